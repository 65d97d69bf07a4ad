"""Waiting for batches at an API by itself: what ``senseforge build … --wait`` does.

A run whose model answers through an API's Batch API (``-o batch=true``) stops as ``awaiting_batch`` once a
stage's batch is submitted; each ``--resume`` collects what the API has answered and goes on, to the next
stage's batch. :func:`wait_for_batches` does those resumes itself: it waits, resumes every run that waits for
batches, and goes on until none does (it finished, or needs people). It says what it waits for (each batch's id,
stage, requests, submission time and status) whenever that changes.

The wait between two checks starts at ``poll_s``; while the same batches are still running it doubles, up to
:data:`BACKOFF` times ``poll_s``, and it starts again at ``poll_s`` when a new batch is submitted. Stopping it
(Ctrl-C) loses nothing: the run stays ``awaiting_batch`` and the same command with ``--resume`` goes on.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from senseforge.pipelines.runner import AWAITING_BATCH, BuildSummary
from senseforge.store.batches import BatchRow

__all__ = ["BACKOFF", "POLL_S", "described", "every", "wait_for_batches", "waiting_line"]

POLL_S = 60.0
"""Seconds between two checks of the batches, by default."""

BACKOFF = 10
"""While the same batches keep running, the wait between checks grows to at most this many times ``poll_s``."""


def every(seconds: float) -> str:
    """A wait as a person reads it.

    >>> every(60), every(0.05), every(240), every(90)
    ('60 s', '0.05 s', '4 min', '90 s')
    """
    return f"{seconds / 60:g} min" if seconds >= 120 else f"{seconds:g} s"


def _clock(ts: float, now: float) -> str:
    """A time of day in UTC, with its date when that is not today's."""
    moment = datetime.fromtimestamp(ts, UTC)
    same_day = moment.date() == datetime.fromtimestamp(now, UTC).date()
    return moment.strftime("%H:%M UTC" if same_day else "%Y-%m-%d %H:%M UTC")


def described(batch: BatchRow, now: float | None = None) -> str:
    """``batch ID (stage S, N requests, submitted 12:03 UTC, in_progress)``: the status as the API last gave it."""
    now = time.time() if now is None else now
    parts = [
        f"stage {batch.stage or 'unknown'}",
        f"{batch.requests} request" + ("" if batch.requests == 1 else "s"),
        f"submitted {_clock(batch.submitted_at, now)}",
    ]
    if batch.api_status:
        parts.append(batch.api_status)
    return f"batch {batch.batch_id} ({', '.join(parts)})"


def waiting_line(batch: BatchRow, wait_s: float, now: float | None = None) -> str:
    """``waiting for batch ID (stage S, N requests, submitted 12:03 UTC, in_progress) — checking every 60 s``."""
    return f"waiting for {described(batch, now)} — checking every {every(wait_s)}"


def wait_for_batches(
    summaries: Sequence[BuildSummary],
    resume: Callable[[int], BuildSummary],
    *,
    poll_s: float = POLL_S,
    say: Callable[[str], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> list[BuildSummary]:
    """Resume the runs that wait for batches at an API until none does.

    Args:
        summaries: how each run's build ended so far.
        resume: resumes run ``i`` (of ``summaries``) and says how it ended this time.
        poll_s: seconds before the first check; it grows while the same batches keep running (see the module).
        say: told a line whenever what the runs wait for changes (a batch, its status, the wait between checks).
        sleep: waits that many seconds (tests give one that finishes the batches instead).

    Returns:
        How each run ended: none of them ``awaiting_batch``.

    Raises:
        ValueError: ``poll_s`` is not above 0.
    """
    if not poll_s > 0:
        raise ValueError(f"the wait between checks must be above 0 seconds, not {poll_s}")
    current = list(summaries)
    wait_s = poll_s
    said: dict[str, str] = {}
    while True:
        waiting = [index for index, summary in enumerate(current) if summary.state == AWAITING_BATCH]
        if not waiting:
            return current
        awaited = {batch for index in waiting for batch in current[index].batches}
        if say is not None:
            for index in waiting:
                for batch in current[index].open_batches:
                    line = waiting_line(batch, wait_s)
                    if said.get(batch.batch_id) != line:
                        say(line)
                    said[batch.batch_id] = line
        sleep(wait_s)
        for index in waiting:
            current[index] = resume(index)
        still = {batch for summary in current if summary.state == AWAITING_BATCH for batch in summary.batches}
        wait_s = min(wait_s * 2, poll_s * BACKOFF) if still == awaited else poll_s
