"""Taking a judgement back (the store's undo): allowed while nothing has acted on it, refused once the run has."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from senseforge.annotate.store import AnnotationStore, Closed
from senseforge.annotate.tasktypes import task_type
from senseforge.data.schema import Choice, Draft, DraftItem, QCEvent
from senseforge.pipelines.human_gen.config import HumanGenConfig
from senseforge.pipelines.human_gen.recipe import HUMAN_GEN
from senseforge.pipelines.runner import build
from senseforge.pipelines.runstore import sqlite_url
from senseforge.pipelines.taskqueue import PEOPLE_STAGES, QueuedTask


def _draft_item(rnd: int) -> DraftItem:
    choices = [Choice(label=label, text=f"option {label}") for label in "ABCDE"]
    return DraftItem(
        id=f"w1@{rnd}", item_id="w1", lang="en", category="weather", concept="umbrella", creator="ana",
        draft=Draft(question="Which umbrella?", choices=choices, answer="A", distractor="B"),
        history=[QCEvent(status="submitted", by="ana", round=0)],
    )  # fmt: skip


def test_a_verdict_the_run_went_on_with_or_an_admin_ruled_on_stays(tmp_path: Path) -> None:
    store = AnnotationStore(sqlite_url(tmp_path / "run.db"))
    store.queue([QueuedTask("qc", _draft_item(1), creator="ana")])
    lease = store.next_assignment("bo", "qc")
    assert lease is not None
    verdict = task_type("qc").parse(lease.input, {"verdict": "needs_revision", "comment": "two right answers"})
    assert store.submit(lease.id, "bo", verdict)
    store.queue([QueuedTask("revise", _draft_item(1), eligible=("ana",))])  # the next resume sent it back
    with pytest.raises(Closed, match=r"the run has gone on with it \(a revise task of w1@1 is queued\)"):
        store.undo(lease.id, "bo")
    assert [j.annotator for j in store.judgements("qc")["w1@1"]] == ["bo"]
    store.queue([QueuedTask("qc", _draft_item(2), creator="ana")])
    second = store.next_assignment("bo", "qc")
    assert second is not None
    assert store.submit(second.id, "bo", task_type("qc").parse(second.input, {"verdict": "complete"}))
    store.adjudicate("boss", "qc", "w1@2", {"verdict": "complete"})
    with pytest.raises(Closed, match="an admin has ruled on it"):
        store.undo(second.id, "bo")
    store.close()


def test_a_build_names_the_stages_that_decide_and_a_decided_creation_cannot_be_undone(tmp_path: Path) -> None:
    table = tmp_path / "concepts.csv"
    table.write_text("category,concept\nculinary,rendang\n", encoding="utf-8")
    config = HumanGenConfig(concepts=str(table), assignment="one", pool=("a", "b"))
    run_dir = tmp_path / "run"
    build(HUMAN_GEN, config, run_dir)
    store = AnnotationStore(sqlite_url(run_dir / "run.db"))
    stages = json.loads(store.runs.meta(PEOPLE_STAGES) or "{}")
    assert stages == {"answer": ["answer"], "create": ["create"], "qc": ["qc"], "revise": ["qc"]}
    lease = store.next_assignment("a", "create")
    assert lease is not None
    fields = {
        "question": "Di mana orang biasanya makan rendang?",
        "options": ["rumah", "kantor", "pasar malam", "sekolah", "sawah"],
        "answer": "A",
        "distractor": "C",
    }
    assert store.submit(lease.id, "a", task_type("create").parse(lease.input, fields))
    reopened = store.undo(lease.id, "a")  # nothing has read it yet
    assert reopened.id == lease.id and store.judgements("create") == {}
    assert store.next_assignment("a", "create") == reopened
    assert store.submit(lease.id, "a", task_type("create").parse(lease.input, fields))
    store.close()
    build(HUMAN_GEN, config, run_dir, resume=True)  # the create stage decides the slot
    store = AnnotationStore(sqlite_url(run_dir / "run.db"))
    with pytest.raises(Closed, match="stage create has decided its record"):
        store.undo(lease.id, "a")
    store.close()
