#!/usr/bin/env python3
"""senseforge's ``hf`` provider against lm-evaluation-harness: same model, items and prompt.

Both tools score the first ``--limit`` CommonsenseQA dev items (200 by default) with the
same offline transformers model, the bundled Gemma 3 270M converted once from GGUF to a
plain bfloat16 folder. The prompt is ``Question: {question}\\nAnswer:`` and each choice is
scored as the continuation ``" " + text``; the prediction is the choice with the highest
summed log-probability (lm-eval's ``acc``).

One run does:

1. the model: converts ``gemma-3-270m`` (``bundled_model_path``) to ``WORKDIR/gemma-3-270m-bf16``
   (plain bf16 safetensors, no GGUF quantizer) unless a conversion of the same GGUF is there,
   and checks that the folder loads with a plain ``from_pretrained``;
2. the lm-eval task: the same items exported with ``senseforge.data.export.export_lm_eval``;
3. lm-eval: ``lm_eval --model hf --model_args pretrained=DIR,dtype=bfloat16 --tasks TASK
   --include_path DIR --batch_size 8 --log_samples --output_path DIR --limit N``, run in a
   child process through a thin wrapper that times the model load, the evaluation and the
   log-likelihood call;
4. senseforge: ``run_eval`` with ``get_llm("hf/DIR", {"dtype": "bfloat16"})`` in a child
   process, the model loaded first (``HFLLM.load``) so that the load is timed apart;
5. the comparison: per-item agreement of the predictions, both accuracies, items/s of both
   and their ratio (goals: agreement >= 99.5 %, senseforge >= 3x lm-eval's items/s).

"Evaluation" time starts once the model is loaded and ends when the results are computed
(reading the data, building the requests, scoring, metrics); "scoring" time is the
log-likelihood call alone. Neither includes interpreter start-up or the model load, which
are printed separately. No response cache is involved: senseforge's backend comes from
``get_llm`` (the cache sits in ``open_llm``) and lm-eval runs without ``--use_cache``.

In bfloat16 both tools round: lm-eval's log-softmax output is bfloat16, and the forward
passes of both round differently with different batch shapes, so items whose best choices
lie within a few hundredths of a nat can flip. ``--float32-reference`` scores the items once
more with senseforge in float32 (untimed) and prints how often each side agrees with it;
``--dtype float32`` runs both tools in float32.

Examples::

    .venv/bin/python benchmarks/eval_vs_lmeval.py --json /tmp/eval-bench.json
    .venv/bin/python benchmarks/eval_vs_lmeval.py --float32-reference
    .venv/bin/python benchmarks/eval_vs_lmeval.py --dtype float32 --limit 50
    .venv/bin/python benchmarks/eval_vs_lmeval.py --model-dir ~/models/some-hf-folder

Both sides are wall-clock times on the same machine, one after the other: run it on an
otherwise idle machine (the load average before each side is printed).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "csqa" / "dev_rand_split.jsonl"
DEFAULT_WORKDIR = Path("/tmp/senseforge-eval-bench")
BUNDLED = "gemma-3-270m"
TASK_NAME = "senseforge_bench_csqa"
PROMPT = "Question: {question}\nAnswer:"
GOAL_AGREEMENT = 0.995
GOAL_RATIO = 3.0
OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


# --------------------------------------------------------------------------- helpers


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def load_average() -> float:
    try:
        return os.getloadavg()[0]
    except OSError:
        return float("nan")


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(OFFLINE)
    env["TOKENIZERS_PARALLELISM"] = "false"
    source = str(ROOT / "src")
    env["PYTHONPATH"] = source + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def run_child(args: list[str], log_path: Path) -> float:
    """Run a child process with its output in ``log_path``; its wall time. Exits with the log tail on failure."""
    began = time.perf_counter()
    with log_path.open("w", encoding="utf-8") as handle:
        code = subprocess.call(args, stdout=handle, stderr=subprocess.STDOUT, env=child_env(), cwd=ROOT)
    wall = time.perf_counter() - began
    if code != 0:
        tail = log_path.read_text(encoding="utf-8", errors="replace").splitlines()[-40:]
        log("\n".join(tail))
        log(f"failed (exit {code}): {' '.join(args)}\nfull log: {log_path}")
        sys.exit(1)
    return wall


def self_command(*args: str) -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), *args]


# --------------------------------------------------------------------------- step 1: the model


def convert_model(out: Path) -> dict[str, Any]:
    """Convert the bundled GGUF to a bf16 transformers folder at ``out`` (worker ``convert``)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    from senseforge.llm.providers.llamacpp import bundled_model_path

    gguf, digest = bundled_model_path(BUNDLED)
    began = time.perf_counter()
    # dequantize=True: plain nn.Linear weights in bf16 instead of GGUF blocks behind a quantizer
    model: Any = AutoModelForCausalLM.from_pretrained(
        str(gguf.parent), gguf_file=gguf.name, dtype=torch.bfloat16, quantization_config=GgufConfig(dequantize=True)
    )
    model.eval()
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    packed = sorted({type(m).__name__ for m in model.modules() if "gguf" in type(m).__name__.lower()})
    if packed:
        raise SystemExit(f"the GGUF weights stayed packed ({', '.join(packed)}): cannot save plain safetensors")
    # drop the GGUF quantizer, so that save_pretrained writes plain weights and no quantization_config
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    if hasattr(model, "is_quantized"):
        model.is_quantized = False
    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    converted_s = time.perf_counter() - began

    # the folder must load without gguf and give the same logits as the GGUF-loaded model
    config = json.loads((tmp / "config.json").read_text())
    if "quantization_config" in config:
        raise SystemExit(f"{tmp}/config.json still has a quantization_config")
    plain: Any = AutoModelForCausalLM.from_pretrained(str(tmp))
    plain.eval()
    if getattr(plain, "hf_quantizer", None) is not None or plain.dtype != torch.bfloat16:
        raise SystemExit(f"{tmp} does not load as a plain bf16 model (dtype {plain.dtype})")
    ids = torch.tensor([tokenizer.encode("Question: Where do you keep milk?\nAnswer: fridge")])
    with torch.inference_mode():
        difference = float((plain(input_ids=ids).logits - model(input_ids=ids).logits).abs().max())
    if difference != 0.0:
        raise SystemExit(f"{tmp}: logits differ from the GGUF-loaded model by {difference}")
    marker = {
        "gguf": gguf.name,
        "gguf_sha256": digest,
        "dtype": "bfloat16",
        "transformers": __import__("transformers").__version__,
        "seconds": round(converted_s, 1),
        "check": "plain from_pretrained: bf16, no quantizer, logits identical to the GGUF-loaded model",
    }
    (tmp / "senseforge-bench.json").write_text(json.dumps(marker, indent=2) + "\n")
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return marker


