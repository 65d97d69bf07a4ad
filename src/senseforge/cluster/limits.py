"""The rate-limit governor: one Ray actor per API endpoint holds, for the whole job, what one process's
:class:`~senseforge.llm.limits.EndpointLimiter` holds for it.

Under ``--executor ray`` the calls of one endpoint leave from several processes (the job's actor of API-bound
batches, the replicas of an evaluation, the driver's in-order stages), and on a cluster from several machines. Each
process alone would keep to the endpoint's limit and together they would send a multiple of it; so every process
of the job installs :func:`install` (the seam :func:`senseforge.llm.limits.govern`), and a provider opened there
takes a :class:`GovernedLimiter`: a client of its endpoint's :class:`Governor` actor. That actor holds one
``EndpointLimiter``: the slots, the adaptive level, ``Retry-After`` holds, the request and token budgets and what
``x-ratelimit-*`` headers announce. It serves waiting requests by the rank their stage gave them (the client sends
it: a context variable does not cross processes), then in the order they came.

**Cost.** A process keeps the slots it was granted while its own requests wait for them: a request that ends
hands its slot straight on to the best-ranked request of its process waiting (or keeps it a moment,
:data:`IDLE_S`, for the next one), with no round trip, while the governor's last answer said no other process
waits, at most :data:`HAND_ON` requests and :data:`HAND_ON_S` seconds after the slot was granted, and never after
a refusal or a hold this process saw, nor when a request and token budget holds (each request must then be
counted before it is sent). Only then does the slot go back, with one message not waited for (how its requests
went, its tokens). A request finding no slot of its process asks the governor for one (one round trip). The
governor's actor takes no CPU of Ray's.

**Lifetime.** The job's :class:`Governors` actor, started by the driver (:func:`start`), starts an endpoint's
governor on its first use and keeps it for the job, so a governor outlives the processes that use it (a lost
worker does not take the endpoint's state with it). The lowest limit asked of an endpoint in the job holds for the
rest of the job. A slot whose holder was lost (a killed worker) is taken back once its lease ends: twice the
provider's timeout, and at least a minute past it (:func:`lease_s`).
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import heapq
import itertools
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from senseforge.llm.limits import RANK, Ask, EndpointLimiter, Limiter, LimiterSource, Sleep, Slot, govern, ranked

from .runtime import import_ray

__all__ = ["LEASE_S", "GovernedLimiter", "GovernedSlot", "Governor", "Governors", "install", "lease_s", "start"]


def lease_s(hold_s: float | None) -> float:
    """How long a slot may be held before it is taken back, for requests that hold one at most ``hold_s`` (their
    timeout): twice that, and at least a minute more; :data:`LEASE_S` when unknown.

    >>> lease_s(60.0), lease_s(600.0), lease_s(None)
    (120.0, 1200.0, 1800.0)
    """
    return LEASE_S if hold_s is None else max(2 * hold_s, hold_s + 60.0)


LEASE_S = 1800.0
"""Seconds a slot may be held before the governor takes it back (its holder is taken as lost), for a provider that
names no timeout."""
REAP_EVERY_S = 5.0
"""How often the governor looks for slots held past their lease."""
WAITING = 100_000
"""Requests one governor can have waiting at once (an async actor's concurrency)."""
REGISTRY = "senseforge-governors"
"""The name of the job's :class:`Governors` actor."""
HAND_ON = 32
"""Requests one granted slot may serve in its process, one after the other, before it goes back to the governor."""
HAND_ON_S = 1.0
"""Seconds after its grant during which a slot may still be handed on in its process (a lease is far longer: a
killed process's slots are taken back as before)."""
IDLE_S = 0.1
"""Seconds a process keeps a slot none of its requests waits for, for the next one (while nobody else waits)."""


@dataclass
class GovernedSlot(Slot):
    """A slot granted by a governor: :class:`~senseforge.llm.limits.Slot` with the ticket that gives it back."""

    ticket: int = 0


@dataclass
class _Held:
    slot: Slot
    sent: Any
    until: float


class Governor:
    """One endpoint's limiter for the whole job (an async Ray actor): see the module notes.

    Args:
        ask: what the first provider object asked of the endpoint.
        clock: seconds, for leases (tests inject one).
    """

    def __init__(self, ask: Ask, clock: Any = time.monotonic) -> None:
        self._limiter = EndpointLimiter(ask.limit, adaptive=ask.adaptive)
        self._limiter.ask(ask.limit, adaptive=ask.adaptive, rpm=ask.rpm, tpm=ask.tpm)
        self._clock = clock
        self._held: dict[int, _Held] = {}
        self._tickets = itertools.count(1)
        self._reaper: asyncio.Task[None] | None = None
        self._waiting: dict[str, int] = {}  # requests waiting, by the process (client) that sent them
        self._asking: dict[tuple[str, int], asyncio.Task[Any]] = {}  # the waits a client may withdraw
        self._withdrawn: set[tuple[str, int]] = set()
        self._grants = self._passed = 0  # slots granted; requests answered in them before the last (hand-offs)

    def ask(self, ask: Ask) -> None:
        """One more provider object's ask: the lower ceiling, a fixed level, the lower budgets hold."""
        self._limiter.ask(ask.limit, adaptive=ask.adaptive, rpm=ask.rpm, tpm=ask.tpm)

    async def slot(
        self, rank: int, tokens: float, hold: bool, lease: float = LEASE_S, client: str = "", ask: int = 0
    ) -> tuple[GovernedSlot, bool, bool] | None:
        """Wait for a slot with ``rank`` (then for any ``Retry-After`` hold, unless ``hold`` is off, and for room in
        the budget), held at most ``lease`` seconds, for the process named ``client``.

        Returns:
            The slot; whether the budget counted the request (:meth:`done` corrects its tokens); whether requests of
            other processes wait now (the process then gives the slot back rather than hand it on). ``None`` when
            the client withdrew the wait (:meth:`withdraw` of ``ask``, the client's number for it).
        """
        if self._reaper is None:
            self._reaper = asyncio.get_running_loop().create_task(self._reap())
        key = (client, ask)
        self._waiting[client] = self._waiting.get(client, 0) + 1
        task = asyncio.current_task()
        if ask and task is not None:
            self._asking[key] = task
        try:
            with ranked(rank):
                slot, sent = await self._limiter.slot(tokens, hold=hold)
        except asyncio.CancelledError:
            if key in self._withdrawn:
                return None
            raise
        finally:
            self._waiting[client] -= 1
            if not self._waiting[client]:
                del self._waiting[client]
            self._asking.pop(key, None)
            self._withdrawn.discard(key)
        ticket = next(self._tickets)
        self._held[ticket] = _Held(slot, sent, self._clock() + lease)
        self._grants += 1
        others = any(name != client for name in self._waiting)
        return GovernedSlot(slot.epoch, slot.level, ticket), sent is not None, others

    def withdraw(self, client: str, ask: int) -> None:
        """The client's wait ``ask`` is not needed any more (the request was served in its own process): it ends,
        answered ``None``; a wait answered already is not changed (its slot reaches the client as any other).

        A withdrawal rather than Ray's ``cancel``: a task cancelled just as it ends may lose its answer, and with it
        a slot granted."""
        key = (client, ask)
        task = self._asking.get(key)
        if task is not None:
            self._withdrawn.add(key)
            task.cancel()

    def done(
        self, ticket: int, outcome: str | None, retry_after_s: float | None, tokens: float | None, passed: int = 0
    ) -> None:
        """The last request in ``ticket``'s slot ended: ``outcome`` ``"ok"`` (answered; ``tokens`` it used, when
        known), ``"refused"`` (as too many, with its ``Retry-After``) or ``None`` (failed otherwise, cancelled, or
        none: a slot kept idle); ``passed`` requests its process had sent in the slot before were answered. The
        slot goes back. A ticket given back already (or taken back at its lease's end) changes nothing."""
        held = self._held.pop(ticket, None)
        if held is None:
            return
        self._passed += passed
        for _ in range(passed):
            self._limiter.succeeded(held.slot)
        if outcome == "ok":
            self._limiter.succeeded(held.slot)
            if tokens is not None:
                self._limiter.settle(held.sent, tokens)
        elif outcome == "refused":
            self._limiter.refused(held.slot, retry_after_s)
        self._limiter.release()

    def heard(self, headers: Mapping[str, str]) -> None:
        """An answer's ``x-ratelimit-*`` headers (see :meth:`EndpointLimiter.heard`)."""
        self._limiter.heard(headers)

    def reap(self) -> int:
        """Take back the slots held past their lease; how many."""
        now = self._clock()
        lapsed = [ticket for ticket, held in self._held.items() if held.until <= now]
        for ticket in lapsed:
            self.done(ticket, None, None, None)
        return len(lapsed)

    async def _reap(self) -> None:
        while True:
            await asyncio.sleep(REAP_EVERY_S)
            self.reap()

    def state(self) -> dict[str, Any]:
        """The limiter's ceiling, level, slots held and most held at once, requests waiting, slots granted so far
        and requests answered in them before their last (handed on in their process) (for tests and reports)."""
        limiter = self._limiter
        budget = limiter.budget
        return {
            "limit": limiter.limit,
            "level": limiter.level,
            "held": limiter.held,
            "peak": limiter.peak,
            "tickets": len(self._held),
            "waiting": sum(self._waiting.values()),
            "grants": self._grants,
            "passed": self._passed,
            "rpm": budget.rpm if budget is not None else None,
            "tpm": budget.tpm if budget is not None else None,
        }


def _name(key: tuple[str, str]) -> str:
    digest = hashlib.sha1("\n".join(key).encode("utf-8")).hexdigest()[:16]
    return f"senseforge-limits-{digest}"


class Governors:
    """The job's registry of governors (a Ray actor the driver starts, :func:`start`): it starts each endpoint's
    :class:`Governor` on first use and owns it for the job."""

    def __init__(self) -> None:
        self._governors: dict[tuple[str, str], Any] = {}
        self._lock = threading.Lock()

    def of(self, key: tuple[str, str], ask: Ask) -> Any:
        """The governor of the endpoint ``key``, told ``ask``."""
        ray = import_ray()
        with self._lock:
            governor = self._governors.get(key)
            if governor is None:
                governor = self._governors[key] = (
                    ray.remote(Governor).options(name=_name(key), num_cpus=0, max_concurrency=WAITING).remote(ask)
                )
                return governor
        ray.get(governor.ask.remote(ask))
        return governor

    def endpoints(self) -> list[tuple[str, str]]:
        """The endpoints governed so far."""
        with self._lock:
            return sorted(self._governors)


_STARTED: dict[str, Any] = {}
_STARTED_LOCK = threading.Lock()


def start() -> Any:
    """The job's :class:`Governors` actor, started here when it is not up (call it on the driver: the actor lives as
    long as the process that starts it, which keeps a handle to it: Ray ends an actor no handle holds)."""
    ray = import_ray()
    context = ray.get_runtime_context()
    key = f"{context.get_node_id()}/{context.get_job_id()}"  # a Ray started again numbers its jobs from 1 again
    with _STARTED_LOCK:
        registry = _STARTED.get(key)
        if registry is None:
            _STARTED.clear()  # those of a Ray left before
            registry = _STARTED[key] = (
                ray.remote(Governors)
                .options(name=REGISTRY, get_if_exists=True, num_cpus=0, max_concurrency=16)
                .remote()
            )
        return registry


@dataclass
class _Lent:
    """A slot the governor granted this process, while the process holds it."""

    slot: GovernedSlot
    budgeted: bool
    granted: float
    epoch: int
    uses: int = 0
    """Requests given the slot so far."""
    passed: int = 0
    """Of those, answered and not yet told to the governor."""
    idle_since: float = 0.0


_Waiter = tuple[int, int, asyncio.AbstractEventLoop, "asyncio.Future[_Lent]", float, bool]
_Send = Callable[[], None]


class GovernedLimiter:
    """The limiter of one endpoint in a process of the job (one for all its providers of that endpoint): a client
    of the endpoint's :class:`Governor` that hands the slots it was granted on to its own waiting requests (see the
    module notes), across every event loop and thread of the process.

    A request with no slot of the process to take waits here, by rank then arrival; the first slot free goes to
    the best waiting request, whether one handed on or one the governor granted. The process asks the governor for
    slots for its best-ranked waiting requests (with their ranks), never for more than the level lets it hold
    besides the slots it holds (holding them all, it asks for none: its own slots serve its requests); an ask no
    request needs any more (its request was cancelled, or served by a slot handed on) is withdrawn.

    ``sleep`` (given to :meth:`slot`) is not used: the governor waits out holds itself.

    Args:
        governor: the endpoint's governor (an actor handle).
        lease: how long the governor may let one of this process's slots be held before it takes it back.
        limit: the endpoint's level as far as known (each grant says it anew).
        clock: seconds, for the hand-off bounds (tests inject one).
    """

    def __init__(
        self, governor: Any, lease: float = LEASE_S, limit: int = WAITING, clock: Any = time.monotonic
    ) -> None:
        self._governor = governor
        self._lease = lease
        self._level = limit
        self._clock = clock
        self._name = uuid.uuid4().hex
        self._lock = threading.Lock()
        self._waiters: list[_Waiter] = []  # a heap: (rank, arrival, loop, future, tokens, hold)
        self._arrivals = itertools.count(1)  # a request's number, its ask's at the governor (0: none)
        self._asks: dict[int, int] = {}  # asks sent and not withdrawn: the rank, by the arrival they were sent for
        self._refs: dict[int, Any] = {}  # every ask until answered (a ref let go loses its answer)
        self._lent: dict[int, _Lent] = {}  # every slot the process holds, by ticket
        self._idle: list[_Lent] = []  # those no request is in (only while none waits)
        self._timer: threading.Timer | None = None
        self._epoch = 0  # moves on a refusal or hold seen here: slots granted before go back when free
        self._others = False  # the governor's last answer: other processes' requests wait
        self._outcomes: dict[int, tuple[str, float | None]] = {}
        self._tokens: dict[int, float] = {}

    def lengthen(self, lease: float) -> None:
        """Ask for slots with a lease of at least ``lease`` from now on (a provider with a longer timeout)."""
        with self._lock:
            self._lease = max(self._lease, lease)

    @property
    def held(self) -> int:
        """Slots the process holds now, idle or in use (for tests and reports)."""
        with self._lock:
            return len(self._lent)

    async def slot(self, tokens: float = 0.0, sleep: Sleep = asyncio.sleep, *, hold: bool = True) -> tuple[Slot, Any]:
        loop = asyncio.get_running_loop()
        with self._lock:
            lent, sends = self._take_idle()
            if lent is None:
                future: asyncio.Future[_Lent] = loop.create_future()
                entry = (RANK.get(), next(self._arrivals), loop, future, float(tokens), hold)
                heapq.heappush(self._waiters, entry)
                sends += self._balance()
        _run(sends)
        if lent is not None:
            return lent.slot, None
        try:
            lent = await future
        except asyncio.CancelledError:
            self._left(entry)
            raise
        return lent.slot, (lent.slot.ticket if lent.budgeted else None)

    def _balance(self) -> list[_Send]:
        """Under the lock: withdraw the worst-ranked asks beyond the requests waiting, and ask for the best-ranked
        of those with none, as far as the level lets the process hold more slots; what to send."""
        sends: list[_Send] = []
        waiting = [entry for entry in self._waiters if not entry[3].done()]
        while len(self._asks) > len(waiting):
            arrival = max(self._asks, key=lambda ask: (self._asks[ask], ask))
            del self._asks[arrival]
            sends.append(functools.partial(self._governor.withdraw.remote, self._name, arrival))
        wanted = min(len(waiting), self._level - len(self._lent))
        if len(self._asks) < wanted:
            for rank, arrival, _, _, tokens, hold in sorted(waiting):
                if arrival not in self._asks:
                    self._asks[arrival] = rank
                    sends.append(functools.partial(self._ask, rank, arrival, tokens, hold))
                    if len(self._asks) >= wanted:
                        break
        return sends

    def _ask(self, rank: int, arrival: int, tokens: float, hold: bool) -> None:
        ref = self._governor.slot.remote(rank, tokens, hold, self._lease, self._name, arrival)
        with self._lock:
            self._refs[arrival] = ref
        ref.future().add_done_callback(lambda answer: self._granted(arrival, answer))

    def _granted(self, arrival: int, answer: Any) -> None:
        """The governor answered the ask of ``arrival`` (in a thread of Ray's)."""
        try:
            granted = answer.result()
        except BaseException as exc:  # the governor failed: one waiting request fails with it
            with self._lock:
                self._refs.pop(arrival, None)
                if self._asks.pop(arrival, None) is not None and self._waiters:
                    mine = [entry for entry in self._waiters if entry[1] == arrival]
                    entry = mine[0] if mine else max(self._waiters)  # its own, else the worst-ranked
                    self._waiters.remove(entry)
                    heapq.heapify(self._waiters)
                    if not entry[2].is_closed():
                        entry[2].call_soon_threadsafe(_fail, entry[3], exc)
            return
        with self._lock:
            self._refs.pop(arrival, None)
            self._asks.pop(arrival, None)
            if granted is None:  # withdrawn
                return
            slot, budgeted, others = granted
            self._others = others
            self._level = slot.level
            lent = self._lent[slot.ticket] = _Lent(slot, budgeted, self._clock(), self._epoch)
            placed = self._place(lent, fresh=True)
            sends = self._balance() + placed  # asks first (see release)
        _run(sends)

    def _reusable(self, lent: _Lent) -> bool:
        return (
            not lent.budgeted
            and not self._others
            and lent.epoch == self._epoch
            and lent.uses < HAND_ON
            and self._clock() - lent.granted < HAND_ON_S
        )

    def _place(self, lent: _Lent, *, fresh: bool = False) -> list[_Send]:
        """Under the lock: a free slot goes to the best waiting request, else waits idle (when it may be handed
        on: ``fresh``, just granted, it may be once) or goes back; what to send once the lock is let go."""
        if not (fresh and lent.uses == 0) and not self._reusable(lent):
            return [self._back(lent)]
        while self._waiters:
            _, _, loop, future, _, _ = heapq.heappop(self._waiters)
            if future.done() or loop.is_closed():
                continue
            try:
                loop.call_soon_threadsafe(self._deliver, future, lent)
            except RuntimeError:  # its loop closed just now
                continue
            lent.uses += 1
            return []
        if not self._reusable(lent):
            return [self._back(lent)]
        lent.idle_since = self._clock()
        self._idle.append(lent)
        if self._timer is None:
            self._arm(IDLE_S)
        return []

    def _arm(self, delay: float) -> None:
        self._timer = threading.Timer(delay, self._expire)
        self._timer.daemon = True
        self._timer.start()

    def _deliver(self, future: asyncio.Future[_Lent], lent: _Lent) -> None:
        if future.done():  # cancelled while the slot was on its way: it goes on
            with self._lock:
                lent.uses -= 1
                placed = self._place(lent, fresh=True)
                sends = self._balance() + placed
            _run(sends)
        else:
            future.set_result(lent)

    def _take_idle(self) -> tuple[_Lent | None, list[_Send]]:
        """Under the lock: an idle slot that may serve one more request (given it), and what to send."""
        sends: list[_Send] = []
        while self._idle:
            lent = self._idle.pop()
            if self._reusable(lent):
                lent.uses += 1
                return lent, sends
            sends.append(self._back(lent))
        return None, sends

    def _expire(self) -> None:
        """Idle slots kept :data:`IDLE_S` go back (in the timer's thread)."""
        with self._lock:
            self._timer = None
            now = self._clock()
            kept = [lent for lent in self._idle if now - lent.idle_since < IDLE_S and self._reusable(lent)]
            sends = [self._back(lent) for lent in self._idle if lent not in kept]
            self._idle = kept
            if kept:
                self._arm(max(0.001, min(lent.idle_since for lent in kept) + IDLE_S - now))
        _run(sends)

    def _back(self, lent: _Lent, outcome: str | None = None, retry_after_s: float | None = None) -> _Send:
        """Under the lock: the slot goes back to the governor, with how its last request went (``outcome``)."""
        self._lent.pop(lent.slot.ticket, None)
        tokens = self._tokens.pop(lent.slot.ticket, None)
        ticket, passed = lent.slot.ticket, lent.passed
        return lambda: self._governor.done.remote(ticket, outcome, retry_after_s, tokens, passed)

    def _left(self, entry: _Waiter) -> None:
        """A request gave up waiting (cancelled): it leaves no slot held nor an ask no request needs."""
        future = entry[3]
        with self._lock:
            sends = []
            if entry in self._waiters:
                self._waiters.remove(entry)
                heapq.heapify(self._waiters)
            elif future.done() and not future.cancelled():  # handed a slot just as it was cancelled
                lent = future.result()
                lent.uses -= 1
                sends = self._place(lent, fresh=True)
            # else on its way: the delivery sees the cancelled future and places it
            sends = self._balance() + sends
        _run(sends)

    def succeeded(self, slot: Slot) -> None:
        self._outcomes[_ticket(slot)] = ("ok", None)

    def refused(self, slot: Slot, retry_after_s: float | None = None) -> None:
        self._outcomes[_ticket(slot)] = ("refused", retry_after_s)

    def settle(self, sent: Any, tokens: float) -> None:
        if sent is not None:
            self._tokens[int(sent)] = float(tokens)

    def release(self, slot: Slot | None = None) -> None:
        if slot is None:
            raise TypeError("a governed slot is given back by name: release(slot)")
        ticket = _ticket(slot)
        outcome, retry_after_s = self._outcomes.pop(ticket, (None, None))
        with self._lock:
            lent = self._lent.get(ticket)
            if lent is None:  # not one of this process's (given back already)
                sends = [lambda: self._governor.done.remote(ticket, outcome, retry_after_s, None, 0)]
            elif outcome == "refused":  # no slot of the process is handed on any more: the level drops
                self._epoch += 1
                sends = [self._back(lent, outcome, retry_after_s)]
            elif self._reusable(lent):
                lent.passed += outcome == "ok"
                sends = self._place(lent)
            else:
                sends = [self._back(lent, outcome)]
            if self._waiters:  # asks first: at the governor they wait before the slot given back is free
                sends = self._balance() + sends
        _run(sends)

    def heard(self, headers: Mapping[str, str]) -> None:
        announced = {name.lower(): value for name, value in headers.items() if name.lower().startswith("x-ratelimit-")}
        if announced:
            with self._lock:  # a budget or a hold the governor will learn of: slots held go back when free
                self._epoch += 1
            self._governor.heard.remote(announced)


def _run(sends: list[_Send]) -> None:
    for send in sends:
        send()


def _fail(future: asyncio.Future[Any], exc: BaseException) -> None:
    if not future.done():
        future.set_exception(exc)


def _ticket(slot: Slot) -> int:
    if not isinstance(slot, GovernedSlot):
        raise TypeError(f"not a governed slot: {slot!r}")
    return slot.ticket


_CLIENTS: weakref.WeakValueDictionary[tuple[str, str, str], GovernedLimiter] = weakref.WeakValueDictionary()
_CLIENTS_LOCK = threading.Lock()


def _source(key: tuple[str, str], ask: Ask) -> Limiter:
    """The process's client of the endpoint's governor (one for all its providers of the endpoint, so that a slot
    one frees is handed on to another's waiting request)."""
    ray = import_ray()
    try:
        registry = ray.get_actor(REGISTRY)
    except ValueError:  # a process of a job whose driver started none (a script of its own): start it here
        registry = start()
    governor = ray.get(registry.of.remote(key, ask))
    name = (*key, str(getattr(governor, "_actor_id", id(governor))))  # a governor of a Ray started again is another
    with _CLIENTS_LOCK:
        client = _CLIENTS.get(name)
        if client is None:
            client = _CLIENTS[name] = GovernedLimiter(governor, lease_s(ask.hold_s), ask.limit)
        else:
            client.lengthen(lease_s(ask.hold_s))
        return client


def install() -> LimiterSource | None:
    """Have this process's providers take their limiters from the job's governors (see the module notes); returns
    the source installed before (give it to :func:`senseforge.llm.limits.govern` to undo)."""
    return govern(_source)
