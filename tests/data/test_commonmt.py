"""CommonMT CSV rows to pairs of binary examples, on real rows."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from senseforge.data.commonmt import commonmt_slug, read_commonmt
from senseforge.errors import DataValidationError

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "commonmt"
LEXICAL = FIXTURES / "lexical ambiguity.csv"
CONTEXTLESS = FIXTURES / "contextless syntactic ambiguity.csv"


def _csv(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def test_each_row_is_one_context_with_a_valid_and_an_invalid_target() -> None:
    rows = _csv(LEXICAL)
    examples = read_commonmt(LEXICAL)
    assert len(rows) == 6
    assert len(examples) == 12
    for number, row in enumerate(rows, start=1):
        correct, wrong = examples[2 * number - 2 : 2 * number]
        assert correct.context_id == wrong.context_id == f"commonmt-lexical-ambiguity-{number}"
        assert correct.id == f"commonmt-lexical-ambiguity-{number}-correct"
        assert wrong.id == f"commonmt-lexical-ambiguity-{number}-wrong"
        assert correct.context == wrong.context == row["chinese_source"]
        assert (correct.target, correct.label) == (row["english_target_correct"], True)
        assert (wrong.target, wrong.label) == (row["english_target_wrong"], False)
        for example in (correct, wrong):
            assert example.task == "mt-zh-en"
            assert example.knowledge == []
            assert example.lang is None
            assert example.metadata["ambiguity"] == "lexical ambiguity"
            assert example.metadata["source_file"] == "lexical ambiguity.csv"
            assert example.metadata["source_lang"] == "zh"
            assert example.metadata["target_lang"] == "en"


def test_quoted_cells_with_commas_and_line_numbers() -> None:
    examples = read_commonmt(LEXICAL)
    second = examples[2]
    assert second.context == "放学后这几个学生约好一起去水库下水。"
    assert second.target == "After school, these students agreed to go to the reservoir together for swimming."
    assert [e.metadata["line"] for e in examples[::2]] == [2, 3, 4, 5, 6, 7]


def test_contextless_file_and_slug() -> None:
    examples = read_commonmt(CONTEXTLESS, split="test")
    assert len(examples) == 8
    assert commonmt_slug(CONTEXTLESS) == "contextless-syntactic-ambiguity"
    assert examples[0].context_id == "commonmt-contextless-syntactic-ambiguity-1"
    assert examples[0].context == "发明的是一个伟大的科学家。 "  # kept as published, trailing space too
    assert {e.metadata["split"] for e in examples} == {"test"}


def test_lang_override() -> None:
    assert {e.lang for e in read_commonmt(LEXICAL, "zh")} == {"zh"}


def test_empty_cell_is_located(tmp_path: Path) -> None:
    lines = LEXICAL.read_text(encoding="utf-8").splitlines()
    lines[3] = "吃掉敌人一个师。,Destroy a division of the enemy.,"
    path = tmp_path / "lexical ambiguity.csv"
    path.write_text("\r\n".join(lines) + "\r\n", encoding="utf-8")
    with pytest.raises(DataValidationError, match=r"lexical ambiguity.csv:4: english_target_wrong: empty"):
        read_commonmt(path)


def test_wrong_header_is_located_at_line_one(tmp_path: Path) -> None:
    path = tmp_path / "x.csv"
    path.write_text("source,correct,wrong\na,b,c\n", encoding="utf-8")
    with pytest.raises(DataValidationError, match=r"x.csv:1: header: missing column\(s\)"):
        read_commonmt(path)
