"""``senseforge report`` on the command line: a run's store gives the agreement its judgements, an evaluation folder
given where a run is expected is read as one, and anything else is refused in one line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

from senseforge.cli.report import run_judgements
from senseforge.data.schema import judgement
from senseforge.pipelines.runstore import RunStore, sqlite_url

from .test_llm_cli import run_cli
from .test_messages import _error

GOLDEN = Path(__file__).parents[1] / "fixtures" / "golden"


def test_the_judgements_come_from_the_runs_store(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "manifest.json").write_text(json.dumps({"recipe": "mcsqa"}), encoding="utf-8")
    assert run_judgements(run) is None  # no store yet: nothing to read, nothing created
    assert not (run / "run.db").exists()
    store = RunStore(sqlite_url(run / "run.db"))
    votes = [judgement(item_id="q1", annotator=who, task="verify", accept=who != "c") for who in "abc"]
    store.add_judgements(votes, "human")
    store.close()
    found = run_judgements(run)
    assert found is not None and [(j.annotator, j.vote(), source) for j, source in found] == [
        ("a", "accept", "human"),
        ("b", "accept", "human"),
        ("c", "reject", "human"),
    ]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "manifest.json").write_text(json.dumps({"run_store_url": "postgresql://db/x"}), encoding="utf-8")
    assert run_judgements(elsewhere) is None  # a store on a server not given: the page says nothing of agreement


def test_an_evaluation_folder_is_read_as_one_and_a_bare_folder_refused(tmp_path: Path, senseforge_home: Path) -> None:
    run = tmp_path / "mcsqa-en"
    shutil.copytree(GOLDEN / "demo" / "mcsqa-en", run)
    evals = tmp_path / "evals"
    scored = run_cli(
        "eval", "run", "--data", str(run), "--split", "all", "-m", "scripted/echo", "--out", str(evals / "echo"),
        home=senseforge_home,
    )  # fmt: skip
    assert scored.returncode == 0, scored.stderr
    page = tmp_path / "page.html"
    result = run_cli("report", str(evals), "--out", str(page), home=senseforge_home)
    assert result.returncode == 0, result.stderr
    assert f"{evals}: evaluation results, not a run folder; read as --eval {evals}" in result.stdout
    text = page.read_text(encoding="utf-8")
    assert "scripted/echo · loglik · n=7" in text and "No funnel yet" not in text
    assert (tmp_path / "page_figures").is_dir() and any((tmp_path / "page_figures").glob("*.pdf"))

    bare = tmp_path / "bare"
    bare.mkdir()
    refused = run_cli("report", str(bare), home=senseforge_home)
    assert refused.returncode != 0
    assert f"{bare}: neither a run folder" in _error(refused.stderr)
    missing = run_cli("report", str(tmp_path / "nothing"), home=senseforge_home)
    assert "no such folder" in _error(missing.stderr)
