#!/usr/bin/env python3
"""The embedded model's scoring against its physical bound, the ``hf`` provider and a one-sequence pass.

All in one run, on the first ``--limit`` CommonsenseQA dev items (200 by default), with the
requests ``senseforge eval run`` builds for the loglik formulation (``Question: …\\nAnswer:``,
each choice scored as ``" " + text``):

1. **embedded**: the ``llamacpp`` provider (bundled Gemma 3 270M) scores every request;
   timed after the model is loaded and warmed on one item.
2. **one-sequence pass**: every (context, continuation) decoded as one sequence on the same
   weights, as a plain forward pass does (the provider's layout before this benchmark was
   written, timed too). Agreement of predictions with the embedded scores, and the largest
   score difference, say whether the fast path is exact.
3. **before**: the same one-sequence layout on llama.cpp's repacked weights, the provider's
   default before (timed; its predictions are compared too).
4. **hf**: the ``hf`` provider on the same weights converted to a transformers folder (the
   conversion of ``eval_vs_lmeval.py``, reused when present), in float32 and, where the CPU
   computes bf16 natively, bfloat16 (``--hf-dtypes``). The fastest path other than the
   embedded one is named, with its agreement: what a user on this CPU could pick instead.
5. **bound**: what the least work costs at llama.cpp's own best rates, measured in the same
   run on long batches of the same weights: per item, its context and every continuation
   token but the last through the network once (tokens/s of a 512-token decode), and the
   output head at the positions that predict a continuation token (seconds per extra output
   row of a 512-token decode). ``embedded / bound`` is the share of that bound reached.
6. **generation**: the provider's greedy generation (tokens/s, prompt and completion) against
   a bare llama.cpp loop on the same prompts (prompt decoded once, then one token per step).

Prints items/s of each, the ratios, the agreement figures and the CPU (model name and
whether it has AVX-512 / native bf16). Goals: embedded ≥ 80% of the bound, and ≥ 99%
predictions identical to the one-sequence pass with every other one a near-tie (its two
choices within 0.01 nats); generation within 20% of the bare loop.

Examples::

    .venv/bin/python benchmarks/eval_embedded.py
    .venv/bin/python benchmarks/eval_embedded.py --limit 50 --skip-hf --json /tmp/embedded.json

Run it on an otherwise idle machine: the figures are wall-clock times, one after the other. On
a machine shared with other jobs, ``--clock cpu`` times every path by this process's CPU seconds
instead; run it then with ``SENSEFORGE_THREADS=1 OMP_NUM_THREADS=1`` so that every path computes
on one thread (CPU seconds of several threads add up)::

    SENSEFORGE_THREADS=1 OMP_NUM_THREADS=1 .venv/bin/python benchmarks/eval_embedded.py --limit 50 --clock cpu
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

DEFAULT_DATA = ROOT.parent / "shared" / "data" / "csqa" / "dev_rand_split.jsonl"
DEFAULT_WORKDIR = Path("/tmp/senseforge-eval-bench")
GOAL_BOUND = 0.80
NEAR_TIE_NATS = 0.01
GOAL_AGREEMENT = 0.99
GOAL_GENERATION = 0.80


clock = time.perf_counter
"""What every figure is timed by: wall-clock seconds, or this process's CPU seconds (``--clock cpu``)."""


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def cpu() -> dict[str, Any]:
    name, flags = platform.processor() or "unknown", set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name") and name in ("unknown", "x86_64", ""):
                name = line.split(":", 1)[1].strip()
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return {
        "model": name,
        "cores": os.cpu_count(),
        "avx2": "avx2" in flags,
        "avx512": "avx512f" in flags,
        "native_bf16": "avx512_bf16" in flags or "amx_bf16" in flags,
    }


# --------------------------------------------------------------------------- requests


def build_requests(data: Path, limit: int) -> tuple[list[Any], list[list[Any]]]:
    from senseforge.data.loaders import load_dataset
    from senseforge.evaluate.formulations import mc_prompt
    from senseforge.llm.base import LoglikelihoodRequest

    items = list(load_dataset(data).items)[:limit]
    grouped = []
    for item in items:
        prompt = mc_prompt(item, "loglik")
        grouped.append([LoglikelihoodRequest(context=prompt.text, continuation=c) for c in prompt.continuations])
    return items, grouped


def predictions(scores: list[float], grouped: list[list[Any]]) -> list[int]:
    out, cursor = [], 0
    for group in grouped:
        chunk = scores[cursor : cursor + len(group)]
        cursor += len(group)
        out.append(int(np.argmax(chunk)))
    return out


