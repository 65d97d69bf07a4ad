"""The loopback OpenAI-compatible server, driven by the real ``openai`` provider and by plain urllib."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from typing import Any

import pytest

from senseforge.errors import ConfigError
from senseforge.llm.base import GenerateRequest, LoglikelihoodRequest, Message
from senseforge.llm.loopback import FAULT_KINDS, LoopbackOpenAI
from senseforge.llm.loopback_handler import request_text
from senseforge.llm.registry import get_llm

FAULTY_SEED = 0
"""A seed under which the 40-request run below meets every fault kind at least once."""


def shout(body: dict[str, Any]) -> str:
    return f"answer: {request_text(body).upper()}"


def client(server: LoopbackOpenAI, **options: Any) -> Any:
    pytest.importorskip("openai")
    settings = {
        "base_url": server.base_url,
        "max_concurrency": 8,
        "timeout_s": 0.5,
        "backoff_base_s": 0.01,
        "backoff_max_s": 0.05,
        "max_retries": 8,
        **options,
    }
    return get_llm("openai/loopback", settings)


def post(server: LoopbackOpenAI, path: str, body: Any) -> tuple[int, dict[str, str], bytes]:
    """One raw request; returns status, headers and body bytes (error statuses included)."""
    request = urllib.request.Request(
        server.base_url + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


def questions(n: int) -> list[GenerateRequest]:
    return [GenerateRequest.chat(f"question number {i}", system="Answer briefly.") for i in range(n)]


# -- through the openai provider --------------------------------------------------------------


def test_answers_come_from_the_responder_with_usage() -> None:
    with LoopbackOpenAI(shout) as server:
        request = GenerateRequest(
            messages=(Message(role="system", content="Be brief."), Message(role="user", content="why is the sky blue"))
        )
        [done] = client(server).generate([request])
    assert done.ok, done.failure
    assert done.text == "answer: WHY IS THE SKY BLUE"
    assert done.finish_reason == "stop"
    assert (done.tokens_in, done.tokens_out) == (7, 6)
    assert done.attempts == 1
    assert (server.requests, server.answered_ok, server.faults_by_kind) == (1, 1, {})
    [entry] = server.log
    assert (entry.path, entry.outcome) == ("/v1/chat/completions", "ok")


def test_injected_faults_are_retried_to_the_fault_free_answers() -> None:
    requests = questions(40)
    with LoopbackOpenAI(shout) as clean:
        expected = client(clean).generate(requests)
    assert all(done.ok for done in expected)

    with LoopbackOpenAI(shout, fault_rate=0.3, hang_s=0.6, seed=FAULTY_SEED, max_consecutive_faults=3) as server:
        results = client(server, timeout_s=0.3).generate(requests)
        # a good answer the client gave up on may still be on its way out: let the server settle first
        settle_by = time.monotonic() + 10
        while server.in_flight and time.monotonic() < settle_by:
            time.sleep(0.02)
        faults = server.faults_by_kind
        attempts_seen = server.requests
        answered = server.answered_ok

    assert all(done.ok for done in results), [done.failure for done in results if not done.ok]
    assert [done.text for done in results] == [done.text for done in expected]
    assert set(faults) == set(FAULT_KINDS), faults
    assert sum(done.attempts for done in results) == attempts_seen
    assert answered >= len(requests)  # more only if the client timed out on a slow but good answer
    assert attempts_seen == answered + sum(faults.values())


def test_in_flight_reaches_the_client_bound_and_never_exceeds_it() -> None:
    # an answer waits (bounded) until 8 have been in the server at once, so reaching the bound does not hang on how
    # fast the client opens its first connections; a client holding more than 8 would still show it
    server: LoopbackOpenAI

    def held(body: dict[str, Any]) -> str:
        deadline = time.monotonic() + 4.0
        while server.max_in_flight < 8 and time.monotonic() < deadline:
            time.sleep(0.01)
        return shout(body)

    with LoopbackOpenAI(held, latency_s=0.05) as server:
        results = client(server, max_concurrency=8, timeout_s=10.0).generate(questions(16))
    assert all(done.ok for done in results)
    assert server.max_in_flight == 8
    assert server.in_flight == 0
    assert server.requests == 16


def test_serves_64_connections_at_once() -> None:
    # every answer waits until all 64 requests are in the server together, however slowly they arrive: a client or
    # server that held fewer at once would break the barrier (its timeout) and fail the requests
    everyone = threading.Barrier(64, timeout=60)

    def together(body: dict[str, Any]) -> str:
        everyone.wait()
        return shout(body)

    with LoopbackOpenAI(together) as server:
        results = client(server, max_concurrency=64, timeout_s=90.0, max_retries=0).generate(questions(64))
    assert all(done.ok for done in results), [done.failure for done in results if not done.ok][:3]
    assert server.max_in_flight == 64


def test_completions_endpoint() -> None:
    with LoopbackOpenAI(lambda body: f"{body['prompt']} and then some") as server:
        [done] = client(server, api="completions").generate([GenerateRequest(prompt="once upon a time")])
    assert done.ok, done.failure
    assert done.text == "once upon a time and then some"
    assert (done.tokens_in, done.tokens_out) == (4, 7)
    assert [entry.path for entry in server.log] == ["/v1/completions"]


def test_loglikelihood_leaves_the_generated_token_out() -> None:
    with LoopbackOpenAI(lambda body: " and more words") as server:
        scores = client(server).loglikelihood(
            [
                LoglikelihoodRequest(context="The sky is", continuation=" blue today"),
                LoglikelihoodRequest(context="Grass is ", continuation="green"),
            ]
        )
    assert all(score.ok for score in scores), [score.failure for score in scores]
    blue, green = scores
    # " blue" and " today"; the generated " and" (-0.3) follows the prompt and is not counted
    assert blue.logprob == pytest.approx(-0.4 - 0.5) and blue.n_tokens == 2 and blue.is_greedy
    assert (blue.tokens_in, blue.tokens_out) == (5, 1)  # the provider asked for one token
    # the context's trailing space travels with the continuation's first token
    assert green.logprob == pytest.approx(-0.5) and green.n_tokens == 1
    assert [entry.outcome for entry in server.log] == ["ok", "ok"]


# -- raw HTTP ---------------------------------------------------------------------------------


@pytest.mark.parametrize("max_tokens", [0, -1])
def test_scoring_without_a_generated_token_is_refused(max_tokens: int) -> None:
    body = {"model": "m", "prompt": "a b", "echo": True, "logprobs": 1, "max_tokens": max_tokens}
    with LoopbackOpenAI(lambda body: " more text here") as server:
        status, _, payload = post(server, "/completions", body)
        ok_status, _, ok_payload = post(server, "/completions", {**body, "max_tokens": 2})
    assert status == 400 and "max_tokens must be at least 1" in json.loads(payload)["error"]["message"]
    assert ok_status == 200
    [choice] = json.loads(ok_payload)["choices"]
    assert choice["text"] == "a b more text" and choice["finish_reason"] == "length"
    assert choice["logprobs"]["text_offset"] == [0, 1, 3, 8]
    assert json.loads(ok_payload)["usage"]["completion_tokens"] == 2
    assert [entry.outcome for entry in server.log] == ["bad_request", "ok"]


def test_models_and_unknown_paths() -> None:
    with LoopbackOpenAI(shout, model="tiny") as server:
        with urllib.request.urlopen(server.base_url + "/models", timeout=5) as response:
            listing = json.loads(response.read())
        status, _, _ = post(server, "/embeddings", {"input": "x"})
        assert [model["id"] for model in listing["data"]] == ["tiny"]
        assert status == 404
        assert server.requests == 0
        assert [entry.outcome for entry in server.log] == ["ok", "not_found"]


def test_a_request_is_logged_before_its_answer_reaches_the_client(monkeypatch: pytest.MonkeyPatch) -> None:
    # slow bookkeeping widens the window: were a request recorded after its answer went
    # out, the log read right after each answer would miss it every time
    with LoopbackOpenAI(shout, fault_rate=1.0, faults=("timeout",), hang_s=2.0) as server:
        record = server._record

        def slow_record(*args: Any, **kwargs: Any) -> None:
            time.sleep(0.1)
            record(*args, **kwargs)

        monkeypatch.setattr(server, "_record", slow_record)
        with urllib.request.urlopen(server.base_url + "/models", timeout=5) as response:
            response.read()
        assert [entry.outcome for entry in server.log] == ["ok"]
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(server.base_url + "/nothing", timeout=5)
        assert [entry.outcome for entry in server.log] == ["ok", "not_found"]
        assert post(server, "/embeddings", {"input": "x"})[0] == 404
        assert [entry.outcome for entry in server.log] == ["ok", "not_found", "not_found"]
        # a hanging fault is logged (and counted as a fault) by the time the client gives up on it
        with pytest.raises((TimeoutError, urllib.error.URLError)):
            urllib.request.urlopen(
                urllib.request.Request(server.base_url + "/chat/completions", data=b'{"prompt": "hi"}'), timeout=0.5
            ).read()
        assert [entry.outcome for entry in server.log][-1] == "timeout"
        assert (server.requests, server.faults_by_kind, server.answered_ok) == (1, {"timeout": 1}, 0)
        assert server.in_flight == 1  # still hanging: in flight until it has hung


def test_fault_draws_are_reproducible_and_capped() -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "same body"}]}

    def outcomes(**settings: Any) -> list[str]:
        with LoopbackOpenAI(shout, faults=("429", "500"), **settings) as server:
            for _ in range(12):
                post(server, "/chat/completions", body)
            return [entry.outcome for entry in server.log]

    first = outcomes(fault_rate=0.5, seed=7)
    assert first == outcomes(fault_rate=0.5, seed=7)
    assert {"ok", "429", "500"} <= set(first)
    always = outcomes(fault_rate=1.0)
    assert "ok" not in always
    capped = outcomes(fault_rate=1.0, max_consecutive_faults=2)
    assert capped == ["ok" if i % 3 == 2 else outcome for i, outcome in enumerate(always)]


def test_rate_limit_and_truncation_on_the_wire() -> None:
    body = {"messages": [{"role": "user", "content": "hi"}]}
    with LoopbackOpenAI(shout, fault_rate=1.0, faults=("429",)) as server:
        status, headers, _ = post(server, "/chat/completions", body)
    assert (status, headers.get("Retry-After")) == (429, "0")
    with LoopbackOpenAI(shout, fault_rate=1.0, faults=("truncated",)) as server:
        status, headers, payload = post(server, "/chat/completions", body)
    assert status == 200
    assert int(headers["Content-Length"]) == len(payload)
    with pytest.raises(json.JSONDecodeError):
        json.loads(payload)


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ConfigError, match="unknown fault"):
        LoopbackOpenAI(shout, faults=("503",))
    with pytest.raises(ConfigError, match="fault_rate"):
        LoopbackOpenAI(shout, fault_rate=1.5)
    with pytest.raises(RuntimeError, match="not started"):
        _ = LoopbackOpenAI(shout).base_url


def _line(stream: Any, within_s: float = 60.0) -> str:
    """The next line of a child's stdout, failing (not hanging) when none comes in time."""
    import select

    ready, _, _ = select.select([stream], [], [], within_s)
    assert ready, f"no line from the server within {within_s} s"
    line: str = stream.readline()
    return line.strip()


