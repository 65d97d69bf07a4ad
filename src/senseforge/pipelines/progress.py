"""What a run says of its progress: one event per change of a stage's counts, in records.

A stage's pass over its records (the first pass, or a later round of records whose calls failed transiently) is
told as :class:`StageProgress` snapshots to a :data:`ProgressSink`, whenever one of its counts changes. The counts
are **records** — what the stage was given, not what its models were asked (a record may cost several requests,
and a record split into children counts once) — with the requests its models answered apart, and with the records
only queued for people apart from those decided:

* ``done``: records with an outcome stored (kept, rejected, or split into children);
* ``queued``: records waiting for people's judgements at this stage (their tasks queued; nothing decided yet);
* ``retry``: records whose calls failed transiently (tried again in the next round, or still failing);
* ``batch``: records whose calls wait for a batch at an API (``-o batch=true``): collected when the run is
  resumed (``build --resume``, or by itself under ``--wait``), not tried again in this run;
* ``requests``: model requests answered for the stage's batches (from the cache or the backend), which move
  within a batch wherever the backend reports answers as they arrive (concurrent API calls, a local model
  answering one request after another).

``done + queued + retry + batch`` never exceeds ``total`` and equals it on a pass's last event. The pipelines only send
events; the command line draws them (:mod:`senseforge.cli`), so nothing here knows a terminal.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, replace

__all__ = ["ProgressSink", "StageProgress", "StageTally"]


@dataclass(frozen=True)
class StageProgress:
    """Where one pass of a stage stands (a snapshot; a later event replaces an earlier one of the same pass)."""

    stage: str
    """The stage's name."""
    attempt: int = 0
    """0 for the first pass over the stage's records; ``n`` for the ``n``-th round of records whose calls failed."""
    total: int | None = None
    """Records of this pass; ``None`` while records still come from the stages before (streaming)."""
    done: int = 0
    """Records with an outcome stored: kept, rejected, or split into children."""
    queued: int = 0
    """Records queued for people: their tasks wait in the annotation app; the stage decided nothing for them."""
    retry: int = 0
    """Records whose calls failed transiently in this pass."""
    batch: int = 0
    """Records whose calls wait for a batch at an API (answered later: nothing failed)."""
    requests: int = 0
    """Model requests answered for this pass's batches, cache hits included."""
    last: bool = False
    """The pass's last event: the stage is through with these records in this run."""

    @property
    def label(self) -> str:
        """The stage's name, and which round of retries this is."""
        return self.stage if self.attempt == 0 else f"{self.stage} (retry {self.attempt})"

    @property
    def handled(self) -> int:
        """Records this pass is through with, one way or another (``done + queued + retry + batch``)."""
        return self.done + self.queued + self.retry + self.batch


ProgressSink = Callable[[StageProgress], None]
"""Where a run's progress events go (the command line's bars; a list's ``append`` in tests). It may be called from
worker threads, one event at a time."""


class StageTally:
    """The counts of one pass of a stage, sent to ``sink`` on every change (thread-safe: requests are counted from
    the threads the models answer on).

    Args:
        stage: the stage's name.
        attempt: which pass (see :attr:`StageProgress.attempt`).
        total: records of the pass, if known yet.
        sink: where the events go.
        lock: shared by every tally of a run, so events reach the sink one at a time.
    """

    def __init__(
        self, stage: str, attempt: int, total: int | None, sink: ProgressSink, lock: threading.Lock | None = None
    ) -> None:
        self._state = StageProgress(stage, attempt, total)
        self._sink = sink
        self._lock = lock or threading.Lock()
        self._closed = False
        with self._lock:
            sink(self._state)

    @property
    def state(self) -> StageProgress:
        """The last event sent."""
        return self._state

    def requests(self, n: int) -> None:
        """``n`` more requests answered (a model's progress callback)."""
        if n:
            self._change(lambda state: replace(state, requests=state.requests + n))

    def records(self, *, done: int = 0, queued: int = 0, retry: int = 0, batch: int = 0) -> None:
        """Records of a stored batch: ``done`` decided, ``queued`` for people, ``retry`` to try again, ``batch``
        waiting for a batch at an API."""
        self._change(
            lambda state: replace(
                state,
                done=state.done + done,
                queued=state.queued + queued,
                retry=state.retry + retry,
                batch=state.batch + batch,
            )
        )

    def know_total(self, total: int) -> None:
        """The pass's record count, once nothing more can come to it."""
        self._change(lambda state: state if state.total == total else replace(state, total=total))

    def close(self) -> None:
        """Send the pass's last event (once); later counts are not sent."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._state = replace(self._state, last=True)
                self._sink(self._state)

    def _change(self, update: Callable[[StageProgress], StageProgress]) -> None:
        with self._lock:
            if self._closed:
                return  # a late answer of a batch the run no longer waits for
            state = update(self._state)
            if state != self._state:
                self._state = state
                self._sink(state)
