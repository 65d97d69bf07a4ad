"""The run store: stage results per record, counts by reason, judgements, run facts."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy.exc import IntegrityError

from senseforge.data.schema import MCItem, judgement
from senseforge.errors import RunBusy, StoreError
from senseforge.pipelines.outcomes import ok
from senseforge.pipelines.payloads import dumps
from senseforge.pipelines.runlease import WriterLease, lease_holder
from senseforge.pipelines.runstore import (
    HEARTBEAT_STALE_S,
    PAGE_SIZE,
    Beat,
    CallEntry,
    Heartbeat,
    Loose,
    Record,
    RunStore,
    StageResult,
    sqlite_url,
)


class Q(Record):
    q: str


class Asked(Record):
    """A record with a nested model and a field stages fill in later."""

    q: str
    item: MCItem | None = None
    votes: list[bool] | None = None


def test_results_counts_and_order(tmp_path: Path) -> None:
    store = RunStore(sqlite_url(tmp_path / "run.db"))
    store.put(
        "filter",
        [
            StageResult("b", "ok", Q(q="Why?")),
            StageResult("a", "rejected", Q(q="x"), reason="no_question_mark", prompt="p", response="r"),
            StageResult("c", "rejected", Q(q="y"), reason="no_question_mark"),
        ],
    )
    assert [r.record_id for r in store.results("filter", model=Q)] == ["a", "b", "c"]
    assert [r.data for r in store.results("filter", "ok", Q)] == [Q(q="Why?")]
    assert store.counts("filter") == {"ok": 1, "no_question_mark": 2}
    assert store.done_ids("filter") == {"a", "b", "c"}
    assert store.results("filter")[0].response == "r"
    with pytest.raises(IntegrityError):  # a record is stored once per stage
        store.put("filter", [StageResult("a", "ok", Q(q="again"))])
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


def test_a_record_stores_the_fields_set_and_the_engines_beside_them(tmp_path: Path) -> None:
    store = RunStore(sqlite_url(tmp_path / "run.db"))
    call = CallEntry(key="k1", model="scripted/x", tokens_in=3, tokens_out=None)
    asked = Asked(q="Where?").with_(votes=[True, False])
    made = StageResult("a", "ok", asked, calls={"judge": (call,)}, review="lm")
    store.put("judge", [made, StageResult("b", "rejected", Asked(q="?"), reason="short", evidence={"words": 1})])
    assert made.payload == {  # the layout runs stored before typed records have: nothing unset, engine keys beside
        "q": "Where?",
        "votes": [True, False],
        "calls": {"judge": [{"key": "k1", "model": "scripted/x", "tokens_in": 3, "tokens_out": None}]},
        "review": "lm",
    }
    first, second = store.results("judge", model=Asked)
    assert first.data == asked and first.data.model_fields_set == {"q", "votes"}
    assert (first.calls, first.review, first.evidence) == ({"judge": (call,)}, "lm", None)
    assert (second.reason, second.evidence, second.calls) == ("short", {"words": 1}, {})
    # the engine reads its own fields of any recipe's records without their model
    assert [r.calls for r in store.results("judge")] == [{"judge": (call,)}, {}]
    assert isinstance(store.results("judge")[0].data, Loose)


def test_a_payload_stored_before_typed_records_reads_back(tmp_path: Path) -> None:
    """The old layout: the recipe's keys, ``calls`` and a ``review`` that may be null, in one object."""
    store = RunStore(sqlite_url(tmp_path / "run.db"))
    old = {"q": "Why?", "review": None, "calls": {"ask": [{"key": "k", "model": "m", "tokens_in": 1, "tokens_out": 2}]}}
    store.put("ask", [StageResult.from_payload("a", "ok", old, Loose)])
    (read,) = store.results("ask", model=Q)
    assert read.data == Q(q="Why?") and read.review is None and read.calls["ask"][0].tokens_out == 2


