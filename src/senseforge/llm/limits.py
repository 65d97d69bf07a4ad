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

**Adapting to the endpoint.** The limit is a ceiling; the *level* of slots granted starts there and moves
with what the endpoint says (additive increase, multiplicative decrease): a request refused as too many
(HTTP 429, or 503) lowers it to ¾ (at most once per level: the other requests sent at the old level
refused with it do not lower it again), a ``Retry-After`` holds every new request of the endpoint until
then, and each run of :data:`RAISE_AFTER` successes in a row raises it by one, up to the ceiling. A
provider given a fixed limit (``adaptive`` off) keeps the level at the ceiling.

**Request and token budgets** (:class:`Budget`): at most so many requests, and so many tokens, in any
minute, across every stage of the process; a request waits (holding its slot) until it fits. The tokens
of a request are estimated before it is sent and corrected by what the answer reports.

**What the endpoint announces** (:meth:`EndpointLimiter.heard`): an OpenAI-style answer carries the
account's limits in ``x-ratelimit-limit-requests`` and ``x-ratelimit-limit-tokens`` (per minute), which
bound the budget as if asked for (the lower bound holds), and what is left of them in
``x-ratelimit-remaining-*``: with nothing left, new requests wait for ``x-ratelimit-reset-*`` (``"1s"``,
``"6m0s"``, ``"20ms"``), as for a ``Retry-After``.

**Beyond one process** (:func:`govern`): a provider takes its endpoint's :class:`Limiter` from
:func:`limiter_for`, which is the process's own :class:`EndpointLimiter` unless a *source* is installed. Under
``--executor ray`` every process of the job installs one that hands out a client of the endpoint's governor
actor (``senseforge.cluster.limits``), which holds an :class:`EndpointLimiter` for the whole job; this module
needs no Ray.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import heapq
import itertools
import math
import re
import threading
import time
import weakref
from collections import deque
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = [
    "RAISE_AFTER",
    "RANK",
    "Ask",
    "Budget",
    "EndpointLimiter",
    "Limiter",
    "LimiterSource",
    "Slot",
    "govern",
    "limiter_for",
    "ranked",
    "reset_seconds",
]

RAISE_AFTER = 25
"""Successes in a row that raise an adaptive level by one slot."""
CUT = 0.75
"""What a refusal as too many leaves of an adaptive level."""
WINDOW_S = 60.0
"""The window of the request and token budgets."""

Clock = Callable[[], float]
Sleep = Callable[[float], Awaitable[None]]

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

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def reset_seconds(text: str | None) -> float | None:
    """Seconds in an ``x-ratelimit-reset-*`` value (``"1s"``, ``"6m0s"``, ``"20ms"``, ``"1h2m3.5s"``; a bare
    number is seconds); ``None`` when absent or unreadable.

    >>> reset_seconds("6m0s"), reset_seconds("20ms"), reset_seconds("1.5"), reset_seconds("soon")
    (360.0, 0.02, 1.5, None)
    """
    if text is None:
        return None
    text = text.strip()
    try:
        return max(0.0, float(text))
    except ValueError:
        pass
    parts = _DURATION_PART.findall(text)
    if not parts or "".join(number + unit for number, unit in parts) != text:
        return None
    return sum(float(number) * _UNIT_S[unit] for number, unit in parts)


def _count(headers: Mapping[str, str], name: str) -> int | None:
    value = headers.get(name)
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


