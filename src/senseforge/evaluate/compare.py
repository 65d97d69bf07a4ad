"""Is B better than A? Two evaluations compared item by item.

Each side is an ``eval run`` folder (``results.json`` with ``samples.jsonl`` beside it). Its
own numbers and their intervals come from its ``results.json``; the comparison itself is
*paired*: it keeps the items both sides scored (matched by sample ``id``, plus the prompt
``variant`` where one run scored several; binary examples by ``id``) and on those reports

- the difference B − A with a 95% percentile bootstrap interval, resampling items (multiple
  choice; an item's prompt variants together) or contexts (binary: a context's targets
  go in or out together), with the engine of :mod:`senseforge.evaluate.bootstrap`, so the
  same seed draws the same resamples as ``eval run``;
- for every accuracy, McNemar's exact test: the two-sided binomial test on the discordant
  pairs (:mod:`senseforge.evaluate.significance`, no SciPy needed).

Binary runs are compared per task (Macro-F1, Situational Accuracy, accuracy) and over all
tasks (the CRoW scores, bootstrapped within each task, and the pooled accuracy).

Nothing is hidden: :attr:`Comparison.warnings` says when the item sets differ (and by how
many), when the data differ (name, path, split or recorded data hash) and when gold answers
disagree on shared items. Nothing here prints; ``senseforge eval compare`` renders the result.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TypeVar

import numpy as np

from senseforge.errors import ConfigError
from senseforge.evaluate import metrics
from senseforge.evaluate.bootstrap import MIN_UNITS, units_of
from senseforge.evaluate.compare_records import Comparison, Estimate, McNemar, PairedDifference, Row, Side
from senseforge.evaluate.compare_stats import (
    _binary_pairs,
    _BinaryPairs,
    _crow_paired,
    _interval,
    _mcnemar,
    _paired_mean,
    _pooled_estimate,
)
from senseforge.evaluate.records import (
    BinaryMetrics,
    BinarySample,
    CrowSummary,
    EvalResults,
    MCMetrics,
    MCSample,
    read_results,
    read_samples,
)

__all__ = [
    "Run",
    "compare_paths",
    "compare_runs",
    "load_run",
]

K = TypeVar("K", bound=Hashable)

MC_ACCURACIES: tuple[tuple[str, str], ...] = (
    ("acc", "correct"),
    ("acc_norm", "correct_norm"),
    ("acc_bytes", "correct_bytes"),
    ("acc_strict", "correct_strict"),
)
"""Multiple-choice accuracies and the sample field each counts."""

MC_GROUP_FIELDS: tuple[str, ...] = ("lang", "difficulty", "category", "recipe", "review")
"""Sample fields whose groups get their own accuracy row (when there are two groups or more)."""

OVERALL = "crow"
"""The task name of the rows over all binary tasks (as in ``results.json``)."""


# --------------------------------------------------------------------------- loading


@dataclass(frozen=True)
class Run:
    """One evaluation: its results and, when present, its per-item samples."""

    path: Path
    results: EvalResults
    mc_samples: list[MCSample] | None
    binary_samples: list[BinarySample] | None


def load_run(path: Path) -> Run:
    """A ``results.json`` (or its folder) and the ``samples.jsonl`` beside it, if there is one.

    Raises:
        DataValidationError: an unreadable ``results.json`` or ``samples.jsonl``.
    """
    file = path / "results.json" if path.is_dir() else path
    results = read_results(file)
    samples_file = file.parent / "samples.jsonl"
    if not samples_file.is_file():
        return Run(file, results, None, None)
    samples = read_samples(samples_file)
    if results.data.kind == "binary":
        return Run(file, results, None, [s for s in samples if isinstance(s, BinarySample)])
    return Run(file, results, [s for s in samples if isinstance(s, MCSample)], None)


def _data_sha256(results: EvalResults) -> str | None:
    identity = results.identity or {}
    value = identity.get("data_sha256")
    if value is None and isinstance(identity.get("data"), dict):
        value = identity["data"].get("sha256")
    return str(value) if value else None


def _side(run: Run) -> Side:
    r = run.results
    scored = None
    if run.mc_samples is not None:
        scored = sum(s.gold is not None for s in run.mc_samples)
    elif run.binary_samples is not None:
        scored = len(run.binary_samples)
    return Side(
        path=str(run.path),
        label=r.label(),
        model=r.model.name,
        setting=r.setting(),
        n=r.n(),
        data_name=r.data.name,
        data_path=r.data.path,
        data_split=r.data.split,
        data_sha256=_data_sha256(r),
        scored=scored,
    )


def _data_warnings(a: Side, b: Side) -> list[str]:
    """A line when the two evaluations may not have seen the same data.

    Where both files record the hash of the evaluated items, the hashes decide (the same
    items under another path are the same data); older files are compared by data name,
    path and split.
    """
    same_source = (a.data_name, a.data_path, a.data_split) == (b.data_name, b.data_path, b.data_split)
    if a.data_sha256 and b.data_sha256:
        if a.data_sha256 == b.data_sha256:
            return []
        hashes = f"sha256 {a.data_sha256[:12]}… and {b.data_sha256[:12]}…"
        if same_source:
            return [
                f"the evaluated items differ ({hashes}) though both ran on {_where(a)}: a --limit, or an edited file"
            ]
        return [f"the data differ ({hashes}): A ran on {_where(a)}, B on {_where(b)}"]
    if same_source:
        return []
    return [f"the data may differ (no data hash recorded to check): A ran on {_where(a)}, B on {_where(b)}"]


def _where(side: Side) -> str:
    return f"{side.data_name} ({side.data_path}" + (f", split {side.data_split})" if side.data_split else ")")


# --------------------------------------------------------------------------- estimates from results.json


def _estimate(found: MCMetrics | BinaryMetrics | None, name: str) -> Estimate | None:
    """A side's ``name`` with its intervals; a Wilson interval is worked out for older files without one."""
    if found is None:
        return None
    value = getattr(found, name, None)
    if value is None:
        return None
    ci = getattr(found, f"{name}_ci95", None)
    wilson = getattr(found, f"{name}_wilson95", None)
    binary = isinstance(found, BinaryMetrics)
    n = found.n_contexts if isinstance(found, BinaryMetrics) and name == "situational_acc" else found.n
    proportion = name in ("acc", "acc_norm", "acc_bytes", "acc_strict", "situational_acc")
    if wilson is None and proportion and n > 0 and math.isfinite(value):
        wilson = list(metrics.wilson_interval(min(1.0, max(0.0, float(value))) * n, n))
    return Estimate(
        value=float(value),
        ci95=list(ci) if ci else None,
        wilson95=list(wilson) if wilson else None,
        ci_unit=found.ci_unit or ("context" if binary else "item"),
        units=found.resampling_units(),
    )