def ensure_model(workdir: Path) -> tuple[Path, dict[str, Any], bool]:
    """The converted folder (reused when it holds a conversion of the same GGUF), its marker, whether reused."""
    out = workdir / f"{BUNDLED}-bf16"
    marker_path = out / "senseforge-bench.json"
    expected = bundled_sha256()
    if marker_path.is_file() and (out / "model.safetensors").is_file():
        marker = json.loads(marker_path.read_text())
        if marker.get("gguf_sha256") == expected:
            return out, marker, True
    workdir.mkdir(parents=True, exist_ok=True)
    log(f"converting {BUNDLED} (GGUF) to a bf16 transformers folder: {out}")
    run_child(self_command("--worker", "convert", "--model-dir", str(out)), workdir / "convert.log")
    return out, json.loads(marker_path.read_text()), False


def bundled_sha256() -> str:
    """The expected SHA-256 of the bundled GGUF, from its package (no hashing of the file)."""
    import importlib

    from senseforge.llm.providers.llamacpp import BUNDLED as PACKAGES

    package = importlib.import_module(PACKAGES[BUNDLED])
    return str(package.EXPECTED_SHA256)


# --------------------------------------------------------------------------- step 2: the items and the task


def read_first_items(data: Path, limit: int) -> list[Any]:
    from senseforge.data.adapters import iter_items

    items = []
    for item in iter_items(data, "en"):
        items.append(item)
        if len(items) == limit:
            break
    return items


def export_task(items: list[Any], task_dir: Path) -> tuple[str, str]:
    """The lm-eval task for ``items``; (how it was written, task name)."""
    try:
        from senseforge.data.export import PROMPT_TEMPLATE, export_lm_eval
    except ImportError as exc:
        write_task_yaml(items, task_dir)
        return f"written by the benchmark (senseforge.data.export unavailable: {exc})", TASK_NAME
    if PROMPT_TEMPLATE != PROMPT:
        raise SystemExit(f"export_lm_eval's prompt {PROMPT_TEMPLATE!r} is not the benchmark's {PROMPT!r}")
    task = export_lm_eval({"validation": items}, task_dir, task_name=TASK_NAME, overwrite=True)
    return f"senseforge.data.export.export_lm_eval (split {task.test_split})", task.task_name


