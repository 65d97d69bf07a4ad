"""The ``openai`` provider scoring through a real llama-cpp-python server (``python -m llama_cpp.server``) on loopback.

The server serves the bundled Gemma 3 270M GGUF from a subprocess. Without llama-cpp-python's
server extras or the bundled model these tests skip on a dev machine and fail under CI=true.

Two things make the stock server's scores differ from the embedded ``llamacpp/`` provider's,
neither of them ours and neither switchable from a request or a server flag:

* it loads llama.cpp's repacked CPU weight buffers, which the embedded scorer avoids (see
  ``senseforge.llm.providers.llamacpp``): up to 0.35 nats on a CommonsenseQA choice here;
* it keeps the previous request's KV cache and evaluates only the part of a prompt that
  differs from it; a decode of two or three tokens rounds differently from a longer one (up
  to 0.1 nats on a choice scored right after a sibling choice).

So the comparison runs the server's own ``main`` with repacking switched off (a launcher of a
few lines, as its settings have no such option) and asks about the questions in turn, one
choice each round, so that every request evaluates a long tail. The scores then equal the
embedded ones to within 1e-6 nats (measured: 4e-7). The stock server, started as a user
starts it, is checked for what broke scoring against it: a request must come back with at
most one generated token.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

import pytest
from pydantic import BaseModel, Field

pytest.importorskip("openai")

from senseforge.llm.base import GenerateRequest, LoglikelihoodRequest, ReplyShape
from senseforge.llm.providers.openai import OpenAILLM, Options
from senseforge.llm.providers.openai_formats import forget_all, memory_for
from senseforge.llm.registry import get_llm

pytestmark = pytest.mark.slow

READY_S = 120.0
"""Longest wait for a started server to list its model."""
N_CTX = 256
"""The server's context: with logits_all it keeps ``N_CTX`` × 262,144 floats of scores (256 MiB)."""
MAX_DELTA = 0.01
"""Largest difference, in nats, allowed between the server's score of a pair and the embedded one."""
ALIAS = "gemma"

QUESTIONS: list[tuple[str, list[str]]] = [
    ("Question: Where do fish live?\nAnswer:", [" in water", " on the moon"]),
    ("Question: What do you use to cut paper?\nAnswer:", [" scissors", " a pillow"]),
]
"""Two questions of two choices: four (context, continuation) pairs. Few, because the server sorts the whole
vocabulary in Python for every echoed token (most of a second each here); not shorter, because a decode of
fewer than about eight tokens rounds differently in llama.cpp's CPU kernels (the embedded scorer pads its short
decodes for that reason; the server does not), which alone moves a score by up to 0.08 nats."""

CHOICES = 2

WITHOUT_REPACKING = """
import llama_cpp.llama_cpp as lib
from llama_cpp.server.__main__ import main

defaults = lib.llama_model_default_params


def without_repacking():
    params = defaults()
    params.use_extra_bufts = False
    return params


lib.llama_model_default_params = without_repacking
main()
"""
"""``python -c`` source: llama-cpp-python's server, loading the weights as the embedded scorer does."""

_PROXIES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")


def _under_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def _missing(what: str) -> NoReturn:
    """What the test needs is not installed: fail under CI=true, else skip (as tests/conftest.py does)."""
    if _under_ci():
        pytest.fail(f"{what} (CI=true: the llama.cpp server tests must run)", pytrace=False)
    pytest.skip(what)


