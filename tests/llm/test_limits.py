"""One concurrency limit per endpoint for the whole process: shared across provider objects, event loops and threads;
a cancelled wait or holder gives its slot back; a stage that asks for less keeps every stage to it."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from senseforge.llm.base import GenerateRequest
from senseforge.llm.limits import RAISE_AFTER, Budget, EndpointLimiter, Slot, limiter_for
from senseforge.llm.loopback import LoopbackOpenAI
from senseforge.llm.registry import get_llm


def _client(server: LoopbackOpenAI, concurrency: int) -> Any:
    pytest.importorskip("openai")
    options = {"base_url": server.base_url, "max_concurrency": concurrency, "timeout_s": 30.0, "max_retries": 0}
    return get_llm("openai/loopback", options)


def test_two_stages_in_two_threads_share_the_endpoints_limit() -> None:
    with LoopbackOpenAI(lambda body: "ok", latency_s=0.1) as server, LoopbackOpenAI(lambda body: "ok") as other:
        stages = [_client(server, 8), _client(server, 8)]
        elsewhere = _client(other, 8)
        done: list[int] = []

        def run(llm: Any, tag: str) -> None:
            results = llm.generate([GenerateRequest.chat(f"{tag} {i}") for i in range(40)])
            done.append(sum(result.ok for result in results))

        threads = [threading.Thread(target=run, args=(llm, f"stage{i}")) for i, llm in enumerate(stages)]
        threads.append(threading.Thread(target=run, args=(elsewhere, "other")))
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        assert sorted(done) == [40, 40, 40]
        assert server.requests == 80 and server.max_in_flight <= 8  # two stages, one endpoint: one limit of 8
        assert stages[0]._limiter is stages[1]._limiter is not elsewhere._limiter


def test_the_smallest_limit_asked_for_an_endpoint_holds() -> None:
    first = limiter_for("http://127.0.0.1:1/v1", "m", 16)
    second = limiter_for("http://127.0.0.1:1/v1/", "m", 4)
    assert first is second and first.limit == 4
    assert limiter_for("http://127.0.0.1:1/v1", "other-model", 16) is not first


def _hold(limiter: EndpointLimiter, entered: threading.Event, leave: threading.Event) -> None:
    async def main() -> None:
        async with limiter:
            entered.set()
            await asyncio.to_thread(leave.wait, 30)

    asyncio.run(main())


def test_a_slot_passes_between_event_loops_of_two_threads_and_a_cancelled_wait_gives_way() -> None:
    limiter = EndpointLimiter(1)
    entered, leave = threading.Event(), threading.Event()
    holder = threading.Thread(target=_hold, args=(limiter, entered, leave))
    holder.start()
    assert entered.wait(30) and limiter.held == 1

    async def wait_then_cancel() -> None:
        waiting = asyncio.ensure_future(limiter.acquire())
        await asyncio.sleep(0.05)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting

    asyncio.run(wait_then_cancel())  # it never got the slot, and leaves no claim on it

    async def wait_for_the_slot() -> int:
        async with limiter:
            return limiter.held

    got: list[int] = []
    waiter = threading.Thread(target=lambda: got.append(asyncio.run(wait_for_the_slot())))
    waiter.start()
    leave.set()  # the holder in the other thread's loop lets go: the slot passes to this loop's waiter
    holder.join(30)
    waiter.join(30)
    assert got == [1] and limiter.held == 0 and limiter.peak == 1


def test_a_lowered_limit_grants_no_slot_above_it() -> None:
    limiter = EndpointLimiter(3)

    async def main() -> list[int]:
        holders = [await _acquired(limiter) for _ in range(3)]
        limiter.lower_to(1)
        seen: list[int] = []

        async def later() -> None:
            async with limiter:
                seen.append(limiter.held)

        task = asyncio.ensure_future(later())
        await asyncio.sleep(0)
        for _ in holders:  # three give back; only once one is held no more does the waiter get in
            limiter.release()
            await asyncio.sleep(0.01)
        await task
        return seen

    assert asyncio.run(main()) == [1] and limiter.held == 0


async def _acquired(limiter: EndpointLimiter) -> None:
    await limiter.acquire()


class FakeTime:
    """A clock that moves only when something sleeps on it."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_a_refusal_lowers_the_level_once_and_successes_in_a_row_raise_it() -> None:
    clock = FakeTime()
    limiter = EndpointLimiter(16, clock=clock)

    async def slot() -> Slot:
        held, _ = await limiter.slot()
        limiter.release()
        return held

    before = asyncio.run(slot())
    limiter.refused(before)
    limiter.refused(before)  # a second refusal of a request sent at the old level: no second cut
    assert limiter.level == 12
    after = asyncio.run(slot())
    limiter.refused(after, retry_after_s=5.0)
    assert limiter.level == 9 and after.level == 12
    for _ in range(RAISE_AFTER - 1):
        limiter.succeeded(after)
    assert limiter.level == 9
    limiter.succeeded(after)
    assert limiter.level == 10 and [level for _, level in limiter.history] == [16, 12, 9, 10]

    # a Retry-After holds the next request until it has passed
    started = clock.now
    asyncio.run(limiter.slot(sleep=clock.sleep))
    limiter.release()
    assert clock.now - started == pytest.approx(5.0)

    fixed = EndpointLimiter(16, adaptive=False)
    held, _ = asyncio.run(fixed.slot())
    fixed.release()
    fixed.refused(held)
    assert fixed.level == 16