# --------------------------------------------------------------------------- multiple choice


def _index(samples: Sequence[K], key: Callable[[K], Hashable], side: str) -> dict[Hashable, K]:
    out: dict[Hashable, K] = {}
    for sample in samples:
        k = key(sample)
        if k in out:
            raise ConfigError(f"{side}'s samples.jsonl holds {k!r} twice: cannot pair its items")
        out[k] = sample
    return out


def _mc_key(sample: MCSample) -> tuple[str, str | None]:
    return sample.id, sample.variant


def _variant_of(results: EvalResults, task: str) -> str | None:
    """The prompt variant a task name ends with (``commonsenseqa/putri2``), or ``None``."""
    prefix = results.data.name + "/"
    return task[len(prefix) :] if task.startswith(prefix) else None


def _task_name(a: str | None, b: str | None) -> str:
    if a and b and a != b:
        return f"{a} vs {b}"
    return a or b or "?"


def _mc_rows(a: Run, b: Run, pairs: list[tuple[MCSample, MCSample]], n_resamples: int, seed: int) -> list[Row]:
    """Every accuracy of every task (each prompt variant, and their mean), then the groups."""
    a_tasks, b_tasks = dict(a.results.accuracy_rows()), dict(b.results.accuracy_rows())
    b_by_variant = {_variant_of(b.results, task): task for task in b_tasks}
    rows: list[Row] = []
    matched: set[str] = set()
    for task, a_metrics in a_tasks.items():
        variant = _variant_of(a.results, task)
        b_task = b_by_variant.get(variant)
        if b_task is not None:
            matched.add(b_task)
        if variant is None or a_metrics.variants is not None:  # one task, or the mean over variants
            members = pairs
        else:
            members = [p for p in pairs if p[0].variant == variant]
        b_metrics = b_tasks[b_task] if b_task is not None else None
        for name, field in MC_ACCURACIES:
            rows += _mc_row(_task_name(task, b_task), name, field, a_metrics, b_metrics, members, n_resamples, seed)
    for task, b_metrics in b_tasks.items():
        if task not in matched:
            for name, field in MC_ACCURACIES:
                rows += _mc_row(task, name, field, None, b_metrics, [], n_resamples, seed)
    return rows + _mc_group_rows(a, b, pairs, n_resamples, seed)


