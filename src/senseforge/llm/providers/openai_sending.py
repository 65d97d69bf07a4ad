"""How the ``openai`` provider sends requests: a batch's requests all at once on one async client, each attempt
in a slot of the endpoint's limiter (:mod:`senseforge.llm.limits`), retried with backoff, and timed.

:func:`run_async` runs a batch on its thread's event loop, kept for the thread's next batches, and
:func:`held_client` keeps a provider's client (and its open connections) on that loop; the client is the SDK's on
its aiohttp transport when ``aiohttp`` is installed (:func:`async_http_client`).

:func:`send_batch` runs a batch's requests together and hands each result on as soon as it is done
(``on_result``, on a worker thread). :meth:`Retries.run` attempts one request: it takes a slot for every attempt
(never while backing off), tells the limiter how the attempt went, retries transient failures (rate limits,
server errors, timeouts, dropped connections, undecodable bodies; see
:func:`senseforge.llm.providers.openai_answers.classify`) after an exponential, jittered backoff or the
endpoint's ``Retry-After``, and measures where the time went: ``service_s``, from each attempt's sending to its
answer, summed, and ``queue_s``, the wait for a slot, a budget or a hold before them.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import functools
import importlib.util
import os
import random
import ssl
import threading
import time
import weakref
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from senseforge.llm.base import GenerateRequest, Progress
from senseforge.llm.limits import Limiter
from senseforge.llm.providers.openai_answers import Problem, classify

if TYPE_CHECKING:  # the SDK and httpx are imported where a client is made (see openai_answers)
    import openai
    from openai._models import FinalRequestOptions

_RETRY_AFTER_MAX_S = 60.0

_HAS_AIOHTTP = importlib.util.find_spec("aiohttp") is not None

Sleep = Callable[[float], Awaitable[None]]
"""An awaitable sleep, injectable so that tests need not wait out backoff delays."""

_T = TypeVar("_T")
_R = TypeVar("_R")

OnResult = Callable[[int, _R], None]
"""Called with a request's index in the batch and its result, as soon as that request is done."""


async def post(client: openai.AsyncOpenAI, path: str, body: dict[str, Any], answer: type[_T]) -> _T:
    """``body`` posted to ``path`` as is, its answer read as the SDK's ``answer`` type: what the SDK's ``create``
    does, less its walk of the body against the parameters' typed dictionaries (a sixth of the client's CPU at
    C = 128, profiled). The provider's bodies hold wire names and JSON values only, which that walk leaves as they
    are (``tests/llm/providers/test_openai_formats.py`` holds it to that).

    The request's options are a copy of :func:`_posting`'s with the path and body set: what ``client.post`` builds
    for them, without its pass over every field's default (4% of a build's CPU at C = 128)."""
    options = _posting().model_copy(update={"url": path, "json_data": body})
    return await client.request(answer, options)


@functools.cache
def _auth() -> openai.RequestOptions:
    """What the SDK's own ``create`` asks for: the API key as bearer token (an SDK without security options sends it
    by default)."""
    import openai

    return {"security": {"bearer_auth": True}} if "security" in openai.RequestOptions.__annotations__ else {}


