"""The rate-limit governor: one endpoint's limit held for every process of a Ray job.

The governor's own logic (tickets, outcomes, ranks, leases) is checked in this process, with no Ray; across
processes, two Ray actors send to one loopback server and the server counts what it had in flight.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from senseforge.cluster import limits
from senseforge.cluster.runtime import gather, import_ray
from senseforge.llm.base import GenerateRequest
from senseforge.llm.limits import RAISE_AFTER, Ask, EndpointLimiter, govern, limiter_for, ranked
from senseforge.llm.loopback import LoopbackOpenAI


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_ticket_gives_its_slot_back_once_and_says_how_its_request_went() -> None:
    governor = limits.Governor(Ask(limit=2, rpm=100, tpm=None))

    async def two() -> list[Any]:
        return [await governor.slot(0, 10.0, True) for _ in range(2)]

    (first, budgeted, _), (second, _, _) = asyncio.run(two())
    assert budgeted and first.ticket != second.ticket and governor.state()["held"] == 2
    governor.done(first.ticket, "ok", None, 12.0)
    governor.done(first.ticket, "ok", None, 12.0)  # given back already: nothing changes
    assert governor.state()["held"] == 1
    governor.done(second.ticket, "refused", None, None)  # a 429: the level drops to ¾ of 2
    assert governor.state() | {} == {
        "limit": 2,
        "level": 1,
        "held": 0,
        "peak": 2,
        "tickets": 0,
        "waiting": 0,
        "grants": 2,
        "passed": 0,
        "rpm": 100,
        "tpm": None,
    }


def test_waiting_requests_are_served_by_the_rank_they_were_sent_with() -> None:
    governor = limits.Governor(Ask(limit=1, adaptive=False))
    served: list[int] = []

    async def scene() -> None:
        holder, _, _ = await governor.slot(0, 0.0, True)

        async def wait(rank: int) -> None:
            slot, _, _ = await governor.slot(rank, 0.0, True)
            served.append(rank)
            governor.done(slot.ticket, "ok", None, None)

        waiting = [asyncio.create_task(wait(rank)) for rank in (3, 1, 2)]
        await asyncio.sleep(0.01)  # all three queued behind the holder
        governor.done(holder.ticket, "ok", None, None)
        await asyncio.gather(*waiting)

    asyncio.run(scene())
    assert served == [1, 2, 3]


def test_a_slot_held_past_its_lease_is_taken_back() -> None:
    clock = Clock()
    governor = limits.Governor(Ask(limit=1), clock=clock)
    lease = limits.lease_s(60.0)  # a provider whose requests time out after a minute
    slot, _, _ = asyncio.run(governor.slot(0, 0.0, True, lease))
    clock.now = lease - 1
    assert governor.reap() == 0 and governor.state()["held"] == 1
    clock.now = lease
    assert governor.reap() == 1 and governor.state()["held"] == 0  # its holder is taken as lost
    governor.done(slot.ticket, "ok", None, None)  # the lost holder's late word changes nothing
    assert governor.state()["held"] == 0


def test_without_a_source_the_process_keeps_its_own_limiter() -> None:
    before = govern(None)
    try:
        assert isinstance(limiter_for("http://127.0.0.1:9/v1", "m", 4), EndpointLimiter)
    finally:
        govern(before)


class Sender:
    """A process of the job sending requests to one endpoint (a Ray actor), governed or on its own limiter."""

    def __init__(self, url: str, governed: bool) -> None:
        from senseforge.llm.registry import get_llm

        if governed:
            limits.install()
        options = {"base_url": url, "max_concurrency": 2, "timeout_s": 30.0, "max_retries": 0}
        self.llm = get_llm("openai/loopback", options)

    def send(self, tag: str, n: int) -> int:
        results = self.llm.generate([GenerateRequest.chat(f"{tag} {i}") for i in range(n)])
        return sum(result.ok for result in results)

    def close(self) -> None:
        self.llm.close()


class Gate:
    """A responder that holds each answer until the server has had ``reach`` requests in flight at once, or until
    ``wait_s`` has passed: two processes' requests then overlap however slowly either starts (it imports the SDK
    when it sends its first request), rather than only when their starts happen to fall close together."""

    def __init__(self, reach: int, wait_s: float) -> None:
        self.reach, self.wait_s = reach, wait_s
        self.server: LoopbackOpenAI | None = None

    def __call__(self, body: dict[str, Any]) -> str:
        deadline = time.monotonic() + self.wait_s
        while self.server is not None and self.server.max_in_flight < self.reach and time.monotonic() < deadline:
            time.sleep(0.01)
        return "ok"


@pytest.mark.xdist_group("ray")
@pytest.mark.parametrize("governed", [True, False], ids=["governed", "each-its-own"])
def test_two_processes_keep_to_one_endpoint_limit(local_ray: Any, governed: bool) -> None:
    """With the governor, two processes asking for 2 at once have at most 2 in flight together; each on its own
    limiter, they have 4 (what the test would miss if it could not fail).

    Answers are held until a request beyond the limit is in flight (a short wait when governed, where none should
    come; a long one otherwise, where the other process's requests do come), so the count does not hang on how the
    two processes' starts fall."""
    pytest.importorskip("openai")
    ray = import_ray()
    limits.start()
    gate = Gate(reach=3, wait_s=0.2) if governed else Gate(reach=4, wait_s=25.0)
    with LoopbackOpenAI(gate) as server:
        gate.server = server
        senders = [ray.remote(Sender).options(num_cpus=0).remote(server.base_url, governed) for _ in range(2)]
        try:
            assert gather([sender.send.remote(f"p{n}", 12) for n, sender in enumerate(senders)]) == [12, 12]
        finally:
            gather([sender.close.remote() for sender in senders])
            for sender in senders:
                ray.kill(sender)
        assert server.requests == 24
        if governed:
            assert server.max_in_flight == 2
        else:
            assert server.max_in_flight == 4


@pytest.mark.xdist_group("ray")
def test_a_wait_given_up_leaves_no_slot_held(local_ray: Any) -> None:
    """A request cancelled while it waits for a slot (a batch given up) takes none: once the holder is done, the
    governor holds nothing."""
    ray = import_ray()
    registry = limits.start()
    key = ("http://127.0.0.1:9/v1", "cancelled-wait")
    governor = ray.get(registry.of.remote(key, Ask(limit=1, adaptive=False)))
    client = limits.GovernedLimiter(governor)

    async def scene() -> None:
        holder, _ = await client.slot()
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(client.slot(), timeout=0.5)
        client.succeeded(holder)
        client.release(holder)

    asyncio.run(scene())
    for _ in range(100):  # the messages are one-way: wait (bounded) until the governor has read them
        state = ray.get(governor.state.remote())
        if state["held"] == 0 and state["tickets"] == 0:
            break
        asyncio.run(asyncio.sleep(0.05))
    assert state["held"] == 0 and state["tickets"] == 0


def test_a_slot_handed_on_in_its_process_is_counted_when_it_goes_back() -> None:
    """A process tells the governor at once how the requests it sent in one slot went: their successes raise the
    level as if each had gone back; and a grant says whether another process's requests wait."""
    governor = limits.Governor(Ask(limit=4))

    async def scene() -> tuple[bool, Any]:
        first, _, _ = await governor.slot(0, 0.0, True, client="a")
        governor.done(first.ticket, "refused", None, None)  # the level drops to 3
        held = [await governor.slot(0, 0.0, True, client="a") for _ in range(3)]
        waiting = asyncio.create_task(governor.slot(0, 0.0, True, client="b"))
        mine = asyncio.create_task(governor.slot(-1, 0.0, True, client="a"))  # better rank: served first
        await asyncio.sleep(0.01)
        governor.done(held[0][0].ticket, "ok", None, None, passed=RAISE_AFTER - 1)  # 25 answers: the level rises
        _, _, others = await mine
        return others, await waiting

    others, (_, _, others_then) = asyncio.run(scene())
    assert others and not others_then  # "b" waited when "a" was granted; nobody waits after "b"
    assert governor.state()["level"] == 4 and governor.state()["held"] == 4


def _settled(governor: Any, client: limits.GovernedLimiter | None = None) -> dict[str, Any]:
    """The governor's state once the one-way messages have arrived and idle slots gone back (bounded wait)."""
    ray = import_ray()
    for _ in range(100):
        state = ray.get(governor.state.remote())
        if state["held"] == 0 and state["tickets"] == 0 and (client is None or client.held == 0):
            break
        asyncio.run(asyncio.sleep(0.05))
    return state


def _governor(name: str, ask: Ask) -> Any:
    ray = import_ray()
    return ray.get(limits.start().of.remote(("http://127.0.0.1:9/v1", name), ask))


@pytest.mark.xdist_group("ray")
def test_a_freed_slot_goes_to_the_best_ranked_request_of_its_process_without_a_round_trip(local_ray: Any) -> None:
    governor = _governor("hand-on", Ask(limit=1, adaptive=False))
    client = limits.GovernedLimiter(governor)
    served: list[tuple[int, int]] = []

    async def scene() -> int:
        holder, _ = await client.slot()

        async def wait(rank: int) -> None:
            with ranked(rank):
                slot, _ = await client.slot()
            served.append((rank, slot.ticket))  # type: ignore[attr-defined]
            client.succeeded(slot)
            client.release(slot)

        waiting = [asyncio.create_task(wait(rank)) for rank in (3, 1, 2)]
        await asyncio.sleep(0.05)  # all three wait in this process
        client.succeeded(holder)
        client.release(holder)
        await asyncio.gather(*waiting)
        return holder.ticket  # type: ignore[attr-defined,no-any-return]

    ticket = asyncio.run(scene())
    assert served == [(1, ticket), (2, ticket), (3, ticket)]  # in rank order, in the holder's slot
    assert _settled(governor, client)["held"] == 0


@pytest.mark.xdist_group("ray")
def test_another_process_waiting_gets_a_slot_within_the_hand_off_bound(
    local_ray: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One process keeps its one slot busy with a stream of its own requests; another's request (better ranked)
    is served once the slot has served at most HAND_ON of them, not after the stream."""
    monkeypatch.setattr(limits, "HAND_ON", 4)
    governor = _governor("no-starving", Ask(limit=1, adaptive=False))
    busy, other = limits.GovernedLimiter(governor), limits.GovernedLimiter(governor)
    sent: list[str] = []

    async def one(client: limits.GovernedLimiter, tag: str, rank: int) -> None:
        with ranked(rank):
            slot, _ = await client.slot()
        sent.append(tag)
        await asyncio.sleep(0.002)
        client.succeeded(slot)
        client.release(slot)

    async def scene() -> None:
        stream = [asyncio.create_task(one(busy, "busy", 5)) for _ in range(100)]
        while len(sent) < 2:  # the stream is under way
            await asyncio.sleep(0.001)
        asking = asyncio.create_task(one(other, "other", 0))
        while not (await governor.state.remote())["waiting"]:  # its ask has reached the governor
            await asyncio.sleep(0.001)
        before = len(sent)
        await asking
        assert len(sent) < 101 and sent.index("other") - before <= limits.HAND_ON  # not after the stream
        await asyncio.gather(*stream)

    asyncio.run(scene())
    assert len(sent) == 101
    assert _settled(governor, busy)["held"] == 0 and other.held == 0


@pytest.mark.xdist_group("ray")
@pytest.mark.parametrize("why", ["refused", "budget"])
def test_a_refusal_or_a_budget_sends_the_slot_back_to_the_governor(local_ray: Any, why: str) -> None:
    """After a 429 the slot goes back with it (the level drops for the job) and the next request asks the governor
    again; under a request budget every request is counted by the governor (no slot is handed on)."""
    governor = _governor(f"back-{why}", Ask(limit=2, rpm=1000 if why == "budget" else None))
    client = limits.GovernedLimiter(governor)

    async def scene() -> tuple[int, int]:
        holder, sent = await client.slot(10.0)
        assert (sent is not None) == (why == "budget")
        waiting = asyncio.create_task(client.slot(10.0))
        second, _ = await client.slot(10.0)  # both slots taken: the waiting request is the process's own
        await asyncio.sleep(0.05)
        if why == "refused":
            client.refused(holder, 0.01)
        else:
            client.succeeded(holder)
        client.release(holder)
        client.release(second)  # after the drop to 1, the waiting request needs both back
        slot, _ = await waiting
        client.release(slot)
        return holder.ticket, slot.ticket  # type: ignore[attr-defined]

    before, after = asyncio.run(scene())
    assert before != after  # the freed slot went back; the waiting request was granted anew
    state = _settled(governor, client)
    assert state["level"] == (1 if why == "refused" else 2) and state["held"] == 0


class Holder:
    """A process of the job that takes slots of a governor, hands one on, and is then killed holding them."""

    def __init__(self, governor: Any) -> None:
        self.client = limits.GovernedLimiter(governor, lease=1.0)

    def hold(self) -> int:
        async def scene() -> int:
            first, _ = await self.client.slot()
            second, _ = await self.client.slot()
            waiting = asyncio.create_task(self.client.slot())
            await asyncio.sleep(0.05)
            self.client.succeeded(first)
            self.client.release(first)  # handed on to the waiting request
            third, _ = await waiting
            return len({first.ticket, second.ticket, third.ticket})  # type: ignore[attr-defined]

        return asyncio.run(scene())


@pytest.mark.xdist_group("ray")
def test_a_killed_process_frees_the_slots_it_handed_on_at_their_lease_end(local_ray: Any) -> None:
    ray = import_ray()
    governor = _governor("killed", Ask(limit=2, adaptive=False))
    holder = ray.remote(Holder).options(num_cpus=0).remote(governor)
    assert ray.get(holder.hold.remote()) == 2  # three requests in two slots
    ray.kill(holder)
    assert ray.get(governor.state.remote())["held"] == 2
    time.sleep(1.2)  # their lease (1 s) ends
    assert ray.get(governor.reap.remote()) == 2
    assert ray.get(governor.state.remote())["held"] == 0


@pytest.mark.xdist_group("ray")
def test_requests_cancelled_while_slots_are_handed_on_leave_none_held(local_ray: Any) -> None:
    """Many requests of one process, some given up while they wait (as a batch given up), while its slots are
    handed on: none is lost and none leaks, in the process or at the governor."""
    governor = _governor("cancelled-hand-on", Ask(limit=2, adaptive=False))
    client = limits.GovernedLimiter(governor)
    done: list[int] = []

    async def one(n: int) -> None:
        slot, _ = await client.slot()
        await asyncio.sleep(0.003)
        client.succeeded(slot)
        client.release(slot)
        done.append(n)

    async def scene() -> int:
        tasks = [asyncio.create_task(one(n)) for n in range(30)]
        await asyncio.sleep(0.01)
        for task in tasks[5::3]:
            task.cancel()
        results = await asyncio.gather(*tasks, return_exceptions=True)
        return sum(isinstance(result, asyncio.CancelledError) for result in results)

    cancelled = asyncio.run(scene())
    assert cancelled > 0 and len(done) + cancelled == 30
    state = _settled(governor, client)
    assert state["held"] == 0 and state["tickets"] == 0 and client.held == 0 and state["peak"] <= 2
