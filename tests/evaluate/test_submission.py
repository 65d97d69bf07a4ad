"""Scoring a CRoW-style submission against gold labels, without a model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from senseforge.errors import ConfigError, DataValidationError
from senseforge.evaluate.records import BinaryMetrics, BinarySample, CrowSummary, read_results, read_samples
from senseforge.evaluate.run import EvalConfig
from senseforge.evaluate.submission import MISSING, read_predictions, score_submission

CONFIG = EvalConfig(n_bootstrap=100)


def _stance(example_id: str, context: str, label: int, dimension: str | None = None) -> dict[str, Any]:
    row: dict[str, Any] = {
        "task": "stance",
        "example_id": example_id,
        "context_id": context,
        "belief": f"belief {context}",
        "argument": f"argument {example_id}",
        "label": label,
    }
    if dimension:
        row["knowledge"] = [{"head": "h", "relation": "r", "tail": "t", "dimension": dimension}]
    return row


def _summary(example_id: str, context: str, label: int) -> dict[str, Any]:
    return {
        "task": "summarization",
        "example_id": example_id,
        "context_id": context,
        "dialogue": [f"A: dialogue {context}", "B: yes"],
        "summary": f"summary {example_id}",
        "label": label,
    }


# two contexts x two targets, one valid and one invalid in each
STANCE = [_stance("a1", "A", 1), _stance("a2", "A", 0), _stance("b1", "B", 1), _stance("b2", "B", 0)]


def _jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def _predictions(path: Path, pairs: dict[str, Any], task: str = "stance") -> Path:
    return _jsonl(path, [{"task": task, "example_id": key, "prediction": value} for key, value in pairs.items()])


def test_perfect_predictions_score_one(tmp_path: Path) -> None:
    gold = _jsonl(tmp_path / "private.jsonl", STANCE)
    preds = _predictions(tmp_path / "pred.jsonl", {"a1": 1, "a2": 0, "b1": True, "b2": "invalid"})
    results = score_submission(gold, preds, CONFIG, tmp_path / "out")
    stance = results.results["stance"]
    assert isinstance(stance, BinaryMetrics)
    assert stance.macro_f1 == 1.0 and stance.situational_acc == 1.0 and stance.n == 4 and stance.n_contexts == 2
    assert results.model.name == "submission:pred.jsonl" and len(results.model.identity["predictions"]) == 64
    assert results.breakdowns["submission"] == {"predictions": 4, "examples": 4, "missing": 0}
    assert "baselines" in results.breakdowns
    assert read_results(tmp_path / "out").results["stance"] == stance
    samples = read_samples(tmp_path / "out")
    assert [s.id for s in samples] == ["a1", "a2", "b1", "b2"] and all(s.correct for s in samples)


def test_one_wrong_prediction_by_hand(tmp_path: Path) -> None:
    gold = _jsonl(tmp_path / "private.jsonl", STANCE)
    # a2 (invalid) is predicted valid: context A is wrong, B right → SA 1/2.
    # golds 1 0 1 0, preds 1 1 1 0. Valid class: TP 2, FP 1, FN 0 → P 2/3, R 1, F1 4/5.
    # Invalid class: TP 1, FP 0, FN 1 → P 1, R 1/2, F1 2/3. Macro-F1 = (4/5 + 2/3) / 2 = 11/15.
    preds = _predictions(tmp_path / "pred.jsonl", {"a1": 1, "a2": 1, "b1": 1, "b2": 0})
    stance = score_submission(gold, preds, CONFIG, tmp_path / "out").results["stance"]
    assert isinstance(stance, BinaryMetrics)
    assert stance.situational_acc == pytest.approx(0.5)
    assert stance.macro_f1 == pytest.approx(11 / 15)
    assert stance.acc == pytest.approx(0.75)


def test_a_missing_prediction_counts_wrong_and_is_reported(tmp_path: Path) -> None:
    gold = _jsonl(tmp_path / "private.jsonl", STANCE)
    # a JSON array works as well as JSON Lines
    preds = tmp_path / "pred.json"
    preds.write_text(
        json.dumps([{"task": "stance", "example_id": k, "prediction": 1 - k.endswith("2")} for k in ("a1", "a2", "b1")])
    )
    results = score_submission(gold, preds, CONFIG, tmp_path / "out")
    stance = results.results["stance"]
    assert isinstance(stance, BinaryMetrics)
    assert results.breakdowns["submission"]["missing"] == 1
    assert stance.situational_acc == pytest.approx(0.5) and stance.unparsed_rate == pytest.approx(0.25)
    # the missing b2 (invalid) counts as predicted valid: the same numbers as the hand case
    assert stance.macro_f1 == pytest.approx(11 / 15)
    b2 = next(s for s in read_samples(tmp_path / "out") if s.id == "b2")
    assert isinstance(b2, BinarySample)
    assert b2.prediction is None and b2.correct is False and b2.error == MISSING


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([{"task": "stance", "example_id": "zz", "prediction": 1}], "pred.jsonl:1: example_id: 'zz' is not in"),
        ([{"task": "stance", "example_id": "a1", "prediction": "maybe"}], "pred.jsonl:1: prediction: expected 0/1"),
        ([{"task": "stance", "example_id": "a1", "prediction": None}], "pred.jsonl:1: prediction: expected 0/1"),
        ([{"task": "stance", "example_id": "a1"}], "pred.jsonl:1: prediction: missing"),
        ([{"example_id": "a1", "prediction": 1}], "pred.jsonl:1: task: missing"),
        (
            [
                {"task": "stance", "example_id": "a1", "prediction": 1},
                {"task": "stance", "example_id": "a1", "prediction": 0},
            ],
            "pred.jsonl:2: example_id: 'a1' repeats the prediction at 1",
        ),
        (
            [{"task": "safety", "example_id": "a1", "prediction": 1}],
            "pred.jsonl:1: task: is 'safety', but gold example 'a1' is task 'stance'",
        ),
        ([{"task": "nonsense", "example_id": "a1", "prediction": 1}], "pred.jsonl:1: task: is 'nonsense'"),
    ],
)
def test_bad_submissions_are_located(tmp_path: Path, rows: list[dict[str, Any]], message: str) -> None:
    gold = _jsonl(tmp_path / "private.jsonl", STANCE)
    preds = _jsonl(tmp_path / "pred.jsonl", rows)
    with pytest.raises(DataValidationError, match=message.replace("(", r"\(")):
        score_submission(gold, preds, CONFIG, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_line_that_is_not_json_is_located(tmp_path: Path) -> None:
    preds = tmp_path / "pred.jsonl"
    preds.write_text('{"task": "stance", "example_id": "a1", "prediction": 1}\n{oops\n', encoding="utf-8")
    with pytest.raises(DataValidationError, match=r"pred.jsonl:2: invalid JSON"):
        read_predictions(preds)


def test_read_predictions_normalises_task_names(tmp_path: Path) -> None:
    preds = _jsonl(tmp_path / "pred.jsonl", [{"task": "mt_zh_en", "example_id": 7, "prediction": "valid"}])
    assert read_predictions(preds) == {"7": ("mt-zh-en", True)}


def test_two_tasks_give_a_crow_score_the_mean_of_their_macro_f1(tmp_path: Path) -> None:
    summaries = [_summary("s1", "X", 1), _summary("s2", "X", 0)]
    gold = _jsonl(tmp_path / "private.jsonl", STANCE + summaries)
    rows = [
        {"task": "stance", "example_id": k, "prediction": v} for k, v in {"a1": 1, "a2": 1, "b1": 1, "b2": 0}.items()
    ]
    rows += [
        {"task": "summarization", "example_id": "s1", "prediction": 1},
        {"task": "summarization", "example_id": "s2", "prediction": 0},
    ]
    results = score_submission(gold, _jsonl(tmp_path / "pred.jsonl", rows), CONFIG, tmp_path / "out")
    crow, stance, summary = results.results["crow"], results.results["stance"], results.results["summarization"]
    assert isinstance(crow, CrowSummary) and isinstance(stance, BinaryMetrics) and isinstance(summary, BinaryMetrics)
    assert summary.macro_f1 == 1.0
    assert crow.crow_score_macro_f1 == pytest.approx((1.0 + 11 / 15) / 2)
    assert crow.crow_score_macro_f1_no_mt == pytest.approx(crow.crow_score_macro_f1)
    assert crow.crow_score_situational_acc == pytest.approx((1.0 + 0.5) / 2)


def test_per_dimension_metrics_when_knowledge_names_dimensions(tmp_path: Path) -> None:
    rows = [
        _stance("a1", "A", 1, "temporal"),
        _stance("a2", "A", 0, "temporal"),
        _stance("b1", "B", 1, "causal"),
        _stance("b2", "B", 0),
    ]
    gold = _jsonl(tmp_path / "private.jsonl", rows)
    preds = _predictions(tmp_path / "pred.jsonl", {"a1": 1, "a2": 0, "b1": 0, "b2": 0})
    results = score_submission(gold, preds, CONFIG, tmp_path / "out")
    stance, crow = results.results["stance"], results.results["crow"]
    assert isinstance(stance, BinaryMetrics) and isinstance(crow, CrowSummary)
    assert stance.per_dimension is not None and set(stance.per_dimension) == {"temporal", "causal", "other"}
    assert stance.per_dimension["temporal"].macro_f1 == 1.0 and stance.per_dimension["temporal"].n == 2
    assert crow.per_dimension_macro_f1 is not None and crow.per_dimension_macro_f1["temporal"].macro_f1 == 1.0
    parity = score_submission(gold, preds, EvalConfig(n_bootstrap=100, crow_parity=True), tmp_path / "parity")
    assert parity.results["crow"].convention == "crow-parity"  # type: ignore[union-attr]


def test_multiple_choice_gold_is_refused(tmp_path: Path) -> None:
    csqa = Path(__file__).parents[1] / "fixtures" / "csqa" / "dev_sample.jsonl"
    preds = _predictions(tmp_path / "pred.jsonl", {"a1": 1})
    with pytest.raises(ConfigError, match="multiple choice"):
        score_submission(csqa, preds, CONFIG, tmp_path / "out")
