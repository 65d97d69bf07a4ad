"""Properties of the metrics and the CRoW baselines (the worked cases live in cases/*.json)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from senseforge.evaluate import crow_metrics, metrics

FIXTURES = Path(__file__).parents[1] / "fixtures"

labels = st.lists(st.booleans(), min_size=1, max_size=60)


@given(golds=labels, constant=st.booleans())
def test_constant_predictor_scores_p_over_1_plus_p(golds: list[bool], constant: bool) -> None:
    preds = [constant] * len(golds)
    p = metrics.accuracy([g == constant for g in golds])
    if p < 1:
        assert crow_metrics.macro_f1(golds, preds) == pytest.approx(p / (1 + p), abs=1e-12)
    else:  # every gold is the constant: perfect predictions, the other class is absent
        assert crow_metrics.macro_f1(golds, preds) == 1.0


@given(pairs=st.lists(st.tuples(st.booleans(), st.booleans()), min_size=1, max_size=60))
def test_macro_f1_does_not_care_which_class_is_called_true(pairs: list[tuple[bool, bool]]) -> None:
    golds = [g for g, _ in pairs]
    preds = [p for _, p in pairs]
    flipped = crow_metrics.macro_f1([not g for g in golds], [not p for p in preds])
    assert crow_metrics.macro_f1(golds, preds) == pytest.approx(flipped, abs=1e-12)
    assert 0.0 <= crow_metrics.macro_f1(golds, preds) <= 1.0


@given(pairs=st.lists(st.tuples(st.booleans(), st.booleans()), min_size=1, max_size=60))
def test_situational_accuracy_with_one_target_per_context_is_accuracy(pairs: list[tuple[bool, bool]]) -> None:
    ids = [f"c{i}" for i in range(len(pairs))]
    golds = [g for g, _ in pairs]
    preds = [p for _, p in pairs]
    assert crow_metrics.situational_accuracy(ids, golds, preds) == metrics.accuracy([g == p for g, p in pairs])


@given(
    pairs=st.lists(st.tuples(st.sampled_from("abcde"), st.booleans(), st.booleans()), min_size=1, max_size=40),
)
def test_situational_accuracy_is_accuracy_over_context_outcomes(pairs: list[tuple[str, bool, bool]]) -> None:
    ids = [c for c, _, _ in pairs]
    golds = [g for _, g, _ in pairs]
    preds = [p for _, _, p in pairs]
    outcomes = crow_metrics.context_outcomes(ids, golds, preds)
    assert list(outcomes) == list(dict.fromkeys(ids))  # first-seen order
    assert crow_metrics.situational_accuracy(ids, golds, preds) == metrics.accuracy(list(outcomes.values()))
    if all(g == p for g, p in zip(golds, preds, strict=True)):
        assert crow_metrics.situational_accuracy(ids, golds, preds) == 1.0


def test_per_dimension_order_is_crows_then_alphabetical() -> None:
    dims = ["spatial", "social", "attribution", None, "causal", "aesthetic"]
    result = crow_metrics.per_dimension_macro_f1(dims, [True] * 6, [True] * 6)
    assert list(result) == ["attribution", "causal", "social", "other", "aesthetic", "spatial"]


def test_per_dimension_accepts_the_dimensions_of_knowledge_triples() -> None:
    # what the harness passes: the sorted distinct dimensions of an example's knowledge, or ["other"]
    dims = [["causal", "social"], ["other"], ["causal"]]
    result = crow_metrics.per_dimension_macro_f1(dims, [True, False, False], [True, False, True])
    assert result == {"causal": pytest.approx(1 / 3), "social": 1.0, "other": 1.0}


def test_mt_tasks_match_the_leaderboard_names() -> None:
    rows = json.loads((FIXTURES / "crow" / "task_leaderboard.json").read_text(encoding="utf-8"))
    tasks = {row["task"] for row in rows}
    assert {t for t in tasks if crow_metrics.is_mt_task(t)} == crow_metrics.MT_TASKS
    assert {t for t in tasks if not crow_metrics.is_mt_task(t)} == {
        "dialogue",
        "summarization",
        "stance",
        "safety",
        "intent",
    }


@pytest.mark.parametrize("name", ["mt-zh-en", "MT_EN_DE", "crow/mt-en-fr", "mt_en_ja", " mt_zh_en "])
def test_mt_task_spellings(name: str) -> None:
    assert crow_metrics.is_mt_task(name)


@pytest.mark.parametrize("name", ["dialogue", "summarization", "stance", "safety", "intent", "mtcsqa", "smt_zh_en"])
def test_not_mt_tasks(name: str) -> None:
    assert not crow_metrics.is_mt_task(name)


def test_majority_predicts_the_most_frequent_label() -> None:
    assert crow_metrics.majority_predictions([True, False, True]) == [True, True, True]
    assert crow_metrics.majority_predictions([False, False, True]) == [False, False, False]


def test_majority_breaks_a_tie_towards_false() -> None:
    assert crow_metrics.majority_predictions([True, False, False, True]) == [False] * 4


def test_majority_of_nothing_is_refused() -> None:
    with pytest.raises(ValueError, match="no gold labels"):
        crow_metrics.majority_predictions([])


def test_random_predictions_are_seeded_coin_flips() -> None:
    a = crow_metrics.random_predictions(10_000, seed=7)
    assert a == crow_metrics.random_predictions(10_000, seed=7)
    assert a != crow_metrics.random_predictions(10_000, seed=8)
    assert all(isinstance(x, bool) for x in a)
    assert abs(sum(a) / len(a) - 0.5) < 0.02  # 4 standard deviations of a fair coin's share
    assert crow_metrics.random_predictions(0, seed=1) == []
    with pytest.raises(ValueError):
        crow_metrics.random_predictions(-1, seed=1)


def test_random_predictions_are_stable_across_releases() -> None:
    # random.Random(0).random() < 0.5 for the first eight draws; pinned so a change of RNG shows up
    assert crow_metrics.random_predictions(8, seed=0) == [False, False, True, True, False, True, False, True]


def test_weighted_mean_with_equal_weights_is_the_mean() -> None:
    assert metrics.weighted_mean([0.1, 0.2, 0.6], [3, 3, 3]) == pytest.approx(0.3)


def test_non_boolean_arrays_are_refused_with_the_argument_name() -> None:
    with pytest.raises(ValueError, match="preds must hold booleans"):
        crow_metrics.macro_f1([True, False], [0.5, 1.0])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="golds must hold booleans"):
        crow_metrics.macro_f1([2, 0], [True, False])  # type: ignore[list-item]
