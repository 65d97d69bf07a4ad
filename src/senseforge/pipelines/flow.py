"""Records flowing through consecutive stages: how the runner schedules batches.

:func:`run_stages` runs a *segment*, consecutive stages that need neither their whole input at once
(a barrier) nor people, over the records given to its first stage. Each stage has a lane: the records
waiting for it, by attempt (a record whose calls failed transiently waits for its next round in the
next queue, up to the run's ``call_rounds``), and its batches in flight.

Two ways to schedule, with the same results:

* **one batch at a time** (``width`` 1, the default for models in this process): the earliest stage
  with work goes first, so a stage runs over all its records, retries included, before the next one
  starts, reading its input back from the run store — the order calls were always made in.
* **streaming** (``width`` > 1, for models behind an API): up to ``width`` batches run at once, in
  threads, the latest stage with a full batch first. A record goes on to its next stage as soon as its
  batch is stored (handed on as the run store would read it back), so calls from several stages are in
  flight together and the endpoint's limiter (:mod:`senseforge.llm.limits`), not a stage's last wave,
  sets the pace. A stage sends a short batch only once every stage before it is through.

A stage that decides each record from the records before it in record-id order (:class:`InOrder`: the
copy filters) needs no barrier: it takes records in id order, one batch at a time, each once no record
before it is still queued, in flight, held, failing or waiting for people at a stage before it (a record's
children have ids above its own), and it recalls what it passed in earlier passes. Its verdicts are a
barrier's.

Either way each batch is stored in one transaction by this thread only (the run store is never
written from a worker), retries wait until a stage's fresh records are through, and a stage stays
at most one batch ahead of what is stored: a killed run loses the batches in flight, and their
finished calls come back from the cache. Outputs do not depend on the schedule: every stage's
outcome for a record depends on the record alone, and outputs are read from the run store in
record order.
"""

from __future__ import annotations

import bisect
import concurrent.futures as cf
import operator
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from senseforge.errors import SenseforgeError
from senseforge.llm.limits import ranked
from senseforge.pipelines.calls import AWAITING, PENDING
from senseforge.pipelines.executor import Executor
from senseforge.pipelines.outcomes import NO_OUTPUT, Children, RunIncomplete, StageOutput, rejected
from senseforge.pipelines.progress import ProgressSink, StageTally
from senseforge.pipelines.quality import counted, excluded_annotators
from senseforge.pipelines.replay import Replay, Replayer
from senseforge.pipelines.runstore import Record, RunStore, StageResult, StoredJudgement
from senseforge.pipelines.stage import InOrder, Stage
from senseforge.pipelines.taskqueue import QueuedTask, queue_tasks

__all__ = ["StageReport", "run_stages"]


@dataclass
class StageReport:
    """What one pass of the runner left behind for a stage."""

    stored: int = 0
    awaiting: list[StageResult] = field(default_factory=list)
    tasks: list[QueuedTask] = field(default_factory=list)


@dataclass
class _Batch:
    lane: int
    attempt: int
    records: list[StageResult]
    keys: list[str] | None = None
    """Each record's key for its kept outcome at the stage (:mod:`senseforge.pipelines.replay`); ``None``: none kept."""
    replay: Replay = field(default_factory=Replay)
    """The outcomes replayed for it; the stage runs on the other records."""


