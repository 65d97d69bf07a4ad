"""Metrics: plain functions from labels and predictions to a number.

Nothing here reads files or keeps state. Inputs that make a metric undefined (no records,
sequences of different lengths, non-boolean labels) raise :class:`ValueError` with a
message that says which argument is wrong.

The binary (CRoW) metrics (Macro-F1, Situational Accuracy, the per-dimension scores, the CRoW
score and its baselines) live in :mod:`senseforge.evaluate.crow_metrics`.

Also here: :func:`bootstrap_ci` (percentile bootstrap, optionally over clusters),
:func:`wilson_interval` (the score interval of a proportion) and the agreement statistics
:func:`fleiss_kappa` and :func:`krippendorff_alpha_nominal`.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from typing import TypeVar

import numpy as np
from numpy.typing import NDArray

from senseforge.evaluate.bootstrap import percentile_interval, resampled_means, resampled_statistics, units_of
from senseforge.evaluate.crow_metrics import _bool_array

T = TypeVar("T")


# --------------------------------------------------------------------------- accuracy-like


def accuracy(correct: Sequence[bool]) -> float:
    """Share of ``True`` values.

    >>> accuracy([True, False, True, True])
    0.75
    """
    arr = _bool_array(correct, "correct")
    if len(arr) == 0:
        raise ValueError("accuracy of no records is undefined")
    return int(np.count_nonzero(arr)) / len(arr)


def weighted_mean(values: Sequence[float], weights: Sequence[float]) -> float:
    """``sum(v * w) / sum(w)``, e.g. per-category accuracies weighted by item counts.

    Weights must be finite and non-negative, with a positive sum.

    >>> weighted_mean([0.5, 1.0], [2, 1])
    0.6666666666666666
    """
    if len(values) != len(weights):
        raise ValueError(f"values and weights differ in length: {len(values)} != {len(weights)}")
    if len(values) == 0:
        raise ValueError("weighted mean of no values is undefined")
    if any(not math.isfinite(w) or w < 0 for w in weights):
        raise ValueError("weights must be finite and non-negative")
    total = math.fsum(weights)
    if total <= 0:
        raise ValueError("weights sum to zero: the weighted mean is undefined")
    return math.fsum(v * w for v, w in zip(values, weights, strict=True)) / total


def wilson_interval(successes: float, n: int, *, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of the proportion ``successes / n``.

    Where a bootstrap interval collapses to a point when every record agrees (0 of 10 right
    resamples to 0 every time), this one still shows how little ten records pin down: 0/10
    gives about ``[0, 0.278]``. The bounds stay inside ``[0, 1]``; they are exactly 0 at
    ``successes == 0`` and exactly 1 at ``successes == n``. ``successes`` may be fractional,
    e.g. a mean over prompt variants times the number of items.

    >>> low, high = wilson_interval(0, 10)
    >>> low, round(high, 4)
    (0.0, 0.2775)
    >>> [round(b, 4) for b in wilson_interval(8, 10)]
    [0.4902, 0.9433]
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}")
    if not (math.isfinite(successes) and 0 <= successes <= n):
        raise ValueError(f"successes must lie between 0 and n = {n}, got {successes}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie strictly between 0 and 1, got {confidence}")
    z = statistics.NormalDist().inv_cdf((1.0 + confidence) / 2.0)
    p = successes / n
    shrink = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / shrink
    half = z / shrink * math.sqrt(p * (1.0 - p) / n + z * z / (4 * n * n))
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return low, high


# --------------------------------------------------------------------------- bootstrap

_MEAN_METRICS: tuple[Callable[..., float], ...] = (accuracy, statistics.fmean, statistics.mean)


def _numeric_values(records: Sequence[object]) -> NDArray[np.float64] | None:
    """The records as floats when every one is a bool, int or float, else ``None``."""
    if not all(isinstance(r, bool | int | float | np.bool_ | np.integer | np.floating) for r in records):
        return None
    return np.asarray(records, dtype=np.float64)


def bootstrap_ci(
    records: Sequence[T],
    metric: Callable[[Sequence[T]], float],
    *,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    cluster: Callable[[T], Hashable] | None = None,
) -> tuple[float, float]:
    """Percentile bootstrap confidence interval of ``metric(records)``.

    Draws ``n_resamples`` resamples of the records with replacement (or, with ``cluster``,
    of whole clusters: all records with one key go in or out together, e.g. the targets of
    one context), applies ``metric`` to each and returns the ``(1 - confidence) / 2`` and
    ``(1 + confidence) / 2`` quantiles. The same arguments give the same interval.

    Fast path: when ``metric`` is :func:`accuracy`, :func:`statistics.fmean` or
    :func:`statistics.mean` and the records are numbers or booleans, every resample's mean
    is computed at once with numpy (1000 resamples of 10,000 records take well under a
    second). It draws the same indices as the generic path, so both give the same interval.

    Caveat for ``cluster``: a cluster drawn twice puts its records in twice. A metric that
    itself groups records by the cluster key (Situational Accuracy groups by context id)
    would merge the copies and count the context once. Bootstrap such a metric from one
    record per cluster instead; for Situational Accuracy::

        outcomes = list(context_outcomes(context_ids, golds, preds).values())
        bootstrap_ci(outcomes, accuracy)

    which is exactly the bootstrap over contexts.

    >>> low, high = bootstrap_ci([True] * 80 + [False] * 20, accuracy, seed=1)
    >>> low < 0.8 < high
    True
    """
    if len(records) == 0:
        raise ValueError("no records to resample")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be at least 1, got {n_resamples}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie strictly between 0 and 1, got {confidence}")
    units = units_of(records, cluster)
    values = _numeric_values(records) if any(metric is m for m in _MEAN_METRICS) else None
    if values is not None:
        stats = resampled_means(values, units, n_resamples=n_resamples, seed=seed)
    else:
        stats = resampled_statistics(records, metric, units, n_resamples=n_resamples, seed=seed)
    return percentile_interval(stats, confidence)


# --------------------------------------------------------------------------- agreement


def fleiss_kappa(ratings: Sequence[Sequence[str]]) -> float:
    """Fleiss' kappa: chance-corrected agreement of a fixed number of raters per item.

    ``ratings[i]`` holds the labels item ``i`` got, one per rater; every item needs the
    same number of ratings, at least two. Which rater gave which label does not matter.
    When every rating is the same single category, expected agreement is 1 and kappa is
    0/0: the result is ``nan``.

    >>> fleiss_kappa([["a", "a"], ["b", "b"]])
    1.0
    >>> fleiss_kappa([["a", "b"], ["b", "a"]])
    -1.0
    """
    if len(ratings) == 0:
        raise ValueError("no items: Fleiss' kappa is undefined")
    m = len(ratings[0])
    if m < 2:
        raise ValueError(f"Fleiss' kappa needs at least two ratings per item, item 0 has {m}")
    for i, item in enumerate(ratings):
        if len(item) != m:
            raise ValueError(
                f"Fleiss' kappa needs the same number of ratings per item: item 0 has {m}, item {i} has {len(item)}"
            )
        if any(label is None for label in item):
            raise ValueError(f"item {i} has a missing rating; use krippendorff_alpha_nominal for missing data")
    per_item = [Counter(item) for item in ratings]
    n_items = len(ratings)
    agreement = math.fsum((sum(c * c for c in item.values()) - m) / (m * (m - 1)) for item in per_item)
    p_bar = agreement / n_items
    totals: Counter[str] = Counter()
    for item_counts in per_item:
        totals.update(item_counts)
    if len(totals) == 1:
        return math.nan
    p_e = math.fsum((count / (n_items * m)) ** 2 for count in totals.values())
    return (p_bar - p_e) / (1 - p_e)


def krippendorff_alpha_nominal(ratings: Sequence[Sequence[str | None]]) -> float:
    """Krippendorff's alpha for nominal labels, with missing ratings allowed.

    ``ratings[i]`` holds item ``i``'s labels from its raters; ``None`` is a missing rating.
    Items with fewer than two ratings are not pairable and are left out (as Krippendorff
    prescribes). ``alpha = 1 - D_o / D_e`` from the coincidence matrix. When all pairable
    ratings share one label, ``D_e`` is 0 and the result is ``nan``.

    >>> krippendorff_alpha_nominal([["a", "a", None], ["b", "b", "b"], ["a", None, None]])
    1.0
    """
    units = [[label for label in item if label is not None] for item in ratings]
    units = [u for u in units if len(u) >= 2]
    if not units:
        raise ValueError("no item has two or more ratings: Krippendorff's alpha is undefined")
    labels = sorted({label for u in units for label in u})
    index = {label: k for k, label in enumerate(labels)}
    coincidences = np.zeros((len(labels), len(labels)), dtype=np.float64)
    for unit in units:
        counts = np.zeros(len(labels), dtype=np.float64)
        for label in unit:
            counts[index[label]] += 1
        coincidences += (np.outer(counts, counts) - np.diag(counts)) / (len(unit) - 1)
    marginals = coincidences.sum(axis=1)
    n = float(marginals.sum())
    observed = n - float(np.trace(coincidences))
    expected = (n * n - float(np.sum(marginals * marginals))) / (n - 1)
    if expected == 0:
        return math.nan
    return 1.0 - observed / expected
