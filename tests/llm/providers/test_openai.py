"""The ``openai`` provider against a real loopback server (see ``conftest.py``)."""

from __future__ import annotations

import asyncio
import email.utils
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("openai")

from senseforge.errors import ConfigError
from senseforge.llm.base import GenerateRequest, LoglikelihoodRequest, Message
from senseforge.llm.cache import CachedLLM
from senseforge.llm.loopback import LoopbackOpenAI
from senseforge.llm.loopback_handler import request_text
from senseforge.llm.prices import Price, PriceTable
from senseforge.llm.providers import openai as provider
from senseforge.llm.providers import openai_answers as reading
from senseforge.llm.registry import get_llm
from senseforge.store.db import Store


class RecordingSleep:
    """Stands in for ``asyncio.sleep``: notes each requested delay and returns at once."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)
        await asyncio.sleep(0)


def make(server: Any, sleep: Any = None, **options: Any) -> provider.OpenAILLM:
    settings = {"base_url": server.base_url, "backoff_base_s": 0.01, "timeout_s": 5.0, **options}
    if sleep is None:
        return provider.OpenAILLM("fake-model", provider.Options(**settings))
    return provider.OpenAILLM("fake-model", provider.Options(**settings), sleep=sleep)


@pytest.fixture(autouse=True)
def _api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")


# -- retries ---------------------------------------------------------------------------------


def test_rate_limited_twice_then_ok(fake_openai: Any) -> None:
    llm = make(fake_openai, backoff_base_s=0.2)  # the real sleep
    [done] = llm.generate([GenerateRequest.chat("k1 script=429,429,200")])
    assert done.ok, done.failure
    assert done.text == "echo: k1 script=429,429,200"
    assert done.attempts == 3
    assert (done.tokens_in, done.tokens_out) == (2, 2)
    assert done.finish_reason == "stop"
    log = fake_openai.log("k1")
    assert [a.answer for a in log] == ["429", "429", "200"]
    # backoff really waited: at least half of base * 2**n (the jitter's lower end)
    assert log[1].arrived - log[0].arrived >= 0.09
    assert log[2].arrived - log[1].arrived >= 0.19
    assert done.latency_s >= log[2].arrived - log[0].arrived
    assert all(a.authorization == "Bearer sk-test" for a in log)


def test_retry_after_seconds_waits_on_the_wire(fake_openai: Any) -> None:
    llm = make(fake_openai)
    [done] = llm.generate([GenerateRequest.chat("ra script=429,200 retry_after=1")])
    assert done.ok and done.attempts == 2
    first, second = fake_openai.log("ra")
    assert second.arrived - first.arrived >= 0.9


@pytest.mark.parametrize(
    ("settings", "expected"),
    [("retry_after=1", 1.0), ("retry_after=2.5", 2.5), ("retry_after_ms=250", 0.25)],
)
def test_retry_after_is_the_requested_delay(fake_openai: Any, settings: str, expected: float) -> None:
    sleep = RecordingSleep()
    llm = make(fake_openai, sleep=sleep)
    [done] = llm.generate([GenerateRequest.chat(f"rs script=429,200 {settings}")])
    assert done.ok and done.attempts == 2
    assert sleep.delays == [expected]


def test_retry_after_http_date() -> None:
    when = email.utils.formatdate(time.time() + 30, usegmt=True)
    delay = reading.parse_retry_after({"Retry-After": when})
    assert delay is not None and 20 <= delay <= 31
    assert reading.parse_retry_after({"Retry-After": "soon"}) is None
    assert reading.parse_retry_after({}) is None


def test_backoff_grows_and_is_capped(fake_openai: Any) -> None:
    llm = make(fake_openai, backoff_base_s=0.5, backoff_max_s=2.0)
    problem = reading.Problem("server_error", "x", 500, True)
    first = llm._retries.backoff(0, problem)
    assert 0.25 <= first <= 0.5
    assert all(1.0 <= llm._retries.backoff(n, problem) <= 2.0 for n in range(2, 12))


@pytest.mark.parametrize(
    ("step", "kind", "status"),
    [
        ("timeout", "timeout", None),
        ("500", "server_error", 500),
        ("502", "server_error", 502),
        ("503", "server_error", 503),
        ("504", "server_error", 504),
        ("trunc", "truncated", 200),
        ("429", "rate_limit", 429),
    ],
)
def test_transient_failures_run_out_of_retries(fake_openai: Any, step: str, kind: str, status: int | None) -> None:
    sleep = RecordingSleep()
    llm = make(fake_openai, sleep=sleep, max_retries=2, timeout_s=0.5 if step == "timeout" else 5.0)
    [done] = llm.generate([GenerateRequest.chat(f"t-{step} script={step}")])
    assert done.failure is not None
    assert done.failure.kind == kind
    assert done.failure.status == status
    assert "\n" not in done.failure.message
    assert done.attempts == 3
    assert [a.answer for a in fake_openai.log(f"t-{step}")] == [step] * 3
    assert len(sleep.delays) == 2
    # every failed attempt is listed, the one that gave up included
    first_word = str(status) if status and status >= 400 else kind
    assert len(done.retry_errors) == 3
    assert all(line.split(":")[0].split()[0] == first_word for line in done.retry_errors)
    assert all("\n" not in line and len(line) <= 160 for line in done.retry_errors)


def test_retry_errors_name_each_failed_attempt(fake_openai: Any) -> None:
    llm = make(fake_openai, sleep=RecordingSleep(), max_retries=3)
    ok, refused = llm.generate(
        [GenerateRequest.chat("e1 script=429,500,trunc,200"), GenerateRequest.chat("e2 script=400")]
    )
    assert ok.ok and ok.attempts == 4
    assert [line.split(":")[0] for line in ok.retry_errors] == ["429 rate_limit", "500 server_error", "truncated"]
    assert ok.retry_errors[0] == "429 rate_limit: scripted 429 for e1"
    assert refused.failure is not None and refused.retry_errors == ("400 bad_request: scripted 400 for e2",)
    [clean] = llm.generate([GenerateRequest.chat("e3")])
    assert clean.retry_errors == ()


@pytest.mark.parametrize("step", ["timeout", "500", "trunc"])
def test_transient_failures_recover(fake_openai: Any, step: str) -> None:
    llm = make(fake_openai, sleep=RecordingSleep(), max_retries=2, timeout_s=0.5 if step == "timeout" else 5.0)
    [done] = llm.generate([GenerateRequest.chat(f"r-{step} script={step},200")])
    assert done.ok, done.failure
    assert done.attempts == 2
    assert [a.answer for a in fake_openai.log(f"r-{step}")] == [step, "200"]


@pytest.mark.parametrize(
    ("status", "kind"),
    [("400", "bad_request"), ("401", "auth"), ("403", "auth"), ("404", "not_found"), ("422", "bad_request")],
)
def test_client_errors_are_not_retried(fake_openai: Any, status: str, kind: str) -> None:
    sleep = RecordingSleep()
    llm = make(fake_openai, sleep=sleep, max_retries=3)
    [done] = llm.generate([GenerateRequest.chat(f"c-{status} script={status},200")])
    assert done.failure is not None
    assert done.failure.kind == kind
    assert done.failure.status == int(status)
    assert done.attempts == 1
    assert len(fake_openai.log(f"c-{status}")) == 1
    assert sleep.delays == []


def test_connection_refused_is_retried_then_recorded(fake_openai: Any) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # nothing listens here once the socket closes
    sleep = RecordingSleep()
    llm = provider.OpenAILLM(
        "fake-model", provider.Options(base_url=f"http://127.0.0.1:{port}/v1", max_retries=2), sleep=sleep
    )
    [done] = llm.generate([GenerateRequest.chat("nobody home")])
    assert done.failure is not None and done.failure.kind == "connection"
    assert done.attempts == 3
    assert len(sleep.delays) == 2


def test_failures_do_not_sink_the_batch(fake_openai: Any) -> None:
    llm = make(fake_openai, sleep=RecordingSleep(), max_retries=1)
    done = llm.generate(
        [GenerateRequest.chat("b1"), GenerateRequest.chat("b2 script=404"), GenerateRequest.chat("b3 script=500,200")]
    )
    assert [d.ok for d in done] == [True, False, True]
    assert done[0].text == "echo: b1" and done[2].text == "echo: b3 script=500,200"


# -- concurrency -----------------------------------------------------------------------------


def test_streams_results_is_declared() -> None:
    assert provider.OpenAILLM.streams_results is True


@pytest.mark.parametrize("verb", ["generate", "loglikelihood"])
def test_on_result_reports_each_request_before_its_progress_tick(fake_openai: Any, verb: str) -> None:
    llm = make(fake_openai, max_concurrency=3)
    events: list[tuple[str, int]] = []
    lock = threading.Lock()

    def on_result(index: int, result: Any) -> None:
        with lock:
            events.append(("result", index))

    def progress(n: int) -> None:
        with lock:
            events.append(("tick", n))

    if verb == "generate":
        done: list[Any] = llm.generate(
            [GenerateRequest.chat(f"o{i}") for i in range(6)], progress=progress, on_result=on_result
        )
    else:
        done = llm.loglikelihood(
            [LoglikelihoodRequest(context=f"o{i} a", continuation=" b") for i in range(6)],
            progress=progress,
            on_result=on_result,
        )
    assert all(d.ok for d in done)
    assert sorted(i for what, i in events if what == "result") == list(range(6))
    assert [what for what, _ in events].count("tick") == 6
    # at any point, no more ticks than reported results
    seen = 0
    for what, _ in events:
        seen += 1 if what == "result" else -1
        assert seen >= 0


def test_concurrency_is_bounded(fake_openai: Any) -> None:
    llm = make(fake_openai, max_concurrency=4)
    ticks: list[int] = []
    requests = [GenerateRequest.chat(f"p{i} delay=0.1") for i in range(24)]
    done = llm.generate(requests, progress=ticks.append)
    assert all(d.ok for d in done)
    assert [d.text.split()[1] for d in done] == [f"p{i}" for i in range(24)]
    assert ticks == [1] * 24
    assert 2 <= fake_openai.max_in_flight <= 4


def test_generate_inside_a_running_event_loop(fake_openai: Any) -> None:
    llm = make(fake_openai)

    async def caller() -> list[Any]:
        return llm.generate([GenerateRequest.chat("loop")])

    [done] = asyncio.run(caller())
    assert done.ok and done.text == "echo: loop"


# -- request bodies --------------------------------------------------------------------------


def test_sampling_and_json_mode_are_sent(fake_openai: Any) -> None:
    llm = make(fake_openai)
    request = GenerateRequest.chat(
        "j1",
        system="be terse",
        temperature=0.7,
        top_p=0.9,
        seed=42,
        max_tokens=33,
        stop=("\n\n", "END"),
        json_mode=True,
    )
    [done] = llm.generate([request])
    assert done.ok and done.json() == {"ok": True}
    [attempt] = fake_openai.log("j1")
    body = attempt.body
    assert attempt.path == "/v1/chat/completions"
    assert body["model"] == "fake-model"
    assert body["messages"] == [{"role": "system", "content": "be terse"}, {"role": "user", "content": "j1"}]
    assert body["response_format"] == {"type": "json_object"}
    assert (body["temperature"], body["top_p"], body["seed"], body["max_tokens"]) == (0.7, 0.9, 42, 33)
    assert body["stop"] == ["\n\n", "END"]


def test_empty_stop_and_no_seed_are_omitted(fake_openai: Any) -> None:
    llm = make(fake_openai)
    [done] = llm.generate([GenerateRequest(prompt="j2 plain", seed=None)])
    assert done.ok
    body = fake_openai.log("j2")[0].body
    assert body["messages"] == [{"role": "user", "content": "j2 plain"}]
    assert "stop" not in body and "seed" not in body and "response_format" not in body


def test_completions_api(fake_openai: Any) -> None:
    llm = make(fake_openai, api="completions")
    chat = GenerateRequest(messages=(Message(role="user", content="j4"),))
    plain, refused = llm.generate([GenerateRequest(prompt="j3 go", stop=("x",)), chat])
    assert plain.ok and plain.text == "echo: j3 go"
    [attempt] = fake_openai.log("j3")
    assert attempt.path == "/v1/completions"
    assert attempt.body["prompt"] == "j3 go" and attempt.body["stop"] == ["x"]
    assert refused.failure is not None and refused.failure.kind == "unsupported"
    assert fake_openai.log("j4") == []


# -- log-likelihood --------------------------------------------------------------------------


def test_loglikelihood_from_echoed_logprobs(fake_openai: Any) -> None:
    llm = make(fake_openai)
    greedy, not_greedy = llm.loglikelihood(
        [
            LoglikelihoodRequest(context="s1 The sky is", continuation=" blue today"),
            LoglikelihoodRequest(context="s2 The sky is", continuation=" !green"),
        ]
    )
    assert greedy.ok and not_greedy.ok
    assert greedy.logprob == pytest.approx(-0.4 - 0.5)  # " blue", " today"
    assert greedy.is_greedy is True and greedy.n_tokens == 2
    assert not_greedy.logprob == pytest.approx(-0.6)  # " !green"
    assert not_greedy.is_greedy is False and not_greedy.n_tokens == 1
    body = fake_openai.log("s1")[0].body
    assert body["prompt"] == "s1 The sky is blue today"
    assert body["echo"] is True and body["logprobs"] == 1 and body["max_tokens"] == provider.SCORING_MAX_TOKENS == 1


def generating(server: Any, *, offsets: bool = True, spelled: bool = True) -> None:
    """Make ``server`` answer scoring requests as a real one does: the echoed prompt, then one generated token.

    The generated token is unlikely (-9.9), so a score that counted it would show. Without
    ``offsets`` the answer has no ``text_offset``; without ``spelled`` the echoed tokens lose
    a character (as a server that decodes a split multi-byte character to nothing would).
    """
    plain = server._success

    def success(path: str, body: dict[str, Any], text: str) -> dict[str, Any]:
        payload: dict[str, Any] = plain(path, body, text)
        choice = payload["choices"][0]
        logprobs = choice["logprobs"]
        if logprobs is None:
            return payload
        prompt = str(body["prompt"])
        choice["text"] = prompt + " gen"
        logprobs["tokens"].append(" gen")
        logprobs["token_logprobs"].append(-9.9)
        logprobs["top_logprobs"].append({" gen": -9.9})
        logprobs["text_offset"] = None if not offsets else [*logprobs["text_offset"], len(prompt)]
        if not spelled:
            logprobs["tokens"][1] = logprobs["tokens"][1][:-1]
        payload["usage"]["completion_tokens"] = 1
        return payload

    server._success = success


@pytest.mark.parametrize("offsets", [True, False], ids=["text_offset", "no_text_offset"])
def test_loglikelihood_leaves_the_generated_token_out(fake_openai: Any, offsets: bool) -> None:
    generating(fake_openai, offsets=offsets)
    llm = make(fake_openai)
    blue, green = llm.loglikelihood(
        [
            LoglikelihoodRequest(context="g1 The sky is", continuation=" blue today"),
            LoglikelihoodRequest(context="g2 Grass is ", continuation="green"),
        ]
    )
    assert blue.ok and green.ok, (blue.failure, green.failure)
    assert blue.logprob == pytest.approx(-0.4 - 0.5) and blue.n_tokens == 2 and blue.is_greedy
    assert blue.tokens_out == 1
    # a token that carries any continuation text counts: here " green" takes the context's trailing space
    assert green.logprob == pytest.approx(-0.5) and green.n_tokens == 1


def test_loglikelihood_needs_the_prompt_echoed(fake_openai: Any) -> None:
    plain = fake_openai._success

    def generated_only(path: str, body: dict[str, Any], text: str) -> dict[str, Any]:
        payload: dict[str, Any] = plain(path, body, text)
        prompt = str(body["prompt"])
        payload["choices"][0]["logprobs"] = {
            "tokens": [" gen"],
            "token_logprobs": [-9.9],
            "top_logprobs": [{" gen": -9.9}],
            "text_offset": [len(prompt)],
        }
        return payload

    fake_openai._success = generated_only
    [score] = make(fake_openai).loglikelihood([LoglikelihoodRequest(context="g4 a b", continuation=" c")])
    assert score.failure is not None and score.failure.kind == "unsupported"
    assert "generated tokens only" in score.failure.message


def test_loglikelihood_refuses_unplaceable_tokens(fake_openai: Any) -> None:
    generating(fake_openai, offsets=False, spelled=False)
    [score] = make(fake_openai).loglikelihood([LoglikelihoodRequest(context="g3 a b", continuation=" c")])
    assert score.failure is not None and score.failure.kind == "backend"
    assert "do not spell the prompt" in score.failure.message
    assert len(fake_openai.log("g3")) == 1


def test_loglikelihood_retries_transients(fake_openai: Any) -> None:
    llm = make(fake_openai, sleep=RecordingSleep())
    [score] = llm.loglikelihood([LoglikelihoodRequest(context="s3 a b", continuation=" c")])
    assert score.ok and score.attempts == 1
    [score] = llm.loglikelihood([LoglikelihoodRequest(context="s4 script=503,trunc,200 a", continuation=" c")])
    assert score.ok and score.attempts == 3 and score.logprob == pytest.approx(-0.1)


def test_loglikelihood_on_a_chat_only_endpoint(fake_openai: Any) -> None:
    fake_openai.chat_only = True
    llm = make(fake_openai, sleep=RecordingSleep())
    [score] = llm.loglikelihood([LoglikelihoodRequest(context="u1 x", continuation=" y")])
    assert score.failure is not None and score.failure.kind == "unsupported"
    assert score.failure.status == 404
    assert "chat-only" in score.failure.message
    assert len(fake_openai.log("u1")) == 1


def test_loglikelihood_without_logprobs_in_the_answer(fake_openai: Any) -> None:
    fake_openai.omit_logprobs = True
    llm = make(fake_openai, sleep=RecordingSleep())
    [score] = llm.loglikelihood([LoglikelihoodRequest(context="u2 x", continuation=" y")])
    assert score.failure is not None and score.failure.kind == "unsupported"
    assert len(fake_openai.log("u2")) == 1


# -- configuration ---------------------------------------------------------------------------


def test_missing_key_for_openai_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)

    def no_client(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("no client may be built without a key")

    monkeypatch.setattr("openai.AsyncOpenAI", no_client)
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        get_llm("openai/gpt-4o-mini")
    with pytest.raises(ConfigError, match="MY_KEY"):
        get_llm("openai/gpt-4o-mini", {"base_url": "https://api.openai.com/v1/", "api_key_env": "MY_KEY"})


def test_custom_endpoint_needs_no_key(fake_openai: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")
    monkeypatch.setenv("OPENAI_BASE_URL", fake_openai.base_url)
    llm = get_llm("openai/served/model")
    assert llm.name == "openai/served/model"
    assert llm.identity() == {"model": "served/model", "base_url": fake_openai.base_url, "options": '{"api":"chat"}'}
    [done] = llm.generate([GenerateRequest.chat("n1")])
    assert done.ok
    assert fake_openai.log("n1")[0].authorization == "Bearer not-needed"


def test_key_from_a_named_variable(fake_openai: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VLLM_KEY", "secret-2")
    llm = get_llm("openai/m", {"base_url": fake_openai.base_url, "api_key_env": "VLLM_KEY"})
    [done] = llm.generate([GenerateRequest.chat("n2")])
    assert done.ok and fake_openai.log("n2")[0].authorization == "Bearer secret-2"


def test_unknown_option_is_rejected() -> None:
    with pytest.raises(ConfigError, match="bad options"):
        get_llm("openai/m", {"base_url": "http://127.0.0.1:9/v1", "concurrency": 3})


# -- with the cache and ledger ---------------------------------------------------------------


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(f"sqlite:///{tmp_path / 'store.db'}")


def _cached(server: Any, store: Store, **options: Any) -> CachedLLM:
    inner = make(server, sleep=RecordingSleep(), **options)
    return CachedLLM(inner, store, prices=PriceTable({"openai/*": Price(1.0, 2.0)}))


def _wait_for(condition: Callable[[], bool], what: str, limit_s: float = 20.0) -> None:
    """Poll until ``condition`` holds; a bounded wait, not a timing assertion."""
    deadline = time.monotonic() + limit_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.02)


def test_finished_requests_are_stored_while_a_slow_one_is_in_flight(
    fake_openai: Any, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the server holds the slow request until the test lets it go, so the order is certain
    release = threading.Event()
    answer = fake_openai.answer

    def gated(path: str, body: dict[str, Any], authorization: str | None = None) -> Any:
        if body["messages"][-1]["content"].startswith("slow"):
            release.wait(timeout=30)
        return answer(path, body, authorization)

    monkeypatch.setattr(fake_openai, "answer", gated)
    llm = _cached(fake_openai, store, max_concurrency=4)
    requests = [GenerateRequest.chat("slow one"), GenerateRequest.chat("fast1"), GenerateRequest.chat("fast2")]
    out: list[Any] = []
    worker = threading.Thread(target=lambda: out.extend(llm.generate(requests)))
    worker.start()
    try:
        _wait_for(lambda: len(store.ledger_rows()) == 2, "the fast rows")
        assert worker.is_alive() and not fake_openai.log("slow")
        rows = store.ledger_rows()
        assert all(not r.cache_hit and r.attempts == 1 for r in rows)
        assert len(store.cache_get([r.cache_key for r in rows])) == 2
        # a resumed run (here: another wrapper on the same store) does not repeat them
        resumed = _cached(fake_openai, store)
        assert [c.text for c in resumed.generate(requests[1:])] == ["echo: fast1", "echo: fast2"]
        assert len(fake_openai.log("fast1")) == len(fake_openai.log("fast2")) == 1
    finally:
        release.set()
        worker.join(timeout=30)
    assert not worker.is_alive()
    assert [c.text for c in out] == ["echo: slow one", "echo: fast1", "echo: fast2"]
    assert len(store.ledger_rows()) == 5  # 2 fast + 2 resumed hits + the slow one
    assert store.ledger_rows()[-1].cache_hit is False


def test_ledger_keeps_retried_errors_and_a_hit_replays_none(fake_openai: Any, store: Store) -> None:
    llm = _cached(fake_openai, store, max_retries=3)
    request = GenerateRequest.chat("rl script=429,500,200")
    [first] = llm.generate([request])
    assert first.ok and first.attempts == 3
    [row] = store.ledger_rows()
    assert row.attempts == 3 and not row.cache_hit and row.failure_kind is None
    assert [line.split(":")[0] for line in row.retry_errors] == ["429 rate_limit", "500 server_error"]

    [again] = _cached(fake_openai, store).generate([request])
    assert again.cached and again.attempts == 0 and again.retry_errors == ()
    hit = store.ledger_rows()[-1]
    assert hit.cache_hit and hit.attempts == 0 and hit.retry_errors == ()
    assert len(fake_openai.log("rl")) == 3

    summary = store.ledger_summary()
    assert summary["backend_attempts"] == 3 and summary["retried_calls"] == 1
    assert summary["retry_errors_by_kind"] == {"429": 1, "500": 1}


def test_the_ledger_times_the_server_apart_from_the_wait_for_a_slot(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One slot, six requests at once, a server that takes ``LATENCY`` on each: the requests wait in this client
    one after another, and that wait is the ledger's ``queue_s``, not the server's ``service_s``.

    Only lower bounds are asserted, which hold on any machine: the server sleeps ``LATENCY`` on each attempt, so
    each service time is at least that, and the k-th request to get the slot waited for at least k attempts
    before it. The spread check fails if the queue wait counts as the server's time (the last request would
    then seem at least five times as slow as the first).
    """
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    latency, count = 0.25, 6
    with LoopbackOpenAI(request_text, latency_s=latency) as server:
        inner = provider.OpenAILLM(
            "loopback", provider.Options(base_url=server.base_url, max_concurrency=1, adaptive=False)
        )
        llm = CachedLLM(inner, store, prices=PriceTable({"openai/*": Price(1.0, 2.0)}))
        done = llm.generate([GenerateRequest.chat(f"q{i}") for i in range(count)])
        assert all(result.ok for result in done) and server.max_in_flight == 1
    rows = store.ledger_rows()
    assert len(rows) == count and all(not row.cache_hit and row.attempts == 1 for row in rows)
    service = [row.service_s for row in rows]
    queued = sorted(row.queue_s for row in rows if row.queue_s is not None)
    assert all(s is not None and s >= latency * 0.95 for s in service), service
    assert len(queued) == count
    for row in rows:
        assert row.service_s is not None and row.queue_s is not None
        assert row.service_s + row.queue_s <= row.latency_s + 1e-6
    for k, wait in enumerate(queued):  # the k-th to be sent waited for the k attempts sent before it
        assert wait >= k * latency * 0.95, (k, queued)
    measured = [s for s in service if s is not None]
    assert max(measured) < min(measured) + (count - 1) * latency, measured  # no growth with the queue
    summary = store.ledger_summary()
    assert summary["queue_s"] == pytest.approx(sum(queued))
    assert summary["service_s"] == pytest.approx(sum(measured))
    assert summary["latency_s"] >= summary["service_s"] + summary["queue_s"] - 1e-6


