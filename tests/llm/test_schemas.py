"""Reply-shape schemas: made strict as OpenAI's strict mode needs, checked as it checks them, and choices as GBNF."""

from __future__ import annotations

from typing import Any, Literal

import pytest
from pydantic import BaseModel, Field

from senseforge.llm.base import ReplyShape
from senseforge.llm.schemas import choices_gbnf, conforms, example_of, gbnf_literal, strict_problem, strict_schema


class Part(BaseModel):
    word: str
    weight: float = 1.0


class Reply(BaseModel):
    parts: list[Part] = Field(min_length=1)
    kind: Literal["a", "b"]
    note: str | None = None


def _objects(node: Any) -> list[dict[str, Any]]:
    """Every object schema in ``node``, at any depth."""
    found = []
    if isinstance(node, dict):
        if node.get("type") == "object":
            found.append(node)
        for value in node.values():
            found.extend(_objects(value))
    elif isinstance(node, list):
        for value in node:
            found.extend(_objects(value))
    return found


def test_a_pydantic_schema_is_made_strict_at_every_depth() -> None:
    schema = ReplyShape.of_model(Reply).as_schema()
    assert schema is not None and strict_problem(schema) is not None  # as pydantic writes it: refused
    strict = strict_schema(schema)
    assert strict is not None and strict_problem(strict) is None
    objects = _objects(strict)
    assert len(objects) == 2  # the reply and Part, in $defs
    for node in objects:
        assert node["additionalProperties"] is False and node["required"] == list(node["properties"])
    assert "default" not in str(strict) and schema["required"] == ["parts", "kind"]  # the original is untouched


def test_what_strict_mode_cannot_say_is_refused_or_none() -> None:
    class Map(BaseModel):
        counts: dict[str, int]

    assert strict_schema(Map.model_json_schema()) is None
    assert strict_schema({"type": "string"}) is None
    assert 'type: "object"' in (strict_problem({"type": "array"}) or "")
    bad = {"type": "object", "properties": {}, "additionalProperties": False, "required": [], "default": {}}
    assert strict_problem(bad) == "In context=(), 'default' is not permitted."
    ref = {"type": "object", "properties": {"a": {"$ref": "http://x/y"}}, "additionalProperties": False}
    assert "$ref" in (strict_problem({**ref, "required": ["a"]}) or "")


@pytest.mark.parametrize(
    ("value", "fits"),
    [
        ({"parts": [{"word": "x"}], "kind": "a"}, True),
        ({"parts": [], "kind": "a"}, False),  # minItems
        ({"parts": [{"word": "x"}], "kind": "c"}, False),  # enum
        ({"parts": [{"word": 3}], "kind": "a"}, False),  # a nested type
        ({"parts": [{"word": "x"}]}, False),  # required
        ({"parts": [{"word": "x", "weight": True}], "kind": "b"}, False),  # a boolean is no number
        ({"parts": [{"word": "x"}], "kind": "b", "note": None}, True),
    ],
)
def test_conforms_agrees_with_the_model(value: dict[str, Any], fits: bool) -> None:
    schema = Reply.model_json_schema()
    assert conforms(value, schema) is fits
    assert conforms(value, strict_schema(schema) or {}) is (fits and "note" in value and "weight" in str(value))


def test_an_example_fits_its_schema_and_validates_as_the_model() -> None:
    for schema in (Reply.model_json_schema(), strict_schema(Reply.model_json_schema()) or {}):
        value = example_of(schema)
        assert conforms(value, schema)
    Reply.model_validate(example_of(Reply.model_json_schema()))


def test_choices_become_an_escaped_alternation() -> None:
    assert gbnf_literal('a "b" \\ c\n\x01') == '"a \\"b\\" \\\\ c\\n\\x01"'
    assert choices_gbnf(["yes", "no", "yes"]) == 'root ::= ("yes" | "no")'
    assert choices_gbnf(["(A)"], leading_space=True) == 'root ::= " "? ("(A)")'
