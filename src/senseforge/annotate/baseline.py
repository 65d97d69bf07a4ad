"""Human baselines: a seeded sample of each split answered blind by k people, scored by majority vote.

:func:`queue_baseline` samples up to ``n`` items of every split of a run directory
(``items/{train,validation,test}.jsonl``) and queues them as *answer* tasks, ``k``
annotators each (5, as Putri et al. and CRoW's human baselines). Once the judgements are
in, :func:`baseline_report` takes each item's majority answer (ties to the earliest
annotator), drops items that more than ``exclude_ambiguous`` annotators flagged as
ambiguous, and reports human accuracy per split with a bootstrap 95% interval, beside
the accuracy of every model evaluated on the run (``eval/*/results.json``).
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np

from senseforge.annotate.store import AnnotationStore
from senseforge.data.io import read_jsonl
from senseforge.data.schema import MCItem
from senseforge.data.splits import SPLIT_NAMES
from senseforge.errors import ConfigError, DataValidationError
from senseforge.evaluate.bootstrap import percentile_interval, resampled_means
from senseforge.evaluate.policies import ExcludeAmbiguous, Majority, Policy
from senseforge.evaluate.records import read_results

ANSWER = "answer"
GROUP_PREFIX = "baseline:"


def _split_items(run_dir: Path) -> dict[str, list[MCItem]]:
    folder = run_dir / "items"
    found = {name: folder / f"{name}.jsonl" for name in SPLIT_NAMES if (folder / f"{name}.jsonl").is_file()}
    if not found:
        raise ConfigError(f"{run_dir}: no items/{{train,validation,test}}.jsonl — finish the build first")
    return {name: read_jsonl(path, MCItem) for name, path in found.items()}


def queue_baseline(store: AnnotationStore, run_dir: Path, *, n: int, k: int = 5, seed: int = 0) -> dict[str, int]:
    """Queue a seeded sample of ``n`` items per split for blind answering; how many were queued per split."""
    if n < 1:
        raise ConfigError("--n must be at least 1")
    queued: dict[str, int] = {}
    for split, items in _split_items(run_dir).items():
        answered = [item for item in items if item.answer is not None]
        chosen = sorted(random.Random(f"{seed}\x1f{split}").sample(answered, min(n, len(answered))), key=lambda i: i.id)
        queued[split] = store.add_tasks(ANSWER, chosen, k=k, group=f"{GROUP_PREFIX}{split}")
    return queued


def _model_results(run_dir: Path, unreadable: list[str]) -> list[dict[str, Any]]:
    out = []
    for path in sorted((run_dir / "eval").glob("*/results.json")):
        try:
            payload = read_results(path)
        except DataValidationError as exc:
            unreadable.append(str(exc))
            continue
        for task, metrics in payload.accuracy_rows():
            if metrics.acc is None:
                continue
            out.append(
                {
                    "model": payload.model.name,
                    "task": task,
                    "acc": metrics.acc,
                    "ci95": metrics.acc_ci95,
                    "n": metrics.n,
                    "split": payload.data.split,
                }
            )
    return out


def baseline_policy(exclude_ambiguous: int | None = 3) -> Policy:
    """The majority vote (ties to the earliest annotator), excluding items more than ``exclude_ambiguous`` flagged."""
    return Majority() if exclude_ambiguous is None else ExcludeAmbiguous(exclude_ambiguous, Majority())


def baseline_report(
    store: AnnotationStore, run_dir: Path, *, exclude_ambiguous: int | None = 3, seed: int = 0
) -> dict[str, Any]:
    """Human accuracy by majority vote per split (complete items only), beside the run's model results."""
    judged = store.judgements(ANSWER)
    policy = baseline_policy(exclude_ambiguous)
    splits: dict[str, Any] = {}
    for item, k, group in store.items(ANSWER):
        if not group.startswith(GROUP_PREFIX):
            continue
        split = group[len(GROUP_PREFIX) :]
        entry = splits.setdefault(split, {"queued": 0, "complete": 0, "excluded": 0, "correct": []})
        entry["queued"] += 1
        votes = judged.get(item.id, [])[:k]
        if len(votes) < k:
            continue
        entry["complete"] += 1
        decision = policy(votes)
        if decision.status == "excluded":
            entry["excluded"] += 1
            continue
        entry["correct"].append(1.0 if decision.value == item.answer else 0.0)
    unreadable: list[str] = []
    report: dict[str, Any] = {"splits": {}, "models": _model_results(run_dir, unreadable)}
    report["unreadable_results"] = unreadable
    for split, entry in splits.items():
        values = np.asarray(entry.pop("correct"), dtype=np.float64)
        scored = len(values)
        accuracy = float(values.mean()) if scored else None
        interval = None
        if scored >= 2:
            stats = resampled_means(values, [[i] for i in range(scored)], n_resamples=1000, seed=seed)
            interval = list(percentile_interval(stats, 0.95))
        report["splits"][split] = {**entry, "scored": scored, "human_acc": accuracy, "human_acc_ci95": interval}
    return report
