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
from senseforge.evaluate.judge import JUDGE_SYSTEM, judge_prompt
from senseforge.evaluate.records import (
    BinarySample,
    DataInfo,
    EvalResults,
    MCMetrics,
    MCSample,
    Metrics,
    ModelInfo,
    read_results,
    write_samples_lines,
)
from senseforge.evaluate.report import baseline_report, binary_report, mc_breakdowns, mc_metrics, mc_variant_mean
from senseforge.evaluate.run import EvalConfig, score_binary, score_mc
from senseforge.llm.base import LLM, Progress

__all__ = ["load_for_eval", "read_results", "run_eval", "write_outputs"]


def load_for_eval(path: Path, fmt: str | None = None, lang: str | None = None, split: str = "test") -> Any:
    """Load a dataset file, or a split of a run directory (``all``: every split together).

    A run directory's ``items/`` (full records) is read before ``dataset/`` (mCSQA schema).
    A folder without split files whose ``dataset/`` (or which itself) holds only binary
    ``*.jsonl`` files, one per task as a CRoW run writes them, loads them all together
    (for ``--split test`` or ``all``), so the CRoW score covers every task.

    Raises:
        ConfigError: a folder with neither split files nor binary task files.
        DataValidationError: a bad row, or an example id in two task files (both named).
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
    if split in ("test", "all"):
        for folder in (path / "dataset", path):
            tasks = _task_files(path, folder, fmt, lang)
            if tasks is not None:
                return tasks
    raise ConfigError(
        f"{path} is a folder without items/{split}.jsonl, dataset/{split}.jsonl or {split}.jsonl, "
        "and without binary task files (dataset/<task>.jsonl, as a CRoW run writes them)"
    )


def _task_files(path: Path, folder: Path, fmt: str | None, lang: str | None) -> Any:
    """Every ``*.jsonl`` of ``folder`` (sorted) as one binary dataset named after ``path``, or ``None``
    when there are none or one is not binary."""
    from senseforge.data.loaders import LoadedDataset, load_dataset

    files = sorted(f for f in folder.glob("*.jsonl") if f.stat().st_size) if folder.is_dir() else []
    parts = []
    for file in files:
        try:
            part = load_dataset(file, fmt, lang=lang)
        except ConfigError:  # not a dataset file (an undetectable format)
            return None
        if part.kind != "binary":
            return None
        parts.append(part)
    if not parts:
        return None
    seen: dict[str, Path] = {}
    for file, part in zip(files, parts, strict=True):
        for example in part.examples:
            first = seen.setdefault(example.id, file)
            if first != file:
                raise DataValidationError(f"{file}: example_id: {example.id!r} is also in {first}")
    examples = [example for part in parts for example in part.examples]
    return LoadedDataset(name=path.name, fmt=parts[0].fmt, kind="binary", examples=examples, split=None, path=path)


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
    judge: LLM | None = None,
) -> EvalResults:
    """Evaluate ``llm`` on ``data`` and write ``results.json`` and ``samples.jsonl`` to ``out_dir``.

    ``split`` picks the split of a run directory (``all`` for every split together). With
    ``variant="putri-all"`` each item is scored under each of Putri et al.'s three prompt
    structures: ``results`` holds ``<task>/putri1`` … ``<task>/putri3`` and their mean
    ``<task>/putri-mean``. ``--formulation open`` needs ``judge``: the opened model
    ``config.judge`` names, which grades each free answer against the gold option.
    """
    config.check_judge()
    dataset = load_for_eval(data, fmt, lang, split)
    started = time.perf_counter()
    shot_pool: list[MCItem] = []
    if config.shots:
        if shots_from is None:
            raise ConfigError("--shots needs --shots-from: a split to draw solved examples from")
        shot_pool = list(load_for_eval(shots_from, fmt, lang).items)
    samples: list[MCSample] | list[BinarySample]
    results: dict[str, Metrics]
    if dataset.kind == "mc":
        items = config.with_gold(dataset.items[: config.limit] if config.limit else dataset.items)
        if not items:
            raise DataValidationError(f"{data}: no items to evaluate")
        samples = score_mc(items, llm, config, shot_pool=shot_pool, progress=progress, judge=judge)
        results = _mc_results(dataset.name, samples, config)
        breakdowns: dict[str, Any] = {
            field: {group: m.to_json() for group, m in groups.items()}
            for field, groups in mc_breakdowns(samples, config).items()
        }
        templates = [
            f"mc/{config.formulation}/{variant}/{config.prompt_language}/shots={config.shots}"
            for variant in config.variants()
        ]
    else:
        examples = dataset.examples[: config.limit] if config.limit else dataset.examples
        if not examples:
            raise DataValidationError(f"{data}: no examples to evaluate")
        samples = score_binary(examples, llm, config, progress=progress)
        per_task, summary = binary_report(samples, config)
        results = {**per_task, "crow": summary}
        breakdowns = {"baselines": baseline_report(samples, config)}
        mode = "cot" if config.chain_of_thought else config.binary_mode
        templates = [f"binary/{mode}/knowledge={config.oracle_knowledge}/{config.prompt_language}"]
    hashes = {template: prompt_hash(template) for template in templates}
    if config.formulation == "open":
        # the judge's instruction and prompt, so a reworded judge shows in results.json
        hashes["judge"] = prompt_hash(JUDGE_SYSTEM + judge_prompt("{question}", "{gold}", ["{other}"], "{answer}"))
    model = ModelInfo(name=llm.name, identity=llm.identity())
    payload = results_payload(results, breakdowns, config, data, dataset, split, model, hashes, len(samples), started)
    write_outputs(out_dir, payload, samples)
    return payload


def results_payload(
    results: dict[str, Any],
    breakdowns: dict[str, Any],
    config: EvalConfig,
    data: Path,
    dataset: Any,
    split: str,
    model: ModelInfo,
    hashes: dict[str, str],
    n_samples: int,
    started: float,
) -> EvalResults:
    """The ``results.json`` of one evaluation: metrics, breakdowns, config, data, model, seeds, versions, timing
    (``started``: the ``time.perf_counter()`` of its start)."""
    elapsed = time.perf_counter() - started
    return EvalResults(
        results=results,
        breakdowns=breakdowns,
        config=config.model_dump(),
        data=DataInfo(
            path=str(data.resolve()),
            name=dataset.name,
            format=dataset.fmt,
            kind=dataset.kind,
            split=split if data.is_dir() else dataset.split,
        ),
        model=model,
        seeds={"seed": config.seed},
        prompt_hashes=hashes,
        versions={"senseforge": __version__, "python": platform.python_version()},
        timing={"seconds": elapsed, "items_per_second": n_samples / elapsed if elapsed > 0 else None},
    )


def _mc_results(name: str, samples: list[MCSample], config: EvalConfig) -> dict[str, Metrics]:
    variants = config.variants()
    if len(variants) == 1:
        return {name: mc_metrics(samples, config)}
    per_variant: dict[str, MCMetrics] = {
        variant: mc_metrics([s for s in samples if s.variant == variant], config) for variant in variants
    }
    results: dict[str, Metrics] = {f"{name}/{variant}": m for variant, m in per_variant.items()}
    results[f"{name}/{config.variant.removesuffix('-all')}-mean"] = mc_variant_mean(per_variant, samples, config)
    return results


def write_outputs(out_dir: Path, payload: EvalResults, samples: list[MCSample] | list[BinarySample]) -> None:
    """``results.json`` and ``samples.jsonl``, atomically."""
    out_dir.mkdir(parents=True, exist_ok=True)
    with atomic_open(out_dir / "samples.jsonl") as handle:
        handle.writelines(write_samples_lines(samples))
    with atomic_open(out_dir / "results.json") as handle:
        json.dump(payload.to_json(), handle, ensure_ascii=False, indent=2, default=str)
        handle.write("\n")
