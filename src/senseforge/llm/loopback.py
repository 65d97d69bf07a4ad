"""A loopback OpenAI-compatible HTTP server, for tests, dry runs and benchmarks.

:class:`LoopbackOpenAI` listens on ``127.0.0.1`` and answers the chat completions,
legacy completions and model-list endpoints, and the part of the Files and Batch APIs
that a batch client needs (``/v1/files``, ``/v1/batches``; see
:mod:`senseforge.llm.loopback_batches`). The answer text comes from a plain
function (the *responder*); every answer waits a fixed latency first, and a seeded share
of attempts fail on purpose (rate limit, server error, a hang past the client's
timeout, or a cut-off body) so that a client's retry logic can be exercised
reproducibly. A legacy completions request with ``echo`` and ``logprobs`` is answered as
vLLM and llama-cpp-python's server answer a log-likelihood request (see
:func:`echo_logprobs`). A generation request that asks for log-probabilities (chat:
``logprobs: true, top_logprobs: N``; completions: ``logprobs: N``) gets them in OpenAI's shape:
the responder's own where it returns ``{"text": ..., "top_logprobs": ...}``, else made from the
text (each whitespace-led word a token, the only alternative there; see
:func:`generated_logprobs`). It uses only the standard library; the HTTP side (routes, request
bodies, answers and errors) is :mod:`senseforge.llm.loopback_handler`.

>>> from senseforge.llm.loopback import LoopbackOpenAI
>>> from senseforge.llm.loopback_handler import request_text
>>> with LoopbackOpenAI(lambda body: request_text(body).upper()) as server:
...     server.base_url.startswith("http://127.0.0.1:")
True
"""

from __future__ import annotations

import hashlib
import json
import random
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from http.server import ThreadingHTTPServer
from types import TracebackType
from typing import Any

from senseforge.errors import ConfigError
from senseforge.llm.loopback_batches import BatchDesk, error_payload
from senseforge.llm.loopback_cli import header, load_responder, parser, wait_for_signal
from senseforge.llm.loopback_formats import REFUSABLE_FORMATS, shaped_text
from senseforge.llm.loopback_handler import (
    CHAT_PATH,
    COMPLETIONS_PATH,
    LoopbackHTTPServer,
    asked_top_logprobs,
    chat_logprobs,
    completion_logprobs,
    content_text,
    count_tokens,
    echo_logprobs,
    generated_logprobs,
    handler_for,
    max_tokens_of,
    prompt_text,
    refusal_reason,
    reply_parts,
    scores_prompt,
)

__all__ = [
    "FAULT_KINDS",
    "LoggedRequest",
    "LoopbackOpenAI",
    "Responder",
    "main",
]

Responder = Callable[[dict[str, Any]], "str | dict[str, Any]"]
"""Turns a request's JSON body into the answer text; called from many threads at once.

It may also return ``{"text": ..., "top_logprobs": [[[token, logprob], ...], ...]}``: the log-probabilities the
server gives for the generated tokens when a request asks for them (see
:func:`~senseforge.llm.loopback_handler.reply_parts`)."""

FAULT_KINDS: tuple[str, ...] = ("429", "500", "timeout", "truncated")
"""The faults the server can inject:

* ``429``: a rate-limit answer with ``Retry-After: 0``;
* ``500``: a server error;
* ``timeout``: the server waits ``hang_s`` before answering, by when the client should have given up;
* ``truncated``: status 200 with the JSON body cut in half (and a ``Content-Length`` to match).
"""

_POLL_S = 0.05


@dataclass(frozen=True)
class LoggedRequest:
    """One request as the server saw it."""

    arrived_s: float
    """Seconds since :meth:`LoopbackOpenAI.start` when the request arrived."""
    path: str
    """The request path, e.g. ``/v1/chat/completions``."""
    outcome: str
    """``ok``, a fault kind (see :data:`FAULT_KINDS`), ``not_found``, ``bad_request`` or ``responder_error``."""