@functools.cache
def _posting() -> FinalRequestOptions:
    """The options ``client.post`` builds for a JSON body (its path and body left to fill in)."""
    from openai._models import FinalRequestOptions

    return FinalRequestOptions.construct(method="post", url="", json_data={}, files=None, **_auth())


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The process's TLS context, shared by every batch's client: each new one reads every CA certificate (about
    40 ms of CPU, which a streamed build paying it per batch of 16 requests felt)."""
    import httpx

    return httpx.create_ssl_context()


def async_http_client(event_hooks: dict[str, list[Callable[..., Any]]]) -> openai.DefaultAsyncHttpxClient:
    """The HTTP client under a thread's :class:`openai.AsyncOpenAI` (the SDK's defaults: its limits and timeouts):
    the SDK's aiohttp transport when ``aiohttp`` is installed (the ``openai`` extra installs it), else httpx's own.

    At C = 128 httpx's pool (``httpcore``) cost about a third of the client's CPU per call, much of it probing every
    idle connection for a server's hang-up at each request and each answer; aiohttp's pool and its compiled HTTP
    parser take about a third less CPU per call in all (``benchmarks/paper_scale.py``; see
    ``docs/design/benchmarks.md``). Requests keep their bytes: the SDK builds them, with httpx, either way.
    """
    import openai

    if _HAS_AIOHTTP:
        with contextlib.suppress(RuntimeError):  # an SDK whose aiohttp transport is not installed says so
            return openai.DefaultAioHttpClient(verify=tls_context(), event_hooks=event_hooks)
    return openai.DefaultAsyncHttpxClient(verify=tls_context(), event_hooks=event_hooks)


def tokens_of(request: GenerateRequest) -> float:
    """A generation's tokens before it is sent, for a token budget: about one per four characters of its
    prompt, and its whole ``max_tokens``."""
    return len(_sent_text(request)) / 4 + request.max_tokens


def _sent_text(request: GenerateRequest) -> str:
    """Every character a generation request sends."""
    if request.prompt is not None:
        return request.prompt
    return "".join(message.content for message in request.as_messages())


class _HeldLoop:
    """A thread's event loop, kept from batch to batch with the HTTP clients its batches opened (and their open
    connections); closed with the thread, or when a batch is cut short."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.pid = os.getpid()
        self.clients: dict[int, tuple[weakref.ref[object], openai.AsyncOpenAI]] = {}

    def run(self, coro: Coroutine[Any, Any, _T]) -> _T:
        """``coro`` to completion on the loop; tasks it left behind are cancelled, as ``asyncio.run`` does."""
        try:
            return self.loop.run_until_complete(coro)
        finally:
            left = asyncio.all_tasks(self.loop)
            if left:
                for task in left:
                    task.cancel()
                self.loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))

    async def client(self, owner: object, make: Callable[[], openai.AsyncOpenAI]) -> openai.AsyncOpenAI:
        """``owner``'s client on this loop, made by ``make`` the first time; the clients of owners gone are
        closed."""
        gone = [key for key, (ref, _) in self.clients.items() if ref() is None]
        for key in gone:
            await self.clients.pop(key)[1].close()
        held = self.clients.get(id(owner))
        if held is None or held[0]() is not owner:
            held = self.clients[id(owner)] = (weakref.ref(owner), make())
        return held[1]

    def close(self) -> None:
        """Close the clients and the loop (nothing while the loop runs, or in a forked child)."""
        if self.loop.is_closed() or self.loop.is_running() or self.pid != os.getpid():
            return
        clients, self.clients = [client for _, client in self.clients.values()], {}
        try:
            if clients:
                self.loop.run_until_complete(_close_all(clients))
        finally:
            self.loop.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()


async def _close_all(clients: list[openai.AsyncOpenAI]) -> None:
    await asyncio.gather(*(client.close() for client in clients), return_exceptions=True)


_HELD = threading.local()
"""Each thread's :class:`_HeldLoop` (a thread that has sent no batch has none)."""


@atexit.register
def _close_held() -> None:
    """At exit, the exiting thread's kept loop and clients (other threads' close with their thread)."""
    held: _HeldLoop | None = getattr(_HELD, "loop", None)
    if held is not None:
        _HELD.loop = None
        held.close()


def run_async(coro: Coroutine[Any, Any, _T]) -> _T:
    """Run ``coro`` to completion on the calling thread's event loop, kept for the thread's next batches (also when
    the caller already runs a loop: then on a thread of its own, whose loop ends with it).

    ``asyncio.run`` per batch made a new loop, new worker threads for ``asyncio.to_thread``, a new HTTP client and
    a new TCP connection for every call (on the server too); a thread's batches now share them (see
    :func:`held_client`). A loop per calling thread, rather than one loop for the process, keeps the batches of
    concurrent stages on as many threads as before (one loop thread starved the network work of the GIL).
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            return pool.submit(_run_once, coro).result()
    held: _HeldLoop | None = getattr(_HELD, "loop", None)
    if held is None or held.pid != os.getpid() or held.loop.is_closed():
        held = _HELD.loop = _HeldLoop()
    try:
        return held.run(coro)
    except BaseException as exc:
        if not isinstance(exc, Exception):  # an interrupt may leave the loop half-way: the next batch gets a new one
            _HELD.loop = None
            held.close()
        raise


def _run_once(coro: Coroutine[Any, Any, _T]) -> _T:
    """``coro`` on a loop of the calling thread's own, closed after with what it holds."""
    held = _HELD.loop = _HeldLoop()
    try:
        return held.run(coro)
    finally:
        _HELD.loop = None
        held.close()


async def held_client(owner: object, make: Callable[[], openai.AsyncOpenAI]) -> openai.AsyncOpenAI | None:
    """``owner``'s client kept on the running loop of :func:`run_async` (made by ``make`` the first time), or
    ``None`` when the running loop is not one it keeps (the caller then opens and closes a client of its own).

    ``owner`` is held weakly: its client is closed at the loop's next batch after it is gone, or with the loop.
    """
    held: _HeldLoop | None = getattr(_HELD, "loop", None)
    if held is None or held.loop is not asyncio.get_running_loop():
        return None
    return await held.client(owner, make)


