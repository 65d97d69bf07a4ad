"""Per-sample records → metrics with bootstrap confidence intervals and breakdowns.

Metrics are :mod:`senseforge.evaluate.records` models, written with lm-evaluation-harness
keys (``"acc,none"``, ``"acc_stderr,none"``, the 95% bootstrap interval as
``"acc_ci95,none"``, the Wilson score interval of a proportion as ``"acc_wilson95,none"``).
Breakdowns group the same metrics by language, difficulty, category, provenance and prompt
variant (multiple choice) or by task and dimension (binary). Accuracy counts a failed or
unparsed answer as wrong, and the rates of both are reported beside it, never folded in
silently.

Bootstrap intervals resample items (multiple choice) or contexts (binary), named in
``ci_unit``. With fewer than two such units a resample is always the sample itself, so the
interval is left out (``None``) rather than shown as a point; the Wilson interval of a
proportion is still given, and it is the one to read when a proportion is 0 or 1.

Per-dimension Macro-F1 (binary) has two conventions. The default counts an example once in
each dimension its knowledge names, per task, and averages a dimension over the tasks that
have it, with ``n`` per cell. ``crow_parity`` reproduces CRoW's scripts: one entry per
knowledge triple, and a task without the dimension counts 0 in the cross-task mean.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from senseforge.evaluate import crow_metrics, metrics
from senseforge.evaluate.bootstrap import MIN_UNITS, percentile_interval, resampled_means, units_of
from senseforge.evaluate.records import (
    BinaryMetrics,
    BinarySample,
    CrowSummary,
    DimensionCell,
    DimensionMean,
    MCMetrics,
    MCSample,
)
from senseforge.evaluate.run import EvalConfig

BinaryFn = Callable[[Sequence[BinarySample]], float]

BREAKDOWN_FIELDS: tuple[str, ...] = ("lang", "difficulty", "category", "recipe", "review", "variant")
"""The sample fields multiple-choice metrics are broken down by."""


def _stderr_of_mean(values: Sequence[bool]) -> float:
    n = len(values)
    if n < 2:
        return math.nan
    p = sum(values) / n
    return math.sqrt(p * (1 - p) / (n - 1))


def _correct_keys(config: EvalConfig) -> list[str]:
    keys = ["correct"]
    if config.formulation == "loglik":
        keys += ["correct_norm", "correct_bytes"]
    if config.formulation == "generate":
        keys += ["correct_strict"]
    return keys


def mc_metrics(samples: Sequence[MCSample], config: EvalConfig) -> MCMetrics:
    """Headline metrics of multiple-choice samples that have a gold answer."""
    scored = [s for s in samples if s.gold is not None]
    failed = [s for s in scored if s.error]
    out: dict[str, Any] = {
        "n": len(scored),
        "n_withheld": len(samples) - len(scored),
        "failed_rate": len(failed) / len(scored) if scored else 0.0,
    }
    if not scored:
        return MCMetrics.model_validate(out)
    out["ci_unit"] = "item"
    for key in _correct_keys(config):
        name = key.replace("correct", "acc")
        values = [bool(getattr(s, key)) for s in scored]
        out[name] = metrics.accuracy(values)
        out[f"{name}_stderr"] = _stderr_of_mean(values)
        out[f"{name}_ci95"] = None
        if len(values) >= MIN_UNITS:
            low, high = metrics.bootstrap_ci(values, metrics.accuracy, n_resamples=config.n_bootstrap, seed=config.seed)
            out[f"{name}_ci95"] = [low, high]
        out[f"{name}_wilson95"] = list(metrics.wilson_interval(sum(values), len(values)))
    if config.formulation == "generate":
        answered = [s for s in scored if not s.error]
        out["unparsed_rate"] = sum(not s.parsed for s in answered) / max(1, len(answered))
        out["unparsed_rate_strict"] = sum(not s.parsed_strict for s in answered) / max(1, len(answered))
        parsed = [s for s in answered if s.parsed]
        out["acc_parsed"] = metrics.accuracy([bool(s.correct) for s in parsed]) if parsed else math.nan
    if config.formulation == "open":  # "parsed": the judge's verdict could be read
        answered = [s for s in scored if not s.error]
        out["unparsed_rate"] = sum(not s.parsed for s in answered) / max(1, len(answered))
        parsed = [s for s in answered if s.parsed]
        out["acc_parsed"] = metrics.accuracy([bool(s.correct) for s in parsed]) if parsed else math.nan
    return MCMetrics.model_validate(out)


def mc_variant_mean(per_variant: dict[str, MCMetrics], samples: Sequence[MCSample], config: EvalConfig) -> MCMetrics:
    """The mean over prompt variants of each accuracy and rate, with a bootstrap interval over items.

    The interval resamples *items* (all of an item's variants go in or out together), so
    scoring an item three times does not narrow it. The Wilson interval likewise counts
    items: it treats the mean as a proportion over ``n`` items (an item's share of right
    variants as its outcome), never over ``n`` times the number of variants.
    """
    rows = list(per_variant.values())
    first = rows[0]
    out: dict[str, Any] = {"n": first.n, "n_withheld": first.n_withheld, "variants": len(rows)}
    out["failed_rate"] = float(np.mean([m.failed_rate for m in rows]))
    scored = [s for s in samples if s.gold is not None]
    if not scored:
        return MCMetrics.model_validate(out)
    units = units_of(scored, lambda s: s.id)
    out["ci_unit"] = "item"
    for key in _correct_keys(config):
        name = key.replace("correct", "acc")
        values = [getattr(m, name) for m in rows]
        out[name] = float(np.mean(values))
        out[f"{name}_ci95"] = None
        if len(units) >= MIN_UNITS:
            correct = np.asarray([bool(getattr(s, key)) for s in scored], dtype=np.float64)
            stats = resampled_means(correct, units, n_resamples=config.n_bootstrap, seed=config.seed)
            out[f"{name}_ci95"] = list(percentile_interval(stats, 0.95))
        if first.n:
            share = min(1.0, max(0.0, out[name]))
            out[f"{name}_wilson95"] = list(metrics.wilson_interval(share * first.n, first.n))
    for name in ("unparsed_rate", "unparsed_rate_strict", "acc_parsed"):
        values = [getattr(m, name) for m in rows]
        if all(v is not None for v in values):
            out[name] = float(np.mean(values))
    return MCMetrics.model_validate(out)


def mc_breakdowns(samples: Sequence[MCSample], config: EvalConfig) -> dict[str, dict[str, MCMetrics]]:
    """The headline metrics per language, difficulty, category, provenance and prompt variant."""
    out: dict[str, dict[str, MCMetrics]] = {}
    for field in BREAKDOWN_FIELDS:
        groups: dict[str, list[MCSample]] = defaultdict(list)
        for sample in samples:
            value = getattr(sample, field)
            if value is not None:
                groups[str(value)].append(sample)
        if groups:
            out[field] = {value: mc_metrics(rows, config) for value, rows in sorted(groups.items())}
    return out


def _pred(sample: BinarySample) -> bool:
    """The prediction, with an unparsed or failed answer counted as wrong."""
    return bool(sample.prediction) if sample.prediction is not None else not sample.gold


def _binary_fns() -> dict[str, BinaryFn]:
    return {
        "macro_f1": lambda rows: crow_metrics.macro_f1([r.gold for r in rows], [_pred(r) for r in rows]),
        "situational_acc": lambda rows: crow_metrics.situational_accuracy(
            [r.context_id for r in rows], [r.gold for r in rows], [_pred(r) for r in rows]
        ),
        "acc": lambda rows: metrics.accuracy([bool(r.correct) for r in rows]),
    }


CROW_NAMES: dict[str | None, str] = {
    "attributional": "attribution",
    "physical/spatial": "physical",
    "comparative": "comparison",
    None: crow_metrics.OTHER_DIMENSION,
}
"""Our dimension names → CRoW's script's (``--crow-parity``). A triple without a dimension has a
relation outside the six, which CRoW's relation table files under ``other``."""


def _cell_dimensions(sample: BinarySample, parity: bool) -> list[str | None]:
    if parity:
        return [CROW_NAMES.get(d, d) for d in sample.triple_dimensions]
    return list(sample.dimensions)


def _dimension_cells(
    samples: Sequence[BinarySample], config: EvalConfig
) -> dict[str, dict[str, crow_metrics.DimensionCell]]:
    return crow_metrics.per_dimension_cells(
        [s.task for s in samples],
        [_cell_dimensions(s, config.crow_parity) for s in samples],
        [s.gold for s in samples],
        [_pred(s) for s in samples],
        parity=config.crow_parity,
    )


def _means(cells: dict[str, dict[str, crow_metrics.DimensionCell]], **how: bool) -> dict[str, DimensionMean]:
    return {
        dim: DimensionMean(macro_f1=mean, tasks=n)
        for dim, (mean, n) in crow_metrics.dimension_means(cells, **how).items()
    }


def binary_metrics(samples: Sequence[BinarySample], config: EvalConfig) -> BinaryMetrics:
    """Macro-F1, Situational Accuracy and accuracy with CIs (resampling whole contexts).

    With a single context there is no bootstrap interval (``None``); accuracy and Situational
    Accuracy still get their Wilson intervals (over examples and over contexts).
    """
    out: dict[str, Any] = {"n": len(samples), "n_contexts": len({s.context_id for s in samples})}
    if not samples:
        return BinaryMetrics.model_validate(out)
    out["ci_unit"] = "context"
    # one all-right-or-not outcome per context: Situational Accuracy is their mean, and
    # resampling them is resampling contexts
    outcomes = list(
        crow_metrics.context_outcomes(
            [s.context_id for s in samples], [s.gold for s in samples], [_pred(s) for s in samples]
        ).values()
    )
    for name, fn in _binary_fns().items():
        out[name] = fn(samples)
        out[f"{name}_ci95"] = None
        if out["n_contexts"] < MIN_UNITS:
            continue
        if name == "situational_acc":
            low, high = metrics.bootstrap_ci(
                outcomes, metrics.accuracy, n_resamples=config.n_bootstrap, seed=config.seed
            )
        else:
            low, high = metrics.bootstrap_ci(
                samples, fn, n_resamples=config.n_bootstrap, seed=config.seed, cluster=lambda s: s.context_id
            )
        out[f"{name}_ci95"] = [low, high]
    out["acc_wilson95"] = list(metrics.wilson_interval(sum(bool(s.correct) for s in samples), len(samples)))
    out["situational_acc_wilson95"] = list(metrics.wilson_interval(sum(outcomes), len(outcomes)))
    out["unparsed_rate"] = sum(s.prediction is None for s in samples) / len(samples)
    out["per_dimension_macro_f1"] = crow_metrics.per_dimension_macro_f1(
        [s.dimensions for s in samples], [s.gold for s in samples], [_pred(s) for s in samples]
    )
    cells = _dimension_cells(samples, config)
    out["per_dimension"] = {
        dim: DimensionCell(macro_f1=cell.macro_f1, n=cell.n)
        for cells_of in cells.values()
        for dim, cell in cells_of.items()
    }
    if config.crow_parity:
        out["per_dimension_macro_f1"] = {dim: cell.macro_f1 for dim, cell in out["per_dimension"].items()}
    return BinaryMetrics.model_validate(out)


def binary_report(samples: Sequence[BinarySample], config: EvalConfig) -> tuple[dict[str, BinaryMetrics], CrowSummary]:
    """Metrics per task, and the CRoW score over tasks (with and without MT) and per dimension."""
    tasks: dict[str, list[BinarySample]] = defaultdict(list)
    for sample in samples:
        tasks[sample.task].append(sample)
    per_task = {task: binary_metrics(rows, config) for task, rows in sorted(tasks.items())}
    f1 = {task: float(m.macro_f1) for task, m in per_task.items() if m.macro_f1 is not None}
    sa = {task: float(m.situational_acc) for task, m in per_task.items() if m.situational_acc is not None}
    cells = _dimension_cells(samples, config)
    summary: dict[str, Any] = {
        "crow_score_macro_f1": crow_metrics.crow_score(f1),
        "crow_score_situational_acc": crow_metrics.crow_score(sa),
        "crow_score_macro_f1_no_mt": crow_metrics.crow_score(f1, include_mt=False) if _has_non_mt(f1) else math.nan,
        "crow_score_situational_acc_no_mt": (
            crow_metrics.crow_score(sa, include_mt=False) if _has_non_mt(sa) else math.nan
        ),
        "per_dimension_macro_f1": _means(cells),
        "convention": "crow-parity" if config.crow_parity else "senseforge",
    }
    if _has_non_mt(f1):
        summary["per_dimension_macro_f1_no_mt"] = _means(cells, include_mt=False)
    if config.crow_parity:
        summary["per_dimension_macro_f1_leaderboard"] = _means(cells, missing_as_zero=True)
    return per_task, CrowSummary.model_validate(summary)


def _has_non_mt(scores: dict[str, float]) -> bool:
    return any(not crow_metrics.is_mt_task(task) for task in scores)


def baseline_report(samples: Sequence[BinarySample], config: EvalConfig) -> dict[str, Any]:
    """CRoW's baselines on the same pairs: a constant majority-label predictor and seeded coin flips."""
    out: dict[str, Any] = {}
    golds = [s.gold for s in samples]
    for name, preds in (
        ("majority", crow_metrics.majority_predictions(golds)),
        ("random", crow_metrics.random_predictions(len(samples), config.seed)),
    ):
        rows = [
            s.model_copy(update={"prediction": p, "correct": p == s.gold}) for s, p in zip(samples, preds, strict=True)
        ]
        per_task, summary = binary_report(rows, config)
        out[name] = {
            "tasks": {
                task: {
                    k: v
                    for k, v in m.to_json().items()
                    if k.endswith(",none") and "_ci95" not in k and "_wilson95" not in k
                }
                for task, m in per_task.items()
            },
            "summary": summary.to_json(),
        }
    return out
