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


def test_status_shows_agreement_and_the_qc_queue(tmp_path: Path) -> None:
    from senseforge.data.schema import ConceptSlot, Draft, DraftItem
    from senseforge.pipelines.taskqueue import QueuedTask

    draft = Draft(
        question="Where would you leave a wet umbrella?",
        choices=[{"label": label, "text": text} for label, text in zip("AB", ("by the door", "in bed"), strict=True)],
        answer="A",
        distractor="B",
    )

    def draft_item(item: str, round_: int) -> DraftItem:
        return DraftItem(
            id=f"{item}@{round_}", item_id=item, lang="en", category="objects", concept="umbrella", creator="cy",
            draft=draft,
        )  # fmt: skip

    store = AnnotationStore(sqlite_url(tmp_path / "run.db"))
    try:
        for name in ("ana", "ben", "cy"):
            store.invite(name)
        slot = ConceptSlot(id="h9", lang="en", category="objects", concept="umbrella", creator="cy")
        store.queue(
            [
                QueuedTask("create", slot, eligible=("cy",)),
                *(QueuedTask("qc", draft_item(f"h{n}", 1), creator="cy") for n in range(1, 4)),
            ]
        )
        store.add_tasks("verify", [item(1)], k=2, group="g")

        def judge(who: str, task: str, **body: Any) -> None:
            lease = store.next_assignment(who, task)
            assert lease is not None
            assert store.submit(lease.id, who, judgement(item_id=lease.item_id, annotator=who, task=task, **body))

        judge("ana", "qc", verdict="needs_revision", comment="say which door")  # h1
        judge("ana", "qc", verdict="complete")  # h2; h3 waits for a checker
        lm_verdict = judgement(item_id="h3@1", annotator="lm:scripted/x#0", task="qc", verdict="complete")
        store.runs.add_judgements([lm_verdict], "lm")  # only people's verdicts move an item through QC
        judge("cy", "create", draft=draft.model_dump())
        judge("ana", "verify", accept=True)
        judge("ben", "verify", accept=False)
    finally:
        store.close()
    result = CliRunner().invoke(app, ["status", str(tmp_path)], env={"COLUMNS": "120"})
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert "1 / 1" in text and "2 / 2" in text and "2 / 3" in text  # the progress table as before
    assert "agreement" in text and "Krippendorff α" in text
    create_row = next(line for line in text.splitlines() if " create " in line and "n/a" in line)
    assert create_row.count("n/a") == 2  # a draft casts no vote
    assert "QC queue" in text
    counts = {}
    for line in text.split("QC queue", 1)[1].splitlines():
        cells = [cell.strip() for cell in line.replace("│", "|").split("|") if cell.strip()]
        if len(cells) == 2 and cells[1].isdigit():
            counts[cells[0]] = int(cells[1])
    assert counts == {"awaiting_qc": 1, "needs_revision": 1, "revised": 0, "complete": 1}

    as_json = CliRunner().invoke(app, ["status", str(tmp_path), "--json"])
    assert as_json.exit_code == 0, as_json.output
    report = json.loads(as_json.stdout)
    assert report["tasks"]["qc"] == {"tasks": 3, "complete": 2, "wanted": 3, "done": 2}
    assert report["agreement"]["create"] is None
    assert report["agreement"]["verify"]["items"] == 1 and report["agreement"]["verify"]["ratings"] == 2
    assert report["qc"]["counts"] == counts
    h1 = report["qc"]["items"][0]
    assert h1 == {"item": "h1", "state": "needs_revision", "round": 1, "creator": "cy", "comment": "say which door"}


def test_status_without_qc_tasks_prints_no_qc_queue(tmp_path: Path) -> None:
    store = AnnotationStore(sqlite_url(tmp_path / "run.db"))
    try:
        store.add_tasks("verify", [item(1)], k=1, group="g")
    finally:
        store.close()
    result = CliRunner().invoke(app, ["status", str(tmp_path)], env={"COLUMNS": "120"})
    assert result.exit_code == 0, result.output
    assert "QC queue" not in result.stdout and "agreement" in result.stdout
    report = json.loads(CliRunner().invoke(app, ["status", str(tmp_path), "--json"]).stdout)
    assert report["qc"] is None and report["agreement"]["verify"]["fleiss_kappa"] is None
