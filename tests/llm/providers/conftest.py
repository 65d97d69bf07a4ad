"""A scripted, loopback OpenAI-compatible HTTP server for the ``openai`` provider tests.

Each request is keyed by the first word of its last user message (chat) or of its
prompt (completions). The rest of that text may carry ``name=value`` settings:

* ``script=429,500,200`` — what successive attempts for the key get. Items: an HTTP
  status (``200``, ``400``, ``429``, ``500`` …), ``timeout`` (sleep ``hang_s`` and then
  answer 200, too late for the client) or ``trunc`` (a 200 whose JSON body is cut short,
  with a matching ``Content-Length``). The last item repeats once the script runs out;
  with no script every attempt gets 200;
* ``retry_after=1`` — a ``Retry-After`` header (seconds) on 429 and 503 answers;
* ``retry_after_ms=250`` — a ``retry-after-ms`` header on those answers;
* ``delay=0.1`` — seconds to wait before answering.

The server logs every attempt (key, path, arrival time, what it answered, the request
body) and the most requests it ever had in flight at once.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

_TOKEN = re.compile(r"\s*\S+")


@dataclass
class Attempt:
    """One request as the server saw it."""

    key: str
    path: str
    arrived: float
    answer: str
    body: dict[str, Any] = field(repr=False)
    authorization: str | None = None


def _settings(text: str) -> tuple[str, dict[str, str]]:
    words = text.split()
    key = words[0] if words else ""
    settings = dict(word.split("=", 1) for word in words[1:] if "=" in word)
    return key, settings


def fake_logprobs(prompt: str) -> dict[str, Any]:
    """Echo log-probabilities for ``prompt``, as a completions endpoint would return them.

    Tokens are whitespace-led words. Each token's log-probability is ``-0.1 * len(word)``;
    the first token has none. A word starting with ``!`` is not the most likely token
    (``" top"`` is, with -0.01).
    """
    tokens = _TOKEN.findall(prompt)
    offsets, position = [], 0
    for token in tokens:
        offsets.append(position)
        position += len(token)
    logprobs: list[float | None] = [None]
    top: list[dict[str, float] | None] = [None]
    for token in tokens[1:]:
        value = -0.1 * len(token.strip())
        logprobs.append(value)
        top.append({" top": -0.01} if token.strip().startswith("!") else {token: value})
    return {"tokens": tokens, "token_logprobs": logprobs, "top_logprobs": top, "text_offset": offsets}


class FakeOpenAI:
    """The server; use :attr:`base_url` as the client's base URL."""

    hang_s = 1.5
    """How long a ``timeout`` attempt waits before answering."""

    def __init__(self) -> None:
        self.attempts: list[Attempt] = []
        self.max_in_flight = 0
        self.chat_only = False
        """When set, ``/v1/completions`` answers 404 (a chat-only endpoint)."""
        self.omit_logprobs = False
        """When set, completions answers carry no ``logprobs``."""
        self._in_flight = 0
        self._counts: dict[str, int] = defaultdict(int)
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def log(self, key: str) -> list[Attempt]:
        """The attempts for one key, in arrival order."""
        with self._lock:
            return [a for a in self.attempts if a.key == key]

    # -- request handling (called from handler threads) ---------------------------------------

    def _enter(self) -> None:
        with self._lock:
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)

    def _leave(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def answer(
        self, path: str, body: dict[str, Any], authorization: str | None = None
    ) -> tuple[int, dict[str, str], bytes, float]:
        """Status, headers, body bytes and delay for one request."""
        arrived = time.monotonic()
        if path.endswith("/chat/completions"):
            users = [m for m in body.get("messages", []) if m.get("role") == "user"]
            text = str(users[-1]["content"]) if users else ""
        else:
            text = str(body.get("prompt", ""))
        key, settings = _settings(text)
        with self._lock:
            index = self._counts[key]
            self._counts[key] += 1
        script = settings.get("script", "200").split(",")
        step = script[min(index, len(script) - 1)]
        if path.endswith("/completions") and not path.endswith("/chat/completions") and self.chat_only:
            step = "404"
        with self._lock:
            self.attempts.append(Attempt(key, path, arrived, step, body, authorization))
        delay = float(settings.get("delay", "0"))
        if step == "timeout":
            delay += self.hang_s
        if step in ("200", "timeout", "trunc"):
            payload = json.dumps(self._success(path, body, text)).encode()
            if step == "trunc":
                payload = payload[: len(payload) // 2]
            return 200, {}, payload, delay
        status = int(step)
        headers: dict[str, str] = {}
        if status in (429, 503):
            if "retry_after" in settings:
                headers["Retry-After"] = settings["retry_after"]
            if "retry_after_ms" in settings:
                headers["retry-after-ms"] = settings["retry_after_ms"]
        error = {"error": {"message": f"scripted {status} for {key}", "type": "scripted", "code": str(status)}}
        return status, headers, json.dumps(error).encode(), delay

    def _success(self, path: str, body: dict[str, Any], text: str) -> dict[str, Any]:
        usage = {"prompt_tokens": len(text.split()), "completion_tokens": 2, "total_tokens": len(text.split()) + 2}
        if path.endswith("/chat/completions"):
            json_mode = (body.get("response_format") or {}).get("type") == "json_object"
            content = '{"ok": true}' if json_mode else f"echo: {text}"
            return {
                "id": "chatcmpl-fake",
                "object": "chat.completion",
                "created": 0,
                "model": body.get("model"),
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
                ],
                "usage": usage,
            }
        prompt = str(body.get("prompt", ""))
        echo = bool(body.get("echo"))
        logprobs = None
        if body.get("logprobs") is not None and not self.omit_logprobs:
            logprobs = fake_logprobs(prompt) if echo else None
        return {
            "id": "cmpl-fake",
            "object": "text_completion",
            "created": 0,
            "model": body.get("model"),
            "choices": [
                {
                    "index": 0,
                    "text": prompt if echo else f"echo: {text}",
                    "finish_reason": "length",
                    "logprobs": logprobs,
                }
            ],
            "usage": usage,
        }


def _handler_for(server: FakeOpenAI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            body = json.loads(raw or b"{}")
            server._enter()
            left = False
            try:
                status, headers, payload, delay = server.answer(self.path, body, self.headers.get("Authorization"))
                if delay:
                    time.sleep(delay)
                # counted out before the reply goes out: once the client has it, it may send its next request
                server._leave()
                left = True
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(payload)
                self.wfile.flush()
            except OSError:  # the client gave up (timeout) and closed the connection
                self.close_connection = True
            finally:
                if not left:
                    server._leave()

        def log_message(self, format: str, *args: Any) -> None:
            return None

    return Handler


@pytest.fixture
def fake_openai(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAI]:
    """A running fake server; proxies and stray OpenAI settings are cleared from the environment."""
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    for name in ("OPENAI_BASE_URL", "OPENAI_CUSTOM_HEADERS", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    server = FakeOpenAI()
    server.start()
    try:
        yield server
    finally:
        server.stop()
