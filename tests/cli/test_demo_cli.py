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
    assert "culture-adapt recipe · en → id, su" in first.output and "Adaptation: full" in first.output
    run_dir = tmp_path / "runs" / "culture-adapt"
    funnel = json.loads((run_dir / "funnel.json").read_text())
    assert funnel["stages"][0] == {"stage": "source", "in": 8, "out": 8, "rejected": {}}
    assert funnel["kept"] == funnel["groups"][0]["kept"] == funnel["groups"][1]["kept"] > 0
    adapted = next(f["values"] for f in funnel["figures"] if f["name"] == "adapted")
    assert adapted["full"] + adapted["names"] > 0  # the sample names people and places
    assert str(run_dir) in first.output

    again = CliRunner().invoke(app, args)  # the same demo again: read back, nothing new asked
    assert again.exit_code == 0, again.output
    assert json.loads((run_dir / "funnel.json").read_text()) == funnel


def test_the_crow_demo_shows_each_task_and_what_was_left_out(tmp_path: Path) -> None:
    args = ["demo", "--recipe", "crow", "-m", "scripted/crow-author", "--out", str(tmp_path)]
    first = CliRunner().invoke(app, args)
    assert first.exit_code == 0, first.output
    assert "crow recipe · safety, intent, dialogue, stance, mt-zh-en" in first.output
    assert "Per task:" in first.output and "kept" in first.output
    run_dir = tmp_path / "runs" / "crow"
    funnel = json.loads((run_dir / "funnel.json").read_text())
    assert funnel["stages"][0] == {"stage": "contexts", "in": 7, "out": 7, "rejected": {}}  # the mt rows: one context
    examples = [f["values"]["total"] for g in funnel["groups"] for f in g["figures"] if f["name"] == "examples"]
    assert funnel["kept"] == sum(examples) > 0 and len(examples) == 5
    assert str(run_dir) in first.output
    assert (tmp_path / "report.html").is_file() and "the report over every run above" in first.output
    again = CliRunner().invoke(app, args)
    assert again.exit_code == 0, again.output
    assert json.loads((run_dir / "funnel.json").read_text()) == funnel


def test_an_unknown_demo_recipe_is_named(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["demo", "--recipe", "nope", "--out", str(tmp_path)])
    assert result.exit_code != 0
    assert "culture-adapt" in str(result.exception)


def test_the_panel_demo_is_its_own_run_with_two_members_of_one_model(tmp_path: Path) -> None:
    args = ["demo", "--panel", "-m", "scripted/mcsqa-author", "--n", "3", "--out", str(tmp_path)]
    first = CliRunner().invoke(app, args)
    assert first.exit_code == 0, first.output
    assert "not two independent models" in first.output  # labelled as what it is
    run_dir = tmp_path / "runs" / "mcsqa-en-panel"
    assert not (tmp_path / "runs" / "mcsqa-en").exists()  # its own run, the default demo's untouched
    manifest = json.loads((run_dir / "manifest.json").read_text())
    members = ["scripted/mcsqa-author@loglik", "scripted/mcsqa-author@letter"]
    assert manifest["config"]["panel"] == members
    rows = [json.loads(line) for line in (run_dir / "panel.jsonl").read_text().splitlines()]
    assert [row["member"] for row in rows[:2]] == members and {row["method"] for row in rows} == {"loglik", "letter"}
    assert len(rows) == 2 * 9  # three sets, three questions each, two members
    funnel = json.loads((run_dir / "funnel.json").read_text())
    names = {figure["name"] for figure in funnel["figures"]}
    assert {"panel-accuracy", "panel-pairwise", "panel-agreement", "panel-policies"} <= names
    assert (tmp_path / "report-panel.html").is_file()
    again = CliRunner().invoke(app, args)  # resumes: the same files
    assert again.exit_code == 0, again.output
    assert json.loads((run_dir / "funnel.json").read_text()) == funnel


def test_the_panel_demo_is_mcsqas(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["demo", "--panel", "--recipe", "crow", "--out", str(tmp_path)])
    assert result.exit_code != 0
    assert "--panel" in str(result.exception)


def test_a_demo_recipe_that_keeps_nothing_points_at_a_capable_model(tmp_path: Path) -> None:
    responder = tmp_path / "mute.py"
    responder.write_text("def respond(request):\n    return ''\n", encoding="utf-8")
    args = ["demo", "--recipe", "culture-gen", "-m", f"scripted/{responder}:respond", "--out", str(tmp_path / "out")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "culture-gen kept 0 items" in result.output
    assert "senseforge build culture-gen -m openai/MODEL" in result.output
