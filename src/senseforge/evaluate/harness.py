"""``senseforge eval run`` as a library function: load, score, summarise, write.

The output folder receives ``results.json`` (metrics in lm-eval style, breakdowns, the
resolved config, model identity, seeds, prompt hashes, versions) and ``samples.jsonl``
(one record per item or pair: prompt, choices, scores, prediction, gold, correct), both
written atomically.
"""

from __future__ import annotations

import hashlib
import json
import platform
import re
import time
from collections.abc import Sequence
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
from senseforge.llm.base import LLM, Completion, Progress
from senseforge.llm.prompting import chat_template, diagnose

__all__ = ["default_out", "load_for_eval", "read_results", "run_eval", "write_outputs"]


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


def setting_slug(config: EvalConfig, kind: str) -> str:
    """How the model was asked, as a folder-name part: ``loglik``, ``generate-putri-all-5shot``, ``binary-loglik``.

    >>> setting_slug(EvalConfig(formulation="letter", shots=5), "mc")
    'letter-5shot'
    >>> setting_slug(EvalConfig(), "binary")
    'binary-loglik'
    """
    if kind == "binary":
        parts = ["binary", "cot" if config.chain_of_thought else config.binary_mode]
        if config.oracle_knowledge:
            parts.append("oracle")
    else:
        parts = [config.formulation]
        if config.variant != "plain":
            parts.append(config.variant)
        if config.shots:
            parts.append(f"{config.shots}shot")
        if config.gold_key != "answer_creator":
            parts.append("majority")
    if config.prompt_language != "en":
        parts.append(f"{config.prompt_language}-cues")
    return "-".join(parts)


def default_out(data: Path, model: str, config: EvalConfig, kind: str) -> Path:
    """Where ``eval run`` writes by default: ``evals/<data>-<model>-<setting>``, or ``<run>/eval/<model>-<setting>``
    for a run directory, so that two evaluations that differ in how the model was asked never share a folder."""
    name = f"{slug(model)}-{setting_slug(config, kind)}"
    if data.is_dir():
        return data / "eval" / name
    return Path("evals") / f"{slug(data.stem)}-{name}"


def slug(text: str) -> str:
    """``text`` as a safe folder-name part.

    >>> slug("openai/Qwen/Qwen2.5 7B")
    'openai_Qwen_Qwen2.5_7B'
    """
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")


def data_digest(dataset: Any, items: Sequence[Any]) -> str:
    """SHA-256 of what is evaluated: the items (or examples) as canonical JSON, after ``--limit``."""
    digest = hashlib.sha256(f"{dataset.kind}\n".encode())
    for item in items:
        row = json.dumps(item.model_dump(mode="json"), ensure_ascii=False, sort_keys=True, separators=(",", ":"))
        digest.update(row.encode("utf-8") + b"\n")
    return digest.hexdigest()


def evaluated(dataset: Any, config: EvalConfig) -> Sequence[Any]:
    """What an evaluation of ``dataset`` under ``config`` scores: its items (with the gold ``config`` reads) or
    examples, after ``--limit``."""
    if dataset.kind == "mc":
        return list(config.with_gold(dataset.items[: config.limit] if config.limit else dataset.items))
    return list(dataset.examples[: config.limit] if config.limit else dataset.examples)


def evaluated_digest(data: Path, config: EvalConfig, split: str | None) -> str | None:
    """The :func:`data_digest` an evaluation of ``data`` (a run folder or file) under ``config`` records, or
    ``None`` when ``data`` cannot be read that way. The report files an evaluation under the run it evaluated by
    this, when its recorded path no longer leads there (the run was moved or copied)."""
    try:
        dataset = load_for_eval(data, split=split or "test")
        return data_digest(dataset, evaluated(dataset, config))
    except (ConfigError, DataValidationError, OSError, ValueError):
        return None


def evaluation_identity(
    config: EvalConfig, model: ModelInfo, data_sha256: str, split: str | None, hashes: dict[str, str]
) -> dict[str, Any]:
    """What makes an evaluation this one: how the model was asked, which model, on which data."""
    return {
        "config": config.model_dump(mode="json"),
        "model": model.name,
        "model_identity": model.identity,
        "data_sha256": data_sha256,
        "split": split,
        "prompt_hashes": dict(sorted(hashes.items())),
    }


