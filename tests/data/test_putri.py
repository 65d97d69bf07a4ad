"""Putri et al.'s id-csqa release to MCItem, on real rows (CC BY-NC 4.0 fixtures, tests only)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from senseforge.data.putri import putri_lang_from_path, putri_row_to_item, read_putri
from senseforge.errors import DataValidationError

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "id-csqa"
HUMAN_IND = FIXTURES / "human_gen" / "ind" / "filtered_test.json"
HUMAN_SUN = FIXTURES / "human_gen" / "sun" / "filtered_test.json"
ADAPT_IND = FIXTURES / "llm_adapt" / "ind" / "filtered_test.json"
GEN_SUN = FIXTURES / "llm_gen" / "sun" / "filtered_test.json"


def _rows(path: Path) -> list[dict[str, Any]]:
    data: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))
    return data


def test_human_gen_keeps_every_annotation() -> None:
    rows = _rows(HUMAN_IND)
    items = read_putri(HUMAN_IND)
    assert len(items) == len(rows) == 6
    for row, item in zip(rows, items, strict=True):
        assert item.id == row["id"]
        assert item.lang == "id"
        assert item.answer == row["answer_creator"]
        assert item.category == row["category"]
        assert item.question_concept == row["question_concept"]
        assert [c.text for c in item.choices] == row["choices"]["text"]
        for key in ("answer_majority", "answers", "answers_uncertainty", "question_ambiguity", "option_ambiguity"):
            assert item.metadata[key] == row[key]
        assert item.metadata["reason"] == row["reason"]
        assert item.metadata["subset"] == "human_gen"
        assert item.provenance.recipe == "id-csqa"
        assert item.provenance.review == "human"


def test_human_gen_first_item_by_hand() -> None:
    item = read_putri(HUMAN_IND)[0]
    assert item.id == "orig_h_ind_98e4348b33cf4f7cb0da4dbca0900e6d"
    assert item.answer_text() == "Makan menggunakan tangan kanan"
    assert item.metadata["answers_uncertainty"]["W4"] == "uncertain"
    assert item.metadata["reason"]["W5"].startswith("[uncertain]")
    assert len(item.metadata["option_ambiguity"]["W2"]) == 5


def test_sundanese_language_comes_from_the_folder() -> None:
    items = read_putri(HUMAN_SUN)
    assert len(items) == 5
    assert {i.lang for i in items} == {"su"}
    assert putri_lang_from_path(HUMAN_SUN) == "su"
    assert putri_lang_from_path(ADAPT_IND) == "id"


def test_llm_adapt_has_no_category_and_a_seven_choice_item() -> None:
    items = read_putri(ADAPT_IND, split="test")
    assert len(items) == 4
    assert all(i.category is None for i in items)
    assert all(i.metadata["subset"] == "llm_adapt" and i.metadata["split"] == "test" for i in items)
    assert all(i.provenance.review is None for i in items)
    wide = items[-1]
    assert [c.label for c in wide.choices] == list("ABCDEFG")
    assert wide.answer == "F"
    assert wide.answer_text() == "singapura"


def test_llm_gen_sundanese() -> None:
    items = read_putri(GEN_SUN)
    assert [i.category for i in items] == [r["category"] for r in _rows(GEN_SUN)]
    assert items[0].question == "Di mana biasana cai mancur kapanggih?"
    assert items[0].metadata["subset"] == "llm_gen"


def test_language_and_subset_from_the_id_when_the_path_says_nothing(tmp_path: Path) -> None:
    copy = tmp_path / "renamed.json"
    shutil.copy(HUMAN_SUN, copy)
    items = read_putri(copy)
    assert {i.lang for i in items} == {"su"}  # from orig_h_sun_…
    assert {i.metadata["subset"] for i in items} == {"human_gen"}  # from orig_h_
    assert {i.lang for i in read_putri(copy, "id")} == {"id"}  # lang= wins


def test_unknown_language_is_a_clear_error() -> None:
    row = {**_rows(ADAPT_IND)[0], "id": "q1"}
    with pytest.raises(ValueError, match="cannot tell the language"):
        putri_row_to_item(row)


def _write(tmp_path: Path, rows: list[dict[str, Any]]) -> Path:
    path = tmp_path / "ind" / "broken.json"
    path.parent.mkdir()
    path.write_text(json.dumps(rows, ensure_ascii=False), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"answer_creator": "Z"}, r"\[1\]: answer_creator: 'Z' is not one of the choice labels"),
        ({"answer_majority": "Q"}, r"\[1\]: answer_majority: 'Q' is not one of"),
        ({"answers": ["A", "B"]}, r"\[1\]: answers: expected an object keyed by annotator"),
        ({"choices": {"label": ["A"], "text": []}}, r"\[1\]: choices: 1 labels but 0 texts"),
        ({"question": ""}, r"\[1\]: question: empty"),
        ({"category": 3}, r"\[1\]: category: expected a string"),
    ],
)
def test_bad_rows_are_located_by_array_index(tmp_path: Path, change: dict[str, Any], message: str) -> None:
    rows = _rows(HUMAN_IND)[:2]
    rows[1] = {**rows[1], **change}
    path = _write(tmp_path, rows)
    with pytest.raises(DataValidationError, match=message) as info:
        read_putri(path)
    assert str(info.value).startswith(f"{path}:[1]: ")


def test_missing_id_and_repeated_id(tmp_path: Path) -> None:
    rows = _rows(HUMAN_IND)[:2]
    no_id = {k: v for k, v in rows[1].items() if k != "id"}
    with pytest.raises(DataValidationError, match=r":\[1\]: id: missing"):
        read_putri(_write(tmp_path, [rows[0], no_id]))
    again = tmp_path / "again"
    again.mkdir()
    with pytest.raises(DataValidationError, match=r":\[1\]: id: .* repeats the row at \[0\]"):
        read_putri(_write(again, [rows[0], rows[0]]))


def test_not_an_array_of_objects(tmp_path: Path) -> None:
    with pytest.raises(DataValidationError, match=r":\[0\]: expected a JSON object, got str"):
        read_putri(_write(tmp_path, ["not an object"]))  # type: ignore[list-item]