def test_until_signal_serves_with_stdin_closed_and_stops_cleanly_on_sigterm() -> None:
    """Started as ``nohup … &`` starts it (stdin closed at once), it serves until SIGTERM, then prints its
    statistics and exits 0."""
    import signal
    import subprocess
    import sys

    command = [sys.executable, "-m", "senseforge.llm.loopback"]
    command += ["--responder", "senseforge.llm.loopback_handler:request_text"]
    child = subprocess.Popen(
        [*command, "--until-signal"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        base_url = _line(child.stdout)
        assert base_url.startswith("http://127.0.0.1:"), base_url
        body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "still there?"}]}).encode()
        request = urllib.request.Request(
            f"{base_url}/chat/completions", data=body, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=30) as answer:  # stdin closed long before: still serving
            reply = json.loads(answer.read())
        assert reply["choices"][0]["message"]["content"] == "still there?"
        assert child.poll() is None
        child.send_signal(signal.SIGTERM)
        out, errors = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == 0, errors
    assert "Traceback" not in errors
    stats = json.loads(out.strip().splitlines()[-1])
    assert stats["requests"] == 1 and stats["answered_ok"] == 1


def test_without_until_signal_a_closed_stdin_still_stops_it() -> None:
    """The benchmarks' way: the server stops when its standard input closes, its statistics last."""
    import subprocess
    import sys

    command = [sys.executable, "-m", "senseforge.llm.loopback"]
    command += ["--responder", "senseforge.llm.loopback_handler:request_text"]
    done = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    base_url, stats = done.stdout.splitlines()
    assert base_url.startswith("http://127.0.0.1:") and json.loads(stats)["requests"] == 0


