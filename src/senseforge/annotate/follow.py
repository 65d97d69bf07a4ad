"""Runs that advance by themselves: ``annotate serve RUN_DIR --follow``.

A :class:`Follower` is a thread in the annotation server that watches the run it serves. When people's judgements
let a waiting stage decide — a queued task got all the judgements it wants, or an admin ruled on an item — and
nothing changed for a settle time (so an undo within it is honoured: it resets the wait), it resumes the run as a
child process, ``senseforge build RECIPE --out RUN_DIR --resume``, one at a time. The app imports no recipe: the
child does, and the recipe's name comes from the run's manifest.

The child takes the run's writer lease (:class:`senseforge.pipelines.runlease.WriterLease`) like any build: while
someone else holds it (a ``build --resume`` typed by hand, another server) the child is refused (exit 75) and the
follower waits and tries again; it never forces. A run whose last build was killed (state ``running``, its lease
holder gone) is resumed the same way. Following stops when the run is done, or when an advance fails (its last line
is the cause, on the admin page).

Each advance is a row of the ``advances`` table in the run store (when it started, the command, when it ended, its
exit status and last line of output). A table, not a file in the run folder: it is written in transactions (a
server killed mid-advance leaves a row with no end, shown as interrupted), every server of a run on PostgreSQL reads
the same log, and the run folder's files stay exactly those a build writes. The table is created by the first
follower, not by every build.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from senseforge.errors import ConfigError, RunBusy
from senseforge.pipelines.runlease import lease_holder
from senseforge.pipelines.runstore import RunStore
from senseforge.pipelines.tables import assignments, gold, judgements, tasks
from senseforge.runfolder.folder import read_manifest

logger = logging.getLogger(__name__)

SETTLE_S = 10.0
"""Seconds the ready judgements must stay as they are before the run is resumed (an undo within it resets it)."""
POLL_S = 2.0
"""Seconds between two looks at the run."""
WAITING = "awaiting_review"
RUNNING = "running"
DONE = "done"
QUEUE = Path("review") / "queue.jsonl"
"""The tasks a run waits for, as its last build wrote them (with ``needed``: judgements still wanted then)."""
INTERRUPTED_CODES = frozenset({130, 143})
"""Exit statuses of a build stopped by Ctrl-C or SIGTERM: not a failure of the run (the next advance resumes it)."""

_log_metadata = sa.MetaData()
advances = sa.Table(
    "advances",
    _log_metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("started", sa.Float, nullable=False),
    sa.Column("command", sa.Text, nullable=False),
    sa.Column("why", sa.Text, nullable=False),
    sa.Column("finished", sa.Float, nullable=True),
    sa.Column("exit_code", sa.Integer, nullable=True),
    sa.Column("last_line", sa.Text, nullable=True),
)
"""The log of a follower's advances (created by the first follower of a run, not by builds)."""


@dataclass(frozen=True)
class Advance:
    """One resume the follower started: when, why, the command, and how it ended (``None``: not yet, or never)."""

    id: int
    started: float
    command: str
    why: str
    finished: float | None
    exit_code: int | None
    last_line: str | None

    @property
    def outcome(self) -> str:
        """``running``, ``interrupted`` (its server stopped first), ``done``/``ok``, ``busy``, ``killed by …``,
        ``failed (exit n)``; with the child's last line where it said something."""
        if self.exit_code is None:
            return "running" if self.finished is None else "interrupted (the server stopped first)"
        if self.exit_code == 0:
            word = "ok"
        elif self.exit_code == RunBusy.exit_code:
            word = "busy (another process builds the run), will try again"
        elif self.exit_code < 0:
            word = f"killed by signal {-self.exit_code}, will resume"
        elif self.exit_code in INTERRUPTED_CODES:
            word = f"interrupted (exit {self.exit_code}), will resume"
        else:
            word = f"failed (exit {self.exit_code})"
        return f"{word}: {self.last_line}" if self.last_line else word


def ready_tasks(engine: Engine) -> frozenset[tuple[str, str]]:
    """What lets a waiting stage decide: every queued task (gold aside) with all the judgements it wants, and every
    item people ruled on or judged outside the queue (an admin's ruling), as ``(task type, item id)``."""
    done = (
        sa.select(sa.func.count())
        .where(assignments.c.task_id == tasks.c.id, assignments.c.done_at.is_not(None))
        .scalar_subquery()
    )
    complete = sa.select(tasks.c.type, tasks.c.item_id).where(
        done >= tasks.c.k, tasks.c.id.not_in(sa.select(gold.c.task_id))
    )
    queued = sa.select(tasks.c.id).where(tasks.c.type == judgements.c.task, tasks.c.item_id == judgements.c.item_id)
    ruled = (
        sa.select(judgements.c.task, judgements.c.item_id)
        .where(judgements.c.source == "human", ~sa.exists(queued))
        .distinct()
    )
    with engine.connect() as conn:
        rows = [*conn.execute(complete), *conn.execute(ruled)]
    return frozenset((str(kind), str(item)) for kind, item in rows)


