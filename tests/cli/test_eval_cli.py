"""``senseforge eval``: several models × several datasets, one result per pair and a leaderboard."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from typer.testing import CliRunner

from senseforge.cli.eval import app
from senseforge.errors import ConfigError
from senseforge.evaluate.records import read_results

FIXTURES = Path(__file__).parent.parent / "fixtures"
CSQA = FIXTURES / "csqa" / "dev_sample.jsonl"
HUMAN_GEN = FIXTURES / "id-csqa" / "human_gen" / "ind" / "filtered_test.json"

runner = CliRunner()

RESPONDER = """
def first(request):
    if hasattr(request, "continuation"):
        return -1.0 * len(request.continuation)
    return "A"
"""


def test_every_model_on_every_dataset_and_a_leaderboard(tmp_path: Path) -> None:
    responder = tmp_path / "first.py"
    responder.write_text(RESPONDER, encoding="utf-8")
    models = ["scripted/echo", f"scripted/{responder}:first"]
    args = ["run", "-d", str(CSQA), "-d", str(HUMAN_GEN), "--out", str(tmp_path / "out"), "--bootstrap", "100"]
    for model in models:
        args += ["-m", model]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    folders = sorted(p.name for p in (tmp_path / "out").iterdir() if p.is_dir())
    assert len(folders) == 4
    pairs = {(r.model.name, r.data.name) for r in (read_results(tmp_path / "out" / f) for f in folders)}
    assert pairs == {(m, d) for m in models for d in ("commonsenseqa", "id-csqa-human-gen-id")}
    board = json.loads((tmp_path / "out" / "leaderboard.json").read_text(encoding="utf-8"))
    # loglik: acc and acc_norm for each of the 2 x 2 pairs
    assert len(board["entries"]) == 8 and len(board["results"]) == 4
    with (tmp_path / "out" / "leaderboard.csv").open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 8 and {row["metric"] for row in rows} == {"acc", "acc_norm"}
    # every entry is the number in its pair's results.json
    written = {(r.model.name, r.data.name): r for r in (read_results(Path(e["path"])) for e in board["results"])}
    for entry in board["entries"]:
        metrics = written[(entry["model"], entry["data"])].results[entry["task"]]
        assert entry["value"] == getattr(metrics, entry["metric"])
    assert "leaderboard" in result.output


def test_one_pair_writes_where_out_says_and_no_leaderboard(tmp_path: Path) -> None:
    result = runner.invoke(app, ["run", "-d", str(CSQA), "-m", "scripted/echo", "--out", str(tmp_path / "one")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "one" / "results.json").is_file() and not (tmp_path / "one" / "leaderboard.json").exists()


def test_putri_all_defaults_to_generation_and_refuses_the_cloze_prompt(tmp_path: Path) -> None:
    result = runner.invoke(
        app,
        ["run", "-d", str(HUMAN_GEN), "-m", "scripted/echo", "--variant", "putri-all", "--out", str(tmp_path / "p")],
    )
    assert result.exit_code == 0, result.output
    results = read_results(tmp_path / "p")
    assert results.config["formulation"] == "generate"
    assert [t.rsplit("/", 1)[1] for t in results.results] == ["putri1", "putri2", "putri3", "putri-mean"]
    refused = runner.invoke(app, ["run", "-d", str(HUMAN_GEN), "--variant", "putri2", "-f", "loglik"])
    assert isinstance(refused.exception, ConfigError) and "--formulation generate" in str(refused.exception)


def test_missing_data_is_named_before_any_model_loads(tmp_path: Path) -> None:
    result = runner.invoke(app, ["run", "-d", str(CSQA), "-d", str(tmp_path / "nope.jsonl"), "-m", "scripted/echo"])
    assert isinstance(result.exception, ConfigError) and "nope.jsonl" in str(result.exception)


def test_help_documents_the_dimension_conventions() -> None:
    result = runner.invoke(app, ["run", "--help"], terminal_width=200)
    assert result.exit_code == 0
    text = " ".join(result.output.replace("│", " ").split())
    assert "--crow-parity" in text and "averaged over the tasks that have" in text and "putri-all" in text
