"""The loopback server reads ``response_format`` as a real server does: malformed or refused forms get a 400 that
says why, and a reply to a request with a schema fits it."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from senseforge.errors import ConfigError
from senseforge.llm.loopback import LoopbackOpenAI, main
from senseforge.llm.loopback_formats import format_problem, shaped_text
from senseforge.llm.loopback_handler import request_text

OBJECT = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
STRICT = {**OBJECT, "additionalProperties": False}


def _schema(schema: dict[str, Any], *, name: str = "Reply", strict: bool = True) -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": strict}}


@pytest.mark.parametrize(
    ("response_format", "problem"),
    [
        (None, None),
        ({"type": "text"}, None),
        ({"type": "json_object"}, None),
        ({"type": "json_object", "schema": OBJECT}, None),
        (_schema(STRICT), None),
        (_schema(OBJECT, strict=False), None),
        ("json", "expected an object"),
        ({"type": "xml"}, "Supported values are"),
        ({"type": "json_object", "schema": "{}"}, "response_format.schema"),
        ({"type": "json_schema"}, "Missing required parameter: 'response_format.json_schema'"),
        (_schema(STRICT, name="has space"), "does not match pattern"),
        (_schema(OBJECT), "Invalid schema for response_format 'Reply': In context=(), 'additionalProperties'"),
        (_schema({"type": "array"}), "Invalid schema for response_format 'Reply'"),
    ],
)
def test_a_response_format_is_read_as_a_real_server_reads_it(response_format: Any, problem: str | None) -> None:
    body = {} if response_format is None else {"response_format": response_format}
    found = format_problem(body)
    assert (found is None) if problem is None else (found is not None and problem in found)


def test_a_refused_form_is_named_and_the_others_still_taken() -> None:
    refused = ["json_object_schema"]
    assert "'json_object' with a 'schema'" in (
        format_problem({"response_format": {"type": "json_object", "schema": OBJECT}}, refused) or ""
    )
    assert format_problem({"response_format": {"type": "json_object"}}, refused) is None


def test_replies_fit_the_schema_and_refusals_are_400_over_http() -> None:
    with LoopbackOpenAI(lambda body: request_text(body), refuse_formats=["json_schema"]) as server:
        url = server.base_url + "/chat/completions"
        messages = [{"role": "user", "content": "hello"}]
        refused = httpx.post(url, json={"messages": messages, "response_format": _schema(STRICT)})
        shaped = httpx.post(
            url, json={"messages": messages, "response_format": {"type": "json_object", "schema": OBJECT}}
        )
        plain = httpx.post(url, json={"messages": messages})
    assert refused.status_code == 400 and "json_schema" in refused.json()["error"]["message"]
    assert json.loads(shaped.json()["choices"][0]["message"]["content"]) == {"ok": False}
    assert plain.json()["choices"][0]["message"]["content"] == "hello"
    assert shaped_text({"response_format": {"type": "json_object", "schema": OBJECT}}, '{"ok":true}') == '{"ok":true}'


def test_an_unknown_form_to_refuse_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="unknown formats"):
        LoopbackOpenAI(request_text, refuse_formats=["yaml"])
    with pytest.raises(SystemExit):
        main(["--responder", "senseforge.llm.loopback_handler:request_text", "--refuse-format", "yaml"])