def _mc_row(
    task: str,
    name: str,
    field: str,
    a_metrics: MCMetrics | None,
    b_metrics: MCMetrics | None,
    members: list[tuple[MCSample, MCSample]],
    n_resamples: int,
    seed: int,
) -> list[Row]:
    a_est, b_est = _estimate(a_metrics, name), _estimate(b_metrics, name)
    if a_est is None and b_est is None:
        return []
    row = Row(task=task, metric=name, a=a_est, b=b_est)
    if a_est is not None and b_est is not None and members:
        a_right = np.asarray([bool(getattr(x, field)) for x, _ in members], dtype=np.float64)
        b_right = np.asarray([bool(getattr(y, field)) for _, y in members], dtype=np.float64)
        units = units_of([x.id for x, _ in members], lambda i: i)
        row.paired = _paired_mean(a_right, b_right, units, "item", n_resamples, seed)
        row.mcnemar = _mcnemar(a_right, b_right, "item")
    return [row]


def _mc_group_rows(a: Run, b: Run, pairs: list[tuple[MCSample, MCSample]], n_resamples: int, seed: int) -> list[Row]:
    """Accuracy per language, difficulty, category … (fields with two groups or more)."""
    a_groups = {(field, group): m for field, group, m in a.results.group_metrics()}
    b_groups = {(field, group): m for field, group, m in b.results.group_metrics()}
    rows: list[Row] = []
    for field in MC_GROUP_FIELDS:
        names = sorted({g for f, g in a_groups if f == field} | {g for f, g in b_groups if f == field})
        if len(names) < 2:
            continue
        for group in names:
            members = [p for p in pairs if str(getattr(p[0], field)) == group and getattr(p[0], field) is not None]
            rows.extend(
                _mc_row(
                    f"{field}={group}",
                    "acc",
                    "correct",
                    a_groups.get((field, group)),
                    b_groups.get((field, group)),
                    members,
                    n_resamples,
                    seed,
                )
            )
    return rows


# --------------------------------------------------------------------------- binary


def _binary_task_rows(
    task: str,
    a_metrics: BinaryMetrics | None,
    b_metrics: BinaryMetrics | None,
    pairs: _BinaryPairs | None,
    n_resamples: int,
    seed: int,
) -> list[Row]:
    rows: list[Row] = []
    for name in ("macro_f1", "situational_acc", "acc"):
        a_est, b_est = _estimate(a_metrics, name), _estimate(b_metrics, name)
        if a_est is None and b_est is None:
            continue
        row = Row(task=task, metric=name, a=a_est, b=b_est)
        if a_est is not None and b_est is not None and pairs is not None:
            row.paired, row.mcnemar = _binary_paired(name, pairs, n_resamples, seed)
        rows.append(row)
    return rows