def test_a_result_reads_back_as_json_would_read_its_stored_payload(tmp_path: Path) -> None:
    """``put`` returns the payloads it stored; ``results`` and ``as_read`` give the values :func:`json.loads` gives
    for them (floats to the same double, big integers, text in any script, repeated call entries shared)."""
    store = RunStore(sqlite_url(tmp_path / "run.db"))
    odd = {"f": [0.1, 1e-320, 2.2250738585072014e-308, 1.7976931348623157e308, -0.0, 1 / 3], "n": 10**30, "t": "猫 ünï"}
    call = CallEntry(key="k", model="m", tokens_in=1, tokens_out=2)
    made = [StageResult(rid, "ok", Loose(q=rid, odd=odd), calls={"ask": (call, call)}) for rid in ("a", "b")]
    stored = store.put("ask", made)
    assert [json.loads(text) for text in stored] == [r.payload for r in made]
    for result, text in zip(made, stored, strict=True):
        again = result.as_read(Loose, text)
        assert repr(again.data.odd) == repr(json.loads(text)["odd"]) and again.calls == result.calls
    first, second = store.results("ask")
    assert repr(first.data.odd) == repr(json.loads(stored[0])["odd"]) and first.payload == json.loads(stored[0])
    assert first.calls["ask"][0] is second.calls["ask"][1]  # one instance per distinct entry
    assert store.put("ask", []) == []


def test_a_record_passed_on_unchanged_is_kept_as_the_store_would_hand_it_back(tmp_path: Path) -> None:
    """A stage that passes on a record the run store handed it, as it came: ``as_read(unchanged=True)`` keeps the
    record instead of reading its payload again, and gives what reading it gives (data, fields set, calls in stored
    order, review); a record with evidence, or of another model, is read as before."""
    store = RunStore(sqlite_url(tmp_path / "run.db"))
    early = CallEntry(key="k1", model="m", tokens_in=1, tokens_out=2)
    late = CallEntry(key="k2", model="m", tokens_in=3, tokens_out=None)
    asked = Asked(q="Where?", item=None).with_(votes=[True])
    [stored] = store.put("ask", [StageResult("a", "ok", asked, calls={"judge": (early,)})])
    came = StageResult("a", "ok", asked).as_read(Asked, stored)  # what the stage was handed
    passed = StageResult("a", "ok", came.data, calls={"vote": (late,), "judge": (early,)}, review="lm")
    [text] = store.put("vote", [passed])
    read, kept = passed.as_read(Asked, text), passed.as_read(Asked, text, unchanged=True)
    assert kept.data is came.data and read.data is not came.data
    assert (
        (kept.data, kept.data.model_fields_set)
        == (read.data, read.data.model_fields_set)
        == (asked, {"q", "item", "votes"})
    )
    assert list(kept.calls) == list(read.calls) == ["judge", "vote"] and kept.calls == read.calls
    assert (kept.review, kept.evidence, kept.reason) == (read.review, read.evidence, read.reason) == ("lm", None, None)
    assert kept.payload == read.payload == json.loads(text)
    flagged = StageResult("b", "ok", came.data, evidence={"near": (1, 2)})
    [flagged_text] = store.put("vote", [flagged])
    again = flagged.as_read(Asked, flagged_text, unchanged=True)  # evidence reads back as JSON: read, not kept
    assert again.data is not came.data and again.evidence == {"near": [1, 2]}
    assert passed.as_read(Loose, text, unchanged=True).data is not came.data  # another model: read


def test_a_record_that_does_not_fit_the_model_is_refused_in_one_line(tmp_path: Path) -> None:
    store = RunStore(sqlite_url(tmp_path / "run.db"))
    store.put("ask", [StageResult.from_payload("r7", "ok", {"q": "Why?", "colour": "red"}, Loose)])
    with pytest.raises(StoreError, match=r"stage ask, record r7: colour: Extra inputs are not permitted") as caught:
        store.results("ask", model=Q)
    assert "\n" not in str(caught.value)


