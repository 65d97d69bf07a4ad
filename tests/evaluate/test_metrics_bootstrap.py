"""Percentile bootstrap: brackets the estimate, is seeded, narrows with data, resamples clusters whole."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import pytest

from senseforge.evaluate import crow_metrics, metrics

Pair = tuple[bool, bool]


def _pattern(n: int, every: int = 10, wrong: int = 3) -> list[bool]:
    """``n`` correctness flags, ``wrong`` of every ``every`` False, spread evenly."""
    return [(i % every) >= wrong for i in range(n)]


def _macro_f1_of(pairs: Sequence[Pair]) -> float:
    return crow_metrics.macro_f1([g for g, _ in pairs], [p for _, p in pairs])


def _pairs(n: int) -> list[Pair]:
    golds = [i % 2 == 0 for i in range(n)]
    preds = [g if i % 5 else not g for i, g in enumerate(golds)]  # 80% right
    return list(zip(golds, preds, strict=True))


def test_interval_brackets_the_point_estimate() -> None:
    correct = _pattern(500)
    low, high = metrics.bootstrap_ci(correct, metrics.accuracy)
    assert low < metrics.accuracy(correct) < high
    pairs = _pairs(300)
    low, high = metrics.bootstrap_ci(pairs, _macro_f1_of, n_resamples=300)
    assert low < _macro_f1_of(pairs) < high


def test_same_seed_same_interval_other_seed_other_interval() -> None:
    correct = _pattern(400)
    first = metrics.bootstrap_ci(correct, metrics.accuracy, seed=3)
    assert metrics.bootstrap_ci(correct, metrics.accuracy, seed=3) == first
    assert metrics.bootstrap_ci(correct, metrics.accuracy, seed=4) != first
    pairs = _pairs(200)
    assert metrics.bootstrap_ci(pairs, _macro_f1_of, n_resamples=200, seed=5) == metrics.bootstrap_ci(
        pairs, _macro_f1_of, n_resamples=200, seed=5
    )


def test_interval_narrows_with_more_data() -> None:
    widths = []
    for n in (100, 1_000, 10_000):
        low, high = metrics.bootstrap_ci(_pattern(n), metrics.accuracy)
        widths.append(high - low)
    assert widths[0] > widths[1] > widths[2]
    # the standard error shrinks like 1/sqrt(n): 10x the data, about a third of the width
    assert widths[1] / widths[0] == pytest.approx(10**-0.5, rel=0.25)


def test_interval_widens_with_confidence() -> None:
    correct = _pattern(500)
    low90, high90 = metrics.bootstrap_ci(correct, metrics.accuracy, confidence=0.90)
    low99, high99 = metrics.bootstrap_ci(correct, metrics.accuracy, confidence=0.99)
    assert low99 <= low90 < high90 <= high99


def test_fast_path_matches_the_generic_path_exactly() -> None:
    correct = _pattern(2_000)
    fast = metrics.bootstrap_ci(correct, metrics.accuracy, seed=11)
    generic = metrics.bootstrap_ci(correct, lambda rs: metrics.accuracy(rs), seed=11)
    assert fast == generic


def test_fast_path_does_not_call_the_metric_per_resample(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*args: object, **kwargs: object) -> None:
        raise AssertionError("generic path taken")

    monkeypatch.setattr(metrics, "resampled_statistics", boom)
    low, high = metrics.bootstrap_ci(_pattern(10_000), metrics.accuracy, n_resamples=1000)
    assert low < 0.7 < high


def test_cluster_resampling_keeps_clusters_whole() -> None:
    sizes = {"a": 2, "b": 3, "c": 4, "d": 1}
    records = [(cid, k) for cid, size in sizes.items() for k in range(size)]
    seen_resamples = 0

    def whole_clusters(sample: Sequence[tuple[str, int]]) -> float:
        nonlocal seen_resamples
        seen_resamples += 1
        counts = Counter(cid for cid, _ in sample)
        assert all(count % sizes[cid] == 0 for cid, count in counts.items())
        assert sum(counts[cid] // sizes[cid] for cid in counts) == len(sizes)  # as many clusters as there are
        return float(len(sample))

    metrics.bootstrap_ci(records, whole_clusters, n_resamples=200, cluster=lambda r: r[0])
    assert seen_resamples == 200


def test_cluster_interval_is_wider_when_outcomes_move_together() -> None:
    # 200 contexts of 5 targets; a context's targets are all right or all wrong
    records = [(c, c % 10 >= 3) for c in range(200) for _ in range(5)]

    def mean_correct(sample: Sequence[tuple[int, bool]]) -> float:
        return metrics.accuracy([ok for _, ok in sample])

    iid_low, iid_high = metrics.bootstrap_ci(records, mean_correct, n_resamples=500)
    cl_low, cl_high = metrics.bootstrap_ci(records, mean_correct, n_resamples=500, cluster=lambda r: r[0])
    # perfectly correlated clusters of 5: the real standard error is sqrt(5) times the naive one
    assert (cl_high - cl_low) / (iid_high - iid_low) == pytest.approx(5**0.5, rel=0.25)


def test_cluster_fast_path_matches_the_generic_path() -> None:
    records = [i % 7 != 0 and i % 11 != 3 for i in range(3_000)]
    clusters = {id_: id_ // 4 for id_ in range(len(records))}
    indexed = list(enumerate(records))
    generic = metrics.bootstrap_ci(
        indexed, lambda rs: metrics.accuracy([ok for _, ok in rs]), seed=2, cluster=lambda r: clusters[r[0]]
    )
    # same clusters, fast path: the records are the flags themselves, clustered by position
    position = iter(range(len(records)))
    fast = metrics.bootstrap_ci(records, metrics.accuracy, seed=2, cluster=lambda _: clusters[next(position)])
    assert fast == pytest.approx(generic, abs=1e-12)


def test_situational_accuracy_interval_over_contexts() -> None:
    # contexts of 2, 3 and 4 targets; every fourth context (of every size) has one wrong target
    ids, golds, preds = [], [], []
    for c in range(150):
        size = 2 + c % 3
        for t in range(size):
            ids.append(f"ctx{c}")
            golds.append(t == 0)
            preds.append((t == 0) != (c % 4 == 0 and t == size - 1))
    estimate = crow_metrics.situational_accuracy(ids, golds, preds)
    outcomes = list(crow_metrics.context_outcomes(ids, golds, preds).values())
    assert len(outcomes) == 150
    low, high = metrics.bootstrap_ci(outcomes, metrics.accuracy)
    assert estimate == pytest.approx(112 / 150)  # contexts 0, 4, ..., 148 (38 of them) are wrong
    assert low < estimate < high
    assert 0.08 < high - low < 0.2  # about 4 standard errors (0.035) of a share of 3/4 over 150 contexts


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n_resamples": 0}, "n_resamples"),
        ({"confidence": 1.0}, "confidence"),
        ({"confidence": 0.0}, "confidence"),
    ],
)
def test_bad_settings_are_refused(kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        metrics.bootstrap_ci([True, False], metrics.accuracy, **kwargs)  # type: ignore[arg-type]


def test_no_records_is_refused() -> None:
    with pytest.raises(ValueError, match="no records"):
        metrics.bootstrap_ci([], metrics.accuracy)