def identity_hash(identity: dict[str, Any]) -> str:
    """SHA-256 of an evaluation identity as canonical JSON."""
    text = json.dumps(identity, ensure_ascii=False, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def identity_differences(old: dict[str, Any] | None, new: dict[str, Any]) -> list[str]:
    """What differs between two evaluation identities, one short phrase each (config fields by name)."""
    if old is None:
        return ["its results.json cannot be read"]
    out: list[str] = []
    old_config, new_config = old.get("config") or {}, new.get("config") or {}
    for key in sorted(set(old_config) | set(new_config)):
        if old_config.get(key) != new_config.get(key):
            out.append(f"{key} {old_config.get(key)!r} → {new_config.get(key)!r}")
    for key, what in (("model", "model"), ("model_identity", "model weights or options"), ("data_sha256", "data")):
        if key not in old:
            continue
        if old.get(key) != new.get(key) and not (key == "model_identity" and old.get("model") != new.get("model")):
            out.append(what if key != "model" else f"model {old.get(key)} → {new.get(key)}")
    if old.get("split") != new.get("split"):
        out.append(f"split {old.get('split')!r} → {new.get('split')!r}")
    if not out and "prompt_hashes" in old and old.get("prompt_hashes") != new.get("prompt_hashes"):
        out.append("prompt templates")
    return out


def check_destination(out_dir: Path, identity: dict[str, Any], *, overwrite: bool) -> None:
    """Refuse to replace another evaluation's results.

    The same evaluation again (same identity) may replace its own results; a different one
    needs ``overwrite``.

    Raises:
        ConfigError: ``out_dir`` holds the results of a different evaluation (what differs is named).
    """
    existing = out_dir / "results.json"
    if overwrite or not existing.is_file():
        return
    try:
        old = read_results(existing)
    except DataValidationError:
        old_identity: dict[str, Any] | None = None
    else:
        if old.identity_hash == identity_hash(identity):
            return
        old_identity = old.identity
        if old_identity is None:
            # written before results had an identity: compare what such a file records
            old_identity = {
                "config": old.config,
                "model": old.model.name,
                "model_identity": old.model.identity,
                "split": old.data.split,
            }
            known = {key: identity.get(key) for key in old_identity}
            if json.dumps(known, sort_keys=True, default=str) == json.dumps(old_identity, sort_keys=True, default=str):
                return
    differs = "; ".join(identity_differences(old_identity, identity)) or "its identity"
    raise ConfigError(
        f"{out_dir} already holds another evaluation ({differs}): give another --out, or --overwrite to replace it"
    )


def run_eval(
    data: Path,
    llm: LLM,
    config: EvalConfig,
    out_dir: Path | None = None,
    *,
    fmt: str | None = None,
    lang: str | None = None,
    shots_from: Path | None = None,
    split: str = "test",
    progress: Progress | None = None,
    judge: LLM | None = None,
    overwrite: bool = False,
) -> EvalResults:
    """Evaluate ``llm`` on ``data`` and write ``results.json`` and ``samples.jsonl`` to ``out_dir``.

    ``split`` picks the split of a run directory (``all`` for every split together). With
    ``variant="putri-all"`` each item is scored under each of Putri et al.'s three prompt
    structures: ``results`` holds ``<task>/putri1`` … ``<task>/putri3`` and their mean
    ``<task>/putri-mean``. ``--formulation open`` needs ``judge``: the opened model
    ``config.judge`` names, which grades each free answer against the gold option.

    ``out_dir`` defaults to :func:`default_out`. ``results.json`` records the evaluation's
    identity (:func:`evaluation_identity`), and a folder holding a different evaluation is
    refused before anything is scored, unless ``overwrite``.

    Raises:
        ConfigError: bad settings, or ``out_dir`` holds another evaluation.
    """
    config.check_judge()
    dataset = load_for_eval(data, fmt, lang, split)
    started = time.perf_counter()
    shot_pool: list[MCItem] = []
    if config.shots:
        if shots_from is None:
            raise ConfigError("--shots needs --shots-from: a split to draw solved examples from")
        shot_pool = list(load_for_eval(shots_from, fmt, lang).items)
    chosen = evaluated(dataset, config)
    if not chosen:
        raise DataValidationError(f"{data}: no {'items' if dataset.kind == 'mc' else 'examples'} to evaluate")
    if dataset.kind == "mc":
        templates = [
            f"mc/{config.formulation}/{variant}/{config.prompt_language}/shots={config.shots}"
            for variant in config.variants()
        ]
    else:
        mode = "cot" if config.chain_of_thought else config.binary_mode
        templates = [f"binary/{mode}/knowledge={config.oracle_knowledge}/{config.prompt_language}"]
    hashes = {template: prompt_hash(template) for template in templates}
    if config.formulation == "open":
        # the judge's instruction and prompt, so a reworded judge shows in results.json
        hashes["judge"] = prompt_hash(JUDGE_SYSTEM + judge_prompt("{question}", "{gold}", ["{other}"], "{answer}"))
    model = ModelInfo(name=llm.name, identity=llm.identity())
    data_split = split if data.is_dir() else dataset.split
    identity = evaluation_identity(config, model, data_digest(dataset, chosen), data_split, hashes)
    destination = out_dir if out_dir is not None else default_out(data, llm.name, config, dataset.kind)
    check_destination(destination, identity, overwrite=overwrite)
    samples: list[MCSample] | list[BinarySample]
    results: dict[str, Metrics]
    if dataset.kind == "mc":
        samples = score_mc(chosen, llm, config, shot_pool=shot_pool, progress=progress, judge=judge)
        results = _mc_results(dataset.name, samples, config)
        breakdowns: dict[str, Any] = {
            field: {group: m.to_json() for group, m in groups.items()}
            for field, groups in mc_breakdowns(samples, config).items()
        }
    else:
        samples = score_binary(chosen, llm, config, progress=progress)
        per_task, summary = binary_report(samples, config)
        results = {**per_task, "crow": summary}
        breakdowns = {"baselines": baseline_report(samples, config)}
    payload = results_payload(results, breakdowns, config, data, dataset, split, model, hashes, len(samples), started)
    replies = [
        Completion(text=sample.response, finish_reason=sample.finish_reason)
        for sample in samples
        if sample.response is not None
    ]
    payload.identity = identity
    payload.identity_hash = identity_hash(identity)
    diagnosis = diagnose(replies, model=llm.name, max_tokens=config.max_tokens, template=chat_template(llm))
    if diagnosis is not None:
        payload.diagnosis = diagnosis
    write_outputs(destination, payload, samples)
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
