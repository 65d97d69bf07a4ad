"""How the runner schedules batches through a segment of stages: one at a time, or streamed."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from senseforge.pipelines.calls import AWAITING, PENDING
from senseforge.pipelines.flow import run_stages
from senseforge.pipelines.mcsqa import MCSQA, McsqaConfig
from senseforge.pipelines.outcomes import Outcome, RunIncomplete, StageOutput, ok, rejected
from senseforge.pipelines.progress import StageProgress
from senseforge.pipelines.runner import segments, stream_width
from senseforge.pipelines.runstore import Record, RunStore, StageResult, sqlite_url
from senseforge.pipelines.stage import InOrder, StageContext

WAIT_S = 60.0
"""How long a stage here waits for an event that the schedule under test must cause (never reached when it does)."""


class Row(Record):
    """A test record: its id and the stages that saw it."""

    id: str | None = None
    seen: tuple[str, ...] = ()


def _records(*ids: str) -> list[StageResult]:
    return [StageResult(i, "ok", Row(id=i)) for i in ids]


class Direct:
    """An executor that runs the stage right here, without models."""

    def run(self, stage, batch, judgements, answered=None):  # type: ignore[no-untyped-def]
        return stage.run(batch, None)

    def close(self) -> None:
        return None


@dataclass
class Step:
    """Marks each record seen; ``fails`` transient failures per id; ``w*`` records wait for people; a batch holding
    ``hold`` waits until ``until`` is set."""

    name: str
    log: list[tuple[str, tuple[str, ...]]]
    fails: dict[str, int] = field(default_factory=dict)
    hold: str | None = None
    until: threading.Event | None = None
    barrier: bool = False
    specs: tuple[str, ...] = ()
    people_tasks: tuple[str, ...] = ()
    pauses_run: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    def run(self, records: Sequence[StageResult[Row]], ctx: StageContext) -> StageOutput:
        ids = tuple(r.record_id for r in records)
        if self.hold in ids:
            assert self.until is not None
            assert self.until.wait(WAIT_S), f"{self.name}: nothing downstream ran while {self.hold} was held"
        with self.lock:
            self.log.append((self.name, ids))
        out: list[Outcome] = []
        for record in records:
            if record.record_id.startswith("w") and self.people_tasks:
                out.append(AWAITING)
            elif self.fails.get(record.record_id, 0) > 0:
                with self.lock:
                    self.fails[record.record_id] -= 1
                out.append(PENDING)
            else:
                out.append(ok(record, record.data.with_(seen=(*record.data.seen, self.name))))
        return StageOutput(out)


@dataclass
class Signal(Step):
    """A step that sets ``when_run`` as soon as it runs a batch."""

    when_run: threading.Event = field(default_factory=threading.Event)

    def run(self, records: Sequence[StageResult[Row]], ctx: StageContext) -> StageOutput:
        self.when_run.set()
        return super().run(records, ctx)


def _run(store: RunStore, stages: Sequence[Step], ids: Sequence[str], *, width: int, rounds: int = 2) -> None:
    def stored(index: int) -> list[StageResult]:
        return store.results(stages[index - 1].name, "ok", Row)  # type: ignore[arg-type]

    run_stages(
        stages,
        _records(*ids),
        store,
        Direct(),  # type: ignore[arg-type]
        sizes=[2] * len(stages),
        rounds=rounds,
        width=width,
        stored_inputs=stored,
        model=Row,
    )


def _payloads(store: RunStore, names: Sequence[str]) -> dict[str, list[tuple[str, str, dict[str, object]]]]:
    return {
        name: [(r.record_id, r.status, r.payload) for r in store.results(name, None, Row)]  # type: ignore[arg-type]
        for name in names
    }


IDS = ("r0", "r1", "r2", "r3", "r4", "r5")


def test_a_record_goes_on_before_the_stage_before_is_through(tmp_path: Path) -> None:
    """The first stage's third batch is held until the second stage has run a batch: only streaming gets there."""
    log: list[tuple[str, tuple[str, ...]]] = []
    second = Signal("second", log)
    first = Step("first", log, hold="r4", until=second.when_run)
    streamed = RunStore(sqlite_url(tmp_path / "streamed.db"))
    _run(streamed, [first, second], IDS, width=4)
    assert log.index(("first", ("r4", "r5"))) > next(i for i, (name, _) in enumerate(log) if name == "second")

    # one batch at a time, every stage runs over all its records first; the stored results are the same
    calm: list[tuple[str, tuple[str, ...]]] = []
    staged = RunStore(sqlite_url(tmp_path / "staged.db"))
    _run(staged, [Step("first", calm), Step("second", calm)], IDS, width=1)
    assert [name for name, _ in calm] == ["first"] * 3 + ["second"] * 3
    assert _payloads(streamed, ["first", "second"]) == _payloads(staged, ["first", "second"])
    assert [r.data.seen for r in streamed.results("second", "ok", Row)] == [("first", "second")] * 6  # type: ignore[arg-type]