class _Lane:
    """One stage of a segment: its records waiting by attempt, its batches in flight, its progress by attempt."""

    def __init__(self, stage: Stage, size: int, rounds: int, done: set[str], below_bar: Mapping[str, Any]) -> None:
        self.stage = stage
        self.size = size
        self.growth = 1
        """Batches' worth of fresh records a batch takes: 1, or more while the stage's batches replay whole (see
        :meth:`replayed`)."""
        self.done = done
        self.done_parents = {record_id.rsplit("/", 1)[0] for record_id in done}
        self.below_bar = below_bar
        self.queues: list[list[StageResult]] = [[] for _ in range(rounds)]
        self.offered = [0] * rounds
        """Records queued for each attempt so far (the records of its pass, once nothing more can come)."""
        self.running = [0] * rounds
        self.failing: list[StageResult] = []
        self.parked = 0
        """Of :attr:`failing`, the records left for a resume while their calls wait for batches at an API."""
        self.report = StageReport()
        self.loaded = False
        self.held: list[StageResult] = []
        """Streaming past a stage that pauses the run: its records, handed on once none waits for people."""
        self.bars: dict[int, StageTally] = {}
        self.in_order = isinstance(stage, InOrder)

    def offer(self, records: Sequence[StageResult]) -> None:
        """Queue the records this stage has no result for yet (a record split into children counts as done); a
        stage deciding in order keeps its queue in record-id order."""
        fresh = [r for r in records if r.record_id not in self.done and r.record_id not in self.done_parents]
        if self.in_order and len(fresh) <= _INSERTED:
            for record in fresh:
                bisect.insort(self.queues[0], record, key=_record_id)
        elif self.in_order:
            self.queues[0] += fresh
            self.queues[0].sort(key=_record_id)
        else:
            self.queues[0] += fresh
        self.offered[0] += len(fresh)

    @property
    def idle(self) -> bool:
        return not any(self.queues) and not any(self.running)

    def through(self, attempt: int, upstream_idle: bool) -> bool:
        """Whether the records of ``attempt`` (and every earlier one) are all through this stage."""
        earlier = range(attempt + 1)
        return upstream_idle and not any(self.queues[a] or self.running[a] for a in earlier)

    def next_batch(self, upstream_idle: bool, floor: str | None = None) -> tuple[int, list[StageResult]] | None:
        """The batch to send next, by attempt: fresh records once a batch is full (or every stage before is
        through); a retry once the fresh records and earlier retries are through. A stage deciding records in
        order takes them in record-id order, those below ``floor`` (the least id still on its way to it), one
        batch at a time."""
        if self.in_order:
            return self._next_in_order(upstream_idle, floor)
        for attempt, queue in enumerate(self.queues):
            if not queue:
                continue
            size = self.size * self.growth if attempt == 0 else self.size
            if attempt == 0:
                if len(queue) < size and not upstream_idle:
                    return None  # a batch is full first (while it replays whole: a grown one)
            elif not self.through(attempt - 1, upstream_idle):
                return None
            taken, self.queues[attempt] = queue[:size], queue[size:]
            return attempt, taken
        return None

    def replayed(self, whole: bool) -> None:
        """A batch of fresh records was looked up for kept outcomes: replayed ``whole``, the next waits for and takes
        twice as many records (up to :data:`_REPLAY_GROWTH` batches' worth: a rebuild's replayed stages cost a few
        lookups and writes per thousand records, not per batch); not, it takes a batch's worth again (the records
        that run are sent in batches of the stage's size)."""
        self.growth = min(2 * self.growth, _REPLAY_GROWTH) if whole else 1

    def _next_in_order(self, upstream_idle: bool, floor: str | None) -> tuple[int, list[StageResult]] | None:
        queue = self.queues[0]  # in record-id order (see offer)
        if not queue or self.running[0]:
            return None
        ready = len(queue) if floor is None else bisect.bisect_left(queue, floor, key=_record_id)
        if ready == 0 or (ready < self.size and not upstream_idle):
            return None
        taken = min(ready, self.size)
        batch, self.queues[0] = queue[:taken], queue[taken:]
        return 0, batch


