"""How the ``openai`` provider sends a batch and spaces its retries (the provider's calls through a loopback
server are in ``test_openai.py``)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("openai")

from senseforge.llm.providers.openai_answers import Problem
from senseforge.llm.providers.openai_sending import Retries, run_async, send_batch


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


def test_run_async_runs_a_coroutine_also_inside_a_running_loop() -> None:
    async def answer() -> int:
        await asyncio.sleep(0)
        return 42

    async def caller() -> int:
        return run_async(answer())  # a loop already runs here: the coroutine goes to a thread of its own

    assert run_async(answer()) == 42
    assert asyncio.run(caller()) == 42


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


def test_a_failing_on_result_ends_the_batch_and_the_client_is_still_closed() -> None:
    async def one(client: Any, request: str) -> str:
        return request

    def refuse(index: int, result: str) -> None:
        raise OSError("disk full")

    client = _Client()
    with pytest.raises(OSError, match="disk full"):
        run_async(send_batch(client, ["a"], one, None, refuse))  # type: ignore[arg-type]
    assert client.closed