def test_a_heartbeat_says_which_process_builds_the_run_and_when_it_stopped(db_url: str) -> None:
    store = RunStore(db_url)
    try:
        assert store.last_beat() is None  # a run from before heartbeats
        with Heartbeat(store, every_s=3600.0):
            beat = store.last_beat()
            assert beat is not None and beat.ended is None
            assert (beat.pid, beat.host) == (os.getpid(), socket.gethostname())
            assert beat.alive(now=beat.ts + 1.0)
            assert not beat.alive(now=beat.ts + HEARTBEAT_STALE_S + 1.0)  # stale: its process stopped beating
        ended = store.last_beat()
        assert ended is not None and ended.ended is not None and not ended.alive(now=ended.ts)
    finally:
        store.close()


def test_a_fresh_beat_of_a_process_gone_from_this_host_is_not_alive(tmp_path: Path) -> None:
    gone = os.getpid()
    while True:  # a pid no process has (checked, not guessed)
        gone += 1
        try:
            os.kill(gone, 0)
        except ProcessLookupError:
            break
        except PermissionError:
            continue
    assert not Beat(ts=100.0, pid=gone, host=socket.gethostname()).alive(now=101.0)
    assert Beat(ts=100.0, pid=gone, host="another-host").alive(now=101.0)  # elsewhere only its age tells
    store = RunStore(sqlite_url(tmp_path / "run.db"))
    try:
        store.set_meta({"heartbeat": "not json"})
        assert store.last_beat() is None
    finally:
        store.close()


# -- the writer lease ------------------------------------------------------------------------------


class Clock:
    """A time source the test moves."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_a_second_writer_is_refused_in_one_line_naming_the_holder_until_the_first_lets_go(db_url: str) -> None:
    store = RunStore(db_url)
    clock = Clock()
    try:
        first = WriterLease(store, every_s=3600.0, clock=clock).acquire()
        holder = lease_holder(store)
        assert holder is not None and (holder.pid, holder.host) == (os.getpid(), socket.gethostname())
        clock.now += 30.0  # within the TTL, and this process is alive: refused
        with pytest.raises(RunBusy) as refused:
            WriterLease(store, every_s=3600.0, clock=clock).acquire()
        line = str(refused.value)
        assert "\n" not in line and f"pid {os.getpid()} on {socket.gethostname()} since 1970-01-12 13:46:40 UTC" in line
        assert refused.value.exit_code == 75
        assert lease_holder(store) == holder  # the refused one changed nothing
        first.release()
        assert lease_holder(store) is None
        with WriterLease(store, every_s=3600.0, clock=clock) as second:
            assert lease_holder(store) is not None and lease_holder(store).token == second.token  # type: ignore[union-attr]
        assert lease_holder(store) is None
    finally:
        store.close()


def test_a_lapsed_lease_is_taken_over_and_its_old_holder_cannot_renew_or_release_it(db_url: str) -> None:
    store = RunStore(db_url)
    clock = Clock()
    try:
        old = WriterLease(store, ttl_s=60.0, every_s=3600.0, clock=clock).acquire()
        clock.now += 59.0
        assert old.renew()  # renewed at +59: alive until +119
        clock.now += 60.0
        with pytest.raises(RunBusy):
            WriterLease(store, ttl_s=60.0, every_s=3600.0, clock=clock).acquire()
        clock.now += 1.0  # +120: not renewed for 61 s
        new = WriterLease(store, ttl_s=60.0, every_s=3600.0, clock=clock).acquire()
        assert not old.renew()  # taken over: the stalled holder learns it
        old.release()  # and lets go of nothing that is not its own
        holder = lease_holder(store)
        assert holder is not None and holder.token == new.token and holder.since == clock.now
        new.release()
    finally:
        store.close()


def test_a_holder_on_another_host_is_trusted_until_its_lease_lapses(tmp_path: Path) -> None:
    from senseforge.pipelines.tables import run_lease

    store = RunStore(sqlite_url(tmp_path / "run.db"))
    try:
        with store.engine.begin() as conn:
            conn.execute(
                run_lease.insert().values(name="writer", token="t", pid=1, host="elsewhere", since=0.0, renewed=100.0)
            )
        with pytest.raises(RunBusy, match="pid 1 on elsewhere since 1970-01-01 00:00:00 UTC"):
            WriterLease(store, ttl_s=60.0, every_s=3600.0, clock=Clock(160.0)).acquire()
        WriterLease(store, ttl_s=60.0, every_s=3600.0, clock=Clock(160.5)).acquire().release()
    finally:
        store.close()


HOLD = """
import sys
from senseforge.pipelines.outcomes import ok
from senseforge.pipelines.payloads import dumps
from senseforge.pipelines.runlease import WriterLease
from senseforge.pipelines.runstore import RunStore
store = RunStore(sys.argv[1])
WriterLease(store, every_s=3600.0).acquire()
print("held", flush=True)
sys.stdin.read()  # until the test kills it
"""


def test_the_lease_of_a_killed_process_on_this_host_is_taken_over_at_once(db_url: str) -> None:
    """A writer killed outright (kill -9) leaves its row; the next writer sees its process gone and takes over,
    without waiting for the TTL. The kill follows a handshake (the holder says it holds), not a sleep."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, db_url], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        store = RunStore(db_url)
        try:
            with pytest.raises(RunBusy, match=f"pid {holder.pid} on"):
                WriterLease(store, every_s=3600.0).acquire()
            holder.kill()
            holder.wait()
            taken = WriterLease(store, ttl_s=3600.0, every_s=3600.0).acquire()  # TTL far off: the dead pid decides
            found = lease_holder(store)
            assert found is not None and found.pid == os.getpid() and found.token == taken.token
            taken.release()
        finally:
            store.close()
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()


