"""XCOPA and COPAL-ID to two-choice MCItems, on real rows."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest

from senseforge.data.copa import copal_variant, read_copal, read_xcopa, xcopa_lang_from_path
from senseforge.errors import DataValidationError

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
XCOPA_ET = FIXTURES / "xcopa" / "et" / "val.et.jsonl"
XCOPA_QU = FIXTURES / "xcopa" / "qu" / "test.qu.jsonl"
XCOPA_ZH = FIXTURES / "xcopa" / "zh" / "test.zh.jsonl"
COPAL = FIXTURES / "copal-id" / "test_copal.csv"
COPAL_COLLOQUIAL = FIXTURES / "copal-id" / "test_copal_colloquial.csv"


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_xcopa_rows_become_two_choice_items() -> None:
    rows = _jsonl(XCOPA_ET)
    items = read_xcopa(XCOPA_ET, "et", split="validation")
    assert len(items) == len(rows) == 8
    for row, item in zip(rows, items, strict=True):
        assert item.id == f"xcopa-et-validation-{row['idx']}"
        assert item.lang == "et"
        assert item.question == row["premise"]
        assert [(c.label, c.text) for c in item.choices] == [("A", row["choice1"]), ("B", row["choice2"])]
        assert item.answer == "AB"[row["label"]]
        assert item.metadata["copa_question"] == row["question"]
        assert item.metadata["idx"] == row["idx"]
        assert item.metadata["changed"] is row["changed"]
        assert item.metadata["split"] == "validation"
        assert item.provenance.recipe == "xcopa"


def test_xcopa_first_row_by_hand() -> None:
    item = read_xcopa(XCOPA_ET, "et")[0]
    assert item.id == "xcopa-et-0"
    assert item.question == "Mees keeras kraani lahti."
    assert item.answer_text() == "Tilast voolas vett."
    assert item.metadata["copa_question"] == "effect"


def test_xcopa_has_both_questions_and_both_labels() -> None:
    items = read_xcopa(XCOPA_ET, "et")
    assert {i.metadata["copa_question"] for i in items} == {"cause", "effect"}
    assert {i.answer for i in items} == {"A", "B"}


@pytest.mark.parametrize(
    ("path", "lang"),
    [(XCOPA_ET, "et"), (XCOPA_QU, "qu"), (XCOPA_ZH, "zh"), (Path("x/val.th.jsonl"), "th"), (Path("ta/a.jsonl"), "ta")],
)
def test_xcopa_language_from_the_path(path: Path, lang: str) -> None:
    assert xcopa_lang_from_path(path) == lang


def test_xcopa_language_unknown_from_a_plain_path() -> None:
    assert xcopa_lang_from_path(Path("data/copa.jsonl")) is None


def test_quechua_and_chinese_text_survive() -> None:
    qu = read_xcopa(XCOPA_QU, "qu")
    assert qu[0].choices[0].text == "Chay imaymanaqa p'akikuqlla karqan."
    zh = read_xcopa(XCOPA_ZH, "zh")
    assert zh[0].question == "该物品用气泡包装纸包着。"
    assert zh[0].answer == "A"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"question": "why"}, "question: expected 'cause' or 'effect', got 'why'"),
        ({"label": 2}, r"label: expected an index 0\.\.1, got 2"),
        ({"label": True}, r"label: expected an index 0\.\.1, got True"),
        ({"idx": "seven"}, "idx: expected a whole number"),
        ({"choice2": None}, "choice2: missing"),
    ],
)
def test_xcopa_bad_rows_are_located_by_line(tmp_path: Path, change: dict[str, Any], message: str) -> None:
    rows = _jsonl(XCOPA_ET)[:3]
    rows[2] = {**rows[2], **change}
    path = tmp_path / "val.et.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    with pytest.raises(DataValidationError, match=message) as info:
        read_xcopa(path, "et")
    assert str(info.value).startswith(f"{path}:3: ")


def test_xcopa_repeated_idx_is_an_error(tmp_path: Path) -> None:
    rows = _jsonl(XCOPA_ET)[:2]
    rows[1]["idx"] = rows[0]["idx"]
    path = tmp_path / "val.et.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    with pytest.raises(DataValidationError, match=r":2: id: 'xcopa-et-0' repeats the row at 1"):
        read_xcopa(path, "et")


def _csv(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def test_copal_standard_rows() -> None:
    rows = _csv(COPAL)
    items = read_copal(COPAL)
    assert len(items) == len(rows) == 8
    for row, item in zip(rows, items, strict=True):
        assert item.id == f"copal-id-standard-{row['idx']}"
        assert item.lang == "id"
        assert item.question == row["premise"]
        assert item.answer == "AB"[int(row["label"])]
        assert item.metadata["copa_question"] == row["question"]
        assert item.metadata["variant"] == "standard"
        assert item.metadata["terminology"] is (row["Terminology"] == "1")
        assert item.metadata["culture"] is (row["Culture"] == "1")
        assert item.metadata["language"] is (row["Language"] == "1")
        assert item.provenance.recipe == "copal-id"
    assert [i.metadata["copa_question"] for i in items].count("effect") == 3


def test_copal_colloquial_is_parallel_to_standard() -> None:
    standard = read_copal(COPAL)
    colloquial = read_copal(COPAL_COLLOQUIAL)
    assert copal_variant(COPAL_COLLOQUIAL) == "colloquial"
    assert [i.metadata["idx"] for i in colloquial] == [i.metadata["idx"] for i in standard]
    assert [i.answer for i in colloquial] == [i.answer for i in standard]
    assert colloquial[2].question == "Bokap gue masuk angin"
    assert colloquial[2].id == "copal-id-colloquial-2"
    assert colloquial[2].answer_text() == "Bokap gue abis ngeronda"


def test_copal_bad_cells_are_located_by_line(tmp_path: Path) -> None:
    lines = COPAL.read_text(encoding="utf-8").splitlines()
    lines[3] = lines[3].replace(",cause,2,1,1,0,0", ",cause,2,1,maybe,0,0")
    path = tmp_path / "test_copal.csv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(DataValidationError, match=r":4: Terminology: expected 0 or 1, got 'maybe'"):
        read_copal(path)


def test_copal_short_row_and_missing_column(tmp_path: Path) -> None:
    lines = COPAL.read_text(encoding="utf-8").splitlines()
    short = tmp_path / "short.csv"
    short.write_text("\n".join([*lines[:3], "Only a premise.,one choice"]) + "\n", encoding="utf-8")
    with pytest.raises(DataValidationError, match=r"short.csv:4: row has 2 cells, header has 9"):
        read_copal(short)
    no_label = tmp_path / "no_label.csv"
    no_label.write_text("premise,choice1,choice2,question,idx\nP,A,B,cause,0\n", encoding="utf-8")
    with pytest.raises(DataValidationError, match=r"no_label.csv:1: header: missing column\(s\) \['label'\]"):
        read_copal(no_label)