def test_streamed_batch_with_repeats_and_failures_keeps_order(fake_openai: Any, store: Store) -> None:
    llm = _cached(fake_openai, store, max_retries=1, max_concurrency=2)
    requests = [
        GenerateRequest.chat("d1"),
        GenerateRequest.chat("d2 script=404"),
        GenerateRequest.chat("d1"),
        GenerateRequest.chat("d3 script=500,200"),
    ]
    done = llm.generate(requests)
    assert [d.ok for d in done] == [True, False, True, True]
    assert done[0].text == done[2].text == "echo: d1" and done[3].text == "echo: d3 script=500,200"
    assert len(fake_openai.log("d1")) == 1
    rows = store.ledger_rows()
    assert sorted(r.cache_hit for r in rows) == [False, False, False, True]
    assert {r.failure_kind for r in rows} == {None, "not_found"}
    assert llm.stats.misses == 3 and llm.stats.hits == 1 and llm.stats.failures == 1
    assert len(store.cache_get([r.cache_key for r in rows])) == 2  # the failure is not cached


# -- options and the cache ---------------------------------------------------------------------

OTHER_SERVER = "<the second loopback server>"

OPTION_VALUES: dict[str, Any] = {
    "base_url": OTHER_SERVER,
    "api_key_env": "SENSEFORGE_TEST_OTHER_KEY",
    "max_concurrency": 1,
    "max_retries": 0,
    "timeout_s": 7.0,
    "backoff_base_s": 0.01,
    "backoff_max_s": 1.0,
    "api": "completions",
    "adaptive": False,
    "rpm": 100_000,
    "tpm": 10_000_000,
    "batch": True,
}
"""A value other than the default for every option (a new option must get one here)."""

