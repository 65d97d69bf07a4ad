"""Waiting for batches at an API by itself (``build --wait``): resumes until no run waits, a wait that grows while
the same batches run and starts again with a new one, and a line each time what is awaited changes."""

from __future__ import annotations

from pathlib import Path

import pytest

from senseforge.pipelines.batchwait import BACKOFF, wait_for_batches, waiting_line
from senseforge.pipelines.runner import AWAITING_BATCH, BuildSummary
from senseforge.store.batches import BatchRow

SUBMITTED = 1_780_000_000.0  # 2026-05-28 20:26:40 UTC


def _batch(batch_id: str, stage: str, status: str = "in_progress") -> BatchRow:
    return BatchRow(
        batch_id=batch_id,
        endpoint="http://x/v1 m",
        run="r",
        stage=stage,
        requests=120,
        submitted_at=SUBMITTED,
        status="submitted",
        api_status=status,
    )


def _waits_for(*batches: BatchRow) -> BuildSummary:
    return BuildSummary(Path("run"), AWAITING_BATCH, batches=[b.batch_id for b in batches], open_batches=list(batches))


def test_the_line_names_the_batch_its_stage_requests_submission_and_status() -> None:
    line = waiting_line(_batch("batch_9", "distractors"), 60, now=SUBMITTED + 60)
    assert line == (
        "waiting for batch batch_9 (stage distractors, 120 requests, submitted 20:26 UTC, in_progress) — "
        "checking every 60 s"
    )
    next_day = waiting_line(_batch("batch_9", "distractors"), 600, now=SUBMITTED + 86_400)
    assert "submitted 2026-05-28 20:26 UTC" in next_day and next_day.endswith("checking every 10 min")


def test_it_resumes_until_no_run_waits_and_the_wait_grows_while_the_same_batch_runs() -> None:
    first, second = _batch("b1", "generate"), _batch("b2", "refine")
    answers = [
        _waits_for(first),
        _waits_for(first),
        _waits_for(_batch("b1", "generate", "finalizing")),
        _waits_for(first),
        *[_waits_for(first)] * 3,
        _waits_for(second),  # the next stage's batch: the wait starts again
        BuildSummary(Path("run"), "done"),
    ]
    slept: list[float] = []
    said: list[str] = []
    resumed: list[int] = []

    def resume(index: int) -> BuildSummary:
        resumed.append(index)
        return answers.pop(0)

    ended = wait_for_batches([_waits_for(first)], resume, poll_s=1.0, say=said.append, sleep=slept.append)
    assert [summary.state for summary in ended] == ["done"] and resumed == [0] * 9 and not answers
    assert slept == [1, 2, 4, 8, BACKOFF, BACKOFF, BACKOFF, BACKOFF, 1]
    # a line whenever it changes: the wait, the status the API gave, the batch
    assert [line.rsplit(" every ", 1)[1] for line in said] == ["1 s", "2 s", "4 s", "8 s", "10 s", "1 s"]
    assert "(stage generate, 120 requests" in said[0] and ", finalizing)" in said[3]
    assert said[-1].startswith("waiting for batch b2 (stage refine")


def test_several_runs_are_resumed_each_until_it_stops_waiting() -> None:
    states = {0: ["awaiting", "done"], 1: ["awaiting_review"]}
    summaries = [_waits_for(_batch("a", "generate")), _waits_for(_batch("b", "generate"))]

    def resume(index: int) -> BuildSummary:
        state = states[index].pop(0)
        return _waits_for(_batch("a2", "refine")) if state == "awaiting" else BuildSummary(Path("run"), state)

    ended = wait_for_batches(summaries, resume, poll_s=0.5, sleep=lambda seconds: None)
    assert [summary.state for summary in ended] == ["done", "awaiting_review"]
    assert states == {0: [], 1: []}


def test_a_wait_of_nothing_is_refused() -> None:
    with pytest.raises(ValueError, match="above 0"):
        wait_for_batches([], lambda index: BuildSummary(Path("run"), "done"), poll_s=0)