def write_task_yaml(items: list[Any], task_dir: Path) -> None:
    """The task YAML with the identical prompt, for when the exporter is not available."""
    from senseforge.data.adapters import item_to_csqa_row

    shutil.rmtree(task_dir, ignore_errors=True)
    task_dir.mkdir(parents=True)
    rows = task_dir / "validation.jsonl"
    rows.write_text("".join(json.dumps(item_to_csqa_row(item), ensure_ascii=False) + "\n" for item in items))
    q = json.dumps
    text = "\n".join(
        [
            f"task: {TASK_NAME}",
            "dataset_path: json",
            "dataset_kwargs:",
            "  data_files:",
            f"    validation: {q(str(rows.resolve()))}",
            "output_type: multiple_choice",
            "validation_split: validation",
            "test_split: validation",
            f"doc_to_text: {q(PROMPT.replace('{question}', '{{question}}'))}",
            'doc_to_choice: "{{choices.text}}"',
            'doc_to_target: "{{choices.label.index(answerKey)}}"',
            'target_delimiter: " "',
            "metric_list:",
            "  - metric: acc",
            "    aggregation: mean",
            "    higher_is_better: true",
            "metadata:",
            "  version: 1.0",
            "",
        ]
    )
    (task_dir / f"{TASK_NAME}.yaml").write_text(text)


# --------------------------------------------------------------------------- step 3: lm-eval


def lm_eval_worker(timing_path: Path, argv: list[str]) -> None:
    """Run the lm-eval CLI with ``argv``, timing the model load, the evaluation and the log-likelihood call."""
    import lm_eval.evaluator as evaluator  # type: ignore[import-untyped]
    from lm_eval.__main__ import cli_evaluate  # type: ignore[import-untyped]
    from lm_eval.models.huggingface import HFLM  # type: ignore[import-untyped]

    timing: dict[str, Any] = {}
    original_init, original_ll, original_evaluate = HFLM.__init__, HFLM.loglikelihood, evaluator.evaluate

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        began = time.perf_counter()
        original_init(self, *args, **kwargs)
        timing["load_s"] = time.perf_counter() - began
        timing["loaded_at"] = time.perf_counter()
        timing["dtype"] = str(self.model.dtype)
        timing["device"] = str(self.device)
        timing["batch_size"] = str(self.batch_size)

    def loglikelihood(self: Any, requests: Any, *args: Any, **kwargs: Any) -> Any:
        began = time.perf_counter()
        out = original_ll(self, requests, *args, **kwargs)
        timing["scoring_s"] = timing.get("scoring_s", 0.0) + time.perf_counter() - began
        timing["requests"] = timing.get("requests", 0) + len(requests)
        return out

    def evaluate(*args: Any, **kwargs: Any) -> Any:
        out = original_evaluate(*args, **kwargs)
        timing["evaluated_at"] = time.perf_counter()
        return out

    HFLM.__init__ = init
    HFLM.loglikelihood = loglikelihood
    evaluator.evaluate = evaluate
    sys.argv = ["lm_eval", *argv]
    import torch

    timing["torch_threads"] = torch.get_num_threads()
    try:
        cli_evaluate()
    finally:
        if "loaded_at" in timing and "evaluated_at" in timing:
            timing["evaluation_s"] = timing["evaluated_at"] - timing["loaded_at"]
        timing_path.write_text(json.dumps(timing, indent=2) + "\n")


def lm_eval_args(
    model_dir: Path, task: str, task_dir: Path, out_dir: Path, batch_size: int, limit: int, dtype: str
) -> list[str]:
    return [
        "--model",
        "hf",
        "--model_args",
        f"pretrained={model_dir},dtype={dtype}",
        "--tasks",
        task,
        "--include_path",
        str(task_dir),
        "--batch_size",
        str(batch_size),
        "--log_samples",
        "--output_path",
        str(out_dir),
        "--limit",
        str(limit),
    ]


