"""One writer per run: the lease row every build and resume takes and renews (:class:`WriterLease`).

A second writer is refused (:class:`~senseforge.errors.RunBusy`, naming the holder); a lease its holder stopped
renewing, or whose process is gone on this host, is taken over.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any, Self

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError

from senseforge.errors import RunBusy
from senseforge.pipelines.runstore import RunStore, process_exists
from senseforge.pipelines.tables import run_lease

logger = logging.getLogger(__name__)

WRITER = "writer"
"""The name of the run's one lease row."""
LEASE_TTL_S = 60.0
"""A writer lease not renewed for this long is taken over (its holder stopped without letting go)."""
LEASE_RENEW_S = 15.0
"""How often a writer renews its lease."""


@dataclass(frozen=True)
class LeaseHolder:
    """Who holds a run's writer lease: which process on which host, since when, renewed when."""

    token: str
    pid: int
    host: str
    since: float
    renewed: float

    def expired(self, now: float, ttl_s: float = LEASE_TTL_S) -> bool:
        """Whether the holder stopped: its lease lapsed (not renewed for ``ttl_s``), or on this host its process
        is gone."""
        if now - self.renewed > ttl_s:
            return True
        return self.host == socket.gethostname() and not process_exists(self.pid)

    def described(self) -> str:
        """``pid 123 on host since 2026-12-04 03:00:00 UTC``."""
        since = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(self.since))
        return f"pid {self.pid} on {self.host} since {since}"


def lease_holder(run: RunStore) -> LeaseHolder | None:
    """Who holds the run's writer lease now (expired or not), or ``None``."""
    with run.engine.connect() as conn:
        row = conn.execute(sa.select(run_lease).where(run_lease.c.name == WRITER)).mappings().first()
    if row is None:
        return None
    return LeaseHolder(
        token=str(row["token"]),
        pid=int(row["pid"]),
        host=str(row["host"]),
        since=float(row["since"]),
        renewed=float(row["renewed"]),
    )


class WriterLease:
    """The run's writer lease: one process at a time builds or resumes a run.

    :meth:`acquire` takes the lease row (or takes over one whose holder stopped: :meth:`LeaseHolder.expired`) in
    one transaction, compare-and-swap on the holder's token, so two processes racing for it cannot both win, on
    SQLite or PostgreSQL alike; a thread renews it every ``every_s`` seconds; :meth:`release` lets it go. A process
    killed outright leaves its row behind, taken over once its holder is seen gone (same host) or its lease
    lapsed (``ttl_s``).

    Args:
        run: the run store.
        ttl_s: a lease not renewed for this long is taken over.
        every_s: seconds between renewals.
        clock: the time source (tests move it).
    """

    def __init__(
        self,
        run: RunStore,
        *,
        ttl_s: float = LEASE_TTL_S,
        every_s: float = LEASE_RENEW_S,
        clock: Any = time.time,
    ) -> None:
        self.run = run
        self.ttl_s = ttl_s
        self.every_s = every_s
        self.clock = clock
        self.token = os.urandom(16).hex()
        self.lost = False
        """The lease was taken over while this process held it (it stalled longer than ``ttl_s``)."""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def try_acquire(self) -> LeaseHolder | None:
        """Take the lease if it is free or its holder stopped; ``None`` when taken, else who holds it."""
        now = float(self.clock())
        mine = {"token": self.token, "pid": os.getpid(), "host": socket.gethostname(), "since": now, "renewed": now}
        try:
            with self.run.engine.begin() as conn:
                row = conn.execute(sa.select(run_lease).where(run_lease.c.name == WRITER)).mappings().first()
                if row is None:
                    conn.execute(run_lease.insert().values(name=WRITER, **mine))
                    return None
                holder = LeaseHolder(
                    str(row["token"]), int(row["pid"]), str(row["host"]), float(row["since"]), float(row["renewed"])
                )
                if not holder.expired(now, self.ttl_s):
                    return holder
                taken = conn.execute(
                    run_lease.update()
                    .where(run_lease.c.name == WRITER, run_lease.c.token == holder.token)
                    .values(**mine)
                )
                if taken.rowcount == 1:
                    logger.info("took over the run's writer lease of %s (it stopped)", holder.described())
                    return None
        except IntegrityError:  # another process inserted the row first
            pass
        current = lease_holder(self.run)  # another process won the race: it holds the lease now
        if current is None:
            return self.try_acquire()
        return current

    def acquire(self) -> Self:
        """Take the lease and renew it every ``every_s`` seconds until :meth:`release`.

        Raises:
            RunBusy: another process holds it (the one line names it).
        """
        holder = self.try_acquire()
        if holder is not None:
            raise RunBusy(
                f"another process builds this run: {holder.described()}; wait for it to finish or stop it"
                f" (a lease not renewed for {self.ttl_s:g} s, or whose process is gone from this host, is taken over)"
            )
        self._thread = threading.Thread(target=self._loop, name="senseforge-writer-lease", daemon=True)
        self._thread.start()
        return self

    def renew(self) -> bool:
        """Renew the lease now; ``False`` when it is no longer this process's (taken over)."""
        with self.run.engine.begin() as conn:
            renewed = conn.execute(
                run_lease.update()
                .where(run_lease.c.name == WRITER, run_lease.c.token == self.token)
                .values(renewed=float(self.clock()))
            )
        return renewed.rowcount == 1

    def _loop(self) -> None:
        while not self._stop.wait(self.every_s):
            try:
                if not self.renew():
                    self.lost = True
                    logger.error("this run's writer lease was taken over by another process: stop this build")
                    return
            except Exception:  # a busy or lost database: the next renewal tries again
                logger.debug("cannot renew the run's writer lease", exc_info=True)

    def release(self) -> None:
        """Stop renewing and let the lease go (only this process's own: one taken over is left to its holder)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        try:
            with self.run.engine.begin() as conn:
                conn.execute(run_lease.delete().where(run_lease.c.name == WRITER, run_lease.c.token == self.token))
        except Exception:  # the row lapses and is taken over
            logger.debug("cannot release the run's writer lease", exc_info=True)

    def __enter__(self) -> Self:
        return self.acquire()

    def __exit__(self, *_: object) -> None:
        self.release()