def test_retries_are_per_record_and_the_rest_streams_on(tmp_path: Path) -> None:
    """A record that fails transiently is tried again once the stage's fresh records are through; one that still
    fails after the rounds stops the run, after every other record has gone through every stage."""
    log: list[tuple[str, tuple[str, ...]]] = []
    store = RunStore(sqlite_url(tmp_path / "run.db"))
    stages = [Step("first", log, fails={"r1": 1, "r3": 5}), Step("second", log)]
    with pytest.raises(RunIncomplete, match=r"stage first: 1 record\(s\) still failing after 2 round"):
        _run(store, stages, IDS, width=3)
    assert store.done_ids("first") == {"r0", "r1", "r2", "r4", "r5"}
    assert store.done_ids("second") == {"r0", "r1", "r2", "r4", "r5"}
    retried = [ids for name, ids in log if name == "first" and ("r1" in ids or "r3" in ids)]
    # the retry round: both in one batch (in the order their first batches came back), once the fresh were through
    assert sorted(retried[-1]) == ["r1", "r3"]

    # a resume finds the rest stored and sends only what is missing
    again: list[tuple[str, tuple[str, ...]]] = []
    _run(store, [Step("first", again), Step("second", again)], IDS, width=3)
    assert again == [("first", ("r3",)), ("second", ("r3",))]


@pytest.mark.parametrize("width", [1, 3])
def test_nothing_passes_a_stage_that_pauses_the_run_while_people_are_awaited(tmp_path: Path, width: int) -> None:
    log: list[tuple[str, tuple[str, ...]]] = []
    store = RunStore(sqlite_url(tmp_path / "run.db"))
    review = Step("review", log, people_tasks=("verify",), pauses_run=True)
    _run(store, [Step("first", log), review, Step("after", log)], ("r0", "r1", "w2", "r3"), width=width)
    assert store.done_ids("review") == {"r0", "r1", "r3"}
    assert store.done_ids("after") == set()  # the run pauses here: the rest waits for the resume

    # where nobody is awaited, the records go on
    calm = RunStore(sqlite_url(tmp_path / "calm.db"))
    _run(calm, [Step("first", log), review, Step("after", log)], ("r0", "r1", "r3"), width=width)
    assert calm.done_ids("after") == {"r0", "r1", "r3"}


@dataclass
class FirstOfKind(Step):
    """Decides in order: keeps a record unless a record kept before it (by id) is of its kind (the id's last letter)."""

    kept: set[str] = field(default_factory=set)

    def recall(self, earlier: Sequence[StageResult[Row]]) -> None:
        self.kept = {record.record_id[-1] for record in earlier}

    def run(self, records: Sequence[StageResult[Row]], ctx: StageContext) -> StageOutput:
        with self.lock:
            self.log.append((self.name, tuple(r.record_id for r in records)))
        out: list[Outcome] = []
        for record in records:
            if record.record_id[-1] in self.kept:
                out.append(rejected(record, "same_kind"))
            else:
                self.kept.add(record.record_id[-1])
                out.append(ok(record))
        return StageOutput(out)


KINDS = ("0a", "1b", "2a", "3c", "4a", "5b", "6d", "7c")


@pytest.mark.parametrize("width", [1, 3])
def test_a_stage_deciding_in_order_streams_yet_sees_every_record_before_each_one(tmp_path: Path, width: int) -> None:
    """Upstream, 2a comes back late (a retry) and the batches finish out of order; the in-order stage still takes
    records in id order, each once nothing before it is on its way, and decides as a barrier over them all would."""
    log: list[tuple[str, tuple[str, ...]]] = []
    store = RunStore(sqlite_url(tmp_path / "run.db"))
    kinds = FirstOfKind("kinds", log)
    assert isinstance(kinds, InOrder)
    _run(store, [Step("first", log, fails={"2a": 1}), kinds, Step("after", log)], KINDS, width=width)
    taken = [record_id for name, ids in log if name == "kinds" for record_id in ids]
    assert taken == sorted(KINDS)
    results = {r.record_id: r.status for r in store.results("kinds", None, Row)}  # type: ignore[arg-type]
    assert results == {i: "ok" if i in {"0a", "1b", "3c", "6d"} else "rejected" for i in KINDS}
    assert store.done_ids("after") == {"0a", "1b", "3c", "6d"}