def read_lm_eval_samples(out_dir: Path, task: str) -> dict[str, dict[str, Any]]:
    """Item id -> prediction (label), per-choice log-likelihoods and gold, from lm-eval's samples file."""
    files = sorted(out_dir.rglob(f"samples_{task}_*.jsonl"))
    if not files:
        raise SystemExit(f"no samples_{task}_*.jsonl under {out_dir}")
    out: dict[str, dict[str, Any]] = {}
    for line in files[-1].read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        doc = record["doc"]
        scores = [float(resp[0]) for resp in record["filtered_resps"]]
        labels = doc["choices"]["label"]
        best = max(range(len(scores)), key=lambda i: (scores[i], -i))  # first maximum, as np.argmax
        out[str(doc["id"])] = {
            "prediction": labels[best],
            "scores": scores,
            "gold": doc["answerKey"],
            "acc": float(record.get("acc", float("nan"))),
        }
    return out


# --------------------------------------------------------------------------- step 4: senseforge


def senseforge_worker(
    model_dir: Path, data: Path, limit: int, batch_size: int | None, out_dir: Path, dtype: str
) -> None:
    """Load the model, then time ``run_eval`` (and the log-likelihood call in it)."""
    import torch

    from senseforge.evaluate.run import EvalConfig
    from senseforge.llm.registry import get_llm

    options: dict[str, Any] = {"dtype": dtype}
    if batch_size is not None:
        options["batch_size"] = batch_size
    timing: dict[str, Any] = {"torch_threads": torch.get_num_threads(), "options": options}
    began = time.perf_counter()
    llm: Any = get_llm(f"hf/{model_dir}", options)
    llm.load()
    timing["load_s"] = time.perf_counter() - began
    model = llm._model  # benchmark only: what actually runs
    timing["dtype"] = str(model.dtype)
    timing["batch_size"] = llm._options.batch_size
    timing["packed_rows"] = llm._pack_limit is not None
    timing["head_on_picked_rows_only"] = llm._base is not None
    if model.dtype != getattr(torch, dtype):
        raise SystemExit(f"the hf provider loaded the model in {model.dtype}, not {dtype}")

    scoring = {"seconds": 0.0, "requests": 0}
    score = llm.loglikelihood

    def timed(requests: Any, progress: Any = None) -> Any:
        start = time.perf_counter()
        out = score(requests, progress=progress)
        scoring["seconds"] += time.perf_counter() - start
        scoring["requests"] += len(requests)
        return out

    llm.loglikelihood = timed
    config = EvalConfig(formulation="loglik", limit=limit)
    start = time.perf_counter()
    try:
        from senseforge.evaluate.harness import run_eval

        run_eval(data, llm, config, out_dir, lang="en")
        timing["path"] = "senseforge.evaluate.harness.run_eval"
    except ModuleNotFoundError as exc:  # run_eval's dataset loader is missing: score the same items directly
        from senseforge.data.adapters import read_items
        from senseforge.evaluate.harness import write_outputs
        from senseforge.evaluate.run import score_mc

        scoring.update(seconds=0.0, requests=0)
        start = time.perf_counter()
        items = read_items(data, "en")[:limit]
        samples = score_mc(items, llm, config)
        write_outputs(out_dir, {"results": {}, "note": f"run_eval unavailable: {exc}"}, samples)
        timing["path"] = f"senseforge.evaluate.run.score_mc (run_eval failed: {exc})"
    timing["evaluation_s"] = time.perf_counter() - start
    timing["scoring_s"] = scoring["seconds"]
    timing["requests"] = scoring["requests"]
    (out_dir / "timing.json").write_text(json.dumps(timing, indent=2) + "\n")