def test_no_minute_holds_more_requests_or_tokens_than_the_budget() -> None:
    clock = FakeTime()
    budget = Budget(rpm=10, tpm=100, clock=clock, sleep=clock.sleep)
    times: list[float] = []

    async def send(count: int, tokens: float, used: float | None = None) -> None:
        for _ in range(count):
            sent = await budget.take(tokens)
            times.append(clock.now)
            if used is not None:
                budget.settle(sent, used)

    asyncio.run(send(25, 5.0))  # the request bound holds: 10 a minute
    assert all(sum(start <= t < start + 60 for t in times) <= 10 for start in times)
    assert times[-1] - times[0] >= 120
    times.clear()
    clock.now += 120
    asyncio.run(send(9, 30.0))  # the token bound holds: 3 of 30 tokens a minute
    assert all(sum(start <= t < start + 60 for t in times) <= 3 for start in times)
    times.clear()
    clock.now += 120
    asyncio.run(send(6, 30.0, used=10.0))  # estimated high, corrected by the answers: more fit
    assert sum(times[0] <= t < times[0] + 60 for t in times) > 3


def test_an_endpoint_that_refuses_above_twelve_settles_the_level_near_twelve(tmp_path: Any) -> None:
    """A server with a hidden limit of 12 requests at once: every request is answered in the end, the server never
    holds more than 12, and the level the ledger records settles near 12."""
    pytest.importorskip("openai")
    from senseforge.llm.cache import CachedLLM
    from senseforge.store.db import Store

    # answers slow enough that any machine keeps the level's worth in flight (a client that cannot is not refused)
    with LoopbackOpenAI(lambda body: "ok", latency_s=0.2, capacity=12) as server:
        options = {
            "base_url": server.base_url,
            "max_concurrency": 64,
            "timeout_s": 30.0,
            "max_retries": 50,
            "backoff_base_s": 0.01,
            "backoff_max_s": 0.05,
        }
        store = Store(f"sqlite:///{tmp_path / 'ledger.db'}")
        llm = CachedLLM(get_llm("openai/loopback", options), store, run="hidden-limit")
        results = llm.generate([GenerateRequest.chat(f"question {i}") for i in range(400)])
        assert all(result.ok for result in results)
        assert server.over_capacity > 0 and server.max_in_flight <= 12
        levels = [row.concurrency for row in store.ledger_rows(run="hidden-limit")]
    assert None not in levels and max(levels) == 64  # the first wave went at the ceiling
    settled = sorted(levels[-150:])
    assert 8 <= settled[len(settled) // 2] <= 14, settled


def test_the_limits_an_endpoint_announces_bound_the_budget_and_an_empty_allowance_holds_it() -> None:
    clock = FakeTime()
    limiter = EndpointLimiter(16, clock=clock)
    limiter.heard({"content-type": "application/json"})  # nothing announced: nothing changes
    assert limiter.budget is None
    limiter.heard({"x-ratelimit-limit-requests": "500", "x-ratelimit-limit-tokens": "not a number"})
    assert limiter.budget is not None and (limiter.budget.rpm, limiter.budget.tpm) == (500, None)
    limiter.heard({"x-ratelimit-limit-requests": "900", "x-ratelimit-limit-tokens": "40000"})
    assert (limiter.budget.rpm, limiter.budget.tpm) == (500, 40000)  # the lower bound holds

    # none left: the next request waits for the reset, then goes
    limiter.heard({"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "1m30s"})
    started = clock.now
    asyncio.run(limiter.slot(sleep=clock.sleep))
    limiter.release()
    assert clock.now - started == pytest.approx(90.0)
    limiter.heard({"x-ratelimit-remaining-tokens": "12", "x-ratelimit-reset-tokens": "20s"})  # some left: no wait
    started = clock.now
    asyncio.run(limiter.slot(sleep=clock.sleep))
    limiter.release()
    assert clock.now == started


def test_the_provider_reads_the_limits_from_every_answer() -> None:
    """A loopback server announcing an account's limits: after one call the endpoint's budget holds them."""
    announced = {"x-ratelimit-limit-requests": "600", "x-ratelimit-limit-tokens": "150000"}
    with LoopbackOpenAI(lambda body: "ok", headers=announced) as server:
        llm = _client(server, 4)
        assert llm._limiter.budget is None
        assert all(result.ok for result in llm.generate([GenerateRequest.chat("hello")]))
        budget = llm._limiter.budget
        assert budget is not None and (budget.rpm, budget.tpm) == (600, 150000)
