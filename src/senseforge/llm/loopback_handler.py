"""The HTTP side of the loopback OpenAI server: routes, request bodies, answers and errors.

:func:`handler_for` builds the request handler that :class:`~senseforge.llm.loopback.LoopbackOpenAI`
serves through :class:`LoopbackHTTPServer`: it reads each request, sends Files and Batch API
paths to the batch desk, refuses what a real server refuses, and writes the answer (or an
injected fault) that the server decides. The helpers here read a request body
(:func:`request_text`, :func:`prompt_text`), build a log-likelihood answer
(:func:`echo_logprobs`) and the log-probabilities of generated tokens (:func:`reply_parts`,
:func:`generated_logprobs`). It uses only the standard library.
"""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Collection
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

from senseforge.llm.loopback_batches import BatchDesk, error_payload
from senseforge.llm.loopback_formats import format_problem

CHAT_PATH = "/v1/chat/completions"
COMPLETIONS_PATH = "/v1/completions"
MODELS_PATH = "/v1/models"

DEFAULT_MAX_TOKENS = 16
"""Most words generated after an echoed prompt when the request names no ``max_tokens`` (OpenAI's default)."""

_QUEUE_SIZE = 256
_WORD = re.compile(r"\s*\S+")


class Host(Protocol):
    """What the request handler needs from the server it answers for.

    :class:`~senseforge.llm.loopback.LoopbackOpenAI` is one; the handler reads its settings and calls its hooks.
    """

    capacity: int | None
    headers: dict[str, str]
    latency_s: float
    hang_s: float
    refuse_formats: frozenset[str]
    _desk: BatchDesk

    def _since_start(self) -> float: ...

    def _arrive(self) -> tuple[float, int, bool]: ...

    def _record(self, arrived: float, path: str, outcome: str, *, attempt: bool, log: bool = True) -> None: ...

    def _draw_fault(self, body: dict[str, Any]) -> str | None: ...

    def _completion(self, path: str, body: dict[str, Any], number: int) -> dict[str, Any]: ...

    def _models(self) -> dict[str, Any]: ...


def request_text(body: dict[str, Any]) -> str:
    """The text a request asks about: the last user message (chat) or the prompt (completions).

    >>> request_text({"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]})
    'Hi'
    >>> request_text({"prompt": "Once upon"})
    'Once upon'
    """
    messages = body.get("messages")
    if isinstance(messages, list):
        users = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"]
        return content_text(users[-1].get("content")) if users else ""
    return content_text(body.get("prompt"))


