"""Reply shapes through the ``openai`` provider, against the loopback server: the schema goes in the first form the
endpoint takes, a refused form is left once, cleanly (one log line, no failed record), and remembered."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, Field

pytest.importorskip("openai")

from senseforge.llm.base import GenerateRequest, Message, ReplyShape
from senseforge.llm.cache import CachedLLM
from senseforge.llm.loopback import LoopbackOpenAI
from senseforge.llm.loopback_handler import request_text
from senseforge.llm.prices import Price, PriceTable
from senseforge.llm.providers import openai as provider
from senseforge.llm.providers.openai_formats import FORMS, FormMemory, forget_all, response_format
from senseforge.store.db import Store


class Distractors(BaseModel):
    distractors: list[str] = Field(min_length=2)
    note: str = ""


SHAPE = ReplyShape.of_model(Distractors)
VERDICT = ReplyShape.one_of("verdict", ["yes", "no"])


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    forget_all()
    yield
    forget_all()


class Recorder:
    """A responder that keeps every body it is asked and echoes the last user message."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, body: dict[str, Any]) -> str:
        self.bodies.append(body)
        return "echo: " + request_text(body)

    def forms(self) -> list[str | None]:
        formats = [body.get("response_format") for body in self.bodies]
        return [None if f is None else f["type"] + ("+schema" if "schema" in f else "") for f in formats]


def _cached(server: LoopbackOpenAI, store: Store, **options: Any) -> CachedLLM:
    inner = provider.OpenAILLM("m", provider.Options(base_url=server.base_url, max_concurrency=1, **options))
    return CachedLLM(inner, store, run="shapes", prices=PriceTable({"openai/*": Price(1.0, 2.0)}))


def _shaped(n: int) -> list[GenerateRequest]:
    return [GenerateRequest.chat(f"Write distractors for question {i}.", reply_shape=SHAPE) for i in range(n)]


def test_a_strict_schema_is_sent_and_the_reply_is_held_to_it(tmp_path: Path) -> None:
    recorder = Recorder()
    store = Store(f"sqlite:///{tmp_path / 'store.db'}")
    with LoopbackOpenAI(recorder) as server:
        [reply] = _cached(server, store).generate(_shaped(1))
    assert reply.ok and reply.constrained is True
    Distractors.model_validate_json(reply.text)
    sent = recorder.bodies[0]["response_format"]
    assert sent["type"] == "json_schema" and sent["json_schema"]["strict"] is True
    assert sent["json_schema"]["schema"]["required"] == ["distractors", "note"]
    [row] = store.ledger_rows(run="shapes")
    assert row.constrained is True and row.failure_kind is None


@pytest.mark.parametrize(
    ("refused", "form", "constrained"),
    [
        (["json_schema"], "json_object+schema", True),
        (["json_schema", "json_object_schema"], "json_object", False),
        (["json_schema", "json_object_schema", "json_object"], None, False),
    ],
)
def test_a_refused_form_is_left_once_cleanly_and_remembered(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, refused: list[str], form: str | None, constrained: bool
) -> None:
    recorder = Recorder()
    store = Store(f"sqlite:///{tmp_path / 'store.db'}")
    with LoopbackOpenAI(recorder, refuse_formats=refused) as server, caplog.at_level(logging.WARNING):
        replies = _cached(server, store).generate(_shaped(3))
        again = _cached(server, store).generate(_shaped(5)[3:])  # another provider object, same endpoint
        outcomes = [entry.outcome for entry in server.log]
    assert all(r.ok and r.constrained is constrained and r.attempts == 1 and not r.retry_errors for r in replies)
    assert all(r.ok and r.constrained is constrained for r in again)
    assert outcomes.count("bad_request") == len(refused)  # each refused form refused once, then never sent again
    assert recorder.forms() == [form] * 5  # the refused bodies never reached the responder
    rows = store.ledger_rows(run="shapes")
    assert len(rows) == 5 and all(row.failure_kind is None and row.constrained is constrained for row in rows)
    lines = [record.getMessage() for record in caplog.records if "refuses response_format" in record.getMessage()]
    assert len(lines) == len(refused) and all("\n" not in line for line in lines)
    if form is not None and constrained:
        assert all(Distractors.model_validate_json(r.text) for r in replies)


