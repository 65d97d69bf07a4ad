"""Raw benchmark formats to MCItem and back, on real fixture rows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from senseforge.data.adapters import (
    RowError,
    csqa_row_to_item,
    detect_format,
    item_to_csqa_row,
    iter_items,
    jcsqa_row_to_item,
    read_items,
)
from senseforge.data.io import iter_json_rows
from senseforge.errors import DataValidationError

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
CSQA = FIXTURES / "csqa" / "dev_sample.jsonl"
JCSQA = FIXTURES / "jcommonsenseqa" / "valid_sample.jsonl"
MCSQA = FIXTURES / "mcsqa" / "test_sample.jsonl"


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _write_rows(path: Path, rows: list[dict[str, Any] | str]) -> Path:
    lines = [r if isinstance(r, str) else json.dumps(r, ensure_ascii=False) for r in rows]
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


# --- CommonsenseQA (real rows) --------------------------------------------------------


def test_csqa_fixture_reads_as_items() -> None:
    rows = _rows(CSQA)
    items = read_items(CSQA, "en")
    assert len(items) == len(rows) == 10
    for row, item in zip(rows, items, strict=True):
        assert item.id == row["id"]
        assert item.lang == "en"
        assert item.question == row["question"]
        assert item.question_concept == row["question_concept"]
        assert [c.label for c in item.choices] == ["A", "B", "C", "D", "E"]
        assert [c.text for c in item.choices] == row["choices"]["text"]
        assert item.answer == row["answerKey"]
        assert item.answer in {"A", "B", "C", "D", "E"}
        assert item.difficulty is None  # CommonsenseQA has no `hard`
        assert item.provenance.recipe == "csqa"  # defaults to the format name
        assert item.provenance.source_ids == [row["id"]]


def test_csqa_first_row_by_hand() -> None:
    item = read_items(CSQA, "en")[0]
    assert item.id == "1afa02df02c908a558b4036e80242fac"
    assert item.question_concept == "revolving door"
    assert item.answer == "A"
    assert item.answer_text() == "bank"


def test_csqa_recipe_override() -> None:
    items = read_items(CSQA, "en-US", "csqa", recipe="commonsenseqa")
    assert {i.provenance.recipe for i in items} == {"commonsenseqa"}
    assert {i.lang for i in items} == {"en-US"}


def test_csqa_rows_round_trip_exactly() -> None:
    for row in _rows(CSQA):
        out = item_to_csqa_row(csqa_row_to_item(row, "en"))
        assert out == row
        assert list(out) == list(row)  # the published key order, too
        assert "hard" not in out


def test_csqa_row_to_item_without_recipe() -> None:
    row = _rows(CSQA)[2]
    item = csqa_row_to_item(row, "en")
    assert item.provenance.recipe is None
    assert item.provenance.source_ids == ["b8c0a4703079cf661d7261a60a1bcbff"]
    assert item.answer_text() == "bookstore"


# --- mCSQA schema (hand-written rows) ---------------------------------------------------

MCSQA_EXPECTED = {
    # id: (lang, answer, difficulty)
    "sf-handwritten-fr-001": ("fr", "A", "easy"),
    "sf-handwritten-fr-002": ("fr", None, "hard"),  # answerKey ""
    "sf-handwritten-zh-001": ("zh", None, "hard"),  # answerKey absent
    "sf-handwritten-zh-002": ("zh", "A", "easy"),
}


def test_mcsqa_rows_map_hard_and_withheld_answers() -> None:
    seen = {}
    for _, row in iter_json_rows(MCSQA):
        lang = row["id"].split("-")[2]
        item = csqa_row_to_item(row, lang, recipe="mcsqa")
        seen[item.id] = (item.lang, item.answer, item.difficulty)
        assert item.provenance.recipe == "mcsqa"
        assert item.provenance.source_ids == [row["id"]]
    assert seen == MCSQA_EXPECTED


def test_mcsqa_non_ascii_text_survives() -> None:
    items = read_items(MCSQA, "zh")
    assert len(items) == 4
    assert items[2].question == "春节时人们通常在门上贴什么？"
    assert items[2].choices[0].text == "春联"
    assert items[0].choices[2].text == "boîte aux lettres"


def test_mcsqa_rows_back_to_published_schema() -> None:
    for _, row in iter_json_rows(MCSQA):
        out = item_to_csqa_row(csqa_row_to_item(row, "fr"))
        assert out["hard"] is row["hard"]
        if "answerKey" in row:
            assert out == row  # incl. answerKey "" for a withheld answer
        else:
            assert out == {**row, "answerKey": ""}
        assert list(out) == ["id", "question", "question_concept", "choices", "answerKey", "hard"]


def test_item_to_csqa_row_withheld_answer_is_empty_string() -> None:
    item = csqa_row_to_item(_rows(CSQA)[0], "en")
    item.answer = None
    row = item_to_csqa_row(item)
    assert row["answerKey"] == ""
    assert "hard" not in row
    item.difficulty = "easy"
    assert item_to_csqa_row(item)["hard"] is False


# --- JCommonsenseQA (real rows) -------------------------------------------------------


def test_jcsqa_fixture_reads_as_items() -> None:
    rows = _rows(JCSQA)
    items = read_items(JCSQA, "ja")
    assert len(items) == 10
    for row, item in zip(rows, items, strict=True):
        assert item.id == str(row["q_id"])
        assert item.lang == "ja"
        assert [c.label for c in item.choices] == ["A", "B", "C", "D", "E"]
        assert [c.text for c in item.choices] == [row[f"choice{i}"] for i in range(5)]
        assert item.answer == "ABCDE"[row["label"]]
        assert item.answer_text() == row[f"choice{row['label']}"]
        assert item.question_concept is None
        assert item.provenance.recipe == "jcommonsenseqa"
        assert item.provenance.source_ids == [str(row["q_id"])]


def test_jcsqa_row_8939_by_hand() -> None:
    item = next(i for i in read_items(JCSQA, "ja") if i.id == "8939")
    assert item.question == "電子機器で使用される最も主要な電子回路基板の事をなんと言う？"
    assert item.answer == "C"  # label 2
    assert item.answer_text() == "マザーボード"


def test_jcsqa_labels_cover_first_and_last_index() -> None:
    answers = {i.id: i.answer for i in read_items(JCSQA, "ja")}
    assert answers["8941"] == "A"  # label 0: 腰を下す
    assert answers["8944"] == "E"  # label 4: 洞窟


def test_jcsqa_row_without_label_has_no_answer() -> None:
    row = {k: v for k, v in _rows(JCSQA)[0].items() if k != "label"}
    item = jcsqa_row_to_item(row)
    assert item.answer is None
    assert item.lang == "ja"
    assert item.provenance.recipe == "jcommonsenseqa"


# --- format detection -----------------------------------------------------------------


@pytest.mark.parametrize(("path", "fmt"), [(CSQA, "csqa"), (MCSQA, "csqa"), (JCSQA, "jcommonsenseqa")])
def test_detect_format(path: Path, fmt: str) -> None:
    assert all(detect_format(row) == fmt for row in _rows(path))


def test_detect_format_unknown() -> None:
    with pytest.raises(RowError, match=r"unknown format: keys \['foo'\]"):
        detect_format({"foo": 1})


def test_read_items_detects_and_explicit_format_agree() -> None:
    assert read_items(JCSQA, "ja") == read_items(JCSQA, "ja", "jcommonsenseqa")
    assert read_items(CSQA, "en") == read_items(CSQA, "en", "csqa")


def test_iter_items_streams() -> None:
    stream = iter_items(JCSQA, "ja")
    assert next(stream).id == "8939"
    assert next(stream).id == "8940"


# --- located errors -------------------------------------------------------------------


def _jrow(**changes: Any) -> dict[str, Any]:
    row = dict(_rows(JCSQA)[0])
    row.update(changes)
    return {k: v for k, v in row.items() if v is not _DROP}


def _crow(**changes: Any) -> dict[str, Any]:
    row = json.loads(json.dumps(_rows(CSQA)[0]))
    row.update(changes)
    return {k: v for k, v in row.items() if v is not _DROP}


_DROP = object()


@pytest.mark.parametrize(
    ("bad", "expected"),
    [
        (_jrow(label=5), "label: expected an index 0..4, got 5"),
        (_jrow(label=-1), "label: expected an index 0..4, got -1"),
        (_jrow(label=True), "label: expected an index 0..4, got True"),
        (_jrow(label="2"), "label: expected an index 0..4, got '2'"),
        (_jrow(label=2.0), "label: expected an index 0..4, got 2.0"),
        (_jrow(question=_DROP), "question: missing"),
        (_jrow(choice4=_DROP), "choice4: missing"),
        (_jrow(choice2=None), "choice2: missing"),
        (_jrow(question=None), "question:"),
    ],
    ids=[
        "label-5",
        "label-neg",
        "label-bool",
        "label-str",
        "label-float",
        "no-question",
        "no-choice4",
        "null-choice",
        "null-question",
    ],
)
def test_bad_jcsqa_row_is_located(tmp_path: Path, bad: dict[str, Any], expected: str) -> None:
    good = _rows(JCSQA)
    path = _write_rows(tmp_path / "file.jsonl", [good[0], good[1], bad, good[2]])
    with pytest.raises(DataValidationError) as exc:
        read_items(path, "ja")
    assert str(exc.value).startswith(f"{path}:3: {expected}")
    assert "file.jsonl:3" in str(exc.value)


@pytest.mark.parametrize(
    ("bad", "expected"),
    [
        (
            _crow(choices={"label": ["A", "B", "C", "D", "E"], "text": ["a", "b", "c", "d"]}),
            "choices: 5 labels but 4 texts",
        ),
        (_crow(choices=["a", "b"]), "choices: expected {label: [...], text: [...]}"),
        (_crow(choices={"label": ["A", "B"]}), "choices: expected {label: [...], text: [...]}"),
        (_crow(choices=_DROP), "choices: missing"),
        (_crow(question=_DROP), "question: missing"),
        (_crow(id=_DROP), "id: missing"),
        (_crow(hard="yes"), "hard: expected true/false, got 'yes'"),
        (_crow(answerKey="F"), "(record): Value error, answer 'F' is not one of the choice labels"),
        (_crow(choices={"label": ["A", ""], "text": ["a", "b"]}, answerKey="A"), "choices.1.label:"),
        (_crow(choices={"label": ["A"], "text": ["a"]}), "choices: List should have at least 2 items"),
    ],
    ids=[
        "len-mismatch",
        "choices-list",
        "no-text",
        "no-choices",
        "no-question",
        "no-id",
        "hard-str",
        "answer-F",
        "empty-label",
        "one-choice",
    ],
)
def test_bad_csqa_row_is_located(tmp_path: Path, bad: dict[str, Any], expected: str) -> None:
    good = _rows(CSQA)
    path = _write_rows(tmp_path / "file.jsonl", [good[0], good[1], bad, good[2]])
    with pytest.raises(DataValidationError) as exc:
        read_items(path, "en")
    assert str(exc.value).startswith(f"{path}:3: {expected}")


def test_bad_lang_is_located(tmp_path: Path) -> None:
    with pytest.raises(DataValidationError, match=r"dev_sample\.jsonl:1: lang: .*not a BCP-47 language tag"):
        read_items(CSQA, "english")


def test_wrong_schema_file_is_located(tmp_path: Path) -> None:
    path = _write_rows(tmp_path / "file.jsonl", [{"foo": 1}, {"foo": 2}])
    with pytest.raises(DataValidationError) as exc:
        read_items(path, "en")
    assert str(exc.value) == f"{path}:1: unknown format: keys ['foo'] match neither csqa nor jcommonsenseqa"


def test_wrong_schema_with_explicit_format_is_located(tmp_path: Path) -> None:
    path = _write_rows(tmp_path / "file.jsonl", [{"foo": 1}])
    with pytest.raises(DataValidationError, match=r"file\.jsonl:1: choices: missing"):
        read_items(path, "en", "csqa")
    with pytest.raises(DataValidationError, match=r"file\.jsonl:1: choice0: missing"):
        read_items(path, "ja", "jcommonsenseqa")


def test_format_is_fixed_by_the_first_row(tmp_path: Path) -> None:
    # a JCommonsenseQA row inside a CSQA file is read with the CSQA adapter and fails there
    path = _write_rows(tmp_path / "file.jsonl", [_rows(CSQA)[0], "", _rows(JCSQA)[0]])
    with pytest.raises(DataValidationError, match=r"file\.jsonl:3: choices: missing"):
        read_items(path, "en")


def test_blank_lines_and_json_errors_in_raw_files(tmp_path: Path) -> None:
    path = _write_rows(tmp_path / "file.jsonl", ["", _rows(JCSQA)[0], "   ", _rows(JCSQA)[1]])
    assert [i.id for i in read_items(path, "ja")] == ["8939", "8940"]
    path = _write_rows(tmp_path / "broken.jsonl", [_rows(JCSQA)[0], "[]"])
    with pytest.raises(DataValidationError, match=r"broken\.jsonl:2: expected a JSON object, got list"):
        read_items(path, "ja")