CACHE_PROMPTS = [GenerateRequest(prompt="Where do fish live?", max_tokens=8), GenerateRequest(prompt="Name a fruit.")]


def tagged(body: dict[str, Any]) -> str:
    """The request text, tagged with the endpoint that answered it (so ``api`` shows in the answers)."""
    return ("chat: " if "messages" in body else "completion: ") + request_text(body)


@pytest.fixture
def loopbacks(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[LoopbackOpenAI, LoopbackOpenAI]]:
    """Two loopback servers with the same responder; proxies are cleared from the environment."""
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    monkeypatch.setenv("SENSEFORGE_TEST_OTHER_KEY", "sk-other")
    with LoopbackOpenAI(tagged) as first, LoopbackOpenAI(tagged) as second:
        yield first, second


def _options(servers: tuple[LoopbackOpenAI, LoopbackOpenAI], **changes: Any) -> provider.Options:
    settings = {"base_url": servers[0].base_url, **changes}
    if settings["base_url"] == OTHER_SERVER:
        settings["base_url"] = servers[1].base_url
    return provider.Options(**settings)


def answers(llm: CachedLLM) -> list[dict[str, Any]]:
    """The answers to a few requests, without what describes the call (cached, latency …)."""
    results = llm.generate(CACHE_PROMPTS)
    assert all(result.ok for result in results), [result.failure for result in results]
    described = {"cached", "latency_s", "service_s", "queue_s", "attempts", "retry_errors", "concurrency", "batched"}
    return [result.model_dump(exclude=described) for result in results]


