"""How the ``openai`` provider sends a batch and spaces its retries (the provider's calls through a loopback
server are in ``test_openai.py``)."""

from __future__ import annotations

import asyncio
import gc
import threading
from typing import Any

import pytest

pytest.importorskip("openai")

from senseforge.llm.providers.openai_answers import Problem
from senseforge.llm.providers.openai_sending import Retries, held_client, release_held, run_async, send_batch


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


def test_a_thread_keeps_its_loop_from_batch_to_batch_and_each_thread_has_its_own() -> None:
    async def loop_of() -> asyncio.AbstractEventLoop:
        await asyncio.sleep(0)
        return asyncio.get_running_loop()

    first, second = run_async(loop_of()), run_async(loop_of())
    assert first is second and not first.is_running()
    elsewhere: list[asyncio.AbstractEventLoop] = []
    thread = threading.Thread(target=lambda: elsewhere.append(run_async(loop_of())))
    thread.start()
    thread.join()
    assert elsewhere[0] is not first


def test_tasks_a_batch_leaves_behind_are_cancelled_and_an_error_keeps_the_loop() -> None:
    cancelled = asyncio.Event()
    started: list[asyncio.Task[None]] = []

    async def straggler() -> None:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    async def leave_one() -> str:
        started.append(asyncio.create_task(straggler()))
        await asyncio.sleep(0)
        return "done"

    async def fail() -> None:
        raise ValueError("bad request")

    async def loop_of() -> asyncio.AbstractEventLoop:
        return asyncio.get_running_loop()

    assert run_async(leave_one()) == "done"
    assert started[0].cancelled() and cancelled.is_set()  # not resumed by the next batch
    before = run_async(loop_of())
    with pytest.raises(ValueError, match="bad request"):
        run_async(fail())
    assert run_async(loop_of()) is before


class _Owner:
    """Stands in for a provider: held weakly by its kept client."""


def test_an_owner_keeps_one_client_per_thread_closed_once_the_owner_is_gone() -> None:
    made: list[_Client] = []

    def make() -> Any:
        made.append(_Client())
        return made[-1]

    async def client_of(owner: object) -> Any:
        return await held_client(owner, make)

    owner, other = _Owner(), _Owner()
    first = run_async(client_of(owner))
    assert run_async(client_of(owner)) is first and len(made) == 1  # the thread's next batch: the same client
    run_async(client_of(other))
    elsewhere: list[Any] = []
    thread = threading.Thread(target=lambda held: elsewhere.append(run_async(client_of(held))), args=(owner,))
    thread.start()
    thread.join()
    assert elsewhere[0] is not first and elsewhere[0].closed  # another thread's own, closed with its thread
    del owner
    gc.collect()
    run_async(client_of(other))  # the next batch closes the client of an owner gone
    assert first.closed and not made[1].closed
    release_held(other)
    assert made[1].closed
    assert asyncio.run(held_client(other, make)) is None  # a loop run_async does not keep: no client kept


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


def test_a_connection_error_the_aiohttp_transport_reports_as_a_timeout_is_a_connection_failure() -> None:
    aiohttp = pytest.importorskip("aiohttp")
    httpx2 = pytest.importorskip("httpx2")  # the SDK's HTTP client from openai 3 on
    import openai

    from senseforge.llm.providers.openai_answers import classify

    def reported(cause: Exception) -> openai.APITimeoutError:
        request = httpx2.Request("POST", "http://127.0.0.1:1/v1/chat/completions")
        try:
            try:
                raise httpx2.ConnectTimeout(str(cause)) from cause  # what the SDK's aiohttp transport raises
            except httpx2.ConnectTimeout as mapped:
                raise openai.APITimeoutError(request=request) from mapped
        except openai.APITimeoutError as exc:
            return exc

    dropped = classify(reported(aiohttp.ServerDisconnectedError()))
    assert dropped.kind == "connection" and dropped.transient and "ServerDisconnectedError" in dropped.message
    assert classify(reported(aiohttp.SocketTimeoutError("read"))).kind == "timeout"


def test_a_post_sends_what_the_sdks_post_sends(fake_openai: Any) -> None:
    import openai
    from openai.types.chat import ChatCompletion

    from senseforge.llm.providers.openai_sending import _auth, post

    body = {"messages": [{"role": "user", "content": "p1 same"}], "model": "m", "temperature": 0.0, "max_tokens": 8}
    sent: list[Any] = []

    async def both() -> list[ChatCompletion]:
        client = openai.AsyncOpenAI(api_key="k", base_url=fake_openai.base_url, max_retries=0)
        original = client._client.send

        async def watched(request: Any, **kwargs: Any) -> Any:
            sent.append((request.method, str(request.url), sorted(request.headers.items()), request.content))
            return await original(request, **kwargs)

        client._client.send = watched  # type: ignore[method-assign]
        try:
            return [
                await post(client, "/chat/completions", body, ChatCompletion),
                await client.post("/chat/completions", cast_to=ChatCompletion, body=body, options=_auth()),
            ]
        finally:
            await client.close()

    ours, sdks = asyncio.run(both())
    assert ours.model_dump() == sdks.model_dump()
    assert sent[0] == sent[1]
