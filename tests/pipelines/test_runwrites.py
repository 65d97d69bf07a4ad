"""The run store's shared writes: a batch of judgements by the one rule, and rows inserted a chunk at a time."""

from __future__ import annotations

from pathlib import Path

from senseforge.data.schema import judgement
from senseforge.pipelines.runstore import Record, RunStore, StageResult, sqlite_url
from senseforge.pipelines.runwrites import CHUNK, put_judgements


class Q(Record):
    q: str


def test_a_batch_follows_the_rule_of_one_judgement_per_item_annotator_and_task(tmp_path: Path) -> None:
    store = RunStore(sqlite_url(tmp_path / "run.db"))
    ana = judgement(item_id="i1", annotator="ana", task="verify", accept=True)
    ana_no = ana.model_copy(update={"accept": False})
    ben = judgement(item_id="i1", annotator="ben", task="verify", accept=False)
    with store.engine.begin() as conn:
        assert put_judgements(conn, [(ana, "lm"), (ben, "lm"), (ana_no, "lm")], 1.0) == 3  # the later repeat wins
    with store.engine.begin() as conn:
        assert put_judgements(conn, [(ana_no, "lm"), (ben, "human")], 2.0) == 1  # same body, another source
    stored = store.judgements_for("verify")["i1"]
    assert [(s.judgement.annotator, s.judgement.accept, s.source) for s in stored] == [
        ("ana", False, "lm"),
        ("ben", False, "human"),
    ]


def test_a_batch_reads_its_records_judgements_and_their_rounds_only(tmp_path: Path) -> None:
    store = RunStore(sqlite_url(tmp_path / "run.db"))
    items = ["r1", "r1@1", "r10", "r10@0", "r1x", "r2", "r1@2"]
    store.add_judgements([judgement(item_id=i, annotator="ana", task="verify", accept=True) for i in items], "human")
    store.add_judgements([judgement(item_id="r1", annotator="ben", task="answer", choice="A")], "human")
    got = store.judgements_of_records(["verify"], ["r1", "r2", "absent"])
    assert {record: [s.judgement.item_id for s in found] for record, found in got.items()} == {
        "r1": ["r1", "r1@1", "r1@2"],  # in the order stored, a sibling id sharing the prefix left out
        "r2": ["r2"],
    }
    assert store.judgements_of_records(["verify", "answer"], [f"x{i}" for i in range(CHUNK + 5)] + ["r10"])["r10"]
    assert store.judgements_of_records([], ["r1"]) == {}


def test_more_rows_than_a_chunk_are_stored_in_order(tmp_path: Path) -> None:
    store = RunStore(sqlite_url(tmp_path / "run.db"))
    ids = [f"{i:04d}" for i in range(2 * CHUNK + 7)]
    store.put("filter", [StageResult(i, "ok", Q(q=f"q{i}?"), prompt=None, response="r") for i in ids])
    read = store.results("filter", model=Q)
    assert [r.record_id for r in read] == ids and read[-1].data == Q(q=f"q{ids[-1]}?") and read[0].response == "r"