class Budget:
    """At most ``rpm`` requests and ``tpm`` tokens in any window of :data:`WINDOW_S` seconds (``None``: no bound).

    A sliding log of what was sent: a request goes when the last ``rpm`` sends are all a window old, and the
    tokens sent within the window leave room for its own. One request bigger than the whole token budget goes
    alone once the window is empty (it could never fit). ``clock`` and ``sleep`` are injectable for tests.
    """

    def __init__(
        self,
        rpm: int | None = None,
        tpm: int | None = None,
        *,
        clock: Clock = time.monotonic,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        for name, value in (("rpm", rpm), ("tpm", tpm)):
            if value is not None and value < 1:
                raise ValueError(f"{name} is at least 1, not {value}")
        self.rpm = rpm
        self.tpm = tpm
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._sent: deque[_Sent] = deque()  # within the window, oldest first
        self._tokens = 0.0

    def tighten(self, rpm: int | None, tpm: int | None) -> None:
        """Keep the lower of each bound (a stage that asks for less keeps every stage to it)."""
        with self._lock:
            self.rpm = rpm if self.rpm is None else min(self.rpm, rpm or self.rpm)
            self.tpm = tpm if self.tpm is None else min(self.tpm, tpm or self.tpm)

    def _forget(self, now: float) -> None:
        while self._sent and self._sent[0].at <= now - WINDOW_S:
            gone = self._sent.popleft()
            gone.counted = False
            self._tokens -= gone.tokens

    def _wait_s(self, now: float, tokens: float) -> float:
        """Seconds until a request of ``tokens`` fits (0: now)."""
        self._forget(now)
        waits = [0.0]
        if self.rpm is not None and len(self._sent) >= self.rpm:
            waits.append(self._sent[-self.rpm].at + WINDOW_S - now)
        if self.tpm is not None and self._sent and self._tokens + tokens > self.tpm:
            needed = self._tokens + tokens - self.tpm
            for sent in self._sent:  # the oldest leave the window first; once all have, it goes alone
                needed -= sent.tokens
                if needed <= 0 or sent is self._sent[-1]:
                    waits.append(sent.at + WINDOW_S - now)
                    break
        return max(waits)

    async def take(self, tokens: float = 0.0) -> _Sent:
        """Wait until a request of ``tokens`` fits, and count it sent; its entry, for :meth:`settle`."""
        while True:
            with self._lock:
                now = self._clock()
                wait = self._wait_s(now, tokens)
                if wait <= 0:
                    sent = _Sent(now, float(tokens))
                    self._sent.append(sent)
                    self._tokens += sent.tokens
                    return sent
            await self._sleep(max(wait, 0.001))

    def settle(self, sent: _Sent, tokens: float) -> None:
        """Correct a sent request's tokens to what its answer reports."""
        with self._lock:
            if sent.counted:
                self._tokens += tokens - sent.tokens
            sent.tokens = float(tokens)

    def sent_within(self, start: float, end: float) -> tuple[int, float]:
        """Requests and tokens sent in ``[start, end)`` that are still in the window (for tests and reports)."""
        with self._lock:
            inside = [sent for sent in self._sent if start <= sent.at < end]
            return len(inside), sum(sent.tokens for sent in inside)


@dataclass
class _Sent:
    at: float
    tokens: float
    counted: bool = True


@dataclass
class Slot:
    """One held slot: the level it was granted at (its :attr:`epoch` names that level's turn)."""

    epoch: int
    level: int


class EndpointLimiter:
    """At most :attr:`level` holders at once, across every event loop and thread of the process.

    ``async with limiter:`` waits for a slot in the caller's event loop (by :data:`RANK`, then first come, first
    served) and gives it back on leaving, also when the waiting or the work is cancelled. A provider that
    reports how its requests went uses :meth:`acquire` (which also waits out a ``Retry-After`` and the
    :attr:`budget`), then :meth:`succeeded` or :meth:`refused`, then :meth:`release`.

    Args:
        limit: the ceiling (``max_concurrency``); the level starts there.
        adaptive: move the level with the endpoint's refusals and successes (else it stays at the ceiling).
        clock: seconds, for the level's history and ``Retry-After`` holds.
    """

    def __init__(self, limit: int, *, adaptive: bool = True, clock: Clock = time.monotonic) -> None:
        if limit < 1:
            raise ValueError(f"a concurrency limit is at least 1, not {limit}")
        self._ceiling = limit
        self._limit = limit  # the level
        self._adaptive = adaptive
        self._clock = clock
        self._lock = threading.Lock()
        self._held = 0
        self._peak = 0
        self._waiters: list[_Waiter] = []  # a heap: (rank, arrival, loop, future)
        self._arrivals = itertools.count()
        self._epoch = 0
        self._streak = 0
        self._hold_until = 0.0
        self.history: list[tuple[float, int]] = [(clock(), limit)]
        """``(time, level)`` each time the level moved, first the start."""
        self.budget: Budget | None = None
        """Requests and tokens per minute, when bounded."""

    @property
    def limit(self) -> int:
        """The ceiling: the smallest ``max_concurrency`` asked for the endpoint."""
        return self._ceiling

    @property
    def level(self) -> int:
        """Slots granted at most now (the ceiling unless the endpoint refused requests as too many)."""
        with self._lock:
            return self._limit

    @property
    def adaptive(self) -> bool:
        return self._adaptive

    def fix(self) -> None:
        """Keep the level at the ceiling from now on (a provider asked for a fixed limit)."""
        with self._lock:
            self._adaptive = False
            raised = self._limit < self._ceiling
            self._set_level(self._ceiling)
        if raised:
            self._wake()

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
        """Make the ceiling ``limit`` when that is lower (held slots are kept; no new one is granted above it)."""
        with self._lock:
            self._ceiling = max(1, min(self._ceiling, limit))
            if self._limit > self._ceiling:
                self._set_level(self._ceiling)

    def _set_level(self, level: int) -> None:
        if level != self._limit:
            self._limit = level
            self.history.append((self._clock(), level))

    def succeeded(self, slot: Slot) -> None:
        """A request sent in ``slot`` was answered: each :data:`RAISE_AFTER` in a row raise the level by one."""
        raised = False
        with self._lock:
            if not self._adaptive:
                return
            self._streak += 1
            if self._streak >= RAISE_AFTER and self._limit < self._ceiling:
                self._streak = 0
                self._set_level(self._limit + 1)
                raised = True
        if raised:
            self._wake()

    def refused(self, slot: Slot, retry_after_s: float | None = None) -> None:
        """A request sent in ``slot`` was refused as too many: the level drops to ¾ (once per level: refusals of
        requests sent before the drop do not drop it again); a ``Retry-After`` holds new requests until then."""
        with self._lock:
            self._streak = 0
            if retry_after_s is not None and retry_after_s > 0:
                self._hold_until = max(self._hold_until, self._clock() + retry_after_s)
            if self._adaptive and slot.epoch == self._epoch:
                self._epoch += 1
                self._set_level(max(1, math.floor(self._limit * CUT)))

    def settle(self, sent: Any, tokens: float) -> None:
        """Correct a sent request's tokens in the :attr:`budget` (``sent``: what :meth:`slot` returned for it)."""
        if sent is not None and self.budget is not None:
            self.budget.settle(sent, tokens)

    def ask(self, limit: int, *, adaptive: bool = True, rpm: int | None = None, tpm: int | None = None) -> None:
        """What one more provider object asks of the endpoint: the lower ceiling, a fixed level when ``adaptive`` is
        off, and the lower request and token budgets hold."""
        self.lower_to(limit)
        if not adaptive:
            self.fix()
        if rpm is not None or tpm is not None:
            with self._lock:
                if self.budget is None:
                    self.budget = Budget(rpm, tpm, clock=self._clock)
                    return
            self.budget.tighten(rpm, tpm)

    def heard(self, headers: Mapping[str, str]) -> None:
        """Read the account's limits from an answer's ``x-ratelimit-*`` headers (names in lower case, as httpx
        gives them): the per-minute limits bound the :attr:`budget`, and with none of a kind left, new requests
        wait for its reset (see the module notes). Headers that are absent or unreadable change nothing."""
        rpm = _count(headers, "x-ratelimit-limit-requests")
        tpm = _count(headers, "x-ratelimit-limit-tokens")
        rpm, tpm = (rpm if rpm and rpm > 0 else None), (tpm if tpm and tpm > 0 else None)
        with self._lock:
            if rpm is not None or tpm is not None:
                if self.budget is None:
                    self.budget = Budget(rpm, tpm, clock=self._clock)
                else:
                    self.budget.tighten(rpm, tpm)
            for kind in ("requests", "tokens"):
                wait = reset_seconds(headers.get(f"x-ratelimit-reset-{kind}"))
                if _count(headers, f"x-ratelimit-remaining-{kind}") == 0 and wait:
                    self._hold_until = max(self._hold_until, self._clock() + wait)

    def _wake(self) -> None:
        """Grant waiting requests the slots a raised level opened."""
        while True:
            with self._lock:
                if self._held >= self._limit or not self._waiters:
                    return
                _, _, loop, future = heapq.heappop(self._waiters)
                if loop.is_closed():
                    continue
                self._take()
            loop.call_soon_threadsafe(self._grant, future)

    async def slot(
        self, tokens: float = 0.0, sleep: Sleep = asyncio.sleep, *, hold: bool = True
    ) -> tuple[Slot, _Sent | None]:
        """Wait for a slot, then out any ``Retry-After`` hold (unless ``hold`` is off: a retry that has just
        waited out its own), then for room in the :attr:`budget`.

        Returns:
            The slot (give it back with :meth:`release`), and the budget's entry of the request (``None`` when
            there is no budget), to correct with the tokens the answer reports.
        """
        await self.acquire()
        try:
            with self._lock:
                held = Slot(self._epoch, self._limit)
                wait = self._hold_until - self._clock() if hold else 0.0
            if wait > 0:
                await sleep(wait)
            sent = await self.budget.take(tokens) if self.budget is not None else None
        except BaseException:
            self.release()
            raise
        return held, sent

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

    def release(self, slot: Slot | None = None) -> None:
        """Give a slot back (``slot``, the one :meth:`slot` granted, is for limiters that name it; this one counts)."""
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


class Limiter(Protocol):
    """What a provider needs of its endpoint's limiter (see :class:`EndpointLimiter`, whose methods these are)."""

    async def slot(
        self, tokens: float = 0.0, sleep: Sleep = asyncio.sleep, *, hold: bool = True
    ) -> tuple[Slot, Any]: ...

    def release(self, slot: Slot | None = None) -> None: ...

    def succeeded(self, slot: Slot) -> None: ...

    def refused(self, slot: Slot, retry_after_s: float | None = None) -> None: ...

    def settle(self, sent: Any, tokens: float) -> None: ...

    def heard(self, headers: Mapping[str, str]) -> None: ...


@dataclass(frozen=True)
class Ask:
    """What a provider object asks of its endpoint (see :func:`limiter_for`)."""

    limit: int
    adaptive: bool = True
    rpm: int | None = None
    tpm: int | None = None
    hold_s: float | None = None
    """The longest one request holds its slot (the provider's timeout), when known."""


LimiterSource = Callable[[tuple[str, str], Ask], Limiter]
"""Gives the limiter of an endpoint (``(base_url, model)``, the URL without its trailing slash) for what a provider
object asks of it."""

_LIMITERS: weakref.WeakValueDictionary[tuple[str, str], EndpointLimiter] = weakref.WeakValueDictionary()
_REGISTRY_LOCK = threading.Lock()
_SOURCE: LimiterSource | None = None


def govern(source: LimiterSource | None) -> LimiterSource | None:
    """Have :func:`limiter_for` take every endpoint's limiter from ``source`` from now on (``None``: the process's
    own again); returns the source installed before. Providers opened earlier keep the limiters they have."""
    global _SOURCE
    with _REGISTRY_LOCK:
        before, _SOURCE = _SOURCE, source
    return before


def limiter_for(
    base_url: str,
    model: str,
    limit: int,
    *,
    adaptive: bool = True,
    rpm: int | None = None,
    tpm: int | None = None,
    hold_s: float | None = None,
) -> Limiter:
    """The limiter of the endpoint (``base_url``, ``model``), lowered to ``limit`` when that is lower.

    A provider object asking for a fixed limit (``adaptive`` off) fixes the endpoint's; ``rpm`` and ``tpm``
    bound it too (the lowest asked for holds). The caller keeps the limiter as long as it may send requests:
    the registry holds it only weakly. With a source installed (:func:`govern`), the source gives it, told also
    ``hold_s``, the longest one request holds its slot (a governor shared by processes takes back the slot of one
    that was lost after that).
    """
    key = (base_url.rstrip("/"), model)
    with _REGISTRY_LOCK:
        source = _SOURCE
        limiter = _LIMITERS.get(key) if source is None else None
        if source is None and limiter is None:
            limiter = _LIMITERS[key] = EndpointLimiter(limit, adaptive=adaptive)
    if limiter is None:
        assert source is not None
        return source(key, Ask(limit, adaptive, rpm, tpm, hold_s))
    limiter.ask(limit, adaptive=adaptive, rpm=rpm, tpm=tpm)
    return limiter