def test_every_option_has_a_test_value() -> None:
    assert set(OPTION_VALUES) == set(provider.Options.model_fields)
    for name, value in OPTION_VALUES.items():
        assert value != provider.Options.model_fields[name].default, name


@pytest.mark.parametrize("name", sorted(provider.Options.model_fields))
def test_identity_holds_exactly_the_output_changing_options(
    loopbacks: tuple[LoopbackOpenAI, LoopbackOpenAI], name: str
) -> None:
    if name not in OPTION_VALUES:
        pytest.fail(f"option {name!r} has no test value in OPTION_VALUES")
    default = provider.OpenAILLM("m", _options(loopbacks)).identity()
    changed = provider.OpenAILLM("m", _options(loopbacks, **{name: OPTION_VALUES[name]})).identity()
    assert (changed == default) is (name in provider.Options.OUTPUT_NEUTRAL)
    assert default == {"model": "m", "base_url": loopbacks[0].base_url, "options": '{"api":"chat"}'}


def test_identity_has_the_resolved_base_url_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A base URL from the option or from ``$OPENAI_BASE_URL`` is the same endpoint, and the same cache."""
    explicit = provider.OpenAILLM("m", provider.Options(base_url="http://127.0.0.1:9/v1/")).identity()
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    assert provider.OpenAILLM("m", provider.Options()).identity() == explicit


@pytest.mark.parametrize("name", sorted(provider.Options.model_fields))
def test_a_shared_cache_answers_as_a_fresh_run(
    loopbacks: tuple[LoopbackOpenAI, LoopbackOpenAI], tmp_path: Path, name: str
) -> None:
    """Changing an option misses the cache unless it is output-neutral, and either way the answers are a fresh run's."""
    if name not in OPTION_VALUES:
        pytest.fail(f"option {name!r} has no test value in OPTION_VALUES")
    shared = Store(f"sqlite:///{tmp_path / 'shared.db'}")
    prices = PriceTable({})
    answers(CachedLLM(provider.OpenAILLM("m", _options(loopbacks)), shared, prices=prices))
    sent = loopbacks[0].requests + loopbacks[1].requests
    options = _options(loopbacks, **{name: OPTION_VALUES[name]})
    on_shared = CachedLLM(provider.OpenAILLM("m", options), shared, prices=prices)
    from_shared = answers(on_shared)
    calls = loopbacks[0].requests + loopbacks[1].requests - sent
    empty = Store(f"sqlite:///{tmp_path / 'empty.db'}")
    from_empty = answers(CachedLLM(provider.OpenAILLM("m", options), empty, prices=prices))
    n_requests = len(CACHE_PROMPTS)
    if name in provider.Options.OUTPUT_NEUTRAL:
        assert (on_shared.stats.hits, on_shared.stats.misses, calls) == (n_requests, 0, 0)
    else:
        assert (on_shared.stats.hits, on_shared.stats.misses, calls) == (0, n_requests, n_requests)
    assert from_shared == from_empty


