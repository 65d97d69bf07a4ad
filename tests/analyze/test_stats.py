"""analyze stats: mCSQA's statistics of a built dataset, on our golden dry-run output."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from senseforge.analyze.stats import dataset_stats, read_split_items
from senseforge.cli.main import app
from senseforge.data.schema import MCItem

GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "golden" / "mcsqa" / "dry-en"


def _items(split: str) -> list[MCItem]:
    lines = (GOLDEN / "items" / f"{split}.jsonl").read_text(encoding="utf-8").splitlines()
    return [MCItem.model_validate_json(line) for line in lines]


def test_every_figure_counts_the_items_of_its_split() -> None:
    result = dataset_stats(read_split_items(str(GOLDEN)))
    assert [(g.lang, g.split) for g in result.groups] == [("en", "train"), ("en", "validation"), ("en", "test")]
    for group in result.groups:
        items = _items(group.split)
        assert group.items == len(items)
        assert (group.easy, group.hard) == (
            sum(i.difficulty == "easy" for i in items),
            sum(i.difficulty == "hard" for i in items),
        )
        assert group.refined == sum(i.metadata.get("refined") is True for i in items)
        positions = Counter(i.answer for i in items)
        assert group.answer_positions == {label: positions.get(label, 0) for label in "ABCDE"}
        expected = len(items) / 5
        chi = sum((positions.get(label, 0) - expected) ** 2 / expected for label in "ABCDE")
        assert group.chi_square == pytest.approx(chi)
        assert group.p_value is not None and 0.0 <= group.p_value <= 1.0
        assert group.question_chars is not None
        assert group.question_chars.mean == pytest.approx(sum(len(i.question) for i in items) / len(items))


def test_a_plain_dataset_file_is_one_split_from_its_name(tmp_path: Path) -> None:
    source = GOLDEN / "items" / "test.jsonl"
    copy = tmp_path / "my_dev.jsonl"
    copy.write_text(source.read_text(encoding="utf-8"), encoding="utf-8")
    (group,) = dataset_stats(read_split_items(str(copy))).groups
    assert group.split == "validation" and group.items == len(_items("test"))


def test_cli_prints_the_table_and_writes_json_csv_and_a_figure(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["analyze", "stats", str(GOLDEN), "--out", str(tmp_path)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "en" in result.stdout and "train" in result.stdout
    doc = json.loads((tmp_path / "stats.json").read_text(encoding="utf-8"))
    assert [g["split"] for g in doc["groups"]] == ["train", "validation", "test"]
    assert (tmp_path / "stats.csv").read_text(encoding="utf-8").startswith("lang,split,items,easy,hard")
    assert (tmp_path / "stats.svg").read_text(encoding="utf-8").lstrip().startswith("<?xml")
    missing = CliRunner().invoke(app, ["analyze", "stats", str(tmp_path / "nothing")])
    assert missing.exit_code != 0 and "no such file or folder" in str(missing.exception)  # main() prints it in one line