@pytest.fixture(scope="module")
def model_path(models_dir: Path) -> Path:
    """The bundled GGUF file, assembled in the session's models folder."""
    try:
        import llama_cpp.server.app  # noqa: F401  (fastapi, sse-starlette, starlette-context, pydantic-settings)
    except ImportError as error:
        _missing(f"llama-cpp-python's server cannot be imported ({error}): pip install -c constraints.txt -e '.[dev]'")
    from senseforge.llm.providers.llamacpp import bundled_model_path

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SENSEFORGE_MODELS", str(models_dir))
        try:
            path, _ = bundled_model_path("gemma-3-270m")
        except ImportError as error:
            _missing(f"the bundled model is not installed ({error}): pip install -e '.[local]'")
    return path


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _lists_models(base_url: str) -> bool:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(base_url + "/models", timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


@contextlib.contextmanager
def _serving(model: Path, log: Path, *, repack: bool) -> Iterator[str]:
    """A llama-cpp-python server on a free loopback port; yields its base URL and kills it afterwards."""
    port = _free_port()
    base_url = f"http://127.0.0.1:{port}/v1"
    entry = ["-m", "llama_cpp.server"] if repack else ["-c", WITHOUT_REPACKING]
    command = [sys.executable, *entry, "--model", str(model), "--model_alias", ALIAS]
    command += ["--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(N_CTX)]
    env = {name: value for name, value in os.environ.items() if name not in _PROXIES}
    with log.open("wb") as sink:
        server = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.monotonic() + READY_S
        while not _lists_models(base_url):
            if server.poll() is not None:
                tail = log.read_text(errors="replace")[-3000:]
                pytest.fail(f"the llama.cpp server exited with {server.returncode}:\n{tail}", pytrace=False)
            if time.monotonic() > deadline:
                pytest.fail(f"the llama.cpp server did not answer within {READY_S:.0f} s", pytrace=False)
            time.sleep(0.25)
        yield base_url
    finally:
        server.terminate()
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


@pytest.fixture(scope="module")
def stock_server(model_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``python -m llama_cpp.server`` as a user starts it."""
    with _serving(model_path, tmp_path_factory.mktemp("llama-server") / "stock.log", repack=True) as base_url:
        yield base_url


@pytest.fixture(scope="module")
def same_weights_server(model_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The same server, loading the weights without repacked buffers, as the embedded scorer does."""
    with _serving(model_path, tmp_path_factory.mktemp("llama-server") / "same.log", repack=False) as base_url:
        yield base_url


@pytest.fixture(autouse=True)
def _no_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in _PROXIES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")


def _client(base_url: str) -> OpenAILLM:
    # the server answers one request at a time, about a second per echoed token on a small CPU
    return OpenAILLM(ALIAS, Options(base_url=base_url, max_concurrency=1, timeout_s=300, max_retries=0))


def test_scores_match_the_embedded_provider(same_weights_server: str) -> None:
    # one choice of every question per round: no request shares more than "Question:" with the one before
    requests = [
        LoglikelihoodRequest(context=context, continuation=choices[round_])
        for round_ in range(CHOICES)
        for context, choices in QUESTIONS
    ]
    served = _client(same_weights_server).loglikelihood(requests)
    embedded = get_llm("llamacpp/gemma-3-270m")
    try:
        local = embedded.loglikelihood(requests)
    finally:
        embedded.close()

    assert all(score.ok for score in served), [score.failure for score in served if not score.ok]
    assert all(score.ok for score in local), [score.failure for score in local if not score.ok]
    assert [score.n_tokens for score in served] == [score.n_tokens for score in local]
    assert all(score.tokens_out is not None and score.tokens_out <= 1 for score in served)
    deltas = {
        (request.context, request.continuation): abs(a.logprob - b.logprob)
        for request, a, b in zip(requests, served, local, strict=True)
        if a.logprob is not None and b.logprob is not None
    }
    assert len(deltas) == len(requests)
    assert max(deltas.values()) <= MAX_DELTA, sorted(deltas.items(), key=lambda item: -item[1])[:3]

    def best(scores: list[float | None]) -> list[int]:
        return [
            max(range(CHOICES), key=lambda choice: scores[choice * len(QUESTIONS) + question] or float("-inf"))
            for question in range(len(QUESTIONS))
        ]

    assert best([score.logprob for score in served]) == best([score.logprob for score in local])


def test_a_scoring_request_generates_at_most_one_token(stock_server: str) -> None:
    context, choices = QUESTIONS[0]
    [score] = _client(stock_server).loglikelihood([LoglikelihoodRequest(context=context, continuation=choices[0])])
    assert score.ok, score.failure
    assert score.tokens_out is not None and score.tokens_out <= 1  # the server's usage.completion_tokens
    assert score.n_tokens == 2  # " in", " water"
    assert score.logprob is not None and score.logprob < 0


class _Fruit(BaseModel):
    name: str = Field(max_length=12)
    sweet: bool


def test_a_reply_shape_is_sent_as_json_object_with_schema_and_honoured(
    stock_server: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The server takes no ``json_schema`` response format (a 422 naming it): the provider falls back once, with one
    log line and no failed attempt, to ``{"type": "json_object", "schema": …}``, which the server turns into a
    grammar: the reply validates against the stage's model."""
    forget_all()
    shape = ReplyShape.of_model(_Fruit)
    request = GenerateRequest.chat("Name a fruit.", reply_shape=shape, max_tokens=40)
    with caplog.at_level(logging.WARNING):
        first, second = (_client(stock_server).generate([request])[0] for _ in range(2))
    assert first.ok and second.ok, (first.failure, second.failure)
    assert first.attempts == 1 and not first.retry_errors
    assert first.constrained is True and second.constrained is True
    assert memory_for(stock_server, ALIAS).form == "json_object_schema"
    lines = [record.getMessage() for record in caplog.records if "refuses response_format" in record.getMessage()]
    assert len(lines) == 1 and "json_schema" in lines[0]
    assert first.finish_reason == "stop", first.text  # a complete reply within 40 tokens: the schema bounds it
    _Fruit.model_validate_json(first.text)
