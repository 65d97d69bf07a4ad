"""One concurrency limit per endpoint for the whole process.

An API limits what one client has in flight, not what one call of ours has: two stages, or two
threads of one stage, that each send ``max_concurrency`` requests to the same endpoint would send
twice the limit. So every provider object for one endpoint (the same base URL and served model)
takes its slots from one :class:`EndpointLimiter`, whichever event loop or thread it runs in.

Waiting requests are served by rank, then in the order they came: a request's rank is :data:`RANK` where it
waits (lower first; 0 unless set with :func:`ranked`). The runner ranks each stage's calls by the stage's place
in the recipe, so while records stream through several stages, the earliest stage's calls go first and its
last records reach the later stages while those still have work queued.

The limit of an endpoint is the smallest ``max_concurrency`` any open provider object for it was
given (a stage that asks for less keeps every stage to it). A limiter lives while a provider object
holds it; the next one opened after all are gone starts afresh.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import heapq
import itertools
import threading
import weakref
from collections.abc import Iterator

__all__ = ["RANK", "EndpointLimiter", "limiter_for", "ranked"]

RANK: contextvars.ContextVar[int] = contextvars.ContextVar("senseforge_limiter_rank", default=0)
"""The rank of the requests sent from this context: among those waiting for a slot, lower ranks go first."""


@contextlib.contextmanager
def ranked(rank: int) -> Iterator[None]:
    """Requests sent inside the block wait for their slots with ``rank`` (see :data:`RANK`)."""
    token = RANK.set(rank)
    try:
        yield
    finally:
        RANK.reset(token)


_Waiter = tuple[int, int, asyncio.AbstractEventLoop, "asyncio.Future[None]"]


class EndpointLimiter:
    """At most :attr:`limit` holders at once, across every event loop and thread of the process.

    ``async with limiter:`` waits for a slot in the caller's event loop (by :data:`RANK`, then first come, first
    served) and gives it back on leaving, also when the waiting or the work is cancelled.
    """

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"a concurrency limit is at least 1, not {limit}")
        self._limit = limit
        self._lock = threading.Lock()
        self._held = 0
        self._peak = 0
        self._waiters: list[_Waiter] = []  # a heap: (rank, arrival, loop, future)
        self._arrivals = itertools.count()

    @property
    def limit(self) -> int:
        return self._limit

    @property
    def held(self) -> int:
        """Slots held now."""
        with self._lock:
            return self._held

    @property
    def peak(self) -> int:
        """The most slots held at once so far."""
        with self._lock:
            return self._peak

    def lower_to(self, limit: int) -> None:
        """Make the limit ``limit`` when that is lower (held slots are kept; no new one is granted above it)."""
        with self._lock:
            self._limit = max(1, min(self._limit, limit))

    async def acquire(self) -> None:
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._held < self._limit and not self._waiters:
                self._take()
                return
            future: asyncio.Future[None] = loop.create_future()
            entry = (RANK.get(), next(self._arrivals), loop, future)
            heapq.heappush(self._waiters, entry)
        try:
            await future
        except asyncio.CancelledError:
            with self._lock:
                waiting = entry in self._waiters
                if waiting:
                    self._waiters.remove(entry)
                    heapq.heapify(self._waiters)
            if not waiting and future.done() and not future.cancelled():
                self.release()  # granted just as it was cancelled: give the slot on
            # (popped but not yet granted: the grant sees the cancelled future and gives the slot on itself)
            raise

    def release(self) -> None:
        with self._lock:
            while self._waiters:
                if self._held > self._limit:  # the limit was lowered: this slot is not handed on
                    break
                _, _, loop, future = heapq.heappop(self._waiters)
                if loop.is_closed():
                    continue
                loop.call_soon_threadsafe(self._grant, future)  # the slot passes on: still held
                return
            self._held -= 1

    def _grant(self, future: asyncio.Future[None]) -> None:
        if future.done():  # cancelled while the slot was on its way
            self.release()
        else:
            future.set_result(None)

    def _take(self) -> None:
        self._held += 1
        self._peak = max(self._peak, self._held)

    async def __aenter__(self) -> EndpointLimiter:
        await self.acquire()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.release()


_LIMITERS: weakref.WeakValueDictionary[tuple[str, str], EndpointLimiter] = weakref.WeakValueDictionary()
_REGISTRY_LOCK = threading.Lock()


def limiter_for(base_url: str, model: str, limit: int) -> EndpointLimiter:
    """The process's limiter of the endpoint (``base_url``, ``model``), lowered to ``limit`` when that is lower.

    The caller keeps the limiter as long as it may send requests: the registry holds it only weakly.
    """
    key = (base_url.rstrip("/"), model)
    with _REGISTRY_LOCK:
        limiter = _LIMITERS.get(key)
        if limiter is None:
            limiter = EndpointLimiter(limit)
            _LIMITERS[key] = limiter
        else:
            limiter.lower_to(limit)
        return limiter
