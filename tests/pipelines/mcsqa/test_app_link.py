"""The recipe's review queue is the annotation app's verify queue; its judgements finish the run."""

from __future__ import annotations

from pathlib import Path

from senseforge.annotate.store import AnnotationStore
from senseforge.data.schema import judgement
from senseforge.pipelines.mcsqa import MCSQA, McsqaConfig
from senseforge.pipelines.runner import build
from senseforge.pipelines.runstore import sqlite_url
from senseforge.store.db import Store

from .conftest import read_jsonl


def test_paused_run_judged_in_the_app_resumes_to_the_unanimous_items(demo_kb: Path, tmp_path: Path) -> None:
    config = McsqaConfig(lang="en", n=12, kb=str(demo_kb), model="scripted/mcsqa-author")
    run = tmp_path / "run"
    paused = build(MCSQA, config, run, store=Store())
    assert paused.state == "awaiting_review"

    app = AnnotationStore(sqlite_url(run / "run.db"))
    queued = [item for item, k, group in app.items("verify")]
    assert len(queued) == paused.awaiting and all(item.answer for item in queued)
    rejected_by = {item.id: ("ana" if i % 3 == 0 else "ben" if i % 3 == 1 else None) for i, item in enumerate(queued)}
    app.invite("ana")
    app.invite("ben")
    app.invite("cy")  # a third person finds nothing left once ana and ben are done (k = 2)
    for person in ("ana", "ben"):
        while (assignment := app.next_assignment(person, "verify")) is not None:
            accept = rejected_by[assignment.input.id] != person
            verdict = judgement(item_id=assignment.input.id, annotator=person, task="verify", accept=accept)
            assert app.submit(assignment.id, person, verdict)
    assert app.next_assignment("cy", "verify") is None
    app.close()

    done = build(MCSQA, config, run, store=Store(), resume=True)
    assert done.state == "done"
    items = [row for split in ("train", "validation", "test") for row in read_jsonl(run / "items" / f"{split}.jsonl")]
    hard = {str(row["id"]) for row in items if row["difficulty"] == "hard"}
    assert hard == {item_id for item_id, who in rejected_by.items() if who is None}
