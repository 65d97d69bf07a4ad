"""The paired statistics of :mod:`senseforge.evaluate.compare`.

B − A on paired records with a percentile bootstrap interval (the engine of
:mod:`senseforge.evaluate.bootstrap`, so the same seed draws the same resamples as ``eval run``),
McNemar's exact test on the discordant pairs, the Macro-F1 and context outcomes of paired
binary examples, the CRoW scores bootstrapped within each task, and the pooled accuracy.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from senseforge.evaluate import crow_metrics, metrics
from senseforge.evaluate.bootstrap import MIN_UNITS, percentile_interval, resampled_means, resampled_sums, units_of
from senseforge.evaluate.compare_records import CONFIDENCE, Estimate, McNemar, PairedDifference
from senseforge.evaluate.records import BinarySample
from senseforge.evaluate.significance import mcnemar_p_value

__all__ = ["mcnemar_exact"]


# --------------------------------------------------------------------------- paired statistics


def _interval(stats: NDArray[np.float64] | None) -> list[float] | None:
    return list(percentile_interval(stats, CONFIDENCE)) if stats is not None else None


def _paired_mean(
    a: NDArray[np.float64],
    b: NDArray[np.float64],
    units: list[list[int]],
    unit: str,
    n_resamples: int,
    seed: int,
) -> PairedDifference:
    """B − A of a mean of 0/1 outcomes over paired records, bootstrapped over units."""
    stats = resampled_means(b - a, units, n_resamples=n_resamples, seed=seed) if len(units) >= MIN_UNITS else None
    mean_a, mean_b = float(np.mean(a)), float(np.mean(b))
    return PairedDifference(
        a=mean_a,
        b=mean_b,
        diff=mean_b - mean_a,
        ci95=_interval(stats),
        ci_unit=unit,
        units=len(units),
    )


def _mcnemar(a: NDArray[np.float64], b: NDArray[np.float64], unit: str) -> McNemar:
    a_only = int(np.count_nonzero((a == 1) & (b == 0)))
    b_only = int(np.count_nonzero((a == 0) & (b == 1)))
    return McNemar(a_only=a_only, b_only=b_only, p_value=mcnemar_p_value(a_only, b_only), unit=unit)


def mcnemar_exact(a_correct: Sequence[bool], b_correct: Sequence[bool], *, unit: str = "item") -> McNemar:
    """McNemar's exact test of two paired sequences of right/wrong outcomes.

    >>> mcnemar_exact([True, True, False, False], [True, False, True, True]).p_value
    1.0
    """
    a = np.asarray(a_correct, dtype=np.float64)
    b = np.asarray(b_correct, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"the two sequences differ in length: {len(a)} != {len(b)}")
    return _mcnemar(a, b, unit)


def _confusion(gold: NDArray[np.bool_], pred: NDArray[np.bool_]) -> NDArray[np.float64]:
    """One row per example: its ``(tp, fp, fn, tn)`` indicators."""
    return np.stack([gold & pred, ~gold & pred, gold & ~pred, ~gold & ~pred], axis=1).astype(np.float64)


def _macro_f1_of_counts(counts: NDArray[np.float64]) -> NDArray[np.float64]:
    """:func:`crow_metrics.macro_f1` of rows of ``(tp, fp, fn, tn)`` counts."""
    tp, fp, fn, tn = counts[:, 0], counts[:, 1], counts[:, 2], counts[:, 3]

    def f1(hit: NDArray[np.float64], false_pos: NDArray[np.float64], miss: NDArray[np.float64]) -> NDArray[np.float64]:
        denominator = 2 * hit + false_pos + miss
        return np.where(denominator == 0, 1.0, 2 * hit / np.maximum(denominator, 1.0))

    result: NDArray[np.float64] = (f1(tp, fp, fn) + f1(tn, fn, fp)) / 2
    return result


@dataclass(frozen=True)
class _BinaryPairs:
    """The shared examples of one task, as arrays (A's and B's own golds and predictions)."""

    gold_a: NDArray[np.bool_]
    pred_a: NDArray[np.bool_]
    gold_b: NDArray[np.bool_]
    pred_b: NDArray[np.bool_]
    contexts: list[Hashable]

    def correct(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        return (self.gold_a == self.pred_a).astype(np.float64), (self.gold_b == self.pred_b).astype(np.float64)

    def units(self) -> list[list[int]]:
        return units_of(self.contexts, lambda c: c)

    def macro_f1_stats(self, n_resamples: int, seed: int) -> NDArray[np.float64]:
        """B − A Macro-F1 on each resample of contexts."""
        table = np.hstack([_confusion(self.gold_a, self.pred_a), _confusion(self.gold_b, self.pred_b)])
        sums = resampled_sums(table, self.units(), n_resamples=n_resamples, seed=seed)
        return _macro_f1_of_counts(sums[:, 4:]) - _macro_f1_of_counts(sums[:, :4])

    def macro_f1(self) -> tuple[float, float]:
        return (
            crow_metrics.macro_f1(self.gold_a.tolist(), self.pred_a.tolist()),
            crow_metrics.macro_f1(self.gold_b.tolist(), self.pred_b.tolist()),
        )

    def context_outcomes(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Per context (first appearance order): whether all its shared targets are right, for A and B."""
        right_a, right_b = self.correct()
        groups = self.units()
        a = np.asarray([all(right_a[i] for i in g) for g in groups], dtype=np.float64)
        b = np.asarray([all(right_b[i] for i in g) for g in groups], dtype=np.float64)
        return a, b


