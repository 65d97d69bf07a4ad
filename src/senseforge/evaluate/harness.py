"""``senseforge eval run`` as a library function: load, score, summarise, write.

The output folder receives ``results.json`` (metrics in lm-eval style, breakdowns, the
resolved config, model identity, seeds, prompt hashes, versions) and ``samples.jsonl``
(one record per item or pair: prompt, choices, scores, prediction, gold, correct), both
written atomically.
"""

from __future__ import annotations

import json
import platform
import time
from pathlib import Path
from typing import Any

from senseforge._version import __version__
from senseforge.data.io import atomic_open
from senseforge.data.schema import MCItem
from senseforge.errors import ConfigError, DataValidationError
from senseforge.evaluate.formulations import prompt_hash
from senseforge.evaluate.report import baseline_report, binary_report, mc_breakdowns, mc_metrics
from senseforge.evaluate.run import EvalConfig, Sample, score_binary, score_mc
from senseforge.llm.base import LLM, Progress


def load_for_eval(path: Path, fmt: str | None = None, lang: str | None = None, split: str = "test") -> Any:
    """Load a dataset file, or a split of a run directory (``all``: every split together).

    A run directory's ``items/`` (full records) is read before ``dataset/`` (mCSQA schema).
    """
    from senseforge.data.loaders import LoadedDataset, load_dataset

    if not path.is_dir():
        return load_dataset(path, fmt, lang=lang)
    folders = [path / "items", path / "dataset", path]
    names = ("train", "validation", "test") if split == "all" else (split,)
    for folder in folders:
        files = [folder / f"{name}.jsonl" for name in names]
        present = [f for f in files if f.is_file()]
        if len(present) == len(files):
            parts = [load_dataset(f, fmt, lang=lang) for f in present]
            if len(parts) == 1:
                return parts[0]
            items = [item for part in parts for item in part.items]
            return LoadedDataset(name=path.name, fmt=parts[0].fmt, kind="mc", items=items, split=None, path=path)
    raise ConfigError(f"{path} is a folder without items/{split}.jsonl, dataset/{split}.jsonl or {split}.jsonl")


def run_eval(
    data: Path,
    llm: LLM,
    config: EvalConfig,
    out_dir: Path,
    *,
    fmt: str | None = None,
    lang: str | None = None,
    shots_from: Path | None = None,
    split: str = "test",
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Evaluate ``llm`` on ``data`` and write ``results.json`` and ``samples.jsonl`` to ``out_dir``.

    ``split`` picks the split of a run directory (``all`` for every split together).
    """
    dataset = load_for_eval(data, fmt, lang, split)
    started = time.perf_counter()
    shot_pool: list[MCItem] = []
    if config.shots:
        if shots_from is None:
            raise ConfigError("--shots needs --shots-from: a split to draw solved examples from")
        shot_pool = list(load_for_eval(shots_from, fmt, lang).items)
    if dataset.kind == "mc":
        items = dataset.items[: config.limit] if config.limit else dataset.items
        if not items:
            raise DataValidationError(f"{data}: no items to evaluate")
        samples = score_mc(items, llm, config, shot_pool=shot_pool, progress=progress)
        results: dict[str, Any] = {dataset.name: mc_metrics(samples, config)}
        breakdowns: dict[str, Any] = mc_breakdowns(samples, config)
        template = f"mc/{config.formulation}/{config.variant}/{config.prompt_language}/shots={config.shots}"
    else:
        examples = dataset.examples[: config.limit] if config.limit else dataset.examples
        if not examples:
            raise DataValidationError(f"{data}: no examples to evaluate")
        samples = score_binary(examples, llm, config, progress=progress)
        report = binary_report(samples, config)
        results = {**report["tasks"], "crow": report["summary"]}
        breakdowns = {"baselines": baseline_report(samples, config)}
        mode = "cot" if config.chain_of_thought else config.binary_mode
        template = f"binary/{mode}/knowledge={config.oracle_knowledge}/{config.prompt_language}"
    elapsed = time.perf_counter() - started
    payload = {
        "results": results,
        "breakdowns": breakdowns,
        "config": config.model_dump(),
        "data": {"path": str(data.resolve()), "name": dataset.name, "format": dataset.fmt, "kind": dataset.kind},
        "model": {"name": llm.name, "identity": llm.identity()},
        "seeds": {"seed": config.seed},
        "prompt_hashes": {template: prompt_hash(template)},
        "versions": {"senseforge": __version__, "python": platform.python_version()},
        "timing": {"seconds": elapsed, "items_per_second": len(samples) / elapsed if elapsed > 0 else None},
    }
    write_outputs(out_dir, payload, samples)
    return payload


def write_outputs(out_dir: Path, payload: dict[str, Any], samples: list[Sample]) -> None:
    """``results.json`` and ``samples.jsonl``, atomically."""
    out_dir.mkdir(parents=True, exist_ok=True)
    with atomic_open(out_dir / "samples.jsonl") as handle:
        for sample in samples:
            handle.write(json.dumps(sample, ensure_ascii=False) + "\n")
    with atomic_open(out_dir / "results.json") as handle:
        json.dump(payload, handle, ensure_ascii=False, indent=2, default=str)
        handle.write("\n")


def read_results(path: Path) -> dict[str, Any]:
    """A ``results.json`` (or the folder holding one)."""
    file = path / "results.json" if path.is_dir() else path
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise DataValidationError(f"{file}: not a readable results.json ({exc})") from exc
    if not isinstance(data, dict) or "results" not in data:
        raise DataValidationError(f"{file}: has no 'results' section; is it a senseforge results.json?")
    return data
