"""``senseforge demo --recipe culture-adapt`` and ``--recipe crow`` with the dry-run authors: the run, its summary
and where it went."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from senseforge.cli.main import app


def test_the_culture_adapt_demo_shows_what_it_kept_and_resumes(tmp_path: Path) -> None:
    args = ["demo", "--recipe", "culture-adapt", "-m", "scripted/culture-adapt-author", "--out", str(tmp_path)]
    first = CliRunner().invoke(app, args)
    assert first.exit_code == 0, first.output
    assert "culture-adapt recipe · en → id, su" in first.output and "names only" in first.output
    run_dir = tmp_path / "runs" / "culture-adapt"
    funnel = json.loads((run_dir / "funnel.json").read_text())
    assert funnel["stages"][0] == {"stage": "source", "in": 8, "out": 8, "rejected": {}}
    assert funnel["kept"] == funnel["by_lang"]["id"]["kept"] == funnel["by_lang"]["su"]["kept"] > 0
    assert funnel["adapted"]["full"] + funnel["adapted"]["names"] > 0  # the sample names people and places
    assert str(run_dir) in first.output

    again = CliRunner().invoke(app, args)  # the same demo again: read back, nothing new asked
    assert again.exit_code == 0, again.output
    assert json.loads((run_dir / "funnel.json").read_text()) == funnel


def test_the_crow_demo_shows_each_task_and_what_was_left_out(tmp_path: Path) -> None:
    args = ["demo", "--recipe", "crow", "-m", "scripted/crow-author", "--out", str(tmp_path)]
    first = CliRunner().invoke(app, args)
    assert first.exit_code == 0, first.output
    assert "crow recipe · safety, intent, dialogue, stance, mt-zh-en" in first.output
    assert "per task" in first.output and "kept" in first.output
    run_dir = tmp_path / "runs" / "crow"
    funnel = json.loads((run_dir / "funnel.json").read_text())
    assert funnel["stages"][0] == {"stage": "contexts", "in": 7, "out": 7, "rejected": {}}  # the mt rows: one context
    assert funnel["kept"] == sum(part["examples"]["total"] for part in funnel["by_task"].values()) > 0
    assert str(run_dir) in first.output
    assert (tmp_path / "report.html").is_file() and "the report over every run above" in first.output
    again = CliRunner().invoke(app, args)
    assert again.exit_code == 0, again.output
    assert json.loads((run_dir / "funnel.json").read_text()) == funnel


def test_an_unknown_demo_recipe_is_named(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["demo", "--recipe", "nope", "--out", str(tmp_path)])
    assert result.exit_code != 0
    assert "culture-adapt" in str(result.exception)