def release_held(owner: object) -> None:
    """Close ``owner``'s client kept on the calling thread's loop, if it has one and the loop is not running."""
    held: _HeldLoop | None = getattr(_HELD, "loop", None)
    if held is None or held.loop.is_closed() or held.loop.is_running() or held.pid != os.getpid():
        return
    kept = held.clients.get(id(owner))
    if kept is not None and kept[0]() is owner:
        del held.clients[id(owner)]
        held.loop.run_until_complete(kept[1].close())


async def send_batch(
    client: openai.AsyncOpenAI,
    requests: list[_T],
    one: Callable[[openai.AsyncOpenAI, _T], Awaitable[_R]],
    progress: Progress | None,
    on_result: OnResult[_R] | None = None,
    *,
    close: bool = True,
) -> list[_R]:
    """Every request of a batch through ``one`` at once on ``client``, which is closed after unless ``close`` is
    false (a client kept for the next batches); the results in the order of ``requests``, each also handed to
    ``on_result`` (on a worker thread), then counted in ``progress``, as soon as it is done."""

    async def run(index: int, request: _T) -> _R:
        result = await one(client, request)  # each attempt takes its own slot (see Retries.run)
        if on_result is not None:
            await asyncio.to_thread(on_result, index, result)
        if progress is not None:
            progress(1)
        return result

    try:
        return list(await asyncio.gather(*(run(index, request) for index, request in enumerate(requests))))
    finally:
        if close:
            await client.close()


@dataclass(frozen=True)
class Retries:
    """How often and after how long a request is tried again.

    Args:
        max_retries: retries after the first attempt (transient failures only).
        backoff_base_s: the first backoff delay; it doubles on every retry.
        backoff_max_s: the longest backoff delay (``Retry-After`` may ask for longer, up to a minute).
        sleep: the coroutine used to wait between attempts (tests inject a recorder).
    """

    max_retries: int
    backoff_base_s: float
    backoff_max_s: float
    sleep: Sleep = asyncio.sleep

    def backoff(self, retry: int, problem: Problem) -> float:
        """Seconds to wait before retry number ``retry`` (0-based)."""
        if problem.retry_after_s is not None:
            return min(problem.retry_after_s, max(self.backoff_max_s, _RETRY_AFTER_MAX_S))
        delay = min(self.backoff_max_s, self.backoff_base_s * 2.0 ** min(retry, 60))
        return delay * random.uniform(0.5, 1.0)

    async def run(
        self, attempt: Callable[[], Awaitable[_R]], limiter: Limiter, tokens: float = 0.0
    ) -> tuple[_R | Problem, dict[str, Any]]:
        """Run ``attempt`` until it succeeds, fails for good, or retries run out.

        Each attempt holds a slot of the endpoint's ``limiter`` while it is in flight (never while backing off),
        and tells the limiter how it went; ``tokens`` is the request's estimate for a token budget.

        Returns:
            The result (or the last problem), and what the call says of itself: ``attempts`` made,
            ``retry_errors`` (one line per failed attempt, see :meth:`Problem.line`), ``concurrency`` (the
            endpoint's level when the last attempt was sent), ``service_s`` (the attempts' time from sending to
            answer, summed) and ``queue_s`` (the time spent waiting for a slot, a budget or a hold before them).
        """
        attempts = 0
        errors: list[str] = []
        waited = False  # this request has just waited out the endpoint's Retry-After itself
        service = queued = 0.0
        while True:
            attempts += 1
            asked = time.perf_counter()
            slot, sent = await limiter.slot(tokens, self.sleep, hold=not waited)
            sending = time.perf_counter()
            queued += sending - asked
            try:
                result = await attempt()
            except asyncio.CancelledError:
                limiter.release(slot)
                raise
            except Exception as exc:
                service += time.perf_counter() - sending
                problem = classify(exc)
                if problem.status in (429, 503):
                    limiter.refused(slot, problem.retry_after_s)
                limiter.release(slot)
            else:
                service += time.perf_counter() - sending
                limiter.succeeded(slot)
                if sent is not None:
                    used = [getattr(result, name, None) for name in ("tokens_in", "tokens_out")]
                    if all(count is not None for count in used):
                        limiter.settle(sent, sum(count for count in used if count is not None))
                limiter.release(slot)
                return result, _said(attempts, errors, slot.level, service, queued)
            errors.append(problem.line())
            if not problem.transient or attempts > self.max_retries:
                return problem, _said(attempts, errors, slot.level, service, queued)
            waited = problem.retry_after_s is not None
            await self.sleep(self.backoff(attempts - 1, problem))


def _said(attempts: int, errors: list[str], level: int, service: float, queued: float) -> dict[str, Any]:
    """What a call says of itself, as :class:`~senseforge.llm.base.Completion` fields."""
    return {
        "attempts": attempts,
        "retry_errors": tuple(errors),
        "concurrency": level,
        "service_s": service,
        "queue_s": queued,
    }