def read_senseforge_samples(out_dir: Path) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for line in (out_dir / "samples.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if record.get("error"):
            raise SystemExit(f"senseforge failed on item {record['id']}: {record['error']}")
        out[str(record["id"])] = {
            "prediction": record["prediction"],
            "scores": record["scores"],
            "gold": record["gold"],
            "prompt": record["prompt"],
            "continuations": record["continuations"],
        }
    return out


# --------------------------------------------------------------------------- step 5: comparison


def compare(
    ours: dict[str, dict[str, Any]],
    theirs: dict[str, dict[str, Any]],
    items: list[Any],
    reference: dict[str, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    ids = [item.id for item in items]
    missing = [i for i in ids if i not in ours or i not in theirs]
    if missing:
        raise SystemExit(f"{len(missing)} items missing from a side's samples, e.g. {missing[:3]}")
    for item in items:  # the same prompt on both sides
        expected = PROMPT.format(question=item.question)
        continuations = [" " + choice.text for choice in item.choices]
        if ours[item.id]["prompt"] != expected or ours[item.id]["continuations"] != continuations:
            raise SystemExit(f"item {item.id}: senseforge's prompt is not {expected!r} + ' ' + choice")
    agree = [i for i in ids if ours[i]["prediction"] == theirs[i]["prediction"]]
    deltas = [abs(a - b) for i in ids for a, b in zip(ours[i]["scores"], theirs[i]["scores"], strict=True)]
    disagreements = []
    labels = {item.id: [choice.label for choice in item.choices] for item in items}
    for i in ids:
        mine, other = ours[i]["prediction"], theirs[i]["prediction"]
        if mine == other:
            continue
        a, b = labels[i].index(mine), labels[i].index(other)
        entry = {
            "id": i,
            "senseforge": mine,
            "lm_eval": other,
            "gold": ours[i]["gold"],
            "senseforge_margin": ours[i]["scores"][a] - ours[i]["scores"][b],
            "lm_eval_margin": theirs[i]["scores"][b] - theirs[i]["scores"][a],
            "senseforge_scores": [round(s, 4) for s in ours[i]["scores"]],
            "lm_eval_scores": [round(s, 4) for s in theirs[i]["scores"]],
        }
        if reference is not None:
            entry["float32_reference"] = reference[i]["prediction"]
        disagreements.append(entry)
    extra: dict[str, Any] = {}
    if reference is not None:
        extra["float32_reference"] = {
            "senseforge_agreement": sum(ours[i]["prediction"] == reference[i]["prediction"] for i in ids) / len(ids),
            "lm_eval_agreement": sum(theirs[i]["prediction"] == reference[i]["prediction"] for i in ids) / len(ids),
            "senseforge_loglik_abs_diff_median": statistics.median(
                abs(a - b) for i in ids for a, b in zip(ours[i]["scores"], reference[i]["scores"], strict=True)
            ),
            "lm_eval_loglik_abs_diff_median": statistics.median(
                abs(a - b) for i in ids for a, b in zip(theirs[i]["scores"], reference[i]["scores"], strict=True)
            ),
        }
    return {
        **extra,
        "items": len(ids),
        "agreement": len(agree) / len(ids),
        "agreeing_items": len(agree),
        "accuracy_senseforge": sum(ours[i]["prediction"] == ours[i]["gold"] for i in ids) / len(ids),
        "accuracy_lm_eval": sum(theirs[i]["prediction"] == theirs[i]["gold"] for i in ids) / len(ids),
        "loglik_abs_diff_max": max(deltas),
        "loglik_abs_diff_median": statistics.median(deltas),
        "disagreements": disagreements,
    }


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="CommonsenseQA dev JSONL (flat HF schema).")
    parser.add_argument("--limit", type=int, default=200, help="Score the first N items (default 200).")
    parser.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR, help="Converted model and run outputs.")
    parser.add_argument("--model-dir", type=Path, help="Use this transformers folder instead of converting Gemma.")
    parser.add_argument("--batch-size", type=int, help="senseforge hf batch_size (rows; default: the provider's).")
    parser.add_argument("--lm-eval-batch-size", type=int, default=8, help="lm-eval --batch_size (default 8).")
    parser.add_argument(
        "--dtype", choices=["bfloat16", "float32"], default="bfloat16", help="Weights and compute of both tools."
    )
    parser.add_argument(
        "--float32-reference",
        action="store_true",
        help="Also score the items with senseforge in float32 (untimed) and report how often each side agrees with it.",
    )
    parser.add_argument("--json", type=Path, help="Also write the figures to this JSON file.")
    parser.add_argument("--worker", choices=["convert", "lm-eval", "senseforge"], help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("rest", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    os.environ.update(OFFLINE)

    if args.worker == "convert":
        convert_model(args.model_dir)
        return 0
    if args.worker == "lm-eval":
        lm_eval_worker(args.out, args.rest)
        return 0
    if args.worker == "senseforge":
        senseforge_worker(args.model_dir, args.data, args.limit, args.batch_size, args.out, args.dtype)
        return 0

    if not args.data.is_file():
        log(f"no data file {args.data}: pass --data (CommonsenseQA dev_rand_split.jsonl)")
        return 2
    if shutil.which("lm_eval", path=str(Path(sys.executable).parent)) is None and not _has_module("lm_eval"):
        log("lm-evaluation-harness is not installed: pip install lm-eval")
        return 2
    workdir = args.workdir.resolve()
    run_dir = workdir / time.strftime("run-%Y%m%d-%H%M%S")
    run_dir.mkdir(parents=True)

    began = time.perf_counter()
    if args.model_dir is not None:
        model_dir, marker, reused = args.model_dir.resolve(), {"source": "--model-dir"}, True
    else:
        model_dir, marker, reused = ensure_model(workdir)
    model_s = time.perf_counter() - began
    log(f"model: {model_dir} ({'reused' if reused else f'converted in {model_s:.0f} s'})")

    items = read_first_items(args.data, args.limit)
    if len(items) < args.limit:
        log(f"{args.data} has only {len(items)} items")
    how, task = export_task(items, run_dir / "task")
    log(f"lm-eval task {task}: {how}")

    # lm-eval
    load_before_lm = load_average()
    lm_out = run_dir / "lm-eval"
    lm_timing_path = run_dir / "lm-eval-timing.json"
    cli = lm_eval_args(model_dir, task, run_dir / "task", lm_out, args.lm_eval_batch_size, len(items), args.dtype)
    log("lm-eval: lm_eval " + " ".join(cli))
    lm_wall = run_child(
        self_command("--worker", "lm-eval", "--out", str(lm_timing_path), "--", *cli), run_dir / "lm.log"
    )
    lm_timing = json.loads(lm_timing_path.read_text())
    theirs = read_lm_eval_samples(lm_out, task)

    # senseforge
    load_before_sf = load_average()
    sf_out = run_dir / "senseforge"
    sf_args = ["--worker", "senseforge", "--model-dir", str(model_dir), "--data", str(args.data)]
    sf_args += ["--limit", str(len(items)), "--out", str(sf_out), "--dtype", args.dtype]
    if args.batch_size is not None:
        sf_args += ["--batch-size", str(args.batch_size)]
    log(f"senseforge: run_eval with get_llm('hf/{model_dir}', {{'dtype': '{args.dtype}'}})")
    sf_wall = run_child(self_command(*sf_args), run_dir / "senseforge.log")
    sf_timing = json.loads((sf_out / "timing.json").read_text())
    ours = read_senseforge_samples(sf_out)

    reference = None
    if args.float32_reference:
        ref_out = run_dir / "senseforge-float32"
        ref_args = ["--worker", "senseforge", "--model-dir", str(model_dir), "--data", str(args.data)]
        ref_args += ["--limit", str(len(items)), "--out", str(ref_out), "--dtype", "float32"]
        log("float32 reference: the same senseforge run in float32 (untimed)")
        run_child(self_command(*ref_args), run_dir / "senseforge-float32.log")
        reference = read_senseforge_samples(ref_out)

    figures = compare(ours, theirs, items, reference)
    n = figures["items"]
    sf_rate = n / sf_timing["evaluation_s"]
    lm_rate = n / lm_timing["evaluation_s"]
    sf_scoring_rate = n / sf_timing["scoring_s"]
    lm_scoring_rate = n / lm_timing["scoring_s"]
    report = {
        **figures,
        "items_per_s_senseforge": sf_rate,
        "items_per_s_lm_eval": lm_rate,
        "ratio": sf_rate / lm_rate,
        "scoring_items_per_s_senseforge": sf_scoring_rate,
        "scoring_items_per_s_lm_eval": lm_scoring_rate,
        "scoring_ratio": sf_scoring_rate / lm_scoring_rate,
        "goals": {
            "agreement>=0.995": figures["agreement"] >= GOAL_AGREEMENT,
            "ratio>=3": sf_rate / lm_rate >= GOAL_RATIO,
        },
        "dtype": args.dtype,
        "senseforge": {**sf_timing, "process_wall_s": sf_wall, "load_average_before": load_before_sf},
        "lm_eval": {
            **{k: v for k, v in lm_timing.items() if not k.endswith("_at")},
            "process_wall_s": lm_wall,
            "load_average_before": load_before_lm,
            "command": "lm_eval " + " ".join(cli),
        },
        "model": {"dir": str(model_dir), "reused": reused, **marker},
        "task": {"name": task, "how": how, "dir": str(run_dir / "task")},
        "data": str(args.data.resolve()),
        "run_dir": str(run_dir),
        "environment": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "torch": _version("torch"),
            "transformers": _version("transformers"),
            "lm_eval": _version("lm_eval"),
            "platform": platform.platform(),
        },
    }
    print_report(report)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n")
        log(f"wrote {args.json}")
    return 0


def print_report(report: dict[str, Any]) -> None:
    sf, lm = report["senseforge"], report["lm_eval"]
    lines = [
        "",
        f"items                        {report['items']}",
        f"agreement (argmax)           {report['agreement']:.1%}  ({report['agreeing_items']}/{report['items']})"
        f"  goal >= {GOAL_AGREEMENT:.1%}  {'ok' if report['goals']['agreement>=0.995'] else 'MISSED'}",
        f"accuracy                     senseforge {report['accuracy_senseforge']:.3f}   "
        f"lm-eval {report['accuracy_lm_eval']:.3f}",
        f"log-likelihood |diff|        median {report['loglik_abs_diff_median']:.4f}   "
        f"max {report['loglik_abs_diff_max']:.4f}",
        "",
        f"{'':28s} {'senseforge':>12s} {'lm-eval':>12s}",
        f"{'evaluation s':28s} {sf['evaluation_s']:12.2f} {lm['evaluation_s']:12.2f}",
        f"{'  of which scoring s':28s} {sf['scoring_s']:12.2f} {lm['scoring_s']:12.2f}",
        f"{'model load s (excluded)':28s} {sf['load_s']:12.2f} {lm['load_s']:12.2f}",
        f"{'process wall s (excluded)':28s} {sf['process_wall_s']:12.2f} {lm['process_wall_s']:12.2f}",
        f"{'items/s (evaluation)':28s} {report['items_per_s_senseforge']:12.1f} {report['items_per_s_lm_eval']:12.1f}",
        f"{'items/s (scoring)':28s} {report['scoring_items_per_s_senseforge']:12.1f} "
        f"{report['scoring_items_per_s_lm_eval']:12.1f}",
        f"{'requests scored':28s} {sf['requests']:12d} {lm['requests']:12d}",
        f"{'batch size':28s} {str(sf['batch_size']) + ' rows':>12s} {lm['batch_size']:>12s}",
        f"{'dtype / torch threads':28s} {sf['dtype'].replace('torch.', '') + ' / ' + str(sf['torch_threads']):>12s} "
        f"{lm['dtype'].replace('torch.', '') + ' / ' + str(lm['torch_threads']):>12s}",
        f"{'load average before':28s} {sf['load_average_before']:12.2f} {lm['load_average_before']:12.2f}",
        "",
        f"ratio (items/s, evaluation)  {report['ratio']:.2f}x  goal >= {GOAL_RATIO:.0f}x  "
        f"{'ok' if report['goals']['ratio>=3'] else 'MISSED'}",
        f"ratio (items/s, scoring)     {report['scoring_ratio']:.2f}x",
        f"senseforge path: {sf['path']}; packed rows: {sf['packed_rows']}; "
        f"head on picked rows only: {sf['head_on_picked_rows_only']}",
        f"outputs: {report['run_dir']}",
    ]
    if "float32_reference" in report:
        ref = report["float32_reference"]
        lines.append(
            f"float32 reference (senseforge, float32): agreement senseforge {ref['senseforge_agreement']:.1%}, "
            f"lm-eval {ref['lm_eval_agreement']:.1%}; median |diff| senseforge "
            f"{ref['senseforge_loglik_abs_diff_median']:.4f}, lm-eval {ref['lm_eval_loglik_abs_diff_median']:.4f}"
        )
    for item in report["disagreements"]:
        lines.append(
            f"  disagree {item['id']}: senseforge {item['senseforge']} (by {item['senseforge_margin']:.3f})"
            f" lm-eval {item['lm_eval']} (by {item['lm_eval_margin']:.3f}) gold {item['gold']}"
            + (f" float32 {item['float32_reference']}" if "float32_reference" in item else "")
            + f"  scores {item['senseforge_scores']} vs {item['lm_eval_scores']}"
        )
    print("\n".join(lines))


def _has_module(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


def _version(module: str) -> str:
    try:
        from importlib.metadata import version

        return version({"lm_eval": "lm_eval"}.get(module, module))
    except Exception:
        return "?"


if __name__ == "__main__":
    sys.exit(main())
