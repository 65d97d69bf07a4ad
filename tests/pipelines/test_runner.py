"""The stage runner: batches stored as they finish, transient failures retried, waiting records reported,
records split into children."""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from senseforge.errors import BackendError, SenseforgeError
from senseforge.llm.base import Completion, Failure
from senseforge.pipelines import runner
from senseforge.pipelines.calls import AWAITING, PENDING, failure_outcome, settle
from senseforge.pipelines.executor import Executor
from senseforge.pipelines.flow import StageReport, run_stages
from senseforge.pipelines.outcomes import Children, Outcome, RunIncomplete, StageOutput, ok, rejected
from senseforge.pipelines.progress import ProgressSink, StageProgress
from senseforge.pipelines.runstore import Record, RunStore, StageResult, sqlite_url
from senseforge.pipelines.stage import Stage, StageContext


class Direct:
    """An executor that runs the stage right here, without models."""

    def run(self, stage, batch, judgements, answered=None):  # type: ignore[no-untyped-def]
        return stage.run(batch, None)

    def close(self) -> None:
        return None


RUN = Direct()


def run_stage(
    stage: Stage,
    inputs: Sequence[StageResult],
    store: RunStore,
    executor: Executor,
    *,
    batch_size: int,
    rounds: int,
    progress: ProgressSink | None = None,
) -> StageReport:
    """One stage over ``inputs`` through the engine's scheduler, as a run's segment of one stage."""
    return run_stages([stage], inputs, store, executor, sizes=[batch_size], rounds=rounds, progress=progress)[0]


@dataclass
class Flaky:
    """Fails record ``r<i>`` transiently for its first ``fails[i]`` passes; ``w*`` records wait."""

    fails: dict[str, int]
    name: str = "flaky"
    barrier: bool = False
    batches: list[list[str]] = field(default_factory=list)
    specs: tuple[str, ...] = ()
    people_tasks: tuple[str, ...] = ()
    pauses_run: bool = False

    def run(self, records: Sequence[StageResult], ctx: StageContext) -> StageOutput:
        self.batches.append([r.record_id for r in records])
        out: list[Outcome] = []
        for record in records:
            if record.record_id.startswith("w"):
                out.append(AWAITING)
            elif self.fails.get(record.record_id, 0) > 0:
                self.fails[record.record_id] -= 1
                out.append(PENDING)
            elif record.record_id.endswith("x"):
                out.append(rejected(record, "bad"))
            else:
                out.append(ok(record, record.data.with_(seen=True)))
        return StageOutput(out)


class Row(Record):
    """A test record: its id, whether a stage saw it, or which part of its parent it is."""

    id: str | None = None
    seen: bool | None = None
    part: int | None = None


def _records(*ids: str) -> list[StageResult]:
    return [StageResult(i, "ok", Row(id=i)) for i in ids]


def test_batches_retries_and_counts(tmp_path: Path) -> None:
    store = RunStore(sqlite_url(tmp_path / "run.db"))
    stage = Flaky({"r1": 1, "r3": 2})
    events: list[StageProgress] = []
    records = _records("r0", "r1", "r2", "r3", "r4x")
    report = run_stage(stage, records, store, RUN, batch_size=2, rounds=3, progress=events.append)
    assert stage.batches == [["r0", "r1"], ["r2", "r3"], ["r4x"], ["r1", "r3"], ["r3"]]
    # each round is a pass of its own, counted in records: those failing for now are said apart, not done
    passes = [(e.label, e.total, e.done, e.retry) for e in events if e.last]
    assert passes == [("flaky", 5, 3, 2), ("flaky (retry 1)", 2, 1, 1), ("flaky (retry 2)", 1, 1, 0)]
    assert report.stored == 5 and not report.awaiting
    assert store.counts("flaky") == {"ok": 4, "bad": 1}
    # a second pass over the same input finds everything stored and calls nothing
    again = Flaky({})
    assert run_stage(again, _records("r0", "r1", "r2", "r3", "r4x"), store, RUN, batch_size=2, rounds=3).stored == 0
    assert again.batches == []