def run_stages(
    stages: Sequence[Stage],
    inputs: Sequence[StageResult],
    store: RunStore,
    executor: Executor,
    *,
    sizes: Sequence[int],
    rounds: int,
    width: int = 1,
    stored_inputs: Callable[[int], Sequence[StageResult]] | None = None,
    model: type[Record] | None = None,
    progress: ProgressSink | None = None,
    causes: Callable[[], str] | None = None,
    awaiting_batches: Callable[[], bool] | None = None,
    replayer: Replayer | None = None,
) -> list[StageReport]:
    """Run the segment ``stages`` over ``inputs`` (the first stage's records), skipping what is stored.

    Args:
        stages: consecutive stages; with more than one, none may be a barrier.
        inputs: the first stage's records.
        store: the run store (each batch's results, judgements and tasks stored in one go).
        executor: runs one batch of a stage.
        sizes: records per batch, per stage (a barrier takes all its records at once).
        rounds: passes over a record whose calls failed transiently before the run stops as incomplete.
        width: batches run at once; above 1 the records stream (see the module).
        stored_inputs: the records of stage ``i`` stored before this call (``i`` ≥ 1): the ok results of
            stage ``i - 1`` in the run store.
        model: the recipe's record model (a streamed record goes on as the run store would read it back).
        progress: where the stages' progress goes, in records (see :mod:`senseforge.pipelines.progress`); a
            stage's pass is told from its first batch.
        causes: why calls kept failing, appended to :class:`RunIncomplete` (default: where to look).
        awaiting_batches: whether the models wait for batches at an API (``-o batch=true``) that are not answered
            yet: a batch's pending records then wait for the run to be resumed, as the records that keep failing
            do, without another round (which would only find the batch still running).
        replayer: keeps what the stages make of each record, and replays it when a record comes again (see
            :mod:`senseforge.pipelines.replay`; ``None``: every stage runs).

    Raises:
        RunIncomplete: records whose calls kept failing transiently after ``rounds`` passes (streaming: once
            the rest is through).
    """
    if len(stages) > 1 and (any(s.barrier for s in stages) or stored_inputs is None):
        raise SenseforgeError("a segment of several stages has no barrier and reads its stored inputs")
    if width > 1 and model is None:
        raise SenseforgeError("streaming hands records on as read back: give the record model")
    stream = width > 1
    lanes = [
        _Lane(
            stage,
            size,
            rounds,
            store.done_ids(stage.name),
            excluded_annotators(store) if stage.people_tasks else {},  # their judgements do not count
        )
        for stage, size in zip(stages, sizes, strict=True)
    ]
    for lane in lanes:
        if isinstance(lane.stage, InOrder):
            if lane.stage.specs or model is None:
                name = lane.stage.name
                raise SenseforgeError(f"stage {name} decides in order: it calls no model; the run gives a record model")
            lane.stage.recall(store.results(lane.stage.name, "ok", model))
    first = lanes[0]
    first.offer(inputs)
    first.loaded = True
    if first.stage.barrier and first.queues[0]:
        if len(first.queues[0]) != len(inputs):
            raise SenseforgeError(f"stage {first.stage.name}: partly stored; the run store is inconsistent")
        first.size = len(first.queues[0])
    if stream:
        assert stored_inputs is not None or len(lanes) == 1
        for index, lane in enumerate(lanes[1:], start=1):
            lane.offer(stored_inputs(index) if stored_inputs else [])
            lane.loaded = True
    sink: ProgressSink = progress or _ignore
    told = threading.Lock()  # one event at a time, from this thread and the models' threads
    flight: dict[cf.Future[StageOutput], _Batch] = {}
    workers = cf.ThreadPoolExecutor(max_workers=width, thread_name_prefix="senseforge-stage") if stream else None

    def upstream_idle(index: int) -> bool:
        return all(lane.idle for lane in lanes[:index])

    def paused_before(index: int) -> bool:
        """Whether a stage before ``index`` that pauses the run is through with records waiting for people: the
        stages after it wait for the resume, as they always have."""
        return any(
            lane.stage.pauses_run and lane.report.awaiting and lane.idle and upstream_idle(i)
            for i, lane in enumerate(lanes[:index])
        )

    def hand_on(
        batch: _Batch, results: Sequence[StageResult], stored: Sequence[str], replayed: Collection[int] = ()
    ) -> None:
        """Stream a stage's new ok results (``stored``: their payloads as stored) to the next stage (held at a stage
        that pauses the run until it is through with none waiting). A record the stage passed on as it came keeps
        its data when it came from the run store (every stage's but the first's)."""
        index = batch.lane
        if index + 1 >= len(lanes):
            return
        assert model is not None
        lane = lanes[index]
        came = {r.record_id: r for r in batch.records} if index else {}
        passed = [
            r if id(r) in replayed else r.as_read(model, payload, unchanged=_same_data(came.get(r.record_id), r))
            for r, payload in zip(results, stored, strict=True)
            if r.status == "ok"
        ]
        if not lane.stage.pauses_run:
            lanes[index + 1].offer(passed)
            return
        lane.held += passed

    def release_held() -> None:
        for index, lane in enumerate(lanes[:-1]):
            if lane.held and lane.idle and upstream_idle(index) and not lane.report.awaiting:
                lanes[index + 1].offer(lane.held)
                lane.held = []

    def floor(index: int) -> str | None:
        """The least record id still on its way to stage ``index``: queued, in flight, held, failing, or waiting for
        people at a stage before it (a record's children have ids above its own)."""
        groups = [group for lane in lanes[:index] for group in (*lane.queues, lane.held, lane.failing)]
        groups += [lane.report.awaiting for lane in lanes[:index]]
        groups += [batch.records for batch in flight.values() if batch.lane < index]
        return min((min(map(_record_id, group)) for group in groups if group), default=None)

    def pick() -> _Batch | None:
        for index in range(len(lanes)):
            lane = lanes[index]
            idle_before = upstream_idle(index)
            if paused_before(index):
                continue
            if not lane.loaded:
                if not idle_before:
                    continue
                assert stored_inputs is not None
                lane.offer(stored_inputs(index))
                lane.loaded = True
            chosen = lane.next_batch(idle_before, floor(index) if lane.in_order and lane.queues[0] else None)
            if chosen is not None:
                return _Batch(index, *chosen)
            if not stream and not lane.idle:
                return None  # one at a time: the next stage waits for this one
        return None

    def open_bar(batch: _Batch) -> StageTally:
        lane = lanes[batch.lane]
        if batch.attempt not in lane.bars:
            known = batch.attempt > 0 or upstream_idle(batch.lane)  # a retry starts once its records are all in
            total = lane.offered[batch.attempt] if known else None
            lane.bars[batch.attempt] = StageTally(lane.stage.name, batch.attempt, total, sink, told)
        return lane.bars[batch.attempt]

    def close_bars(everything: bool = False) -> None:
        for index, lane in enumerate(lanes):
            for attempt in sorted(lane.bars):
                if attempt == 0 and upstream_idle(index):  # nothing more comes to the first pass
                    lane.bars[attempt].know_total(lane.offered[0])
                if everything or lane.through(attempt, upstream_idle(index)):
                    lane.bars.pop(attempt).close()

    def send(batch: _Batch) -> cf.Future[StageOutput] | StageOutput:
        lane = lanes[batch.lane]
        lane.running[batch.attempt] += 1
        answered = open_bar(batch).requests
        records = batch.records
        if replayer is not None and model is not None:
            batch.keys = replayer.keys(lane.stage, records)
            if batch.keys is not None:
                batch.replay = replayer.replay(lane.stage, records, batch.keys)
                if batch.attempt == 0:
                    lane.replayed(len(batch.replay.outcomes) == len(records))
                if len(batch.replay.outcomes) == len(records):
                    return StageOutput(
                        list(batch.replay.outcomes[i] for i in range(len(records))), batch.replay.judgements
                    )
                records = [r for i, r in enumerate(records) if i not in batch.replay.outcomes]
        judged = counted(_judgements(lane.stage, store, [r.record_id for r in records]), lane.below_bar)
        if workers is None:
            return executor.run(lane.stage, records, judged, answered)
        return workers.submit(_ranked, batch.lane, executor, lane.stage, records, judged, answered)

    def settle(batch: _Batch, output: StageOutput) -> None:
        lane = lanes[batch.lane]
        lane.running[batch.attempt] -= 1
        before = lane.parked
        if batch.replay.outcomes and len(batch.replay.outcomes) < len(batch.records):
            output = batch.replay.merged(len(batch.records), output)
        results = _stored_results(lane, batch, output, awaiting_batches)
        parked = lane.parked - before  # not done: they wait for an API's batch
        replayed = batch.replay.results()
        stored = store.put(lane.stage.name, results, judgements=output.judgements)
        if replayer is not None and batch.keys is not None and len(batch.replay.outcomes) < len(batch.records):
            payloads = {id(r): payload for r, payload in zip(results, stored, strict=True)}
            replayer.remember(lane.stage, batch.keys, batch.records, output, payloads, batch.replay)
        queue_tasks(store.engine, output.tasks)
        lane.report.stored += len(results)
        awaiting = sum(outcome is AWAITING for outcome in output.outcomes)
        retry = sum(outcome is PENDING for outcome in output.outcomes) - parked
        done = len(batch.records) - awaiting - retry - parked
        lane.bars[batch.attempt].records(done=done, queued=awaiting, retry=retry, batch=parked)
        if stream:
            hand_on(batch, results, stored, replayed)
            release_held()
        close_bars()
        if not stream and lane.failing and lane.idle:
            raise _incomplete(lane, rounds, causes)

    interrupted = False
    try:
        while True:
            while len(flight) < width and (batch := pick()) is not None:
                sent = send(batch)
                if isinstance(sent, cf.Future):
                    flight[sent] = batch
                else:
                    settle(batch, sent)
            if not flight:
                break
            finished, _ = cf.wait(flight, return_when=cf.FIRST_COMPLETED)
            for future in sorted(finished, key=lambda f: (flight[f].lane, flight[f].attempt)):
                settle(flight.pop(future), future.result())
    except KeyboardInterrupt:
        interrupted = True  # calls in flight end when the models close; the answers that came are cached
        raise
    finally:
        if workers is not None:  # otherwise the batches in flight finish (their results go unstored, cached)
            workers.shutdown(wait=not interrupted, cancel_futures=True)
        close_bars(everything=True)
    failing = next((lane for lane in lanes if lane.failing), None)
    if failing is not None:
        raise _incomplete(failing, rounds, causes)
    return [lane.report for lane in lanes]


