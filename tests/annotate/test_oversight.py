"""The oversight part of the annotation store: the QC queue reads the task types that declare checking and revising."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from senseforge.annotate.store import AnnotationStore
from senseforge.annotate.tasktypes import TASK_TYPES
from senseforge.data.schema import Choice, Draft, DraftItem, judgement
from senseforge.pipelines.runstore import sqlite_url
from senseforge.pipelines.taskqueue import QueuedTask


def draft_item(item: str) -> DraftItem:
    draft = Draft(
        question="Where would you leave a wet umbrella?",
        choices=[Choice(label="A", text="by the door"), Choice(label="B", text="in bed")],
        answer="A",
        distractor="B",
    )
    return DraftItem(
        id=f"{item}@1", item_id=item, lang="en", category="objects", concept="umbrella", creator="cy", draft=draft
    )


@pytest.fixture
def store(tmp_path: Path) -> Iterator[AnnotationStore]:
    """Two drafts of cy's in QC: h1 sent back by ana and revised by cy, h2 not checked yet."""
    made = AnnotationStore(sqlite_url(tmp_path / "run.db"), clock=lambda: 1000.0)
    made.queue([QueuedTask("qc", draft_item(f"h{n}"), creator="cy") for n in (1, 2)])
    made.queue([QueuedTask("revise", draft_item("h1"), eligible=("cy",))])

    def judge(who: str, task: str, **body: Any) -> None:
        lease = made.next_assignment(who, task)
        assert lease is not None
        assert made.submit(lease.id, who, judgement(item_id=lease.item_id, annotator=who, task=task, **body))

    judge("ana", "qc", verdict="needs_revision", comment="say which door")
    judge("cy", "revise", draft=draft_item("h1").draft.model_dump())
    try:
        yield made
    finally:
        made.close()


def states(store: AnnotationStore) -> dict[str, str]:
    return {row["item"]: row["state"] for row in store.qc_queue()["items"]}


def test_the_qc_queue_reads_checks_and_revisions_by_the_declared_properties(
    store: AnnotationStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert states(store) == {"h1": "revised", "h2": "awaiting_qc"}
    monkeypatch.setattr(TASK_TYPES["revise"], "revises_drafts", False)  # revise judgements no longer revise
    assert states(store) == {"h1": "needs_revision", "h2": "awaiting_qc"}
    monkeypatch.setattr(TASK_TYPES["qc"], "checks_drafts", False)  # and no task type checks drafts
    assert store.qc_queue() == {
        "items": [],
        "counts": {"awaiting_qc": 0, "needs_revision": 0, "revised": 0, "complete": 0},
    }
