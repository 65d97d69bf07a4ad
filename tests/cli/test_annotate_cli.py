"""``senseforge annotate``: invite, status and serve, in-process with Typer's test runner."""

from __future__ import annotations

import importlib.util
import json
import logging
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from senseforge.annotate.store import AnnotationStore
from senseforge.cli._common import run_store_url
from senseforge.cli.annotate import _HideTokens, app
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
    from senseforge.pipelines.mcsqa import MCSQA, McsqaConfig
    from senseforge.pipelines.runner import build
    from senseforge.store.db import Store

    import_dump("demo", tmp_path / "kb")
    author = "scripted/mcsqa-author"
    config = McsqaConfig(
        lang="en", n=30, kb=str(tmp_path / "kb"), model=author, reviewers=(author,), lm_review_as_hard=True
    )
    run = tmp_path / "run"
    build(MCSQA, config, run, store=Store(f"sqlite:///{tmp_path / 'cache.db'}"))
    runner = CliRunner()
    first = runner.invoke(app, ["baseline", str(run), "--n", "2", "--k", "1"])
    assert first.exit_code == 0, first.output
    assert "queued for blind answering" in first.output
    assert "warning: --k 1 asks 1 different people to answer each item, but 0 are invited" in first.output
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
    assert "warning" not in second.output  # one invited, one answer wanted per item
    assert second.output.count("1.000") >= 3  # every split answered right by the one annotator
    written = json.loads((run / "human_baseline.json").read_text())  # kept beside the run for senseforge report
    assert all(row["human_acc"] == 1.0 for row in written["splits"].values())


def test_invite_warns_while_too_few_people_could_complete_what_is_queued(tmp_path: Path) -> None:
    store = AnnotationStore(sqlite_url(tmp_path / "run.db"))
    store.add_tasks("verify", [item(1), item(2)], k=3, group="g")
    store.close()
    runner = CliRunner()
    first = runner.invoke(app, ["invite", "ana", str(tmp_path)])
    assert first.exit_code == 0, first.output
    assert "warning: verify: 2 open task(s) need 3 different people but only 1 of the 1 invited" in first.output
    assert "senseforge annotate invite NAME RUN_DIR" in first.output
    assert (
        "need 3 different people but only 2 of the 2 invited"
        in runner.invoke(app, ["invite", "bo", str(tmp_path)]).output
    )
    last = runner.invoke(app, ["invite", "cy", str(tmp_path)])
    assert last.exit_code == 0 and "warning" not in last.output


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


# --- annotate export / import: Label Studio and Argilla ------------------------------------


def _verify_store(tmp_path: Path) -> None:
    """Three verify tasks, k = 2, and a gold one; q1 already has both its judgements from the app."""
    store = AnnotationStore(sqlite_url(tmp_path / "run.db"))
    try:
        store.add_tasks("verify", [item(1), item(2), item(3)], k=2, group="g")
        for name in ("ana", "ben"):
            store.invite(name)
            lease = store.next_assignment(name, "verify")
            assert lease is not None and lease.item_id == "q1"
            store.submit(lease.id, name, judgement(item_id="q1", annotator=name, task="verify", accept=True))
        store.add_gold("verify", [(item(9), {"accept": "yes"})])  # gold stays in the app: never exported
    finally:
        store.close()


def _stored(tmp_path: Path) -> dict[str, list[tuple[str, Any]]]:
    store = AnnotationStore(sqlite_url(tmp_path / "run.db"))
    try:
        return {
            item_id: [(j.annotator, getattr(j, "accept", None)) for j in made]
            for item_id, made in store.judgements("verify").items()
        }
    finally:
        store.close()


