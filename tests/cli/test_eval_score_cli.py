"""``senseforge eval score`` (a submission, no model) and ``eval run`` on a folder of CRoW task files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from senseforge.cli.eval import app
from senseforge.errors import ConfigError, DataValidationError
from senseforge.evaluate.harness import load_for_eval
from senseforge.evaluate.records import BinaryMetrics, CrowSummary, read_results

runner = CliRunner()


def _rows(task: str, prefix: str) -> list[dict[str, Any]]:
    fields = {"stance": ("belief", "argument"), "safety": ("scenario", "action")}[task]
    return [
        {
            "task": task,
            "example_id": f"{prefix}{index}",
            "context_id": f"{prefix}-ctx",
            fields[0]: f"context of {prefix}",
            fields[1]: f"target {prefix}{index}",
            "label": label,
        }
        for index, label in enumerate((1, 0))
    ]


def _jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    run = tmp_path / "crow-run"
    _jsonl(run / "dataset" / "stance.jsonl", _rows("stance", "st"))
    _jsonl(run / "dataset" / "safety.jsonl", _rows("safety", "sa"))
    return run


def test_score_writes_results_and_warns_of_missing_predictions(run_dir: Path, tmp_path: Path) -> None:
    preds = _jsonl(
        tmp_path / "submission.jsonl",
        [
            {"task": "stance", "example_id": "st0", "prediction": 1},
            {"task": "stance", "example_id": "st1", "prediction": 0},
            {"task": "safety", "example_id": "sa0", "prediction": True},
        ],
    )
    out = tmp_path / "scored"
    args = ["score", "--gold", str(run_dir), "--predictions", str(preds), "--out", str(out), "--bootstrap", "100"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "1 of 4 gold examples have no prediction" in result.output
    results = read_results(out)
    assert results.model.name == "submission:submission.jsonl" and results.data.name == "crow-run"
    assert results.breakdowns["submission"]["missing"] == 1
    stance, crow = results.results["stance"], results.results["crow"]
    assert isinstance(stance, BinaryMetrics) and isinstance(crow, CrowSummary)
    assert stance.macro_f1 == 1.0 and (out / "samples.jsonl").is_file()
    assert set(results.results) == {"safety", "stance", "crow"}


def test_score_defaults_its_output_folder(run_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    gold = _jsonl(tmp_path / "private.jsonl", _rows("stance", "st"))
    preds = _jsonl(tmp_path / "p.jsonl", [{"task": "stance", "example_id": "st0", "prediction": 1}])
    result = runner.invoke(app, ["score", "--gold", str(gold), "--predictions", str(preds)])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "evals" / "private-submission" / "results.json").is_file()


def test_score_names_a_bad_line(run_dir: Path, tmp_path: Path) -> None:
    preds = _jsonl(tmp_path / "p.jsonl", [{"task": "stance", "example_id": "nope", "prediction": 1}])
    result = runner.invoke(app, ["score", "--gold", str(run_dir), "--predictions", str(preds)])
    assert isinstance(result.exception, DataValidationError)
    assert "p.jsonl:1: example_id: 'nope'" in str(result.exception)


def test_eval_run_scores_every_task_file_of_a_run(run_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "echo"
    args = ["run", "-d", str(run_dir), "-m", "scripted/echo", "--out", str(out), "--bootstrap", "100"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    results = read_results(out)
    assert set(results.results) == {"safety", "stance", "crow"} and results.data.kind == "binary"
    crow, safety, stance = (results.results[k] for k in ("crow", "safety", "stance"))
    assert isinstance(crow, CrowSummary) and isinstance(safety, BinaryMetrics) and isinstance(stance, BinaryMetrics)
    assert safety.macro_f1 is not None and stance.macro_f1 is not None
    assert crow.crow_score_macro_f1 == pytest.approx((safety.macro_f1 + stance.macro_f1) / 2)


def test_load_for_eval_reads_task_files_sorted_and_named_after_the_folder(run_dir: Path) -> None:
    dataset = load_for_eval(run_dir)
    assert dataset.kind == "binary" and dataset.name == "crow-run" and dataset.fmt == "crow"
    assert [e.id for e in dataset.examples] == ["sa0", "sa1", "st0", "st1"]
    # the folder of task files itself works too
    assert [e.id for e in load_for_eval(run_dir / "dataset").examples] == ["sa0", "sa1", "st0", "st1"]


def test_an_example_id_in_two_task_files_names_both(run_dir: Path) -> None:
    _jsonl(run_dir / "dataset" / "stance.jsonl", _rows("stance", "sa"))
    with pytest.raises(DataValidationError, match=r"stance.jsonl: example_id: 'sa0' is also in .*safety.jsonl"):
        load_for_eval(run_dir)


def test_a_folder_with_a_non_binary_file_is_not_a_task_folder(tmp_path: Path) -> None:
    csqa = Path(__file__).parents[1] / "fixtures" / "csqa" / "dev_sample.jsonl"
    folder = tmp_path / "mixed"
    _jsonl(folder / "stance.jsonl", _rows("stance", "st"))
    (folder / "qa.jsonl").write_text(csqa.read_text(encoding="utf-8"), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"without items/test.jsonl.*binary task files"):
        load_for_eval(folder)