def _binary_paired(
    name: str, pairs: _BinaryPairs, n_resamples: int, seed: int
) -> tuple[PairedDifference, McNemar | None]:
    units = pairs.units()
    if name == "macro_f1":
        f1_a, f1_b = pairs.macro_f1()
        stats = pairs.macro_f1_stats(n_resamples, seed) if len(units) >= MIN_UNITS else None
        paired = PairedDifference(
            a=f1_a,
            b=f1_b,
            diff=f1_b - f1_a,
            ci95=_interval(stats),
            ci_unit="context",
            units=len(units),
        )
        return paired, None
    if name == "situational_acc":
        out_a, out_b = pairs.context_outcomes()
        singletons = [[i] for i in range(len(out_a))]
        return _paired_mean(out_a, out_b, singletons, "context", n_resamples, seed), _mcnemar(out_a, out_b, "context")
    right_a, right_b = pairs.correct()
    return _paired_mean(right_a, right_b, units, "context", n_resamples, seed), _mcnemar(right_a, right_b, "example")


def _binary_rows(
    a: Run, b: Run, pairs: list[tuple[BinarySample, BinarySample]], n_resamples: int, seed: int
) -> list[Row]:
    a_tasks = {t: m for t, m in a.results.results.items() if isinstance(m, BinaryMetrics)}
    b_tasks = {t: m for t, m in b.results.results.items() if isinstance(m, BinaryMetrics)}
    by_task: dict[str, list[tuple[BinarySample, BinarySample]]] = {}
    for pair in pairs:
        by_task.setdefault(pair[0].task, []).append(pair)
    per_task = {task: _binary_pairs(members) for task, members in by_task.items()}
    rows: list[Row] = []
    tasks = sorted(set(a_tasks) | set(b_tasks))
    for task in tasks:
        rows += _binary_task_rows(task, a_tasks.get(task), b_tasks.get(task), per_task.get(task), n_resamples, seed)
    if len(tasks) < 2:
        return rows
    a_summary, b_summary = a.results.results.get(OVERALL), b.results.results.get(OVERALL)
    for name in ("crow_score_macro_f1", "crow_score_situational_acc"):
        a_value = getattr(a_summary, name, None) if isinstance(a_summary, CrowSummary) else None
        b_value = getattr(b_summary, name, None) if isinstance(b_summary, CrowSummary) else None
        row = Row(
            task=OVERALL,
            metric=name,
            a=Estimate(value=float(a_value)) if a_value is not None else None,
            b=Estimate(value=float(b_value)) if b_value is not None else None,
        )
        if row.a is not None and row.b is not None:
            row.paired = _crow_paired(name, {t: per_task[t] for t in sorted(per_task)}, n_resamples, seed)
        rows.append(row)
    row = Row(
        task=OVERALL,
        metric="acc",
        a=_pooled_estimate(a.binary_samples or [], n_resamples, seed),
        b=_pooled_estimate(b.binary_samples or [], n_resamples, seed),
    )
    if pairs:
        whole = _binary_pairs(pairs)
        right_a, right_b = whole.correct()
        row.paired = _paired_mean(right_a, right_b, whole.units(), "context", n_resamples, seed)
        row.mcnemar = _mcnemar(right_a, right_b, "example")
    if row.a is not None or row.b is not None:
        rows.append(row)
    return rows


# --------------------------------------------------------------------------- entry points


def _config_int(results: EvalResults, key: str, default: int) -> int:
    value = results.config.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _pair_up(
    a_samples: Sequence[K], b_samples: Sequence[K], key: Callable[[K], Hashable]
) -> tuple[list[tuple[K, K]], int, int]:
    """Shared records in A's order, and how many are only in A and only in B."""
    a_index, b_index = _index(a_samples, key, "A"), _index(b_samples, key, "B")
    pairs = [(sample, b_index[k]) for k, sample in a_index.items() if k in b_index]
    return pairs, len(a_index) - len(pairs), len(b_index) - len(pairs)