def test_concurrent_requests_learn_the_form_together(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = Store(f"sqlite:///{tmp_path / 'store.db'}")
    with LoopbackOpenAI(Recorder(), refuse_formats=["json_schema"]) as server, caplog.at_level(logging.WARNING):
        inner = provider.OpenAILLM("m", provider.Options(base_url=server.base_url, max_concurrency=8))
        replies = CachedLLM(inner, store, run="shapes").generate(_shaped(8))
    assert all(r.ok and r.constrained is True for r in replies)
    assert sum("refuses response_format" in record.getMessage() for record in caplog.records) == 1
    assert all(row.failure_kind is None for row in store.ledger_rows(run="shapes"))


def test_choices_and_requests_without_a_shape_send_no_format(tmp_path: Path) -> None:
    recorder = Recorder()
    store = Store(f"sqlite:///{tmp_path / 'store.db'}")
    with LoopbackOpenAI(recorder) as server:
        word, plain, as_json = _cached(server, store).generate(
            [
                GenerateRequest.chat("Is the sky green?", reply_shape=VERDICT),
                GenerateRequest.chat("Hello"),
                GenerateRequest.chat("Some JSON", json_mode=True),
            ]
        )
    assert recorder.forms() == [None, None, "json_object"]
    assert word.ok and word.constrained is False
    assert plain.ok and plain.constrained is None and "constrained" not in json.loads(plain.model_dump_json())
    assert as_json.constrained is None
    assert [row.constrained for row in store.ledger_rows(run="shapes")] == [False, None, None]


def test_legacy_completions_send_no_format_and_say_so(tmp_path: Path) -> None:
    recorder = Recorder()
    store = Store(f"sqlite:///{tmp_path / 'store.db'}")
    with LoopbackOpenAI(recorder) as server:
        [reply] = _cached(server, store, api="completions").generate(
            [GenerateRequest(prompt="Distractors:", reply_shape=SHAPE)]
        )
    assert reply.ok and reply.constrained is False and "response_format" not in recorder.bodies[0]


def test_a_schema_refused_as_invalid_moves_only_that_request_on() -> None:
    memory = FormMemory("http://x (m)")
    assert memory.refused("json_schema", "Invalid schema for response_format 'A': bad") == "json_object_schema"
    assert memory.form == "json_schema"
    assert memory.refused("json_schema", "'response_format' of type 'json_schema' is not supported") == (
        "json_object_schema"
    )
    assert memory.form == "json_object_schema"
    # a late refusal of a form already left does not move the endpoint further
    assert memory.refused("json_schema", "response_format json_schema unsupported") == "json_object_schema"
    assert memory.form == "json_object_schema"


def test_a_free_form_map_skips_the_strict_form() -> None:
    class Counts(BaseModel):
        counts: dict[str, int]

    shape = ReplyShape.of_model(Counts)
    with pytest.raises(ValueError, match="cannot be made strict"):
        response_format(shape, "json_schema")
    llm = provider.OpenAILLM("m", provider.Options(base_url="http://127.0.0.1:9/v1"))
    assert llm._form(GenerateRequest.chat("x", reply_shape=shape)) == "json_object_schema"


def test_a_batch_learns_the_form_with_one_probe_and_its_lines_carry_it(tmp_path: Path) -> None:
    recorder = Recorder()
    store = Store(f"sqlite:///{tmp_path / 'store.db'}")
    with LoopbackOpenAI(recorder, refuse_formats=["json_schema"], batch_latency_s=None) as server:
        llm = _cached(server, store, batch=True)
        requests = [*_shaped(2), GenerateRequest.chat("plain")]
        waiting = llm.generate(requests)
        assert all(r.failure and r.failure.kind == "awaiting_batch" for r in waiting)
        probes = [entry.outcome for entry in server.log]
        server.finish_batches()
        done = llm.generate(requests)
    assert probes == ["bad_request", "ok"]  # json_schema refused, json_object+schema taken: one probe each
    lines = recorder.bodies[1:]  # after the probe that was answered
    assert [b.get("response_format", {}).get("type") for b in lines] == ["json_object", "json_object", None]
    assert [r.constrained for r in done] == [True, True, None] and all(r.ok and r.batched for r in done)
    rows = [row for row in store.ledger_rows(run="shapes") if not row.cache_hit]
    assert sorted(str(row.constrained) for row in rows) == ["None", "True", "True"]  # rows in key order
    assert all(row.failure_kind is None for row in rows)


def test_json_mode_with_a_shape_follows_the_form_down_to_none(tmp_path: Path) -> None:
    """A request with both ``json_mode`` and a shape is sent what its form says: once the endpoint has refused every
    form, nothing (not the refused ``json_object`` again)."""
    recorder = Recorder()
    store = Store(f"sqlite:///{tmp_path / 'store.db'}")
    refused = ["json_schema", "json_object_schema", "json_object"]
    with LoopbackOpenAI(recorder, refuse_formats=refused) as server:
        request = GenerateRequest.chat("JSON please", json_mode=True, reply_shape=SHAPE)
        [reply] = _cached(server, store).generate([request])
    assert reply.ok and reply.constrained is False and recorder.forms() == [None]


@pytest.mark.parametrize("form", FORMS)
def test_the_bodies_sent_as_they_are_are_what_the_sdk_would_send(form: str) -> None:
    """The provider posts its bodies without the SDK's walk of them against its typed parameters
    (:func:`senseforge.llm.providers.openai_sending.post`): that walk must leave every body it builds as it is."""
    import asyncio

    from openai._utils import async_maybe_transform
    from openai.types import completion_create_params as text_params
    from openai.types.chat import completion_create_params as chat_params

    llm = provider.OpenAILLM("fake-model", provider.Options(base_url="http://127.0.0.1:9/v1"))
    system = Message(role="system", content="Be brief.")
    chats = [
        GenerateRequest.chat("Distractors?", reply_shape=SHAPE, seed=3, stop=("\n\n",)),
        GenerateRequest.chat("Is the sky green?", reply_shape=VERDICT, top_logprobs=5),
        GenerateRequest(messages=(system, Message(role="user", content="JSON please")), json_mode=True),
    ]
    for request in chats:
        body = llm._chat_body(request, form if request.reply_shape is SHAPE else None)  # type: ignore[arg-type]
        walked = asyncio.run(async_maybe_transform(body, chat_params.CompletionCreateParamsNonStreaming))
        assert walked == body
    text = GenerateRequest(prompt="Distractors:", top_logprobs=2, stop=("\n",), seed=1)
    body = llm._completion_body(text)
    assert asyncio.run(async_maybe_transform(body, text_params.CompletionCreateParamsNonStreaming)) == body