class LoopbackOpenAI:
    """An OpenAI-compatible server on ``127.0.0.1``, answering through ``responder``.

    Endpoints: ``POST /v1/chat/completions``, ``POST /v1/completions`` and
    ``GET /v1/models``; for batches, ``POST /v1/files``, ``GET /v1/files/{id}``,
    ``GET /v1/files/{id}/content``, ``POST /v1/batches``, ``GET /v1/batches``,
    ``GET /v1/batches/{id}`` and ``POST /v1/batches/{id}/cancel`` (see
    :class:`~senseforge.llm.loopback_batches.BatchDesk`). A completions request with
    ``echo`` and ``logprobs`` gets its prompt back with log-probabilities and the
    responder's first ``max_tokens`` words after it (:func:`echo_logprobs`); ``max_tokens``
    below 1 is refused with 400 there, as vLLM refuses it (llama-cpp-python would read it
    as "no limit").

    Each completion attempt waits ``latency_s`` (in its own handler thread, so many can
    wait at once), then either answers or, with probability ``fault_rate``, fails in one
    of the ``faults`` ways. Whether an attempt fails is drawn from a
    :class:`random.Random` seeded with ``seed``, a hash of the request body and how many
    times that body was sent before, so a run is reproducible whatever order concurrent
    requests arrive in.

    Args:
        responder: builds the answer text from the request's JSON body.
        latency_s: seconds every completion attempt waits before it is answered.
        fault_rate: chance that one attempt fails on purpose, 0 to 1.
        faults: the fault kinds to draw from (see :data:`FAULT_KINDS`).
        hang_s: extra seconds a ``timeout`` fault waits before it answers anyway.
        seed: seeds the fault draws.
        model: the model name listed by ``/v1/models`` and used when a request names none.
        max_consecutive_faults: if set, the same request body never fails more than this
            many times in a row; the next attempt is answered.
        capacity: if set, the most completion attempts in flight at once, as an account's hidden
            concurrency limit: an attempt that finds that many is refused at once with a 429
            (counted in :attr:`over_capacity` and logged as ``over_capacity``).
        headers: sent with every completion answer, refusals too: an account's announced limits, e.g.
            ``{"x-ratelimit-limit-requests": "600"}``.
        batch_latency_s: seconds from a batch's creation until it completes (when next read), or None to
            complete batches only when :meth:`finish_batches` is called. A batch's lines are answered as
            online requests are, but without ``latency_s`` and without injected faults.
        port: the port to listen on; 0 (the default) takes a free one.
        refuse_formats: chat ``response_format`` forms refused with 400, as an endpoint that does not take them
            answers (some of :data:`~senseforge.llm.loopback_formats.REFUSABLE_FORMATS`). Every other one is
            checked as a real server checks it (a strict schema as OpenAI's strict mode does), and a reply to a
            request with a schema fits it (:func:`~senseforge.llm.loopback_formats.shaped_text`).

    Statistics (``requests``, ``answered_ok``, ``faults_by_kind``, ``max_in_flight``,
    ``in_flight``, ``log``) may be read while the server runs. Each request is counted
    and logged before its answer goes out, so a client that holds an answer (or has
    given up on a ``timeout`` fault) always finds that request in them. They count online
    completion attempts only: Files and Batch API requests are neither counted nor logged
    there, but in ``files_uploaded`` and ``batches_created``.

    Raises:
        ConfigError: a setting is out of range or names an unknown fault kind.
    """

    def __init__(
        self,
        responder: Responder,
        *,
        latency_s: float = 0.0,
        fault_rate: float = 0.0,
        faults: Sequence[str] = FAULT_KINDS,
        hang_s: float = 2.0,
        seed: int = 0,
        model: str = "loopback",
        max_consecutive_faults: int | None = None,
        capacity: int | None = None,
        headers: Mapping[str, str] | None = None,
        batch_latency_s: float | None = 0.0,
        port: int = 0,
        refuse_formats: Sequence[str] = (),
    ) -> None:
        if latency_s < 0 or hang_s < 0:
            raise ConfigError(f"latency_s and hang_s must be >= 0, got {latency_s} and {hang_s}")
        if not 0.0 <= fault_rate <= 1.0:
            raise ConfigError(f"fault_rate must lie between 0 and 1, got {fault_rate}")
        unknown = sorted(set(faults) - set(FAULT_KINDS))
        if unknown:
            raise ConfigError(f"unknown fault kinds {unknown}: use some of {', '.join(FAULT_KINDS)}")
        if fault_rate > 0 and not faults:
            raise ConfigError("fault_rate > 0 needs at least one fault kind in faults")
        if capacity is not None and capacity < 1:
            raise ConfigError(f"capacity must be >= 1, got {capacity}")
        if not 0 <= port <= 65535:
            raise ConfigError(f"port must lie between 0 (a free one) and 65535, got {port}")
        if max_consecutive_faults is not None and max_consecutive_faults < 0:
            raise ConfigError(f"max_consecutive_faults must be >= 0, got {max_consecutive_faults}")
        unknown_formats = sorted(set(refuse_formats) - set(REFUSABLE_FORMATS))
        if unknown_formats:
            raise ConfigError(f"unknown formats {unknown_formats}: refuse some of {', '.join(REFUSABLE_FORMATS)}")
        self.refuse_formats = frozenset(refuse_formats)
        self.responder = responder
        self.port = port
        self.capacity = capacity
        self.headers = dict(headers or {})
        self.latency_s = latency_s
        self.fault_rate = fault_rate
        self.faults = tuple(faults)
        self.hang_s = hang_s
        self.seed = seed
        self.model = model
        self.max_consecutive_faults = max_consecutive_faults
        self._lock = threading.Lock()
        self._requests = 0
        self._answered_ok = 0
        self._faults: Counter[str] = Counter()
        self._in_flight = 0
        self._max_in_flight = 0
        self._over_capacity = 0
        self._log: list[LoggedRequest] = []
        self._sent: Counter[str] = Counter()
        self._streak: Counter[str] = Counter()
        self._started = 0.0
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.batch_latency_s = batch_latency_s
        self._desk = BatchDesk(self._answer_line, latency_s=batch_latency_s, lock=self._lock)

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> LoopbackOpenAI:
        """Bind ``port`` (a free one when 0) and serve in a daemon thread; returns ``self``.

        Raises:
            ConfigError: the port is taken.
        """
        if self._httpd is not None:
            raise RuntimeError("the loopback server is already started")
        try:
            self._httpd = LoopbackHTTPServer(("127.0.0.1", self.port), handler_for(self))
        except OSError as exc:
            raise ConfigError(f"cannot listen on 127.0.0.1:{self.port}: {exc.strerror or exc}") from exc
        self._started = time.monotonic()
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": _POLL_S}, name="loopback-openai", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the listening socket; requests still sleeping are abandoned."""
        httpd, thread = self._httpd, self._thread
        if httpd is None:
            return
        httpd.shutdown()
        httpd.server_close()
        if thread is not None:
            thread.join()
        self._httpd = self._thread = None

    def __enter__(self) -> LoopbackOpenAI:
        return self if self._httpd is not None else self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1``, to use as the client's base URL."""
        if self._httpd is None:
            raise RuntimeError("the loopback server is not started: call start() or use it in a with block")
        port = self._httpd.server_address[1]
        return f"http://127.0.0.1:{port}/v1"

    # -- statistics --------------------------------------------------------------------------

    @property
    def requests(self) -> int:
        """Completion attempts received (both completion endpoints, faults included)."""
        with self._lock:
            return self._requests

    @property
    def answered_ok(self) -> int:
        """Completion attempts answered in full."""
        with self._lock:
            return self._answered_ok

    @property
    def faults_by_kind(self) -> dict[str, int]:
        """How many attempts got each injected fault, counted when drawn (a ``timeout`` while it still hangs)."""
        with self._lock:
            return dict(self._faults)

    @property
    def in_flight(self) -> int:
        """Completion attempts received and not yet answered."""
        with self._lock:
            return self._in_flight

    @property
    def max_in_flight(self) -> int:
        """The most completion attempts ever received and not yet answered at once."""
        with self._lock:
            return self._max_in_flight

    @property
    def files_uploaded(self) -> int:
        """Files uploaded through ``POST /v1/files``."""
        return self._desk.files_uploaded

    @property
    def batches_created(self) -> int:
        """Batches created through ``POST /v1/batches``."""
        return self._desk.batches_created

    def finish_batches(self) -> int:
        """Complete every batch still in progress now, due or not; returns how many were completed."""
        return self._desk.finish_batches()

    @property
    def log(self) -> list[LoggedRequest]:
        """Every request whose outcome is decided (model list and unknown paths too), in arrival order.

        A request enters the log before its answer is sent; a ``timeout`` fault enters it when drawn,
        before it starts to hang, since the client gives up long before that answer comes.
        """
        with self._lock:
            return sorted(self._log, key=lambda entry: entry.arrived_s)

    # -- request handling (called from handler threads) ---------------------------------------

    def _arrive(self) -> tuple[float, int, bool]:
        """Note a completion attempt; returns its arrival time, its 1-based number, and whether it finds the server
        over its capacity (it is then refused, and not counted in flight)."""
        now = time.monotonic() - self._started
        with self._lock:
            self._requests += 1
            if self.capacity is not None and self._in_flight >= self.capacity:
                self._over_capacity += 1
                self._log.append(LoggedRequest(now, CHAT_PATH, "over_capacity"))
                return now, self._requests, True
            self._in_flight += 1
            self._max_in_flight = max(self._max_in_flight, self._in_flight)
            return now, self._requests, False

    @property
    def over_capacity(self) -> int:
        """Attempts refused with a 429 because ``capacity`` requests were already in flight."""
        with self._lock:
            return self._over_capacity

    def _record(self, arrived: float, path: str, outcome: str, *, attempt: bool, log: bool = True) -> None:
        """Note how a request ended: log it, and for a completion attempt count it as answered.

        Call it before the answer's bytes go out: the client may read the statistics the
        moment it has the answer, and must find this request in them. ``attempt=False``
        with ``log=True`` only logs (a ``timeout`` fault, before it hangs); ``log=False``
        only counts (that fault once it has hung).
        """
        with self._lock:
            if log:
                self._log.append(LoggedRequest(arrived, path, outcome))
            if attempt:
                self._in_flight -= 1
                if outcome == "ok":
                    self._answered_ok += 1

    def _since_start(self) -> float:
        return time.monotonic() - self._started

    def _draw_fault(self, body: dict[str, Any]) -> str | None:
        """The fault for this attempt at ``body``, or None to answer it."""
        digest = hashlib.sha256(json.dumps(body, sort_keys=True, ensure_ascii=False).encode()).hexdigest()
        cap = self.max_consecutive_faults
        # one critical section: two attempts at the same body must not take their numbers in
        # one order and update the fault streak in the other
        with self._lock:
            index = self._sent[digest]
            self._sent[digest] += 1
            rng = random.Random(f"{self.seed}:{digest}:{index}")
            fault = rng.choice(self.faults) if self.faults and rng.random() < self.fault_rate else None
            if fault is not None and cap is not None and self._streak[digest] >= cap:
                fault = None
            self._streak[digest] = self._streak[digest] + 1 if fault is not None else 0
            if fault is not None:
                self._faults[fault] += 1
        return fault

    def _completion(self, path: str, body: dict[str, Any], number: int) -> dict[str, Any]:
        """The full success payload for one attempt."""
        text, given = reply_parts(self.responder(body))
        if path == CHAT_PATH:
            text = shaped_text(body, text)
        prompt_tokens, completion_tokens = count_tokens(prompt_text(body)), count_tokens(text)
        logprobs: dict[str, Any] | None = None
        finish_reason = "stop"
        top = asked_top_logprobs(path, body)
        if top is not None:
            positions = generated_logprobs(text, given)
            logprobs = chat_logprobs(positions, top) if path == CHAT_PATH else completion_logprobs(positions, top)
        if path == COMPLETIONS_PATH and scores_prompt(body):
            limit = max_tokens_of(body)
            text, logprobs, completion_tokens = echo_logprobs(content_text(body.get("prompt")), text, limit)
            prompt_tokens = len(logprobs["tokens"]) - completion_tokens
            finish_reason = "length" if completion_tokens >= limit else "stop"
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }
        model = str(body.get("model") or self.model)
        if path == CHAT_PATH:
            return {
                "id": f"chatcmpl-loopback-{number}",
                "object": "chat.completion",
                "created": 0,
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": text},
                        "finish_reason": "stop",
                        **({"logprobs": logprobs} if logprobs is not None else {}),
                    }
                ],
                "usage": usage,
            }
        return {
            "id": f"cmpl-loopback-{number}",
            "object": "text_completion",
            "created": 0,
            "model": model,
            "choices": [{"index": 0, "text": text, "finish_reason": finish_reason, "logprobs": logprobs}],
            "usage": usage,
        }

    def _answer_line(self, path: str, body: dict[str, Any], number: int) -> tuple[int, dict[str, Any]]:
        """Status and JSON body of one batch line: as an online attempt at ``body`` would get, less latency and
        faults."""
        refusal = refusal_reason(path, body, self.refuse_formats)
        if refusal is not None:
            return 400, error_payload(400, refusal)
        try:
            return 200, self._completion(path, body, number)
        except Exception as exc:
            return 500, error_payload(500, f"responder failed: {type(exc).__name__}: {exc}")

    def _models(self) -> dict[str, Any]:
        return {
            "object": "list",
            "data": [{"id": self.model, "object": "model", "created": 0, "owned_by": "senseforge-loopback"}],
        }