def test_a_stage_deciding_in_order_waits_behind_a_failing_record_and_resumes_from_what_it_kept(tmp_path: Path) -> None:
    log: list[tuple[str, tuple[str, ...]]] = []
    store = RunStore(sqlite_url(tmp_path / "run.db"))
    with pytest.raises(RunIncomplete):
        _run(store, [Step("first", log, fails={"3c": 5}), FirstOfKind("kinds", log)], KINDS, width=3)
    assert store.done_ids("kinds") == {"0a", "1b", "2a"}  # nothing after the failing 3c was decided

    # the resume: a fresh stage recalls what it kept (a, b), so 4a and 5b are still of a kind kept
    again: list[tuple[str, tuple[str, ...]]] = []
    _run(store, [Step("first", again), FirstOfKind("kinds", again)], KINDS, width=3)
    assert [i for name, ids in again if name == "kinds" for i in ids] == ["3c", "4a", "5b", "6d", "7c"]
    kept = {r.record_id for r in store.results("kinds", "ok", Row)}  # type: ignore[arg-type]
    assert kept == {"0a", "1b", "3c", "6d"}


@pytest.mark.parametrize("width", [1, 3])
def test_a_stage_deciding_in_order_waits_behind_a_record_people_decide(tmp_path: Path, width: int) -> None:
    log: list[tuple[str, tuple[str, ...]]] = []
    store = RunStore(sqlite_url(tmp_path / "run.db"))
    check = Step("check", log, people_tasks=("check",))  # does not pause the run: the rest goes on
    _run(store, [check, FirstOfKind("kinds", log)], ("0a", "w1", "x2"), width=width)
    assert store.done_ids("check") == {"0a", "x2"}
    assert store.done_ids("kinds") == {"0a"}  # x2 waits for w1, which people have not decided


def _mcsqa(spec: str, **options: object) -> McsqaConfig:
    return McsqaConfig(lang="en", kb="unused", model=spec, model_options={spec: dict(options)}, reviewers=(spec,))


def test_segments_stand_a_barrier_alone_and_stream_only_behind_an_api() -> None:
    api = _mcsqa("openai/loopback", base_url="http://127.0.0.1:9", max_concurrency=64)
    parts = segments(MCSQA.stages(api))
    names = [[stage.name for stage in part] for part in parts]
    # the copy filter decides in record-id order, so it streams with the rest; only the split needs every record
    assert names == [
        ["generate", "filter", "refine", "filter_refined", "distractors", "shuffle", "verify", "review", "moderate"],
        ["split"],
    ]
    assert all(not stage.barrier for part in parts if len(part) > 1 for stage in part)
    assert api.batch_for("generate") == 16  # a quarter of the bound: batches go on to the next stage in time
    assert stream_width(parts[0], api) == 16  # 4 × 64 requests' worth of records in flight
    assert stream_width(parts[0], api, streaming=False) == 1
    local = _mcsqa("scripted/echo")
    assert stream_width(segments(MCSQA.stages(local))[0], local) == 1  # one at a time, as always
    assert stream_width(segments(MCSQA.stages(local))[0], local, streaming=True) > 1


@pytest.mark.parametrize("batch_open", [True, False])
@pytest.mark.parametrize("width", [1, 3])
def test_records_waiting_for_a_batch_at_an_api_get_no_retry_round(tmp_path: Path, width: int, batch_open: bool) -> None:
    """Their calls answered ``awaiting_batch``: another round would only find the batch still running (and show a
    retry that nothing needed), so they wait for the resume; records whose calls failed otherwise get their rounds."""
    store = RunStore(sqlite_url(tmp_path / "run.db"))
    log: list[tuple[str, tuple[str, ...]]] = []
    events: list[StageProgress] = []
    asked: list[bool] = []

    def awaiting() -> bool:
        asked.append(batch_open)
        return batch_open

    step = Step("ask", log, fails={"r0": 5, "r2": 5})
    with pytest.raises(RunIncomplete):
        run_stages(
            [step],
            _records("r0", "r1", "r2", "r3"),
            store,
            Direct(),  # type: ignore[arg-type]
            sizes=[8],
            rounds=3,
            width=width,
            model=Row,
            progress=events.append,
            awaiting_batches=awaiting,
        )
    assert [r.record_id for r in store.results("ask", "ok", Row)] == ["r1", "r3"]  # type: ignore[arg-type]
    last = [(e.label, e.done, e.retry, e.batch) for e in events if e.last]
    if batch_open:
        assert log == [("ask", ("r0", "r1", "r2", "r3"))] and asked == [True]
        assert last == [("ask", 2, 0, 2)]  # the two waiting for the batch are neither done nor to retry
    else:
        assert log == [("ask", ("r0", "r1", "r2", "r3")), ("ask", ("r0", "r2")), ("ask", ("r0", "r2"))]
        assert [label for label, *_ in last] == ["ask", "ask (retry 1)", "ask (retry 2)"] and len(asked) == 3
        assert all(batch == 0 for *_, batch in last)


@pytest.mark.parametrize("width", [1, 4])
def test_a_barrier_runs_once_over_every_record_whatever_the_batch_size(tmp_path: Path, width: int) -> None:
    log: list[tuple[str, tuple[str, ...]]] = []
    _run(RunStore(sqlite_url(tmp_path / "run.db")), [Step("whole", log, barrier=True)], IDS, width=width)
    assert log == [("whole", IDS)]