def test_values_are_picked_out_of_the_payloads_by_the_database(db_url: str) -> None:
    store = RunStore(db_url)
    try:
        store.put(
            "ask",
            [
                StageResult.from_payload("r2", "rejected", {"q": "Why?", "n": 2}, Loose, reason="bad"),
                StageResult.from_payload("r1", "ok", {"q": "Wie?", "flag": True, "more": {"a": [1, "é"]}}, Loose),
            ],
        )
        assert store.values("ask", ("q", "flag", "more")) == [
            ("r1", "ok", {"q": "Wie?", "flag": True, "more": {"a": [1, "é"]}}),
            ("r2", "rejected", {"q": "Why?", "flag": None, "more": None}),
        ]
        assert store.values("ask", ("n",), "rejected") == [("r2", "rejected", {"n": 2})]
        with pytest.raises(ValueError, match="not a payload key"):
            store.values("ask", ("q' OR 1=1 --",))
    finally:
        store.close()


def test_a_new_sqlite_run_store_has_large_pages_and_an_old_one_keeps_its_own(tmp_path: Path) -> None:
    def page_size(path: Path) -> int:
        with sqlite3.connect(path) as db:
            return int(db.execute("PRAGMA page_size").fetchone()[0])

    RunStore(sqlite_url(tmp_path / "new.db")).close()
    assert page_size(tmp_path / "new.db") == PAGE_SIZE
    with sqlite3.connect(tmp_path / "old.db") as db:  # a run an older version made, with SQLite's pages
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("CREATE TABLE kept (x TEXT)")
    store = RunStore(sqlite_url(tmp_path / "old.db"))
    store.put("s", [StageResult("r1", "ok", Loose())])
    store.close()
    assert page_size(tmp_path / "old.db") == 4096


def test_a_record_passed_on_as_it_came_is_stored_as_the_payload_it_was_read_from(tmp_path: Path) -> None:
    store = RunStore(sqlite_url(tmp_path / "run.db"))
    store.put("ask", [StageResult.from_payload("r1", "ok", {"q": "Wie?", "n": 1}, Loose)])
    (came,) = store.results("ask", "ok")
    assert came.stored is not None
    passed, changed, reviewed = ok(came), ok(came, Loose(q="Wer?", n=1)), ok(came, review="lm")
    assert passed.stored == came.stored and changed.stored is None and reviewed.stored is None
    # the run store writes the payload held, so a payload that is not what the record dumps to shows it was used
    marked = ok(StageResult("r2", "ok", Loose(q="x")).keep_stored('{"q":"held"}'))
    assert store.put("check", [passed, marked]) == [came.stored, '{"q":"held"}']
    assert store.put("change", [changed]) == [dumps(changed._stored())]
    store.close()
