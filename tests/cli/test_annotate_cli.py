"""``senseforge annotate``: invite, status and serve, in-process with Typer's test runner."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from senseforge.annotate.store import AnnotationStore
from senseforge.cli.annotate import _HideTokens, app, run_store_url
from senseforge.data.schema import MCItem, judgement
from senseforge.errors import ConfigError
from senseforge.pipelines.runstore import sqlite_url


def item(n: int) -> MCItem:
    return MCItem(
        id=f"q{n}",
        lang="en",
        question="Where?",
        choices=[{"label": "A", "text": "here"}, {"label": "B", "text": "there"}],
        answer="A",
    )


def test_invite_prints_a_working_link(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["invite", "ana", str(tmp_path), "--admin", "--base-url", "https://ann.example/"])
    assert result.exit_code == 0, result.output
    link = result.stdout.strip().splitlines()[-1]
    assert link.startswith("https://ann.example/login?token=")
    store = AnnotationStore(sqlite_url(tmp_path / "run.db"))
    try:
        who = store.who(link.split("token=", 1)[1])
        assert who is not None and (who.name, who.role) == ("ana", "admin")
    finally:
        store.close()


def test_status_shows_progress_per_task_type_and_annotator(tmp_path: Path) -> None:
    store = AnnotationStore(sqlite_url(tmp_path / "run.db"))
    try:
        store.add_tasks("verify", [item(1), item(2)], k=2, group="g")
        store.invite("ben")
        assignment = store.next_assignment("ben", "verify")
        assert assignment is not None
        store.submit(assignment.id, "ben", judgement(item_id="q1", annotator="ben", task="verify", accept=True))
    finally:
        store.close()
    result = CliRunner().invoke(app, ["status", str(tmp_path)], env={"COLUMNS": "120"})
    assert result.exit_code == 0, result.output
    assert "verify" in result.stdout and "1 / 4" in result.stdout
    assert "ben" in result.stdout


def test_the_run_store_comes_from_the_run_directory(tmp_path: Path) -> None:
    assert run_store_url(tmp_path, None) == sqlite_url(tmp_path / "run.db")
    assert run_store_url(tmp_path / "missing", "sqlite:///elsewhere.db") == "sqlite:///elsewhere.db"
    with pytest.raises(ConfigError, match="no such run directory"):
        run_store_url(tmp_path / "missing", None)
    (tmp_path / "manifest.json").write_text(json.dumps({"run_store_url": "postgresql+psycopg://u:***@db/run"}))
    with pytest.raises(ConfigError, match="--store"):
        run_store_url(tmp_path, None)


def test_serve_says_how_to_invite_and_hides_tokens_from_the_access_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import uvicorn

    started: list[Any] = []
    monkeypatch.setattr(uvicorn.Server, "run", lambda self, sockets=None: started.append(self.config))
    result = CliRunner().invoke(app, ["serve", str(tmp_path), "--port", "8123"])
    assert result.exit_code == 0, result.output
    assert "http://127.0.0.1:8123" in result.output and "senseforge annotate invite NAME" in result.output
    assert len(started) == 1 and started[0].port == 8123
    record = logging.LogRecord(
        "uvicorn.access", logging.INFO, "", 0, '%s - "%s %s"', ("127.0.0.1", "GET", "/login?token=s3cret&x=1"), None
    )
    assert _HideTokens().filter(record) and "s3cret" not in record.getMessage()


def test_baseline_queues_then_reports(tmp_path: Path) -> None:
    from senseforge.kb.conceptnet import import_dump
    from senseforge.pipelines.mcsqa import McsqaConfig, build
    from senseforge.store.db import Store

    import_dump("demo", tmp_path / "kb")
    author = "scripted/mcsqa-author"
    config = McsqaConfig(
        lang="en", n=30, kb=str(tmp_path / "kb"), model=author, reviewers=(author,), lm_review_as_hard=True
    )
    run = tmp_path / "run"
    build(config, run, store=Store(f"sqlite:///{tmp_path / 'cache.db'}"))
    runner = CliRunner()
    first = runner.invoke(app, ["baseline", str(run), "--n", "2", "--k", "1"])
    assert first.exit_code == 0, first.output
    assert "queued for blind answering" in first.output
    store = AnnotationStore(run_store_url(run, None))
    store.invite("solo")
    while (assignment := store.next_assignment("solo", "answer")) is not None:
        item = assignment.input
        verdict = judgement(item_id=item.id, annotator="solo", task="answer", choice=item.answer, certain=True)
        assert store.submit(assignment.id, "solo", verdict)
    store.close()
    second = runner.invoke(app, ["baseline", str(run), "--n", "2", "--k", "1"])
    assert second.exit_code == 0, second.output
    assert "queued" not in second.output.split("human baseline")[0]
    assert second.output.count("1.000") >= 3  # every split answered right by the one annotator