def _last_line(handle: IO[bytes]) -> str | None:
    handle.seek(0)
    lines = [line.strip() for line in handle.read().decode("utf-8", "replace").splitlines() if line.strip()]
    return lines[-1][:500] if lines else None


class Follower:
    """Resume a run by itself as people's judgements let it move on (see the module's description).

    Args:
        run_dir: the run folder (its manifest names the recipe).
        store_url: the run store's SQLAlchemy URL.
        run_store: the ``--run-store`` URL to hand the child (when the run store is not the run's ``run.db`` and its
            manifest keeps no password); ``None``: the manifest's.
        settle_s: seconds the ready judgements must stay unchanged before an advance.
        poll_s: seconds between two looks at the run.
        command: the program a resume runs (default: this Python's ``-m senseforge``); tests hand another.
        clock: a monotonic time source for the settle time (tests move it).

    Raises:
        ConfigError: ``run_dir`` holds no run (no manifest naming a recipe).
    """

    def __init__(
        self,
        run_dir: Path,
        store_url: str,
        *,
        run_store: str | None = None,
        settle_s: float = SETTLE_S,
        poll_s: float = POLL_S,
        command: Sequence[str] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        manifest = read_manifest(run_dir) if run_dir.is_dir() else None
        if manifest is None or not manifest.recipe:
            raise ConfigError(f"{run_dir}: no run to follow here (no manifest.json naming its recipe)")
        self.run_dir = run_dir.resolve()
        self.recipe = str(manifest.recipe)
        self.settle_s = settle_s
        self.poll_s = poll_s
        self.clock = clock
        program = list(command) if command is not None else [sys.executable, "-m", "senseforge"]
        self.argv = [*program, "build", self.recipe, "--out", str(self.run_dir), "--resume"]
        if run_store is not None:
            self.argv += ["--run-store", run_store]
        self.shown = f"senseforge build {self.recipe} --out {self.run_dir} --resume"
        self.run = RunStore(store_url)
        _log_metadata.create_all(self.run.engine)
        self.cause: str | None = None
        """Why following stopped when an advance failed (its last line), else ``None``."""
        self.finished = False
        """The run is done: nothing more to follow."""
        self.waiting_for: str | None = None
        """Who holds the run's lease while an advance waits for it (``pid … on … since …``), else ``None``."""
        self._consumed: frozenset[tuple[str, str]] = frozenset()
        self._seen: frozenset[tuple[str, str]] | None = None
        self._since: float | None = None
        self._child: subprocess.Popen[bytes] | None = None
        self._child_log: IO[bytes] | None = None
        self._child_row = 0
        self._child_ready: frozenset[tuple[str, str]] = frozenset()
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._close_interrupted()
        if self.state() == WAITING:
            self._consumed = self._seen_by_last_build()

    def _seen_by_last_build(self) -> frozenset[tuple[str, str]]:
        """What the run's last build had already read when it stopped to wait: every ready task but those its
        review queue (``review/queue.jsonl``) still listed as needing judgements (empty when it cannot be read: one
        advance then checks)."""
        path = self.run_dir / QUEUE
        try:
            rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
            open_then = {(str(row["type"]), str(row["id"])) for row in rows if int(row["needed"]) > 0}
        except (OSError, ValueError, KeyError, TypeError):
            return frozenset()
        return frozenset(ready_tasks(self.run.engine) - open_then)

    # -- state -------------------------------------------------------------------------------

    @property
    def following(self) -> bool:
        """Whether the run may still move on by itself (not done, no failed advance)."""
        return not self.finished and self.cause is None

    def state(self) -> str | None:
        """The run's state as its store says (``running``, ``awaiting_review`` …), or ``None``."""
        return self.run.meta("state")

    def advances(self, limit: int = 20) -> list[Advance]:
        """The newest advances first."""
        with self.run.engine.connect() as conn:
            rows = conn.execute(sa.select(advances).order_by(advances.c.id.desc()).limit(limit)).mappings().all()
        return [Advance(**dict(row)) for row in rows]

    @property
    def busy(self) -> bool:
        """Whether an advance is running now."""
        return self._child is not None

    # -- the loop ------------------------------------------------------------------------------

    def start(self) -> Follower:
        """Look at the run every ``poll_s`` seconds in a thread until :meth:`stop`."""
        self._thread = threading.Thread(target=self._loop, name="senseforge-follow", daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.wait(self.poll_s):
            try:
                self.step()
            except Exception:  # a busy or lost database: the next look tries again
                logger.warning("following the run: could not look at it", exc_info=True)
            if not self.following and self._child is None:
                return

    def stop(self, *, wait_s: float = 30.0) -> None:
        """Stop looking; an advance still running is asked to stop (SIGTERM: the build stops cleanly and the next
        advance, or ``build --resume``, continues it)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=wait_s)
        with self._lock:
            if self._child is not None:
                self._child.terminate()
                try:
                    self._child.wait(timeout=wait_s)
                except subprocess.TimeoutExpired:
                    self._child.kill()
                    self._child.wait()
                self._reap()
        self.run.close()

    def step(self) -> None:
        """One look at the run: collect a finished advance, else start one when the run can move on and the ready
        judgements have settled."""
        with self._lock:
            if self._child is not None:
                if self._child.poll() is None:
                    return
                self._reap()
            if not self.following:
                return
            state = self.state()
            if state == DONE:
                self.finished = True
                return
            holder = lease_holder(self.run)
            now_wall = time.time()
            live = holder is not None and not holder.expired(now_wall)
            interrupted = state == RUNNING and not live  # its build was killed: resume it
            if state != WAITING and not interrupted:
                self._since = None
                self.waiting_for = holder.described() if live and holder is not None else None
                return
            ready = ready_tasks(self.run.engine)
            if not interrupted and not (ready - self._consumed):
                self._seen, self._since = ready, None
                return
            now = self.clock()
            if ready != self._seen or self._since is None:  # new judgements, or an undo: wait again
                self._seen, self._since = ready, now
            if now - self._since < self.settle_s:
                return
            if live and holder is not None:  # someone else builds it now: wait, never force
                self.waiting_for = holder.described()
                return
            self.waiting_for = None
            self._launch(ready, "resume the interrupted build" if interrupted else self._why(ready))

    def _why(self, ready: frozenset[tuple[str, str]]) -> str:
        new = sorted(ready - self._consumed)
        kinds: dict[str, int] = {}
        for kind, _ in new:
            kinds[kind] = kinds.get(kind, 0) + 1
        return "judged: " + ", ".join(f"{kind} {n}" for kind, n in sorted(kinds.items()))

    def _launch(self, ready: frozenset[tuple[str, str]], why: str) -> None:
        log = tempfile.TemporaryFile()  # noqa: SIM115 — kept open until the child ends (closed in _reap)
        with self.run.engine.begin() as conn:
            inserted = conn.execute(
                advances.insert().values(started=time.time(), command=self.shown, why=why)
            ).inserted_primary_key
        assert inserted is not None
        self._child_row = int(inserted[0])
        self._child_ready = ready
        self._child_log = log
        logger.info("advancing the run (%s): %s", why, self.shown)
        self._child = subprocess.Popen(
            self.argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ)
        )

    def _reap(self) -> None:
        """Record how the finished advance ended, and what it means for following."""
        child, log = self._child, self._child_log
        assert child is not None and log is not None
        code = child.wait()
        last = _last_line(log)
        log.close()
        self._child, self._child_log = None, None
        with self.run.engine.begin() as conn:
            conn.execute(
                advances.update()
                .where(advances.c.id == self._child_row)
                .values(finished=time.time(), exit_code=code, last_line=last)
            )
        if code == 0:
            self._consumed = self._child_ready
            self._since = None
            if self.state() == DONE:
                self.finished = True
        elif code == RunBusy.exit_code or code < 0 or code in INTERRUPTED_CODES:
            self._since = None  # busy, killed or interrupted: the same judgements advance it again after a settle
        else:
            self.cause = last or f"the build exited with status {code}"
            logger.error("stopped following the run: %s", self.cause)

    def _close_interrupted(self) -> None:
        """Advances a server killed before they ended: marked as such (they end, with no exit status)."""
        with self.run.engine.begin() as conn:
            conn.execute(
                advances.update().where(advances.c.finished.is_(None)).values(finished=time.time(), exit_code=None)
            )

    def wait(self, timeout_s: float | None = None) -> int | None:
        """Wait for the advance running now (if any) to end, and record it; its exit status, or ``None``."""
        with self._lock:
            child = self._child
        if child is None:
            return None
        code = child.wait(timeout=timeout_s)
        with self._lock:
            if self._child is child:
                self._reap()
        return code

    def child_pid(self) -> int | None:
        """The process id of the advance running now, or ``None``."""
        with self._lock:
            return self._child.pid if self._child is not None else None


def describe(follower: Follower | None) -> dict[str, Any]:
    """What the admin page shows of a follower: following or why not, the settle time, who it waits for."""
    if follower is None:
        return {"following": False}
    return {
        "following": follower.following,
        "busy": follower.busy,
        "settle_s": follower.settle_s,
        "cause": follower.cause,
        "waiting_for": follower.waiting_for,
    }


__all__ = ["POLL_S", "SETTLE_S", "Advance", "Follower", "advances", "describe", "ready_tasks"]