def content_text(content: Any) -> str:
    """Plain text of a message content or prompt: a string, or a list of strings or text parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [part if isinstance(part, str) else str(part.get("text", "")) for part in content]
        return "\n".join(parts)
    return "" if content is None else str(content)


def prompt_text(body: dict[str, Any]) -> str:
    messages = body.get("messages")
    if isinstance(messages, list):
        return "\n".join(content_text(m.get("content")) for m in messages if isinstance(m, dict))
    return content_text(body.get("prompt"))


def echo_logprobs(prompt: str, generated: str, max_tokens: int) -> tuple[str, dict[str, Any], int]:
    """The echoed text, ``logprobs`` object and generated-token count of an ``echo`` + ``logprobs`` answer.

    Tokens are whitespace-led words: the prompt's, then at most ``max_tokens`` of
    ``generated``. Each token's log-probability is -0.1 per character of the word, the
    first token has none (nothing precedes it), and each token is the most likely one.
    ``text_offset`` counts characters of the echoed text, so the first generated token
    starts where the prompt ends.

    >>> text, logprobs, n = echo_logprobs("The sky is blue", " and wide", 1)
    >>> text, n
    ('The sky is blue and', 1)
    >>> logprobs["tokens"], logprobs["token_logprobs"], logprobs["text_offset"]
    (['The', ' sky', ' is', ' blue', ' and'], [None, -0.3, -0.2, -0.4, -0.3], [0, 3, 7, 10, 15])
    """
    made = _WORD.findall(generated)[: max(0, max_tokens)]
    tokens = [*_WORD.findall(prompt), *made]
    offsets, position = [], 0
    for token in tokens:
        offsets.append(position)
        position += len(token)
    values: list[float | None] = [None, *(round(-0.1 * len(token.strip()), 6) for token in tokens[1:])]
    tops = [None if value is None else {token: value} for token, value in zip(tokens, values, strict=True)]
    logprobs = {"tokens": tokens, "token_logprobs": values, "top_logprobs": tops, "text_offset": offsets}
    return prompt + "".join(made), logprobs, len(made)


def asked_top_logprobs(path: str, body: dict[str, Any]) -> int | None:
    """How many alternatives per generated token a body asks for, or ``None`` when it asks for no log-probabilities.

    Chat asks with ``logprobs: true`` and ``top_logprobs: N``; legacy completions with ``logprobs: N`` (and
    without ``echo``, which asks to score the prompt instead, see :func:`echo_logprobs`).

    >>> asked_top_logprobs(CHAT_PATH, {"logprobs": True, "top_logprobs": 3})
    3
    >>> asked_top_logprobs(COMPLETIONS_PATH, {"logprobs": 2}), asked_top_logprobs(CHAT_PATH, {})
    (2, None)
    """
    if path == CHAT_PATH:
        return int(body.get("top_logprobs") or 0) if body.get("logprobs") is True else None
    if path == COMPLETIONS_PATH and not body.get("echo") and body.get("logprobs") is not None:
        return int(body["logprobs"])
    return None


def reply_parts(reply: object) -> tuple[str, list[list[tuple[str, float]]] | None]:
    """A responder's reply as its text and, where it gives them, its top log-probabilities per generated token.

    A reply is the text, or ``{"text": ..., "top_logprobs": [[[token, logprob], ...], ...]}`` (one list per
    generated token, each alternative a token and its natural-log probability, the most likely first).

    >>> reply_parts({"text": "B", "top_logprobs": [[["B", -0.1], ["A", -2.5]]]})
    ('B', [[('B', -0.1), ('A', -2.5)]])

    Raises:
        ValueError: the reply is neither, or its ``top_logprobs`` is not of that shape.
    """
    if isinstance(reply, str):
        return reply, None
    if not isinstance(reply, dict) or not isinstance(reply.get("text"), str):
        raise ValueError(f'a responder returns text or {{"text": ..., "top_logprobs": ...}}, not {reply!r:.80}')
    given = reply.get("top_logprobs")
    if given is None:
        return reply["text"], None
    try:
        positions = [[(str(token), float(logprob)) for token, logprob in position] for position in given]
    except (TypeError, ValueError) as exc:
        raise ValueError(f"top_logprobs must be a list of [[token, logprob], ...] per token ({exc})") from exc
    return reply["text"], positions


def generated_logprobs(text: str, given: list[list[tuple[str, float]]] | None) -> list[list[tuple[str, float]]]:
    """The alternatives per generated token: ``given`` by the responder, else made from ``text``.

    Made ones take the text's whitespace-led words as its tokens, each the only alternative at its position, with
    -0.1 per character of the word as its log-probability (as :func:`echo_logprobs` scores a prompt's words).

    >>> generated_logprobs(" B because", None)
    [[(' B', -0.1)], [(' because', -0.7)]]
    """
    if given is not None:
        return given
    return [[(word, round(-0.1 * len(word.strip()), 6))] for word in _WORD.findall(text)]


def chat_logprobs(positions: list[list[tuple[str, float]]], top: int) -> dict[str, Any]:
    """A chat answer's ``logprobs`` object: per token, the most likely alternative and at most ``top`` of them."""
    content = []
    for alternatives in positions:
        token, logprob = alternatives[0] if alternatives else ("", 0.0)
        listed = [{"token": t, "logprob": lp, "bytes": list(t.encode())} for t, lp in alternatives[:top]]
        content.append({"token": token, "logprob": logprob, "bytes": list(token.encode()), "top_logprobs": listed})
    return {"content": content, "refusal": None}


def completion_logprobs(positions: list[list[tuple[str, float]]], top: int) -> dict[str, Any]:
    """A text completion's ``logprobs`` object: per token, the most likely alternative and at most ``top`` of them
    as a token → log-probability object (offsets counted from the start of the generated text)."""
    tokens, values, tops, offsets, position = [], [], [], [], 0
    for alternatives in positions:
        token, logprob = alternatives[0] if alternatives else ("", 0.0)
        tokens.append(token)
        values.append(logprob)
        tops.append(dict(alternatives[:top]))
        offsets.append(position)
        position += len(token)
    return {"tokens": tokens, "token_logprobs": values, "top_logprobs": tops, "text_offset": offsets}


def count_tokens(text: str) -> int:
    """Whitespace-separated words, at least one."""
    return max(1, len(text.split()))


class LoopbackHTTPServer(ThreadingHTTPServer):
    """A threading server with a deep accept queue that never waits for its handler threads."""

    request_queue_size = _QUEUE_SIZE
    daemon_threads = True
    block_on_close = False

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Stay quiet about clients that hung up (timeouts); report anything else as usual."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


def scores_prompt(body: dict[str, Any]) -> bool:
    """Whether a completions body asks for the prompt's log-probabilities (``echo`` and ``logprobs``)."""
    return bool(body.get("echo")) and body.get("logprobs") is not None


def max_tokens_of(body: dict[str, Any]) -> int:
    value = body.get("max_tokens")
    return DEFAULT_MAX_TOKENS if value is None else int(value)


def refusal_reason(path: str, body: dict[str, Any], refused_formats: Collection[str] = ()) -> str | None:
    """Why a well-formed JSON body is refused with 400, or None (a chat body's ``response_format`` is read as a
    real server reads it, ``refused_formats`` refused: :func:`~senseforge.llm.loopback_formats.format_problem`)."""
    if path == CHAT_PATH:
        return format_problem(body, refused_formats)
    if path != COMPLETIONS_PATH or not scores_prompt(body):
        return None
    value = body.get("max_tokens")
    if value is not None and (not isinstance(value, int) or value < 1):
        return f"max_tokens must be at least 1, got {value!r}"
    return None


def _error(status: int, message: str) -> bytes:
    return json.dumps(error_payload(status, message)).encode()


def handler_for(server: Host) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Headers and body go out in two writes; with Nagle's algorithm on, the body waits
        # for the client's delayed ACK (~40 ms on Linux) — a stall no real server adds.
        disable_nagle_algorithm = True

        def do_GET(self) -> None:
            if self._batch_api("GET", b""):
                return
            arrived = server._since_start()
            if self.path.rstrip("/") == MODELS_PATH:
                server._record(arrived, self.path, "ok", attempt=False)
                self._send(200, json.dumps(server._models()).encode())
            else:
                server._record(arrived, self.path, "not_found", attempt=False)
                self._send(404, _error(404, f"no route for GET {self.path}"))

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            if self._batch_api("POST", raw):
                return
            path = self.path.rstrip("/")
            if path not in (CHAT_PATH, COMPLETIONS_PATH):
                arrived = server._since_start()
                server._record(arrived, self.path, "not_found", attempt=False)
                self._send(404, _error(404, f"no route for POST {self.path}"))
                return
            arrived, number, crowded = server._arrive()
            if crowded:  # an account's concurrency limit: refused at once, nothing counted in flight
                refusal = _error(429, f"more than {server.capacity} requests at once")
                self._send(429, refusal, {"Retry-After": "0", **server.headers})
                return
            outcome, status, payload = "bad_request", 400, b""
            headers: dict[str, str] = {}
            logged = False
            try:
                if server.latency_s:
                    time.sleep(server.latency_s)
                outcome, status, payload, headers = self._answer(path, raw, number)
                if outcome == "timeout":
                    # logged before the hang: the client gives up (and may look) long before it ends
                    server._record(arrived, path, outcome, attempt=False)
                    logged = True
                    time.sleep(server.hang_s)
                    self.close_connection = True
            finally:
                # counted as answered before the bytes go out, so that a client that sends its
                # next request as soon as it reads this answer never sees both counted at once
                server._record(arrived, path, outcome, attempt=True, log=not logged)
            self._send(status, payload, {**headers, **server.headers})

        def _answer(self, path: str, raw: bytes, number: int) -> tuple[str, int, bytes, dict[str, str]]:
            """Outcome, status, payload and extra headers for one completion attempt."""
            try:
                body = json.loads(raw or b"{}")
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                return "bad_request", 400, _error(400, f"the body is not JSON: {exc}"), {}
            if not isinstance(body, dict):
                return "bad_request", 400, _error(400, "the body must be a JSON object"), {}
            refusal = refusal_reason(path, body, server.refuse_formats)
            if refusal is not None:
                return "bad_request", 400, _error(400, refusal), {}
            fault = server._draw_fault(body)
            if fault == "429":
                return fault, 429, _error(429, "injected rate limit"), {"Retry-After": "0"}
            if fault == "500":
                return fault, 500, _error(500, "injected server error"), {}
            try:
                payload = json.dumps(server._completion(path, body, number)).encode()
            except Exception as exc:
                return "responder_error", 500, _error(500, f"responder failed: {type(exc).__name__}: {exc}"), {}
            if fault == "truncated":
                return fault, 200, payload[: len(payload) // 2], {}
            return fault or "ok", 200, payload, {}

        def _batch_api(self, method: str, raw: bytes) -> bool:
            """Answer a Files or Batch API request through the batch desk; False if the path is not one."""
            answer = server._desk.route(method, self.path, self.headers.get("Content-Type", ""), raw)
            if answer is None:
                return False
            self._send(answer.status, answer.payload, content_type=answer.content_type)
            return True

        def _send(
            self,
            status: int,
            payload: bytes,
            headers: dict[str, str] | None = None,
            content_type: str = "application/json",
        ) -> None:
            try:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(payload)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(payload)
                self.wfile.flush()
            except OSError:  # the client gave up (a timeout) and closed the connection
                self.close_connection = True

        def log_message(self, format: str, *args: Any) -> None:
            return None

    return Handler