def test_still_failing_after_the_rounds_stops_the_run(tmp_path: Path) -> None:
    store = RunStore(sqlite_url(tmp_path / "run.db"))
    with pytest.raises(RunIncomplete, match=r"1 record.*--resume"):
        run_stage(Flaky({"r1": 5}), _records("r0", "r1"), store, RUN, batch_size=8, rounds=2)
    assert store.done_ids("flaky") == {"r0"}  # the good record was kept


def test_waiting_records_are_reported_not_stored(tmp_path: Path) -> None:
    store = RunStore(sqlite_url(tmp_path / "run.db"))
    report = run_stage(Flaky({}), _records("r0", "w1"), store, RUN, batch_size=8, rounds=1)
    assert [r.record_id for r in report.awaiting] == ["w1"]
    assert store.done_ids("flaky") == {"r0"}


def test_failure_kinds() -> None:
    assert failure_outcome(Completion(text="x")) is None
    assert failure_outcome(Completion(failure=Failure(kind="rate_limit", message="429"))) is PENDING
    assert failure_outcome(Completion(failure=Failure(kind="bad_request", message="400"))) == "llm_error"
    with pytest.raises(BackendError, match="auth"):
        failure_outcome(Completion(failure=Failure(kind="auth", message="bad key")))
    assert settle([Completion(text="x"), Completion(failure=Failure(kind="timeout", message="slow"))]) is PENDING
    assert settle([Completion(failure=Failure(kind="bad_request", message="400"))]) == "llm_error"


@dataclass
class Split3:
    """Splits ``p<i>`` into three children (the middle one rejected); ``e*`` into none; ``z*`` misnames a child."""

    name: str = "split3"
    barrier: bool = False
    specs: tuple[str, ...] = ()
    people_tasks: tuple[str, ...] = ()
    pauses_run: bool = False
    seen: list[str] = field(default_factory=list)

    def run(self, records: Sequence[StageResult], ctx: StageContext) -> StageOutput:
        out: list[Outcome] = []
        for record in records:
            self.seen.append(record.record_id)
            if record.record_id.startswith("e"):
                out.append(Children(()))
                continue
            kids = []
            for index in range(3):
                sep = "-" if record.record_id.startswith("z") else "/"
                name = f"{record.record_id}{sep}{index}"
                kid = StageResult(name, "ok", Row(part=index))
                kids.append(rejected(kid, "middle") if index == 1 else ok(kid))
            out.append(Children(tuple(kids)))
        return StageOutput(out)


def test_a_record_splits_into_children_counted_in_their_own_unit(tmp_path: Path) -> None:
    store = RunStore(sqlite_url(tmp_path / "run.db"))
    stage = Split3()
    report = run_stage(stage, _records("p0", "p1", "e2"), store, RUN, batch_size=2, rounds=1)
    assert report.stored == 7  # 3 + 3 children, and the empty parent as a rejection
    assert [r.record_id for r in store.results("split3", "ok")] == ["p0/0", "p0/2", "p1/0", "p1/2"]
    assert store.counts("split3") == {"ok": 4, "middle": 2, "no_output": 1}
    # a resume finds every parent done, children and empty ones alike
    again = Split3()
    assert run_stage(again, _records("p0", "p1", "e2"), store, RUN, batch_size=2, rounds=1).stored == 0
    assert again.seen == []


def test_children_must_be_named_after_their_parent(tmp_path: Path) -> None:
    store = RunStore(sqlite_url(tmp_path / "run.db"))
    with pytest.raises(SenseforgeError, match="<parent>/<index>"):
        run_stage(Split3(), _records("z0"), store, RUN, batch_size=2, rounds=1)
    assert store.done_ids("split3") == set()


def test_the_runner_names_no_kind_of_stage() -> None:
    """The runner knows people's part in a stage only by the fields every stage has (``people_tasks``,
    ``pauses_run``): it imports neither the review stage nor the people base."""
    tree = ast.parse(Path(runner.__file__).read_text(encoding="utf-8"))
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) for alias in node.names}
    modules = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert not imported & {"Review", "PeopleStage"}
    assert "senseforge.pipelines.review" not in modules
    named = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    assert not named & {"Review", "PeopleStage"}