# --------------------------------------------------------------------------- the measured paths


def embedded(grouped: list[list[Any]]) -> tuple[list[float], float, Any]:
    from senseforge.llm.providers.llamacpp import Options, create

    llm = create("gemma-3-270m", Options())
    llm.loglikelihood(grouped[0])  # load and warm up
    flat = [r for group in grouped for r in group]
    began = clock()
    scores = [float(r.logprob) for r in llm.loglikelihood(flat)]  # type: ignore[arg-type]
    return scores, clock() - began, llm


def one_sequence(llm: Any, grouped: list[list[Any]], *, repack: bool) -> tuple[list[float], float]:
    """Each (context, continuation) decoded as one sequence: the plain forward pass."""
    from senseforge.llm.providers import _llamacpp_scoring as scoring

    scorer = llm._load(n_ctx=512, logits_all=False, repack=repack)
    try:
        encoded = [llm.encode_pair(r) for group in grouped for r in group]
        scores: list[float] = []
        began = clock()
        for prefix, continuation in encoded:
            scoring.clear(scorer)
            wanted = range(len(prefix) - 1, len(prefix) + len(continuation) - 1)
            rows = scoring.decode_rows(scorer, prefix + continuation, 0, wanted)
            scores.append(sum(scoring.log_softmax_at(rows[p], t)[0] for p, t in zip(wanted, continuation, strict=True)))
        return scores, clock() - began
    finally:
        scorer.close()


def hf(grouped: list[list[Any]], workdir: Path, dtype: str) -> tuple[list[float], float] | None:
    try:
        from eval_vs_lmeval import ensure_model
    except ImportError as exc:
        log(f"hf skipped: {exc}")
        return None
    from senseforge.llm.registry import get_llm

    folder, _marker, reused = ensure_model(workdir)
    log(f"hf model: {folder} ({'reused' if reused else 'converted'})")
    llm = get_llm(f"hf/{folder}", options={"dtype": dtype})
    try:
        llm.loglikelihood(grouped[0])
        flat = [r for group in grouped for r in group]
        began = clock()
        scores = [float(r.logprob) for r in llm.loglikelihood(flat)]  # type: ignore[arg-type]
        return scores, clock() - began
    finally:
        llm.close()


def rates(llm: Any, repeats: int = 3) -> dict[str, float]:
    """llama.cpp's best rates on these weights: seconds per token of a 512-token decode, per extra output row."""
    from senseforge.llm.providers import _llamacpp_scoring as scoring

    scorer = llm._load(n_ctx=1024, logits_all=False, repack=False)
    try:
        tokens = [int(t) for t in np.random.default_rng(0).integers(1000, 20000, size=512)]

        def timed(outputs: int) -> float:
            best = float("inf")
            for _ in range(repeats):
                scoring.clear(scorer)
                began = clock()
                scoring.decode_rows(scorer, tokens, 0, range(512 - outputs, 512))
                best = min(best, clock() - began)
            return best

        one, many = timed(1), timed(65)
        return {"token_s": one / 512, "output_row_s": max(0.0, (many - one) / 64), "tokens_per_s": 512 / one}
    finally:
        scorer.close()


def bound_seconds(llm: Any, grouped: list[list[Any]], rate: dict[str, float]) -> float:
    total = 0.0
    for group in grouped:
        encoded = [llm.encode_pair(r) for r in group]
        prefix = encoded[0][0]
        through = len(prefix) + sum(len(c) - 1 for _, c in encoded)
        outputs = 1 + sum(len(c) - 1 for _, c in encoded)
        total += through * rate["token_s"] + outputs * rate["output_row_s"]
    return total


def generation(llm: Any, prompts: list[str], max_tokens: int) -> dict[str, float]:
    """Tokens/s (prompt + completion) of the provider's greedy generation and of a bare llama.cpp loop."""
    from senseforge.llm.base import GenerateRequest

    requests = [GenerateRequest(prompt=p, max_tokens=max_tokens, temperature=0.0) for p in prompts]
    llm.generate(requests[:1])
    began = clock()
    done = llm.generate(requests)
    ours_s = clock() - began
    ours_tokens = sum((c.tokens_in or 0) + (c.tokens_out or 0) for c in done)
    gen = llm._generator()
    began = clock()
    bare_tokens = 0
    for prompt, completion in zip(prompts, done, strict=True):
        tokens = gen.tokenize(prompt.encode("utf-8"), add_bos=True)
        gen.reset()
        gen.eval(tokens)
        bare_tokens += len(tokens)
        for _ in range(completion.tokens_out or max_tokens):
            token = int(np.argmax(gen.scores[gen.n_tokens - 1]))
            gen.eval([token])
            bare_tokens += 1
    bare_s = clock() - began
    return {"ours_tokens_per_s": ours_tokens / ours_s, "bare_tokens_per_s": bare_tokens / bare_s}