# -- top log-probabilities of generated tokens -------------------------------------------------


def test_a_chat_answers_logprobs_are_read_most_likely_first() -> None:
    def alternative(token: str, logprob: float) -> dict[str, Any]:
        return {"token": token, "logprob": logprob, "bytes": None}

    answer = {
        "id": "c",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": "(B"},
                "logprobs": {
                    "content": [
                        {**alternative("(", -0.05), "top_logprobs": []},  # no alternatives: the token alone
                        {**alternative("B", -0.3), "top_logprobs": [alternative("A", -1.6), alternative("B", -0.3)]},
                    ]
                },
            }
        ],
    }
    assert reading.from_chat(answer).top_logprobs == ((("(", -0.05),), (("B", -0.3), ("A", -1.6)))
    answer["choices"][0]["logprobs"] = None  # type: ignore[index]
    assert reading.from_chat(answer).top_logprobs is None


def test_a_text_completions_logprobs_are_read_most_likely_first() -> None:
    answer = {
        "id": "c",
        "object": "text_completion",
        "created": 0,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "text": " B",
                "logprobs": {"tokens": [" B"], "token_logprobs": [-0.2], "top_logprobs": [{" A": -2.0, " B": -0.2}]},
            }
        ],
    }
    assert reading.from_completion(answer).top_logprobs == (((" B", -0.2), (" A", -2.0)),)
    answer["choices"][0]["logprobs"]["top_logprobs"] = None  # type: ignore[index]
    assert reading.from_completion(answer).top_logprobs == (((" B", -0.2),),)
    answer["choices"][0]["logprobs"]["token_logprobs"] = [-0.2, -0.1]  # type: ignore[index]
    with pytest.raises(reading.Undecodable, match="differ in length"):
        reading.from_completion(answer)