def test_export_then_import_label_studio_stores_each_judgement_once(tmp_path: Path) -> None:
    _verify_store(tmp_path)
    runner = CliRunner()
    out_dir = tmp_path / "ls"
    exported = runner.invoke(app, ["export", str(tmp_path), "--format", "label-studio", "--type", "verify",
                                   "--out", str(out_dir)])  # fmt: skip
    assert exported.exit_code == 0, exported.output
    assert "2 open verify task(s) of 3" in exported.output and "annotate import" in exported.output
    tasks = json.loads((out_dir / "tasks.json").read_text(encoding="utf-8"))
    assert [t["data"]["senseforge"]["input_id"] for t in tasks] == ["q2", "q3"]  # q1 has its k judgements
    assert (out_dir / "label_config.xml").read_text(encoding="utf-8").startswith("<View>")
    every = runner.invoke(app, ["export", str(tmp_path), "--format", "label-studio", "--type", "verify",
                                "--out", str(tmp_path / "all"), "--all"])  # fmt: skip
    assert every.exit_code == 0 and "3 every verify task(s) of 3" in every.output

    def choice(value: str) -> list[dict[str, Any]]:
        return [{"from_name": "accept", "to_name": "item_question", "type": "choices", "value": {"choices": [value]}}]

    tasks[0]["annotations"] = [
        {"id": 1, "completed_by": {"id": 4, "email": "dee@example.org"}, "result": choice("yes")},
        {"id": 2, "completed_by": 5, "result": choice("no")},
    ]
    tasks[1]["annotations"] = [
        {"id": 3, "completed_by": 5, "result": choice("maybe")},  # not yes or no
        {"id": 4, "completed_by": 6, "result": choice("yes"), "was_cancelled": True},
    ]
    export_file = tmp_path / "project-1.json"
    export_file.write_text(json.dumps(tasks), encoding="utf-8")
    command = ["import", str(tmp_path), "--format", "label-studio", "--type", "verify", str(export_file)]
    first = runner.invoke(app, command)
    assert first.exit_code == 0, first.output
    assert "2 verify judgement(s) stored (2 new or changed, 0 already there); 1 skipped; 1 rejected" in first.stdout
    assert f"rejected: {export_file}: task 2, annotation 1 (id 3) (item q3) by ls:5: accept:" in first.output
    again = runner.invoke(app, command)
    assert again.exit_code == 0, again.output
    assert "2 verify judgement(s) stored (0 new or changed, 2 already there)" in again.stdout
    assert _stored(tmp_path)["q2"] == [("ls:dee@example.org", True), ("ls:5", False)]
    assert sum(len(v) for v in _stored(tmp_path).values()) == 4  # q1's two from the app, q2's two: no doubles

    named = tmp_path / "names.json"
    named.write_text(json.dumps({"5": "ben"}), encoding="utf-8")
    mapped = runner.invoke(app, [*command, "--annotator-map", str(named), "--annotator-prefix", "x:"])
    assert mapped.exit_code == 0, mapped.output
    assert ("ben", False) in _stored(tmp_path)["q2"] and ("x:dee@example.org", True) in _stored(tmp_path)["q2"]
    reopened = runner.invoke(app, ["export", str(tmp_path), "--format", "label-studio", "--type", "verify",
                                   "--out", str(tmp_path / "again")])  # fmt: skip
    assert "1 open verify task(s) of 3" in reopened.output  # q2 has its two now, q3 none
    store = AnnotationStore(sqlite_url(tmp_path / "run.db"))
    try:  # the app agrees: q2's slots are taken by the imported judgements, and ben is not offered q2 again
        assert store.progress()["tasks"]["verify"]["complete"] == 2
        assert store.progress()["annotators"]["ben"]["verify"]["done"] >= 1
        assert (lease := store.next_assignment("ben", "verify")) is None or lease.input.id != "q2"
    finally:
        store.close()


