"""Honest intervals: Wilson beside the bootstrap, and no bootstrap interval from fewer than two units."""

from __future__ import annotations

import pytest

from senseforge.evaluate import metrics
from senseforge.evaluate.records import BinarySample, MCSample
from senseforge.evaluate.report import baseline_report, binary_metrics, mc_metrics
from senseforge.evaluate.run import EvalConfig

CONFIG = EvalConfig(formulation="letter", n_bootstrap=200, seed=3)


def _mc(item: str, right: bool) -> MCSample:
    return MCSample(
        id=item,
        lang="en",
        difficulty=None,
        category=None,
        recipe=None,
        review=None,
        prompt="q",
        choices=["yes", "no"],
        labels=["A", "B"],
        continuations=[" A", " B"],
        gold="A",
        prediction="A" if right else "B",
        correct=right,
    )


def _pair(item: str, context: str, gold: bool, prediction: bool) -> BinarySample:
    return BinarySample(
        id=item,
        context_id=context,
        task="stance",
        lang="en",
        dimensions=["other"],
        prompt="p",
        target="t",
        gold=gold,
        prediction=prediction,
        parsed=True,
        correct=gold == prediction,
    )


def test_wilson_is_scipys_wilson_interval() -> None:
    stats = pytest.importorskip("scipy.stats")
    for n in (1, 2, 3, 7, 10, 30, 101, 1000):
        for k in sorted({0, 1, n // 3, n // 2, n - 1, n}):
            reference = stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
            low, high = metrics.wilson_interval(k, n)
            assert low == pytest.approx(float(reference.low), abs=1e-12), (k, n)
            assert high == pytest.approx(float(reference.high), abs=1e-12), (k, n)


def test_wilson_bounds_are_exact_at_the_ends_and_bad_input_is_refused() -> None:
    assert metrics.wilson_interval(0, 10)[0] == 0.0
    assert metrics.wilson_interval(10, 10)[1] == 1.0
    assert metrics.wilson_interval(0, 10)[1] == pytest.approx(0.2775, abs=1e-4)
    low99, high99 = metrics.wilson_interval(3, 10, confidence=0.99)
    low95, high95 = metrics.wilson_interval(3, 10)
    assert low99 < low95 < 0.3 < high95 < high99
    with pytest.raises(ValueError, match="positive integer"):
        metrics.wilson_interval(0, 0)
    with pytest.raises(ValueError, match="between 0 and n"):
        metrics.wilson_interval(11, 10)


def test_none_right_of_ten_keeps_its_bootstrap_point_and_gets_a_real_wilson_interval() -> None:
    result = mc_metrics([_mc(f"q{i}", False) for i in range(10)], CONFIG)
    assert result.acc == 0.0 and result.acc_ci95 == [0.0, 0.0]
    assert result.acc_wilson95 is not None
    assert result.acc_wilson95[0] == 0.0 and result.acc_wilson95[1] == pytest.approx(0.2775, abs=1e-4)
    assert result.ci_unit == "item" and result.resampling_units() == 10
    written = result.to_json()
    assert written["acc_wilson95,none"] == result.acc_wilson95 and written["ci_unit"] == "item"


def test_one_item_has_no_bootstrap_interval() -> None:
    result = mc_metrics([_mc("q", True)], CONFIG)
    assert result.acc == 1.0 and result.acc_ci95 is None
    assert result.acc_wilson95 is not None and result.acc_wilson95[1] == 1.0 and result.acc_wilson95[0] < 0.25
    written = result.to_json()
    assert "acc_ci95,none" in written and written["acc_ci95,none"] is None  # the key stays, empty


def test_one_context_has_no_bootstrap_interval() -> None:
    result = binary_metrics([_pair("a", "c0", True, True), _pair("b", "c0", False, True)], CONFIG)
    assert (result.n, result.n_contexts, result.ci_unit) == (2, 1, "context")
    assert result.macro_f1 == 0.3333333333333333 and result.macro_f1_ci95 is None
    assert result.acc_ci95 is None and result.situational_acc_ci95 is None
    assert result.acc_wilson95 == list(metrics.wilson_interval(1, 2))  # over examples
    assert result.situational_acc_wilson95 == list(metrics.wilson_interval(0, 1))  # over contexts


def test_binary_wilson_counts_contexts_for_situational_accuracy() -> None:
    pairs = [_pair(f"{c}-{t}", f"c{c}", t == 0, c % 3 != 0 or t == 1) for c in range(9) for t in range(2)]
    result = binary_metrics(pairs, CONFIG)
    assert result.n_contexts == 9 and result.macro_f1_ci95 is not None
    right_contexts = round((result.situational_acc or 0) * 9)
    assert result.situational_acc_wilson95 == list(metrics.wilson_interval(right_contexts, 9))
    assert result.acc_wilson95 == list(metrics.wilson_interval(sum(bool(p.correct) for p in pairs), 18))


def test_baselines_keep_their_keys() -> None:
    pairs = [_pair(f"{c}-{t}", f"c{c}", t == 0, True) for c in range(4) for t in range(2)]
    tasks = baseline_report(pairs, CONFIG)["majority"]["tasks"]["stance"]
    assert not any("_wilson95" in key or "_ci95" in key for key in tasks)