def _ranked(
    rank: int,
    executor: Executor,
    stage: Stage,
    records: Sequence[StageResult],
    judgements: Mapping[str, Sequence[StoredJudgement]],
    answered: Callable[[int], None],
) -> StageOutput:
    """A streamed batch: its calls wait for the endpoint's slots with the stage's place in the segment as their
    rank, so the earliest stage's calls go first (see :mod:`senseforge.llm.limits`)."""
    with ranked(rank):
        return executor.run(stage, records, judgements, answered)


def _same_data(came: StageResult | None, result: StageResult) -> bool:
    """Whether ``result`` holds the very data its record came to the stage with."""
    return came is not None and came.data is result.data


_record_id = operator.attrgetter("record_id")
_REPLAY_GROWTH = 32
"""How many of a stage's batches one batch of a rebuild takes at most while the stage's batches replay whole."""
_INSERTED = 64
"""Records offered at once up to which a stage deciding in order inserts each in place (more: its queue is sorted
again): its queue stays in record-id order without sorting every record at every pick."""


def _ignore(_event: object) -> None:
    """No progress shown."""


def _incomplete(lane: _Lane, rounds: int, causes: Callable[[], str] | None) -> RunIncomplete:
    where = causes() if causes is not None else " (causes: senseforge llm ledger --failed)"
    return RunIncomplete(
        f"stage {lane.stage.name}: {len(lane.failing)} record(s) still failing after {rounds} round(s) of transient "
        f"errors{where}; run again with --resume to retry them"
    )