def test_export_then_import_argilla(tmp_path: Path) -> None:
    _verify_store(tmp_path)
    runner = CliRunner()
    out_dir = tmp_path / "ag"
    exported = runner.invoke(app, ["export", str(tmp_path), "--format", "argilla", "--type", "verify",
                                   "--out", str(out_dir)])  # fmt: skip
    assert exported.exit_code == 0, exported.output
    settings = json.loads((out_dir / "settings.json").read_text(encoding="utf-8"))
    assert settings["distribution"]["min_submitted"] == 2
    records = json.loads((out_dir / "records.json").read_text(encoding="utf-8"))
    users = ["00000000-0000-4000-8000-000000000001", "00000000-0000-4000-8000-000000000002"]
    flat = [  # records.to_list(flatten=True): fields and metadata on top, responses per question
        {"id": r["id"], **r["fields"], **r["metadata"], "status": "pending", "_server_id": None, "vectors": {},
         "accept.responses": ["yes", "no"], "accept.responses.users": users,
         "accept.responses.status": ["submitted", "discarded"]}
        for r in records
    ]  # fmt: skip
    export_file = tmp_path / "records-export.json"
    export_file.write_text(json.dumps(flat), encoding="utf-8")
    command = ["import", str(tmp_path), "--format", "argilla", "--type", "verify", str(export_file)]
    for _ in range(2):
        result = runner.invoke(app, command)
        assert result.exit_code == 0, result.output
        assert "2 verify judgement(s) stored" in result.stdout and "2 skipped; 0 rejected" in result.stdout
    stored = _stored(tmp_path)
    assert stored["q2"] == stored["q3"] == [(f"argilla:{users[0]}", True)]


def test_export_check_validates_with_the_tools_and_names_the_extra_without_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from senseforge.errors import MissingDependencyError

    _verify_store(tmp_path)
    base = ["export", str(tmp_path), "--type", "verify", "--out", str(tmp_path / "out"), "--check", "--format"]
    runner = CliRunner()
    for fmt, package in (("label-studio", "label_studio_sdk"), ("argilla", "argilla")):
        if importlib.util.find_spec(package) is not None:
            checked = runner.invoke(app, [*base, fmt])
            assert checked.exit_code == 0, checked.output
    monkeypatch.setitem(sys.modules, "label_studio_sdk.label_interface", None)
    monkeypatch.setitem(sys.modules, "argilla", None)
    for fmt in ("label-studio", "argilla"):
        result = runner.invoke(app, [*base, fmt])
        assert isinstance(result.exception, MissingDependencyError), result.output
        assert "senseforge[interop]" in str(result.exception)
    unknown = runner.invoke(app, ["export", str(tmp_path), "--format", "argilla", "--type", "vote", "--out", "x"])
    assert isinstance(unknown.exception, ConfigError) and "verify" in str(unknown.exception)


def test_gold_from_a_dataset_sets_the_rate_and_the_bar_and_status_shows_accuracy(tmp_path: Path) -> None:
    gold_file = tmp_path / "gold.jsonl"
    gold_file.write_text(
        "".join(json.dumps(item(90 + n).model_dump(mode="json")) + "\n" for n in range(2)), encoding="utf-8"
    )
    store = AnnotationStore(sqlite_url(tmp_path / "run.db"))
    try:
        store.add_tasks("answer", [item(n) for n in range(1, 5)], k=1, group="g")
        store.invite("ben")
    finally:
        store.close()
    command = ["gold", str(tmp_path), "--type", "answer", str(gold_file), "--rate", "0.5", "--min-accuracy", "0.5"]
    added = CliRunner().invoke(app, [*command, "--min-gold", "1"])
    assert added.exit_code == 0, added.output
    assert "2 gold answer item(s) added; served at a rate of 0.50" in added.stdout
    again = CliRunner().invoke(app, command)
    assert "0 gold answer item(s) added" in again.stdout and "on 1+ gold items" in again.stdout  # the bar stays
    store = AnnotationStore(sqlite_url(tmp_path / "run.db"))
    try:
        for _ in range(2):  # a real item, then a gold one, answered wrong
            lease = store.next_assignment("ben", "answer")
            assert lease is not None
            wrong = "B" if lease.input.answer == "A" else "A"
            made = judgement(item_id=lease.input.id, annotator="ben", task="answer", choice=wrong, certain=True)
            store.submit(lease.id, "ben", made)
        assert store.next_assignment("ben", "answer") is None  # below the bar
    finally:
        store.close()
    shown = CliRunner().invoke(app, ["status", str(tmp_path)], env={"COLUMNS": "160"})
    assert shown.exit_code == 0 and "gold items" in shown.stdout and "no: below the bar" in shown.stdout
    as_json = json.loads(CliRunner().invoke(app, ["status", str(tmp_path), "--json"]).stdout)
    assert as_json["gold"]["ben"]["answer"] == {"gold": 1, "correct": 0, "accuracy": 0.0, "excluded": True}
    refused = CliRunner().invoke(app, ["gold", str(tmp_path), "--type", "create", str(gold_file)])
    assert refused.exit_code != 0