# --------------------------------------------------------------------------- main


def agreement(a: list[float], b: list[float], grouped: list[list[Any]]) -> dict[str, float]:
    """Share of identical predictions, the largest score difference, and the widest gap at a differing item.

    The gap of a differing item is the larger of the two score gaps between the two chosen
    choices (under ``a`` and under ``b``): within :data:`NEAR_TIE_NATS`, it is a near-tie.
    """
    pa, pb = predictions(a, grouped), predictions(b, grouped)
    gaps, cursor = [], 0
    for group, x, y in zip(grouped, pa, pb, strict=True):
        if x != y:
            gaps.append(max(abs(a[cursor + x] - a[cursor + y]), abs(b[cursor + x] - b[cursor + y])))
        cursor += len(group)
    return {
        "identical_predictions": sum(x == y for x, y in zip(pa, pb, strict=True)) / len(pa),
        "max_abs_diff_nats": float(np.max(np.abs(np.asarray(a) - np.asarray(b)))),
        "differing": float(len(gaps)),
        "widest_differing_gap_nats": float(max(gaps, default=0.0)),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="CommonsenseQA dev JSONL.")
    parser.add_argument("--limit", type=int, default=200, help="Items to score (default 200).")
    parser.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR, help="Where the hf conversion lives.")
    parser.add_argument("--skip-hf", action="store_true", help="Leave the hf provider out.")
    parser.add_argument(
        "--hf-dtypes",
        default="float32,bfloat16",
        help="hf dtypes to time, comma-separated (bfloat16 only where the CPU has native bf16; default: both).",
    )
    parser.add_argument("--json", type=Path, help="Also write the figures here.")
    parser.add_argument(
        "--clock",
        choices=("wall", "cpu"),
        default="wall",
        help="Time by wall clock (default) or by this process's CPU seconds (on a machine shared with other jobs; "
        "with SENSEFORGE_THREADS=1 OMP_NUM_THREADS=1, one thread per path).",
    )
    args = parser.parse_args(argv)
    global clock
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    if not args.data.is_file():
        parser.error(f"--data: no such file {args.data}")

    report: dict[str, Any] = {
        "cpu": cpu(),
        "items": args.limit,
        "load_average": os.getloadavg()[0],
        "clock": args.clock,
        "threads": os.environ.get("SENSEFORGE_THREADS") or "every core",
    }
    items, grouped = build_requests(args.data, args.limit)
    n = len(items)
    log(f"scoring {n} items ({sum(len(g) for g in grouped)} requests) with the embedded model")
    fast, fast_s, llm = embedded(grouped)
    log("one-sequence pass on the same weights")
    plain, plain_s = one_sequence(llm, grouped, repack=False)
    log("one-sequence pass on repacked weights (the provider's default before)")
    before, before_s = one_sequence(llm, grouped, repack=True)
    log("llama.cpp's rates on long batches")
    rate = rates(llm)
    bound_s = bound_seconds(llm, grouped, rate)
    log("generation")
    prompts = [g[0].context for g in grouped[:8]]
    gen = generation(llm, prompts, max_tokens=24)
    llm.close()
    report.update(
        embedded_items_per_s=n / fast_s,
        one_sequence_items_per_s=n / plain_s,
        before_items_per_s=n / before_s,
        bound_items_per_s=n / bound_s,
        rates=rate,
        vs_one_sequence=agreement(fast, plain, grouped),
        vs_before=agreement(fast, before, grouped),
        generation=gen,
    )
    others: dict[str, tuple[float, dict[str, float]]] = {
        "llamacpp one-sequence pass, same weights": (n / plain_s, report["vs_one_sequence"]),
        "llamacpp one-sequence pass, repacked weights": (n / before_s, agreement(before, plain, grouped)),
    }
    dtypes = [d.strip() for d in args.hf_dtypes.split(",") if d.strip()]
    if not report["cpu"]["native_bf16"] and "bfloat16" in dtypes:
        dtypes.remove("bfloat16")
        log("hf bfloat16 skipped: no native bf16 on this CPU")
    for dtype in [] if args.skip_hf else dtypes:
        log(f"hf provider ({dtype}) on the converted weights")
        got = hf(grouped, args.workdir, dtype)
        if got is None:
            break
        report[f"hf_{dtype}_items_per_s"] = n / got[1]
        report[f"vs_hf_{dtype}"] = agreement(fast, got[0], grouped)
        others[f"hf provider, {dtype}, same weights"] = (n / got[1], agreement(got[0], plain, grouped))
    name, (rate_other, vs_plain) = max(others.items(), key=lambda kv: kv[1][0])
    report["fastest_other"] = {"path": name, "items_per_s": rate_other, "vs_one_sequence": vs_plain}
    print_report(report)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    one = report["vs_one_sequence"]
    met = (
        report["embedded_items_per_s"] / report["bound_items_per_s"] >= GOAL_BOUND
        and one["identical_predictions"] >= GOAL_AGREEMENT
        and one["widest_differing_gap_nats"] <= NEAR_TIE_NATS
    )
    return 0 if met else 1