def test_a_port_can_be_chosen_and_a_taken_one_is_refused() -> None:
    with LoopbackOpenAI(shout) as first:
        port = int(first.base_url.rsplit(":", 1)[1].split("/")[0])
        with pytest.raises(ConfigError, match=f"cannot listen on 127.0.0.1:{port}"):
            LoopbackOpenAI(shout, port=port).start()
    with LoopbackOpenAI(shout, port=port) as second:  # free again once the first has stopped
        assert second.base_url == f"http://127.0.0.1:{port}/v1"
    with pytest.raises(ConfigError, match="port must lie between"):
        LoopbackOpenAI(shout, port=70000)


def test_help_is_plain_text(capsys: pytest.CaptureFixture[str]) -> None:
    from senseforge.llm.loopback import main

    with pytest.raises(SystemExit) as leaving:
        main(["--help"])
    assert leaving.value.code == 0
    page = capsys.readouterr().out
    assert "--until-signal" in page and "--port" in page and "--responder MODULE:FUNCTION" in page
    for markup in ("``", ":func:", ":mod:", ":class:", ":data:", "::"):
        assert markup not in page, markup


# -- log-probabilities of generated tokens ----------------------------------------------------


def letter_reply(body: dict[str, Any]) -> dict[str, Any]:
    """Answers ``B`` and says how likely each letter was there."""
    return {"text": " B.", "top_logprobs": [[[" B", -0.2], [" A", -1.9], [" C", -3.0]], [[".", -0.01]]]}