def test_every_task_type_exports_checked_and_the_type_help_lists_them(tmp_path: Path) -> None:
    from senseforge.annotate.tasktypes import TASK_TYPES
    from senseforge.data.crow_items import AnnotationItem, KnowledgeCheckItem, RewriteCheckItem, RewriteItem
    from senseforge.data.schema import KnowledgeTriple, OpenAnswer

    triple = KnowledgeTriple(head="lid", relation="UsedFor", tail="keeping heat in")
    pair = {"id": "s1", "task": "safety", "lang": "en", "context_name": "scenario", "context": "Soup boils over",
            "target_name": "action", "target": "turn down the heat", "label": "safe"}  # fmt: skip
    inputs = {
        "open-judge": OpenAnswer(id="q1::m", item_id="q1", model="m", lang="en", question="Q?", gold="river",
                                 answer="a stream"),
        "cka": AnnotationItem(**pair),
        "ckv": KnowledgeCheckItem(**pair, triple=triple),
        "wsg": RewriteItem(**pair, flipped="unsafe", triples=[triple]),
        "wsv": RewriteCheckItem(**pair, rewrite="turn up the heat", flipped="unsafe", violates=[triple]),
    }  # fmt: skip
    store = AnnotationStore(sqlite_url(tmp_path / "run.db"))
    try:
        for name, given in inputs.items():
            store.add_tasks(name, [given], k=3, group="g")
    finally:
        store.close()
    runner = CliRunner()
    help_text = " ".join(runner.invoke(app, ["export", "--help"], env={"COLUMNS": "200"}).output.split())
    assert all(name in help_text for name in TASK_TYPES)
    formats = [f for f, package in (("label-studio", "label_studio_sdk"), ("argilla", "argilla"))
               if importlib.util.find_spec(package) is not None]  # fmt: skip
    for name in inputs:
        for fmt in formats or ["label-studio"]:
            out_dir = tmp_path / "out" / fmt / name
            command = ["export", str(tmp_path), "--format", fmt, "--type", name, "--out", str(out_dir)]
            result = runner.invoke(app, [*command, *(["--check"] if formats else [])])
            assert result.exit_code == 0, result.output
            assert f"1 open {name} task(s) of 1" in result.output


def test_serve_follow_is_opt_in_says_it_can_spend_money_and_needs_a_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import uvicorn

    from senseforge.cli.annotate import _run_state
    from senseforge.pipelines.human_gen.config import HumanGenConfig
    from senseforge.pipelines.human_gen.recipe import HUMAN_GEN
    from senseforge.pipelines.runner import build

    shown = CliRunner().invoke(app, ["serve", "--help"], env={"COLUMNS": "200"})
    assert "--follow" in shown.output and "API money" in " ".join(shown.output.split())
    started: list[Any] = []
    monkeypatch.setattr(uvicorn.Server, "run", lambda self, sockets=None: started.append(self.config))
    nothing = CliRunner().invoke(app, ["serve", str(tmp_path), "--follow"])
    assert nothing.exit_code != 0 and "no run to follow here" in str(nothing.exception)
    table = tmp_path / "concepts.csv"
    table.write_text("category,concept\nculinary,rendang\n", encoding="utf-8")
    run = tmp_path / "run"
    build(HUMAN_GEN, HumanGenConfig(concepts=str(table), pool=("ana", "bo")), run)
    result = CliRunner().invoke(app, ["serve", str(run), "--follow", "--settle", "3"])
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    command = f"senseforge build human-gen --out {run.resolve()} --resume"
    assert f"following: the run is resumed by itself 3 s after judgements let a stage decide (`{command}`" in said
    assert len(started) == 1
    state = _run_state(run, None)
    assert state is not None and state()["state"] == "awaiting_review"
    assert _run_state(tmp_path, None) is None  # a task queue with no run folder: the page shows the store's word
