"""The rate-limit governor: one endpoint's limit held for every process of a Ray job.

The governor's own logic (tickets, outcomes, ranks, leases) is checked in this process, with no Ray; across
processes, two Ray actors send to one loopback server and the server counts what it had in flight.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from senseforge.cluster import limits
from senseforge.cluster.runtime import gather, import_ray
from senseforge.llm.base import GenerateRequest
from senseforge.llm.limits import Ask, EndpointLimiter, govern, limiter_for
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


@pytest.mark.xdist_group("ray")
@pytest.mark.parametrize("governed", [True, False], ids=["governed", "each-its-own"])
def test_two_processes_keep_to_one_endpoint_limit(local_ray: Any, governed: bool) -> None:
    """With the governor, two processes asking for 2 at once have at most 2 in flight together; each on its own
    limiter, they have 4 (what the test would miss if it could not fail)."""
    pytest.importorskip("openai")
    ray = import_ray()
    limits.start()
    with LoopbackOpenAI(lambda body: "ok", latency_s=0.1) as server:
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
