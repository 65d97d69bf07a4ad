"""The run store: stage results per record, counts by reason, judgements, run facts."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy.exc import IntegrityError

from senseforge.data.schema import judgement
from senseforge.pipelines.runstore import RunStore, StageResult, sqlite_url


def test_results_counts_and_order(tmp_path: Path) -> None:
    store = RunStore(sqlite_url(tmp_path / "run.db"))
    store.put(
        "filter",
        [
            StageResult("b", "ok", {"q": "Why?"}),
            StageResult("a", "rejected", {"q": "x"}, reason="no_question_mark", prompt="p", response="r"),
            StageResult("c", "rejected", {"q": "y"}, reason="no_question_mark"),
        ],
    )
    assert [r.record_id for r in store.results("filter")] == ["a", "b", "c"]
    assert [r.payload for r in store.results("filter", "ok")] == [{"q": "Why?"}]
    assert store.counts("filter") == {"ok": 1, "no_question_mark": 2}
    assert store.done_ids("filter") == {"a", "b", "c"}
    assert store.results("filter")[0].response == "r"
    with pytest.raises(IntegrityError):  # a record is stored once per stage
        store.put("filter", [StageResult("a", "ok", {})])
    store.close()
    reopened = RunStore(sqlite_url(tmp_path / "run.db"))
    assert reopened.counts("filter") == {"ok": 1, "no_question_mark": 2}


def test_judgements_replace_per_annotator_and_keep_order(tmp_path: Path) -> None:
    store = RunStore(sqlite_url(tmp_path / "run.db"))
    ana = judgement(item_id="i1", annotator="ana", task="verify", accept=True)
    ben = judgement(item_id="i1", annotator="ben", task="verify", accept=False)
    assert store.add_judgements([ana, ben], "human") == 2
    assert store.add_judgements([ana], "human") == 0
    assert store.add_judgements([ana.model_copy(update={"accept": False})], "human") == 1
    stored = store.judgements_for("verify")["i1"]
    assert [(s.judgement.annotator, s.judgement.accept, s.source) for s in stored] == [
        ("ana", False, "human"),
        ("ben", False, "human"),
    ]
    assert store.judgements_for("answer") == {}


def test_meta_upserts(tmp_path: Path) -> None:
    store = RunStore(sqlite_url(tmp_path / "run.db"))
    assert store.meta("state") is None
    store.set_meta({"state": "running"})
    store.set_meta({"state": "done"})
    assert store.meta("state") == "done"
