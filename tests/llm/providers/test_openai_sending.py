"""How the ``openai`` provider sends a batch and spaces its retries (the provider's calls through a loopback
server are in ``test_openai.py``)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

pytest.importorskip("openai")

from senseforge.llm.providers.openai_answers import Problem
from senseforge.llm.providers.openai_sending import LoopThread, Retries, send_batch


class _Client:
    """Stands in for the async SDK client: only its closing is watched."""

    def __init__(self) -> None:
        self.closed = False

    async def close(self) -> None:
        self.closed = True


def test_retry_after_is_waited_out_up_to_a_minute_or_the_longest_backoff() -> None:
    retries = Retries(max_retries=5, backoff_base_s=0.5, backoff_max_s=2.0)
    asked = Problem("rate_limit", "slow down", 429, True, retry_after_s=10.0)
    assert retries.backoff(0, asked) == 10.0  # no jitter: the endpoint said when
    assert retries.backoff(0, Problem("rate_limit", "x", 429, True, retry_after_s=500.0)) == 60.0
    longer = Retries(max_retries=5, backoff_base_s=0.5, backoff_max_s=90.0)
    assert longer.backoff(0, Problem("rate_limit", "x", 429, True, retry_after_s=500.0)) == 90.0


def run_async(coro: Any) -> Any:
    """``coro`` run on a loop thread of its own, closed after."""
    loop = LoopThread("test-loop")
    try:
        return loop.run(coro)
    finally:
        loop.close()


def test_a_loop_thread_runs_coroutines_from_any_thread_also_inside_a_running_loop() -> None:
    loop = LoopThread("test-loop")
    threads: set[str] = set()

    async def answer(value: int) -> int:
        await asyncio.sleep(0)
        threads.add(threading.current_thread().name)
        return value

    async def caller() -> int:
        return loop.run(answer(7))  # a loop already runs here: the coroutine goes to the loop thread

    try:
        assert loop.run(answer(42)) == 42
        assert asyncio.run(caller()) == 7
        results: list[int] = []
        workers = [threading.Thread(target=lambda i=i: results.append(loop.run(answer(i)))) for i in range(4)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        assert sorted(results) == [0, 1, 2, 3]
        assert threads == {"test-loop"}  # one loop, one thread, for every caller
        assert loop.running
    finally:
        loop.close()
    assert not loop.running


def test_a_closed_loop_thread_runs_what_it_must_close_and_starts_again_when_asked() -> None:
    loop = LoopThread("test-loop")
    closed: list[str] = []

    async def last() -> None:
        closed.append(threading.current_thread().name)

    loop.close(last)  # never started: nothing to close
    assert closed == []
    assert loop.run(asyncio.sleep(0, result="first")) == "first"
    loop.close(last)
    assert closed == ["test-loop"]
    assert loop.run(asyncio.sleep(0, result="again")) == "again"
    loop.close()


def test_an_error_in_a_coroutine_reaches_the_caller_and_the_loop_goes_on() -> None:
    loop = LoopThread("test-loop")

    async def fail() -> None:
        raise ValueError("bad request")

    try:
        with pytest.raises(ValueError, match="bad request"):
            loop.run(fail())
        assert loop.run(asyncio.sleep(0, result=1)) == 1
    finally:
        loop.close()


def test_a_batch_hands_on_each_result_as_it_is_done_and_keeps_the_order() -> None:
    release_first = asyncio.Event()
    heard: list[tuple[int, str]] = []
    counted: list[int] = []

    async def one(client: Any, request: str) -> str:
        if request == "a":
            await release_first.wait()  # the first request finishes last
        else:
            release_first.set()
        return request.upper()

    client = _Client()
    results = run_async(send_batch(client, ["a", "b"], one, counted.append, lambda i, r: heard.append((i, r))))  # type: ignore[arg-type]
    assert results == ["A", "B"]
    assert heard == [(1, "B"), (0, "A")]
    assert counted == [1, 1]
    assert client.closed


def test_a_shared_client_is_left_open() -> None:
    async def one(client: Any, request: str) -> str:
        return request

    client = _Client()
    assert run_async(send_batch(client, ["a"], one, None, close=False)) == ["a"]  # type: ignore[arg-type]
    assert not client.closed


def test_a_failing_on_result_ends_the_batch_and_the_client_is_still_closed() -> None:
    async def one(client: Any, request: str) -> str:
        return request

    def refuse(index: int, result: str) -> None:
        raise OSError("disk full")

    client = _Client()
    with pytest.raises(OSError, match="disk full"):
        run_async(send_batch(client, ["a"], one, None, refuse))  # type: ignore[arg-type]
    assert client.closed