@pytest.mark.parametrize("api", ["chat", "completions"])
def test_the_responders_top_logprobs_come_back_to_the_provider(api: str) -> None:
    with LoopbackOpenAI(letter_reply) as server:
        asked, plain = client(server, api=api).generate(
            [GenerateRequest(prompt="Which?", top_logprobs=2), GenerateRequest(prompt="Which?")]
        )
    assert asked.ok and plain.ok, (asked.failure, plain.failure)
    assert asked.text == plain.text == " B."
    assert asked.top_logprobs == (((" B", -0.2), (" A", -1.9)), ((".", -0.01),))  # at most the two asked for
    assert plain.top_logprobs is None  # not asked: none, as from a real endpoint


def test_the_request_asks_for_top_logprobs_in_each_apis_words() -> None:
    seen: list[dict[str, Any]] = []

    def remember(body: dict[str, Any]) -> str:
        seen.append(body)
        return "A"

    with LoopbackOpenAI(remember) as server:
        client(server).generate([GenerateRequest.chat("Which?", top_logprobs=3), GenerateRequest.chat("Which?")])
        client(server, api="completions").generate([GenerateRequest(prompt="Which?", top_logprobs=4)])
    completion = seen.pop()  # the chat pair is sent at once, in either order: tell them apart by what they ask
    asked, plain = sorted(seen, key=lambda body: "logprobs" not in body)
    assert (asked["logprobs"], asked["top_logprobs"]) == (True, 3)
    assert "logprobs" not in plain and "top_logprobs" not in plain
    assert completion["logprobs"] == 4 and "echo" not in completion


def test_top_logprobs_are_made_from_the_text_when_the_responder_gives_none() -> None:
    with LoopbackOpenAI(lambda body: "C because") as server:
        [done] = client(server).generate([GenerateRequest.chat("Which?", top_logprobs=5)])
    assert done.top_logprobs == ((("C", -0.1),), ((" because", -0.7),))


def test_the_openai_shape_of_top_logprobs_on_the_wire() -> None:
    with LoopbackOpenAI(letter_reply) as server:
        chat = {"messages": [{"role": "user", "content": "Which?"}], "logprobs": True, "top_logprobs": 1}
        status, _, raw = post(server, "/chat/completions", chat)
        assert status == 200
        [token, _] = json.loads(raw)["choices"][0]["logprobs"]["content"]
        assert token["token"] == " B" and token["logprob"] == -0.2
        assert token["top_logprobs"] == [{"token": " B", "logprob": -0.2, "bytes": [32, 66]}]
        status, _, raw = post(server, "/completions", {"prompt": "Which?", "logprobs": 2})
        logprobs = json.loads(raw)["choices"][0]["logprobs"]
        assert logprobs["tokens"] == [" B", "."] and logprobs["text_offset"] == [0, 2]
        assert logprobs["top_logprobs"] == [{" B": -0.2, " A": -1.9}, {".": -0.01}]
        status, _, raw = post(server, "/chat/completions", {"messages": chat["messages"]})
        assert "logprobs" not in json.loads(raw)["choices"][0]  # not asked: the answer is as before


def test_a_malformed_top_logprobs_reply_is_a_responder_error() -> None:
    with LoopbackOpenAI(lambda body: {"text": "A", "top_logprobs": [["A", -0.1]]}) as server:
        status, _, raw = post(
            server, "/chat/completions", {"messages": [{"role": "user", "content": "x"}], "logprobs": True}
        )
    assert status == 500 and b"top_logprobs must be a list" in raw