def _judgements(stage: Stage, store: RunStore, ids: list[str]) -> Mapping[str, Sequence[StoredJudgement]]:
    return store.judgements_of_records(stage.people_tasks, ids) if stage.people_tasks else {}


def _stored_results(
    lane: _Lane, batch: _Batch, output: StageOutput, awaiting_batches: Callable[[], bool] | None = None
) -> list[StageResult]:
    """What the batch stores; its pending records queued for their next round (or failing: after the last round,
    or while the models wait for batches at an API), the waiting ones reported."""
    stage = lane.stage
    lane.report.tasks += output.tasks
    if len(output.outcomes) != len(batch.records):
        raise SenseforgeError(f"stage {stage.name}: {len(output.outcomes)} outcomes for {len(batch.records)} records")
    results: list[StageResult] = []
    parked: bool | None = None
    for record, outcome in zip(batch.records, output.outcomes, strict=True):
        if outcome is PENDING:
            if parked is None:  # asked once per batch, and only for one with pending records
                parked = awaiting_batches is not None and awaiting_batches()
            if batch.attempt + 1 < len(lane.queues) and not parked:
                lane.queues[batch.attempt + 1].append(record)
                lane.offered[batch.attempt + 1] += 1
            else:
                lane.failing.append(record)
                lane.parked += bool(parked)
        elif outcome is AWAITING:
            lane.report.awaiting.append(record)
        elif isinstance(outcome, Children):
            results += _children(stage.name, record, outcome)
        elif isinstance(outcome, StageResult):
            if outcome.record_id != record.record_id:
                raise SenseforgeError(
                    f"stage {stage.name}: result {outcome.record_id!r} for record {record.record_id!r}"
                )
            results.append(outcome)
    return results


def _children(stage: str, record: StageResult, outcome: Children) -> list[StageResult]:
    if not outcome.results:
        return [rejected(record, NO_OUTPUT)]
    for index, kid in enumerate(outcome.results):
        if kid.record_id != f"{record.record_id}/{index}":
            raise SenseforgeError(
                f"stage {stage}: child {kid.record_id!r} of {record.record_id!r} is not <parent>/<index>"
            )
    return list(outcome.results)
