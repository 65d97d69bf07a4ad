"""A run's heartbeat: the building process says, every few seconds, that it is still at work.

:class:`Heartbeat` records it in the run store (:meth:`~senseforge.pipelines.runstore.RunStore.beat`);
``senseforge runs show`` and the writer lease read it back (:class:`Beat`) to tell a running build from a stopped
one.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any, Protocol, Self

logger = logging.getLogger(__name__)


class Beating(Protocol):
    """Where beats are recorded: the run store (:meth:`~senseforge.pipelines.runstore.RunStore.beat`)."""

    def beat(self, *, ended: bool = False) -> object: ...


HEARTBEAT = "heartbeat"
"""The run fact that holds the heartbeat (JSON: ``ts``, ``pid``, ``host``, ``ended``)."""
HEARTBEAT_EVERY_S = 15.0
"""How often a building process records its heartbeat."""
HEARTBEAT_STALE_S = 60.0
"""A heartbeat older than this says the process that wrote it stopped (four beats missed)."""


@dataclass(frozen=True)
class Beat:
    """A heartbeat: when, and which process on which host, last said it was building the run."""

    ts: float
    pid: int
    host: str
    ended: float | None = None
    """When the process stopped building (it said so on its way out), or ``None``."""

    def as_json(self) -> dict[str, Any]:
        """The beat as the run store keeps it."""
        return {"ts": self.ts, "pid": self.pid, "host": self.host, "ended": self.ended}

    def alive(self, now: float | None = None, stale_s: float = HEARTBEAT_STALE_S) -> bool:
        """Whether the process is still building: it has not said it ended, its beat is fresh, and on this host its
        process still exists."""
        ts = time.time() if now is None else now
        if self.ended is not None or ts - self.ts > stale_s:
            return False
        return self.host != socket.gethostname() or process_exists(self.pid)


def process_exists(pid: int) -> bool:
    """Whether a process ``pid`` exists on this host (``True`` where that cannot be asked)."""
    if os.name != "posix":
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    except OSError:
        return True
    return True


class Heartbeat:
    """A small thread that records this process's heartbeat in the run store: once when it starts, every
    ``every_s`` seconds, and, marked ended, when it stops (a process killed outright leaves a beat that goes
    stale). A beat that cannot be written is logged and skipped: it never stops the build.

    Args:
        run: the run store.
        every_s: seconds between beats.
    """

    def __init__(self, run: Beating, every_s: float = HEARTBEAT_EVERY_S) -> None:
        self.run = run
        self.every_s = every_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _beat(self, *, ended: bool = False) -> None:
        try:
            self.run.beat(ended=ended)
        except Exception:  # a busy or lost database: the next beat tries again
            logger.debug("cannot record the run's heartbeat", exc_info=True)

    def _loop(self) -> None:
        while not self._stop.wait(self.every_s):
            self._beat()

    def start(self) -> Self:
        """Beat now, then every ``every_s`` seconds until :meth:`stop`."""
        self._beat()
        self._thread = threading.Thread(target=self._loop, name="senseforge-heartbeat", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop beating, and record the last beat marked ended."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._beat(ended=True)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()
