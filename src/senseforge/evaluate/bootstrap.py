"""Resampling engine behind :func:`senseforge.evaluate.metrics.bootstrap_ci`.

Two ways to get the resampled statistics, which draw the very same indices for the same
seed (so they agree to the last bit on means of 0/1 values):

- :func:`resampled_statistics` calls any metric once per resample (plain Python);
- :func:`resampled_means` computes the mean of numeric values for every resample at once
  with numpy (the fast path for accuracy-like metrics);
- :func:`resampled_sums` does the same for the column sums of a table of counts, from which
  a statistic such as Macro-F1 (confusion counts) or a paired difference follows.

All resample *units*: single records, or whole clusters when clusters are given. Indices
are drawn in batches of whole resamples, so memory stays bounded for large inputs. With
fewer than :data:`MIN_UNITS` units every resample is the sample itself, and a percentile
interval would be a point posing as an interval: callers report none instead.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator, Sequence
from typing import TypeVar

import numpy as np
from numpy.typing import NDArray

T = TypeVar("T")

_BATCH_CELLS = 1 << 21
"""About how many indices one batch holds (2M int64 = 16 MiB)."""

MIN_UNITS = 2
"""The fewest resampling units a bootstrap interval is reported for."""


def units_of(records: Sequence[T], cluster: Callable[[T], Hashable] | None) -> list[list[int]]:
    """Record indices grouped into resampling units, clusters in order of first appearance.

    >>> units_of(["a1", "b1", "a2"], lambda r: r[0])
    [[0, 2], [1]]
    >>> units_of(["x", "y"], None)
    [[0], [1]]
    """
    if cluster is None:
        return [[i] for i in range(len(records))]
    groups: dict[Hashable, list[int]] = {}
    for i, record in enumerate(records):
        groups.setdefault(cluster(record), []).append(i)
    return list(groups.values())


def _index_batches(seed: int, n_units: int, n_resamples: int) -> Iterator[NDArray[np.int64]]:
    """Unit indices for each resample, ``(batch, n_units)`` arrays, the same for the same arguments."""
    rng = np.random.default_rng(seed)
    per_batch = max(1, _BATCH_CELLS // max(1, n_units))
    done = 0
    while done < n_resamples:
        size = min(per_batch, n_resamples - done)
        yield rng.integers(0, n_units, size=(size, n_units), dtype=np.int64)
        done += size


def resampled_statistics(
    records: Sequence[T],
    metric: Callable[[Sequence[T]], float],
    units: Sequence[Sequence[int]],
    *,
    n_resamples: int,
    seed: int,
) -> NDArray[np.float64]:
    """The metric on each of ``n_resamples`` resamples of whole units (generic path).

    A unit drawn twice contributes its records twice, one copy after the other.
    """
    stats = np.empty(n_resamples, dtype=np.float64)
    row = 0
    for batch in _index_batches(seed, len(units), n_resamples):
        for drawn in batch:
            sample = [records[i] for u in drawn for i in units[u]]
            stats[row] = metric(sample)
            row += 1
    return stats


def resampled_means(
    values: NDArray[np.float64],
    units: Sequence[Sequence[int]],
    *,
    n_resamples: int,
    seed: int,
) -> NDArray[np.float64]:
    """Mean of ``values`` over the records of each resample of whole units (vectorised path).

    With clusters this is the ratio of the drawn clusters' sums to their sizes, which is
    what the mean over the concatenated records of the drawn clusters is.
    """
    n_units = len(units)
    unit_of = np.empty(len(values), dtype=np.int64)
    for u, members in enumerate(units):
        unit_of[list(members)] = u
    sums = np.bincount(unit_of, weights=values, minlength=n_units)
    sizes = np.bincount(unit_of, minlength=n_units).astype(np.float64)
    singletons = bool(np.all(sizes == 1.0))
    out: list[NDArray[np.float64]] = []
    for batch in _index_batches(seed, n_units, n_resamples):
        totals = sums[batch].sum(axis=1)
        counts = np.full(len(batch), float(n_units)) if singletons else sizes[batch].sum(axis=1)
        out.append(totals / counts)
    return np.concatenate(out)


def resampled_sums(
    values: NDArray[np.float64],
    units: Sequence[Sequence[int]],
    *,
    n_resamples: int,
    seed: int,
) -> NDArray[np.float64]:
    """Column sums of ``values`` (one row per record) over the records of each resample of whole units.

    Returns an ``(n_resamples, columns)`` array. It draws the same indices as
    :func:`resampled_means` and :func:`resampled_statistics` for the same seed and units.

    >>> table = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    >>> resampled_sums(table, [[0], [1], [2]], n_resamples=4, seed=0).shape
    (4, 2)
    """
    if values.ndim != 2:
        raise ValueError(f"values must be a table with one row per record, got shape {values.shape}")
    n_units = len(units)
    unit_of = np.empty(len(values), dtype=np.int64)
    for u, members in enumerate(units):
        unit_of[list(members)] = u
    per_unit = np.stack(
        [np.bincount(unit_of, weights=values[:, j], minlength=n_units) for j in range(values.shape[1])], axis=1
    )
    out: list[NDArray[np.float64]] = []
    for batch in _index_batches(seed, n_units, n_resamples):
        out.append(np.stack([per_unit[:, j][batch].sum(axis=1) for j in range(values.shape[1])], axis=1))
    return np.concatenate(out) if out else np.zeros((0, values.shape[1]), dtype=np.float64)


def percentile_interval(stats: NDArray[np.float64], confidence: float) -> tuple[float, float]:
    """The equal-tailed percentile interval of resampled statistics (linear interpolation).

    >>> percentile_interval(np.arange(101, dtype=np.float64), 0.5)
    (25.0, 75.0)
    """
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(stats, [tail, 1.0 - tail])
    return float(low), float(high)