def print_report(r: dict[str, Any]) -> None:
    c = r["cpu"]
    print(
        f"CPU: {c['model']} ({c['cores']} cores; AVX-512: {'yes' if c['avx512'] else 'no'}, "
        f"native bf16: {'yes' if c['native_bf16'] else 'no'}); load average before: {r['load_average']:.2f}"
    )
    print(f"timed by: {r['clock']} clock; llama.cpp threads: {r['threads']}")
    print(f"items: {r['items']} CommonsenseQA dev, loglik formulation\n")
    rows = [
        ("embedded (llamacpp provider)", r["embedded_items_per_s"]),
        ("physical bound (llama.cpp's long-batch rates)", r["bound_items_per_s"]),
        ("one-sequence pass, same weights", r["one_sequence_items_per_s"]),
        ("one-sequence pass, repacked weights (before)", r["before_items_per_s"]),
    ]
    for dtype in ("float32", "bfloat16"):
        if f"hf_{dtype}_items_per_s" in r:
            rows.append((f"hf provider, {dtype}, same weights", r[f"hf_{dtype}_items_per_s"]))
    for name, value in rows:
        print(f"  {name:<48} {value:7.2f} items/s")
    rate = r["rates"]
    print(
        f"\n  llama.cpp rates: {rate['tokens_per_s']:.0f} tokens/s through the network, "
        f"{1000 * rate['output_row_s']:.2f} ms per output row"
    )
    print(
        f"\n  embedded / bound:   {r['embedded_items_per_s'] / r['bound_items_per_s']:.1%}  (goal ≥ {GOAL_BOUND:.0%})"
    )
    print(f"  embedded / before:  {r['embedded_items_per_s'] / r['before_items_per_s']:.2f}×")
    for dtype in ("float32", "bfloat16"):
        if f"hf_{dtype}_items_per_s" in r:
            print(f"  embedded / hf {dtype}: {r['embedded_items_per_s'] / r[f'hf_{dtype}_items_per_s']:.2f}×")
    one = r["vs_one_sequence"]
    print(
        f"  vs one-sequence pass: {one['identical_predictions']:.1%} identical predictions "
        f"(goal ≥ {GOAL_AGREEMENT:.0%}), largest score difference {one['max_abs_diff_nats']:.2g} nats; "
        f"{one['differing']:.0f} differing, widest gap {one['widest_differing_gap_nats']:.2g} nats "
        f"(goal ≤ {NEAR_TIE_NATS} nats: near-ties)"
    )
    before = r["vs_before"]
    print(
        f"  vs before (repacked): {before['identical_predictions']:.1%} identical predictions, "
        f"largest score difference {before['max_abs_diff_nats']:.2g} nats"
    )
    for dtype in ("float32", "bfloat16"):
        if f"vs_hf_{dtype}" in r:
            vs = r[f"vs_hf_{dtype}"]
            print(
                f"  vs hf {dtype}: {vs['identical_predictions']:.1%} identical predictions, "
                f"largest score difference {vs['max_abs_diff_nats']:.2g} nats"
            )
    other = r["fastest_other"]
    print(
        f"  fastest other path on this CPU: {other['path']}, {other['items_per_s']:.2f} items/s "
        f"({other['items_per_s'] / r['embedded_items_per_s']:.2f}× the embedded), "
        f"{other['vs_one_sequence']['identical_predictions']:.1%} of its predictions identical to the one-sequence pass"
    )
    gen = r["generation"]
    print(
        f"  generation: {gen['ours_tokens_per_s']:.0f} tokens/s against a bare llama.cpp loop's "
        f"{gen['bare_tokens_per_s']:.0f} ({gen['ours_tokens_per_s'] / gen['bare_tokens_per_s']:.0%}; "
        f"goal ≥ {GOAL_GENERATION:.0%})"
    )


if __name__ == "__main__":
    raise SystemExit(main())
