"""CRoW's released form to binary examples (hand-written fixture: no released file is at hand)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from senseforge.data._rows import RowError
from senseforge.data.crow import (
    crow_row_to_example,
    knowledge_triples,
    normalize_dimension,
    normalize_task,
    parse_label,
    read_crow,
)
from senseforge.data.relations import DIMENSIONS
from senseforge.errors import DataValidationError

RELEASED = Path(__file__).resolve().parent.parent / "fixtures" / "crow" / "released_handwritten.jsonl"


def _rows() -> list[dict[str, Any]]:
    return [json.loads(line) for line in RELEASED.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_every_task_layout_reads() -> None:
    examples = read_crow(RELEASED)
    assert [e.id for e in examples] == [f"sf-handwritten-0{i}" for i in range(1, 9)]
    assert [e.task for e in examples] == [
        "dialogue",
        "dialogue",
        "mt-zh-en",
        "mt-zh-en",
        "safety",
        "stance",
        "intent",
        "summarization",
    ]
    assert [e.label for e in examples] == [True, False, True, False, False, True, True, True]


def test_dialogue_turns_and_shared_context() -> None:
    valid, invalid = read_crow(RELEASED)[:2]
    assert valid.context == "A: I left the soup on the stove an hour ago.\nB: Did you turn the heat off?"
    assert valid.target == "A: No, so it has probably boiled dry by now."
    assert valid.context_id == invalid.context_id == "dialogue/sf-dlg-1"
    assert valid.lang == "en"
    triple = valid.knowledge[0]
    assert (triple.head, triple.relation, triple.tail, triple.dimension) == (
        "soup on the stove",
        "IsBefore",
        "boiled dry",
        "temporal",
    )
    assert valid.metadata["knowledge_extra"] == [{"verbalized": "soup on the stove happens before boiled dry"}]
    assert "knowledge_extra" not in invalid.metadata  # nothing beyond head/relation/tail/dimension


def test_translation_pairs_group_by_context_text() -> None:
    examples = read_crow(RELEASED)
    good, bad = examples[2], examples[3]
    assert good.context_id == bad.context_id
    assert good.context_id.startswith("mt-zh-en/ctx-")
    assert good.lang is None
    assert good.metadata["source_lang"] == "zh" and good.metadata["target_lang"] == "en"
    assert good.knowledge == []
    assert bad.knowledge[0].dimension == "physical/spatial"  # "physical" normalised


def test_target_object_carries_label_and_knowledge() -> None:
    safety = read_crow(RELEASED)[4]
    assert safety.context == "If a pan of oil catches fire"
    assert safety.target == "pour a glass of water on it."
    assert safety.label is False  # "unsafe"
    assert safety.knowledge[0].dimension == "causal"


def test_stance_label_falls_back_to_the_stance_field() -> None:
    stance = read_crow(RELEASED)[5]
    assert stance.context.startswith("Public libraries")
    assert stance.target.startswith("Weekends")
    assert stance.label is True
    assert stance.metadata["stance"] == "support"


def test_knowledge_without_dimension_and_generic_fields() -> None:
    intent, summary = read_crow(RELEASED)[6:]
    assert intent.knowledge[0].dimension is None
    assert summary.context_id == "summarization/sf-sum-1"
    assert summary.target == "#Person2# will call someone to fix the jammed printer."
    assert summary.metadata == {"data_id": "sf-sum-1", "source": "written by the senseforge developers"}


def test_lang_override() -> None:
    assert {e.lang for e in read_crow(RELEASED, "en-GB")} == {"en-GB"}


def test_a_json_array_reads_the_same(tmp_path: Path) -> None:
    path = tmp_path / "crow.json"
    path.write_text(json.dumps(_rows(), ensure_ascii=False), encoding="utf-8")
    assert read_crow(path) == read_crow(RELEASED)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("Attribution", "attributional"),
        ("physical", "physical/spatial"),
        ("Spatial", "physical/spatial"),
        ("comparison", "comparative"),
        ("social", "social"),
        ("other", None),
        (None, None),
    ],
)
def test_dimension_names(value: str | None, expected: str | None) -> None:
    assert normalize_dimension(value) == expected
    assert expected is None or expected in DIMENSIONS


def test_unknown_dimension_is_an_error() -> None:
    with pytest.raises(RowError, match="dimension: unknown dimension 'moral'"):
        normalize_dimension("moral")


@pytest.mark.parametrize(
    ("value", "expected"),
    [("mt_zh_en", "mt-zh-en"), ("MT_EN_DE", "mt-en-de"), ("stance_classification", "stance"), ("dialogue", "dialogue")],
)
def test_task_names(value: str, expected: str) -> None:
    assert normalize_task(value) == expected


def test_unknown_task() -> None:
    with pytest.raises(RowError, match="task: unknown CRoW task 'poetry'"):
        normalize_task("poetry")


@pytest.mark.parametrize(
    ("value", "expected"),
    [(1, True), (0, False), (True, True), ("valid", True), ("No", False), ("safe", True), ("counter", False)],
)
def test_label_words(value: object, expected: bool) -> None:
    assert parse_label(value) is expected


def test_knowledge_must_be_complete() -> None:
    with pytest.raises(RowError, match=r"knowledge.0.tail: missing"):
        knowledge_triples([{"head": "a", "relation": "IsA"}])
    with pytest.raises(RowError, match=r"knowledge: expected a list"):
        knowledge_triples("a IsA b")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"label": None}, "label: missing"),
        ({"label": 2}, "label: expected 0/1"),
        ({"task": "poetry"}, "task: unknown CRoW task"),
        ({"response": None}, "response: missing"),
        ({"example_id": None}, "example_id: missing"),
        ({"knowledge": [{"head": "x", "relation": "IsA", "tail": "y", "dimension": "moral"}]}, "knowledge.0.dimension"),
    ],
)
def test_bad_rows_are_located_by_line(tmp_path: Path, change: dict[str, Any], message: str) -> None:
    rows = _rows()
    rows[1] = {**rows[1], **change}
    path = tmp_path / "crow.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    with pytest.raises(DataValidationError, match=message) as info:
        read_crow(path)
    assert str(info.value).startswith(f"{path}:2: ")


def test_repeated_example_id(tmp_path: Path) -> None:
    rows = _rows()
    rows[3]["example_id"] = rows[0]["example_id"]
    path = tmp_path / "crow.json"
    path.write_text(json.dumps(rows, ensure_ascii=False), encoding="utf-8")
    with pytest.raises(DataValidationError, match=r":\[3\]: id: 'sf-handwritten-01' repeats the row at \[0\]"):
        read_crow(path)


def test_row_function_directly() -> None:
    example = crow_row_to_example(
        {
            "task": "mt_en_fr",
            "example_id": "e1",
            "source": "The cup fell.",
            "target": "La tasse est tombée.",
            "label": 1,
        }
    )
    assert example.task == "mt-en-fr"
    assert example.metadata == {"source_lang": "en", "target_lang": "fr"}
