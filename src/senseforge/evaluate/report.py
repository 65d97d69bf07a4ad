"""Per-sample records → metrics with bootstrap confidence intervals and breakdowns.

Metric keys follow lm-evaluation-harness (``"acc,none"``, ``"acc_stderr,none"``), with
the 95% bootstrap interval as ``"acc_ci95,none"``. Breakdowns group the same metrics by
language, difficulty, category and provenance (multiple choice) or by task and
dimension (binary). Accuracy counts a failed or unparsed answer as wrong, and the rates
of both are reported beside it, never folded in silently.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

from senseforge.evaluate import metrics
from senseforge.evaluate.run import EvalConfig, Sample

MetricFn = Callable[[Sequence[Sample]], float]


def _ci(samples: Sequence[Sample], fn: MetricFn, config: EvalConfig, cluster: str | None = None) -> list[float]:
    key = (lambda s: s[cluster]) if cluster else None
    low, high = metrics.bootstrap_ci(samples, fn, n_resamples=config.n_bootstrap, seed=config.seed, cluster=key)
    return [low, high]


def _stderr_of_mean(values: Sequence[bool]) -> float:
    n = len(values)
    if n < 2:
        return math.nan
    p = sum(values) / n
    return math.sqrt(p * (1 - p) / (n - 1))


def mc_metrics(samples: Sequence[Sample], config: EvalConfig) -> dict[str, Any]:
    """Headline metrics of multiple-choice samples that have a gold answer."""
    scored = [s for s in samples if s.get("gold") is not None]
    out: dict[str, Any] = {"n": len(scored), "n_withheld": len(samples) - len(scored)}
    failed = [s for s in scored if s.get("error")]
    out["failed_rate,none"] = len(failed) / len(scored) if scored else 0.0
    if not scored:
        return out
    keys = ["correct"]
    if config.formulation == "loglik":
        keys += ["correct_norm", "correct_bytes"]
    if config.formulation == "generate":
        keys += ["correct_strict"]
    for key in keys:
        name = key.replace("correct", "acc")
        values = [bool(s.get(key)) for s in scored]
        out[f"{name},none"] = metrics.accuracy(values)
        out[f"{name}_stderr,none"] = _stderr_of_mean(values)
        low, high = metrics.bootstrap_ci(values, metrics.accuracy, n_resamples=config.n_bootstrap, seed=config.seed)
        out[f"{name}_ci95,none"] = [low, high]
    if config.formulation == "generate":
        answered = [s for s in scored if not s.get("error")]
        out["unparsed_rate,none"] = sum(not s.get("parsed") for s in answered) / max(1, len(answered))
        out["unparsed_rate_strict,none"] = sum(not s.get("parsed_strict") for s in answered) / max(1, len(answered))
        parsed = [s for s in answered if s.get("parsed")]
        out["acc_parsed,none"] = metrics.accuracy([bool(s["correct"]) for s in parsed]) if parsed else math.nan
    return out


def mc_breakdowns(samples: Sequence[Sample], config: EvalConfig) -> dict[str, dict[str, Any]]:
    """The headline metrics per language, difficulty, category and provenance."""
    out: dict[str, dict[str, Any]] = {}
    for field in ("lang", "difficulty", "category", "recipe", "review"):
        groups: dict[str, list[Sample]] = defaultdict(list)
        for sample in samples:
            if sample.get(field) is not None:
                groups[str(sample[field])].append(sample)
        if groups:
            out[field] = {value: mc_metrics(rows, config) for value, rows in sorted(groups.items())}
    return out


def _binary_fns() -> dict[str, MetricFn]:
    return {
        "macro_f1": lambda rows: metrics.macro_f1([r["gold"] for r in rows], [_pred(r) for r in rows]),
        "situational_acc": lambda rows: metrics.situational_accuracy(
            [r["context_id"] for r in rows], [r["gold"] for r in rows], [_pred(r) for r in rows]
        ),
        "acc": lambda rows: metrics.accuracy([bool(r["correct"]) for r in rows]),
    }


def _pred(sample: Sample) -> bool:
    """The prediction, with an unparsed or failed answer counted as wrong."""
    pred = sample.get("prediction")
    return bool(pred) if pred is not None else not sample["gold"]


def binary_metrics(samples: Sequence[Sample], config: EvalConfig) -> dict[str, Any]:
    """Macro-F1, Situational Accuracy and accuracy with CIs (resampling whole contexts)."""
    out: dict[str, Any] = {"n": len(samples), "n_contexts": len({s["context_id"] for s in samples})}
    if not samples:
        return out
    for name, fn in _binary_fns().items():
        out[f"{name},none"] = fn(samples)
        if name == "situational_acc":
            # resample contexts as units: one all-right-or-not outcome per context
            outcomes = metrics.context_outcomes(
                [s["context_id"] for s in samples], [s["gold"] for s in samples], [_pred(s) for s in samples]
            )
            low, high = metrics.bootstrap_ci(
                list(outcomes.values()), metrics.accuracy, n_resamples=config.n_bootstrap, seed=config.seed
            )
            out[f"{name}_ci95,none"] = [low, high]
        else:
            out[f"{name}_ci95,none"] = _ci(samples, fn, config, cluster="context_id")
    out["unparsed_rate,none"] = sum(s.get("prediction") is None for s in samples) / len(samples)
    out["per_dimension_macro_f1"] = metrics.per_dimension_macro_f1(
        [s["dimensions"] for s in samples], [s["gold"] for s in samples], [_pred(s) for s in samples]
    )
    return out


def binary_report(samples: Sequence[Sample], config: EvalConfig) -> dict[str, Any]:
    """Metrics per task, and the CRoW score over tasks (with and without MT)."""
    tasks: dict[str, list[Sample]] = defaultdict(list)
    for sample in samples:
        tasks[str(sample["task"])].append(sample)
    per_task = {task: binary_metrics(rows, config) for task, rows in sorted(tasks.items())}
    f1 = {task: float(m["macro_f1,none"]) for task, m in per_task.items()}
    sa = {task: float(m["situational_acc,none"]) for task, m in per_task.items()}
    summary = {
        "crow_score_macro_f1,none": metrics.crow_score(f1),
        "crow_score_situational_acc,none": metrics.crow_score(sa),
        "crow_score_macro_f1_no_mt,none": metrics.crow_score(f1, include_mt=False) if _has_non_mt(f1) else math.nan,
        "crow_score_situational_acc_no_mt,none": metrics.crow_score(sa, include_mt=False)
        if _has_non_mt(sa)
        else math.nan,
    }
    return {"tasks": per_task, "summary": summary}


def _has_non_mt(scores: dict[str, float]) -> bool:
    return any(not metrics.is_mt_task(task) for task in scores)


def baseline_report(samples: Sequence[Sample], config: EvalConfig) -> dict[str, Any]:
    """CRoW's baselines on the same pairs: a constant majority-label predictor and seeded coin flips."""
    out: dict[str, Any] = {}
    golds = [bool(s["gold"]) for s in samples]
    for name, preds in (
        ("majority", metrics.majority_predictions(golds)),
        ("random", metrics.random_predictions(len(samples), config.seed)),
    ):
        rows = [{**s, "prediction": p, "correct": p == s["gold"]} for s, p in zip(samples, preds, strict=True)]
        report = binary_report(rows, config)
        out[name] = {
            "tasks": {
                task: {k: v for k, v in m.items() if k.endswith(",none") and "_ci95" not in k}
                for task, m in report["tasks"].items()
            },
            "summary": report["summary"],
        }
    return out
