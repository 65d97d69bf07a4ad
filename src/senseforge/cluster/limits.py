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

**Cost.** A request makes one round trip to the governor before it is sent (its slot), and one message without
waiting after its answer (how it went, its tokens, the slot back). The governor's actor takes no CPU of Ray's.

**Lifetime.** The job's :class:`Governors` actor, started by the driver (:func:`start`), starts an endpoint's
governor on its first use and keeps it for the job, so a governor outlives the processes that use it (a lost
worker does not take the endpoint's state with it). The lowest limit asked of an endpoint in the job holds for the
rest of the job. A slot whose holder was lost (a killed worker) is taken back once its lease ends: twice the
provider's timeout, and at least a minute past it (:func:`lease_s`).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import itertools
import threading
import time
from collections.abc import Mapping
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

    def ask(self, ask: Ask) -> None:
        """One more provider object's ask: the lower ceiling, a fixed level, the lower budgets hold."""
        self._limiter.ask(ask.limit, adaptive=ask.adaptive, rpm=ask.rpm, tpm=ask.tpm)

    async def slot(self, rank: int, tokens: float, hold: bool, lease: float = LEASE_S) -> tuple[GovernedSlot, bool]:
        """Wait for a slot with ``rank`` (then for any ``Retry-After`` hold, unless ``hold`` is off, and for room in
        the budget), held at most ``lease`` seconds; the slot and whether the budget counted the request
        (:meth:`done` corrects its tokens)."""
        if self._reaper is None:
            self._reaper = asyncio.get_running_loop().create_task(self._reap())
        with ranked(rank):
            slot, sent = await self._limiter.slot(tokens, hold=hold)
        ticket = next(self._tickets)
        self._held[ticket] = _Held(slot, sent, self._clock() + lease)
        return GovernedSlot(slot.epoch, slot.level, ticket), sent is not None

    def done(self, ticket: int, outcome: str | None, retry_after_s: float | None, tokens: float | None) -> None:
        """A request of ``ticket`` ended: ``outcome`` ``"ok"`` (answered; ``tokens`` it used, when known),
        ``"refused"`` (as too many, with its ``Retry-After``) or ``None`` (failed otherwise, or cancelled); its slot
        goes back. A ticket given back already (or taken back at its lease's end) changes nothing."""
        held = self._held.pop(ticket, None)
        if held is None:
            return
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
        """The limiter's ceiling, level, slots held and most held at once (for tests and reports)."""
        limiter = self._limiter
        budget = limiter.budget
        return {
            "limit": limiter.limit,
            "level": limiter.level,
            "held": limiter.held,
            "peak": limiter.peak,
            "tickets": len(self._held),
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


class GovernedLimiter:
    """A provider's limiter in a process of the job: each request asks its endpoint's :class:`Governor` for a slot
    (with the rank of the calling context) and tells it how the request went when it gives the slot back.

    ``sleep`` (given to :meth:`slot`) is not used: the governor waits out holds itself.
    """

    def __init__(self, governor: Any, lease: float = LEASE_S) -> None:
        self._governor = governor
        self._lease = lease
        self._ray = import_ray()
        self._outcomes: dict[int, tuple[str, float | None]] = {}
        self._tokens: dict[int, float] = {}

    async def slot(self, tokens: float = 0.0, sleep: Sleep = asyncio.sleep, *, hold: bool = True) -> tuple[Slot, Any]:
        ref = self._governor.slot.remote(RANK.get(), float(tokens), hold, self._lease)
        try:
            slot, budgeted = await ref
        except asyncio.CancelledError:
            self._forfeit(ref)
            raise
        return slot, (slot.ticket if budgeted else None)

    def _forfeit(self, ref: Any) -> None:
        """A wait given up: stop it at the governor, and give back the slot should it have been granted already."""
        with contextlib.suppress(Exception):
            self._ray.cancel(ref)

        def give_back(future: Any) -> None:
            with contextlib.suppress(BaseException):
                slot, _ = future.result()
                self._governor.done.remote(slot.ticket, None, None, None)

        ref.future().add_done_callback(give_back)

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
        self._governor.done.remote(ticket, outcome, retry_after_s, self._tokens.pop(ticket, None))

    def heard(self, headers: Mapping[str, str]) -> None:
        announced = {name: value for name, value in headers.items() if name.lower().startswith("x-ratelimit-")}
        if announced:
            self._governor.heard.remote({name.lower(): value for name, value in announced.items()})


def _ticket(slot: Slot) -> int:
    if not isinstance(slot, GovernedSlot):
        raise TypeError(f"not a governed slot: {slot!r}")
    return slot.ticket


def _source(key: tuple[str, str], ask: Ask) -> Limiter:
    ray = import_ray()
    try:
        registry = ray.get_actor(REGISTRY)
    except ValueError:  # a process of a job whose driver started none (a script of its own): start it here
        registry = start()
    return GovernedLimiter(ray.get(registry.of.remote(key, ask)), lease_s(ask.hold_s))


def install() -> LimiterSource | None:
    """Have this process's providers take their limiters from the job's governors (see the module notes); returns
    the source installed before (give it to :func:`senseforge.llm.limits.govern` to undo)."""
    return govern(_source)
