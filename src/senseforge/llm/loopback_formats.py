"""The loopback server's reading of a chat request's ``response_format``, as a real server reads it.

:func:`format_problem` says why a ``response_format`` is refused (HTTP 400): a type other than ``text``,
``json_object`` and ``json_schema``; a ``json_schema`` without a valid name or an object schema; a strict schema
that OpenAI's strict mode would refuse (:func:`senseforge.llm.schemas.strict_problem`, in its words); or a form the
server was told to refuse (``refuse_formats``: ``json_schema``; ``json_object_schema``, llama-cpp-python's
``{"type": "json_object", "schema": …}``; ``json_object``), as an endpoint that does not take it answers.

:func:`shaped_text` makes a reply fit the schema the request holds it to, as a server that decodes under the schema
would: the responder's text where it already fits, else a small value that does
(:func:`senseforge.llm.schemas.example_of`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from typing import Any, Final

from senseforge.llm.schemas import conforms, example_of, strict_problem

__all__ = ["REFUSABLE_FORMATS", "form_of", "format_problem", "shaped_text"]

REFUSABLE_FORMATS: Final = ("json_schema", "json_object_schema", "json_object")
"""The response formats the server can be told to refuse."""

_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_TYPES = ("text", "json_object", "json_schema")


def form_of(response_format: dict[str, Any]) -> str:
    """Which form a ``response_format`` is: its type, or ``json_object_schema`` for a JSON object with a schema."""
    kind = str(response_format.get("type"))
    return "json_object_schema" if kind == "json_object" and "schema" in response_format else kind


def format_problem(body: dict[str, Any], refused: Collection[str] = ()) -> str | None:
    """Why a chat body's ``response_format`` is refused with 400, or ``None`` (none given, or a good one).

    >>> format_problem({"response_format": {"type": "json_schema", "json_schema": {"name": "a b", "schema": {}}}})
    "Invalid 'response_format.json_schema.name': string does not match pattern '^[a-zA-Z0-9_-]{1,64}$'."
    >>> format_problem({"response_format": {"type": "json_object"}}, refused=["json_object"])
    "Invalid parameter: 'response_format' of type 'json_object' is not supported by this server."
    """
    given = body.get("response_format")
    if given is None:
        return None
    if not isinstance(given, dict):
        return "Invalid type for 'response_format': expected an object."
    kind = given.get("type")
    if kind not in _TYPES:
        return f"Invalid value: {kind!r}. Supported values are: 'text', 'json_object' and 'json_schema'."
    form = form_of(given)
    if form in refused:
        shown = "json_object' with a 'schema" if form == "json_object_schema" else form
        return f"Invalid parameter: 'response_format' of type '{shown}' is not supported by this server."
    if form == "json_object_schema" and not isinstance(given.get("schema"), dict):
        return "Invalid type for 'response_format.schema': expected an object."
    if kind != "json_schema":
        return None
    spec = given.get("json_schema")
    if not isinstance(spec, dict):
        return "Missing required parameter: 'response_format.json_schema'."
    name = spec.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        return f"Invalid 'response_format.json_schema.name': string does not match pattern '{_NAME.pattern}'."
    schema = spec.get("schema")
    if not isinstance(schema, dict):
        return "Invalid type for 'response_format.json_schema.schema': expected an object."
    if spec.get("strict") is True:
        problem = strict_problem(schema)
        if problem is not None:
            return f"Invalid schema for response_format '{name}': {problem}"
    return None


def _schema_of(body: dict[str, Any]) -> dict[str, Any] | None:
    """The schema a chat body's ``response_format`` holds the reply to, if any."""
    given = body.get("response_format")
    if not isinstance(given, dict):
        return None
    if given.get("type") == "json_schema":
        spec = given.get("json_schema")
        schema = spec.get("schema") if isinstance(spec, dict) else None
    else:
        schema = given.get("schema") if given.get("type") == "json_object" else None
    return schema if isinstance(schema, dict) else None


def shaped_text(body: dict[str, Any], text: str) -> str:
    """``text`` as a server decoding under the body's schema would write it: unchanged where it already fits (or
    the body names no schema), else a small value that fits, as compact JSON.

    >>> body = {"response_format": {"type": "json_object", "schema": {"type": "object",
    ...     "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}}}
    >>> shaped_text(body, "sure!"), shaped_text(body, '{"ok": true}')
    ('{"ok":false}', '{"ok": true}')
    """
    schema = _schema_of(body)
    if schema is None:
        return text
    try:
        if conforms(json.loads(text), schema):
            return text
    except ValueError:
        pass
    return json.dumps(example_of(schema), separators=(",", ":"), ensure_ascii=False)