def main(argv: Sequence[str] | None = None) -> int:
    """Serve from a process of its own (so the server does not share the client's interpreter).

    Prints the base URL on the first line of stdout, then serves: until stdin closes (each
    line read prints the statistics so far as one JSON line), or with ``--until-signal``
    until SIGTERM or SIGINT; either way it prints the statistics once more and exits 0.
    ``python -m senseforge.llm.loopback --help`` says the rest.
    """
    import signal

    args = parser().parse_args(argv)
    headers = dict(header(text) for text in args.header)
    if args.until_signal and hasattr(signal, "pthread_sigmask"):  # before any thread starts: they inherit the mask
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
    try:
        server = LoopbackOpenAI(
            load_responder(args.responder),
            latency_s=args.latency,
            fault_rate=args.fault_rate,
            seed=args.seed,
            capacity=args.capacity,
            headers=headers,
            batch_latency_s=args.batch_latency,
            port=args.port,
            refuse_formats=args.refuse_format,
        ).start()
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    def stats() -> str:
        return json.dumps(
            {
                "requests": server.requests,
                "answered_ok": server.answered_ok,
                "faults_by_kind": server.faults_by_kind,
                "max_in_flight": server.max_in_flight,
                "in_flight": server.in_flight,
                "over_capacity": server.over_capacity,
                "files_uploaded": server.files_uploaded,
                "batches_created": server.batches_created,
                "first_arrival_monotonic": arrival(0),
                "last_arrival_monotonic": arrival(-1),
            }
        )

    def arrival(index: int) -> float | None:
        """When the first (``0``) or last (``-1``) request came, on this machine's monotonic clock (the client's
        too): a rate from the first leaves the client's start-up out; the last, its finishing."""
        log = server.log
        return server._started + log[index].arrived_s if log else None

    with server:
        print(server.base_url, flush=True)
        try:
            if args.until_signal:
                wait_for_signal()
            else:
                for _line in sys.stdin:
                    print(stats(), flush=True)
        except KeyboardInterrupt:
            pass
        print(stats(), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