def _binary_prediction(sample: BinarySample) -> bool:
    """The prediction, an unparsed or failed answer counting as wrong (as ``eval run`` counts it)."""
    return bool(sample.prediction) if sample.prediction is not None else not sample.gold


def _binary_pairs(pairs: Sequence[tuple[BinarySample, BinarySample]]) -> _BinaryPairs:
    return _BinaryPairs(
        gold_a=np.asarray([a.gold for a, _ in pairs], dtype=np.bool_),
        pred_a=np.asarray([_binary_prediction(a) for a, _ in pairs], dtype=np.bool_),
        gold_b=np.asarray([b.gold for _, b in pairs], dtype=np.bool_),
        pred_b=np.asarray([_binary_prediction(b) for _, b in pairs], dtype=np.bool_),
        contexts=[(a.task, a.context_id) for a, _ in pairs],
    )


# --------------------------------------------------------------------------- CRoW scores and pooled accuracy


def _task_seeds(seed: int, count: int) -> list[int]:
    """Independent seeds for the tasks of a stratified bootstrap (the same for the same ``seed``)."""
    return [int(s.generate_state(1)[0]) for s in np.random.SeedSequence(seed).spawn(count)]


def _crow_paired(name: str, per_task: dict[str, _BinaryPairs], n_resamples: int, seed: int) -> PairedDifference | None:
    """B − A of a CRoW score (the plain mean over tasks), resampling contexts within each task."""
    if not per_task:
        return None
    seeds = _task_seeds(seed, len(per_task))
    a_scores, b_scores, stats, units = [], [], [], []
    for (_task, pairs), task_seed in zip(per_task.items(), seeds, strict=True):
        n_units = len(pairs.units())
        units.append(n_units)
        if name == "crow_score_macro_f1":
            f1_a, f1_b = pairs.macro_f1()
            a_scores.append(f1_a)
            b_scores.append(f1_b)
            stats.append(pairs.macro_f1_stats(n_resamples, task_seed) if n_units >= MIN_UNITS else None)
        else:
            out_a, out_b = pairs.context_outcomes()
            a_scores.append(float(np.mean(out_a)))
            b_scores.append(float(np.mean(out_b)))
            singletons = [[i] for i in range(len(out_a))]
            stats.append(
                resampled_means(out_b - out_a, singletons, n_resamples=n_resamples, seed=task_seed)
                if n_units >= MIN_UNITS
                else None
            )
    mean_a, mean_b = float(np.mean(a_scores)), float(np.mean(b_scores))
    ci = None
    if any(s is not None for s in stats):
        point = [b_ - a_ for a_, b_ in zip(a_scores, b_scores, strict=True)]
        columns = [s if s is not None else np.full(n_resamples, p) for s, p in zip(stats, point, strict=True)]
        ci = list(percentile_interval(np.mean(np.stack(columns, axis=1), axis=1), CONFIDENCE))
    return PairedDifference(a=mean_a, b=mean_b, diff=mean_b - mean_a, ci95=ci, ci_unit="context", units=sum(units))


def _pooled_estimate(samples: Sequence[BinarySample], n_resamples: int, seed: int) -> Estimate | None:
    """Accuracy over every example of every task, bootstrapped over contexts, with its Wilson interval."""
    if not samples:
        return None
    right = np.asarray([_binary_prediction(s) == s.gold for s in samples], dtype=np.float64)
    units = units_of([(s.task, s.context_id) for s in samples], lambda c: c)
    ci = None
    if len(units) >= MIN_UNITS:
        ci = list(percentile_interval(resampled_means(right, units, n_resamples=n_resamples, seed=seed), CONFIDENCE))
    return Estimate(
        value=float(np.mean(right)),
        ci95=ci,
        wilson95=list(metrics.wilson_interval(float(right.sum()), len(right))),
        ci_unit="context",
        units=len(units),
    )