def test_top_logprobs_are_sent_and_cached_through_the_provider(tmp_path: Path) -> None:
    def letters(body: dict[str, Any]) -> dict[str, Any]:
        return {"text": "A", "top_logprobs": [[["A", -0.4], ["B", -1.2], ["C", -2.9]]]}

    store = Store(f"sqlite:///{tmp_path / 'cache.db'}")
    request = GenerateRequest.chat("which?", max_tokens=2, top_logprobs=3)
    with LoopbackOpenAI(letters) as server:
        first = CachedLLM(make(server), store).generate([request, GenerateRequest.chat("which?", max_tokens=2)])
        again = CachedLLM(make(server), store).generate([request])
        assert server.requests == 2
    assert first[0].top_logprobs == again[0].top_logprobs == ((("A", -0.4), ("B", -1.2), ("C", -2.9)),)
    assert again[0].cached and first[1].top_logprobs is None


def test_a_request_answered_from_the_cache_never_imports_the_sdk(tmp_path: Path) -> None:
    """A rebuild answered from the cache opens the provider and asks its identity, but makes no client: the SDK (a
    second of imports) and its HTTP libraries stay unloaded. Checked in a fresh interpreter, as a rebuild starts."""
    url = f"sqlite:///{tmp_path / 'store.db'}"
    store = Store(url)
    with LoopbackOpenAI(request_text) as server:
        llm = CachedLLM(provider.OpenAILLM("loopback", provider.Options(base_url=server.base_url)), store)
        [sent] = llm.generate([GenerateRequest.chat("what is a kettle for?")])
        base_url = server.base_url
    assert sent.ok and not sent.cached
    store.close()
    script = (
        "import json, sys\n"
        "from senseforge.llm.base import GenerateRequest\n"
        "from senseforge.llm.cache import open_llm\n"
        "from senseforge.store.db import Store\n"
        f"store = Store({url!r})\n"
        f"llm = open_llm('openai/loopback', {{'base_url': {base_url!r}}}, store=store)\n"
        "[hit] = llm.generate([GenerateRequest.chat('what is a kettle for?')])\n"
        "print(json.dumps([hit.cached, hit.text, sorted({'openai', 'httpx', 'aiohttp'} & set(sys.modules))]))\n"
    )
    shown = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    hit, text, loaded = json.loads(shown.stdout.strip().splitlines()[-1])
    assert hit and text == sent.text  # answered from the cache (the server is gone) ...
    assert loaded == []  # ... with no client library imported