def compare_runs(a: Run, b: Run, *, n_resamples: int | None = None, seed: int | None = None) -> Comparison:
    """Compare evaluation B with evaluation A (see the module docstring for what is computed).

    ``n_resamples`` and ``seed`` default to A's bootstrap settings (``--bootstrap`` and
    ``--seed`` of its ``eval run``).

    Raises:
        ConfigError: one side is multiple choice and the other binary, or a side's samples
            hold an item twice.
    """
    kind_a, kind_b = a.results.data.kind, b.results.data.kind
    if (kind_a == "binary") != (kind_b == "binary"):
        raise ConfigError(f"A is a {kind_a} evaluation and B a {kind_b} one: there is nothing to pair")
    n_resamples = n_resamples or _config_int(a.results, "n_bootstrap", 1000)
    seed = _config_int(a.results, "seed", 0) if seed is None else seed
    side_a, side_b = _side(a), _side(b)
    warnings = _data_warnings(side_a, side_b)
    kind: Literal["mc", "binary"] = "binary" if kind_a == "binary" else "mc"
    unit = "example" if kind == "binary" else "item"
    missing = [name for name, run in (("A", a), ("B", b)) if run.mc_samples is None and run.binary_samples is None]
    for name in missing:
        where = (a if name == "A" else b).path.parent / "samples.jsonl"
        warnings.append(f"{name} has no samples.jsonl ({where}): no paired difference and no test")
    rows: list[Row]
    shared = only_a = only_b = 0
    if kind == "binary":
        binary_pairs: list[tuple[BinarySample, BinarySample]] = []
        if not missing:
            binary_pairs, only_a, only_b = _pair_up(a.binary_samples or [], b.binary_samples or [], lambda s: s.id)
        shared = len(binary_pairs)
        disagree = sum(x.gold != y.gold for x, y in binary_pairs)
        rows = _binary_rows(a, b, binary_pairs, n_resamples, seed)
    else:
        mc_pairs: list[tuple[MCSample, MCSample]] = []
        if not missing:
            scored_a = [s for s in a.mc_samples or [] if s.gold is not None]
            scored_b = [s for s in b.mc_samples or [] if s.gold is not None]
            mc_pairs, only_a, only_b = _pair_up(scored_a, scored_b, _mc_key)
            with_a = {s.variant is not None for s in scored_a}
            with_b = {s.variant is not None for s in scored_b}
            if with_a != with_b and scored_a and scored_b:
                which = "A" if True in with_a else "B"
                warnings.append(
                    f"only {which} scored several prompt variants, so no item pairs up; "
                    "compare runs made with the same --variant"
                )
        shared = len(mc_pairs)
        disagree = sum(x.gold != y.gold for x, y in mc_pairs)
        rows = _mc_rows(a, b, mc_pairs, n_resamples, seed)
    if not missing:
        if shared == 0:
            warnings.append(f"A and B share no {unit}s: no paired difference and no test")
        elif only_a or only_b:
            warnings.append(
                f"the {unit} sets differ: {only_a} only in A, {only_b} only in B; "
                f"B − A is over the {shared} shared {unit}s"
            )
        if disagree:
            warnings.append(f"{disagree} shared {unit}s have a different gold answer in A and in B")
    return Comparison(
        a=side_a,
        b=side_b,
        kind=kind,
        unit=unit,
        shared=shared,
        only_a=only_a,
        only_b=only_b,
        n_resamples=n_resamples,
        seed=seed,
        warnings=warnings,
        rows=rows,
    )


def compare_paths(first: Path, second: Path, *, n_resamples: int | None = None, seed: int | None = None) -> Comparison:
    """:func:`compare_runs` of two ``results.json`` files (or their folders)."""
    return compare_runs(load_run(first), load_run(second), n_resamples=n_resamples, seed=seed)
