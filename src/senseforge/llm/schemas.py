"""JSON schemas of reply shapes, as each kind of backend takes them, and checked as a strict server checks them.

A stage's :class:`~senseforge.llm.base.ReplyShape` carries the JSON schema pydantic writes for the model its parser
validates against. The backends need it in other forms:

* :func:`strict_schema`: the schema as OpenAI's strict ``json_schema`` response format requires it (every property
  required, ``additionalProperties: false`` on every object, keywords strict mode refuses dropped), or ``None``
  where it cannot be made strict (a free-form map);
* :func:`choices_gbnf`: a llama.cpp grammar (GBNF) whose only sentences are a shape's choices.

The loopback server checks a strict schema as OpenAI does (:func:`strict_problem`) and makes a reply that fits a
schema when its responder's does not (:func:`conforms`, :func:`example_of`). Only the standard library is used.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = [
    "STRICT_UNSUPPORTED",
    "canonical",
    "choices_gbnf",
    "conforms",
    "example_of",
    "gbnf_literal",
    "strict_problem",
    "strict_schema",
]

STRICT_UNSUPPORTED = frozenset(
    {
        "default",
        "examples",
        "patternProperties",
        "unevaluatedProperties",
        "propertyNames",
        "minProperties",
        "maxProperties",
        "dependentRequired",
        "dependentSchemas",
        "if",
        "then",
        "else",
        "not",
        "allOf",
    }
)
"""Keywords OpenAI's strict mode refuses; :func:`strict_schema` drops them (``allOf`` is first merged away where it
holds one ``$ref``, as pydantic writes a described reference)."""

_SUBSCHEMA_MAPS = ("properties", "$defs", "definitions")
_SUBSCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")


def strict_schema(schema: Mapping[str, Any]) -> dict[str, Any] | None:
    """``schema`` as OpenAI's strict ``json_schema`` mode takes it, or ``None`` where it cannot be made strict.

    Every object, at any depth (properties, array items, ``anyOf`` branches, ``$defs``), gets
    ``additionalProperties: false`` and lists every property as required; ``oneOf`` becomes ``anyOf``; an
    ``allOf`` of one schema is replaced by it; the keywords of :data:`STRICT_UNSUPPORTED` are dropped (pydantic's
    ``default`` among them: a field with a default is then always written, which its model accepts). A property
    that was optional stays of its own type: a model that must write it writes a value its parser takes.

    >>> strict_schema({"type": "object", "properties": {"a": {"type": "string", "default": ""}}})
    {'type': 'object', 'properties': {'a': {'type': 'string'}}, 'additionalProperties': False, 'required': ['a']}
    >>> strict_schema({"type": "object", "additionalProperties": {"type": "integer"}}) is None
    True

    Returns:
        The converted schema (a new dict), or ``None`` when the root is not an object or some object is a free-form
        map (``additionalProperties`` a schema, or ``true``), which strict mode cannot express.
    """
    root = copy.deepcopy(dict(schema))
    if root.get("type") != "object":
        return None
    try:
        return _strict(root)
    except _NotStrict:
        return None


class _NotStrict(Exception):
    """A part of the schema that strict mode cannot express."""


def _strict(node: dict[str, Any]) -> dict[str, Any]:
    all_of = node.get("allOf")
    if isinstance(all_of, list) and len(all_of) == 1 and isinstance(all_of[0], dict):
        merged = {**{k: v for k, v in node.items() if k != "allOf"}, **all_of[0]}
        node = merged
    if "oneOf" in node:
        node["anyOf"] = node.pop("oneOf")
    for keyword in STRICT_UNSUPPORTED & node.keys():
        del node[keyword]
    for key in _SUBSCHEMA_MAPS:
        children = node.get(key)
        if isinstance(children, dict):
            node[key] = {name: _strict(dict(child)) for name, child in children.items() if isinstance(child, dict)}
    for key in ("anyOf", "prefixItems"):
        children = node.get(key)
        if isinstance(children, list):
            node[key] = [_strict(dict(child)) for child in children if isinstance(child, dict)]
    if isinstance(node.get("items"), dict):
        node["items"] = _strict(dict(node["items"]))
    if _is_object(node):
        extra = node.get("additionalProperties", False)
        if extra is not False:
            raise _NotStrict
        properties = node.setdefault("properties", {})
        node["additionalProperties"] = False
        node["required"] = list(properties)
    return node


def _is_object(node: Mapping[str, Any]) -> bool:
    kind = node.get("type")
    return kind == "object" or (isinstance(kind, list) and "object" in kind) or "properties" in node


def strict_problem(schema: Any, *, where: tuple[str, ...] = ()) -> str | None:
    """Why OpenAI's strict mode would refuse ``schema``, in its words, or ``None`` when it takes it.

    The rules checked: the root is an object; every object sets ``additionalProperties: false`` and requires every
    property; no keyword of :data:`STRICT_UNSUPPORTED`; ``$ref`` points into the schema's own ``$defs``.

    >>> schema = {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": False}
    >>> strict_problem(schema).endswith("including every key in properties. Missing 'a'.")
    True
    """
    if not where and (not isinstance(schema, dict) or schema.get("type") != "object"):
        return "schema must be a JSON Schema of 'type: \"object\"'"
    if not isinstance(schema, dict):
        return f"In context={where!r}, a schema must be a JSON object"
    refused = sorted(STRICT_UNSUPPORTED & schema.keys())
    if refused:
        return f"In context={where!r}, '{refused[0]}' is not permitted."
    if _is_object(schema):
        if schema.get("additionalProperties") is not False:
            return f"In context={where!r}, 'additionalProperties' is required to be supplied and to be false."
        properties = schema.get("properties") or {}
        required = schema.get("required")
        missing = [name for name in properties if not isinstance(required, list) or name not in required]
        if missing:
            return (
                f"In context={(*where, 'properties')!r}, 'required' is required to be supplied and to be an array "
                f"including every key in properties. Missing '{missing[0]}'."
            )
    reference = schema.get("$ref")
    if reference is not None and not (isinstance(reference, str) and reference.startswith("#/$defs/")):
        return f"In context={where!r}, $ref {reference!r} must point into '#/$defs/'."
    for key, child in _children(schema):
        problem = strict_problem(child, where=(*where, *key))
        if problem is not None:
            return problem
    return None


def _children(schema: Mapping[str, Any]) -> Iterable[tuple[tuple[str, ...], Any]]:
    for key in _SUBSCHEMA_MAPS:
        children = schema.get(key)
        if isinstance(children, dict):
            for name, child in children.items():
                yield (key, name), child
    for key in _SUBSCHEMA_LISTS:
        children = schema.get(key)
        if isinstance(children, list):
            for index, child in enumerate(children):
                yield (key, str(index)), child
    if isinstance(schema.get("items"), dict):
        yield ("items",), schema["items"]


def _resolve(node: Mapping[str, Any], root: Mapping[str, Any]) -> Mapping[str, Any]:
    """``node`` with a local ``$ref`` (``#/$defs/Name``, ``#/definitions/Name``) followed."""
    seen = 0
    while isinstance(node.get("$ref"), str) and seen < 64:
        target: Any = root
        for part in str(node["$ref"]).removeprefix("#").strip("/").split("/"):
            if part:
                target = target.get(part, {}) if isinstance(target, dict) else {}
        node = target if isinstance(target, dict) else {}
        seen += 1
    return node


_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "null": (type(None),),
    "array": (list,),
    "object": (dict,),
}


def conforms(value: Any, schema: Mapping[str, Any], root: Mapping[str, Any] | None = None) -> bool:
    """Whether ``value`` fits ``schema``, for the keywords a reply shape uses (types, properties, required,
    ``additionalProperties: false``, items, enum, const, anyOf/oneOf, local ``$ref``, lengths and bounds).

    >>> conforms({"a": 1}, {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]})
    True
    >>> conforms({"a": "1"}, {"type": "object", "properties": {"a": {"type": "integer"}}})
    False
    """
    top = schema if root is None else root
    node = _resolve(schema, top)
    if "const" in node and value != node["const"]:
        return False
    if "enum" in node and value not in node["enum"]:
        return False
    for key in ("anyOf", "oneOf"):
        if isinstance(node.get(key), list) and not any(conforms(value, branch, top) for branch in node[key]):
            return False
    kinds = node.get("type")
    if kinds is not None:
        names = [kinds] if isinstance(kinds, str) else list(kinds)
        if not any(_is_type(value, name) for name in names):
            return False
    if isinstance(value, str) and not node.get("minLength", 0) <= len(value) <= node.get("maxLength", len(value)):
        return False
    if isinstance(value, (int, float)) and not isinstance(value, bool) and not _within(value, node):
        return False
    if isinstance(value, list):
        if not node.get("minItems", 0) <= len(value) <= node.get("maxItems", len(value)):
            return False
        if isinstance(node.get("items"), dict) and not all(conforms(item, node["items"], top) for item in value):
            return False
    if isinstance(value, dict):
        properties = node.get("properties") or {}
        if any(name not in value for name in node.get("required") or ()):
            return False
        if node.get("additionalProperties") is False and any(name not in properties for name in value):
            return False
        if not all(conforms(value[name], sub, top) for name, sub in properties.items() if name in value):
            return False
    return True


def _within(value: float, node: Mapping[str, Any]) -> bool:
    return bool(node.get("minimum", value) <= value <= node.get("maximum", value))


def _is_type(value: Any, name: str) -> bool:
    if name in ("integer", "number") and isinstance(value, bool):
        return False
    if name == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, _TYPES.get(name, (object,)))


def example_of(schema: Mapping[str, Any], root: Mapping[str, Any] | None = None) -> Any:
    """A small value that fits ``schema`` (:func:`conforms`): what a server that decodes under it could write.

    Every required property is given (all of them under a strict schema), the first ``enum`` value or ``anyOf``
    branch is taken, a string is as short as allowed, a number its minimum or 0, an array as short as allowed.

    >>> example_of({"type": "object", "properties": {"a": {"enum": ["x", "y"]}, "b": {"type": "array",
    ...     "items": {"type": "integer"}, "minItems": 1}}, "required": ["a", "b"]})
    {'a': 'x', 'b': [0]}
    """
    top = schema if root is None else root
    node = _resolve(schema, top)
    if "const" in node:
        return node["const"]
    if isinstance(node.get("enum"), list) and node["enum"]:
        return node["enum"][0]
    for key in ("anyOf", "oneOf"):
        branches = node.get(key)
        if isinstance(branches, list) and branches:
            return example_of(branches[0], top)
    kinds = node.get("type")
    kind = kinds if isinstance(kinds, str) else next((k for k in kinds or () if k != "null"), None)
    if kind is None:
        kind = "object" if "properties" in node else "array" if "items" in node else "null"
    if kind == "object":
        properties = node.get("properties") or {}
        return {name: example_of(properties.get(name) or {}, top) for name in node.get("required") or ()}
    if kind == "array":
        given = node.get("items")
        items: Mapping[str, Any] = given if isinstance(given, dict) else {}
        return [example_of(items, top) for _ in range(int(node.get("minItems", 0)))]
    if kind == "string":
        return "x" * int(node.get("minLength", 0))
    if kind in ("integer", "number"):
        return node.get("minimum", 0)
    if kind == "boolean":
        return False
    return None


def gbnf_literal(text: str) -> str:
    """``text`` as a GBNF string literal: quotes, backslashes and control characters escaped.

    >>> print(gbnf_literal('say "hi"\\n'))
    "say \\"hi\\"\\n"
    """
    out = []
    for char in text:
        if char in '"\\':
            out.append("\\" + char)
        elif char == "\n":
            out.append("\\n")
        elif char == "\r":
            out.append("\\r")
        elif char == "\t":
            out.append("\\t")
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append(f"\\x{ord(char):02X}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def choices_gbnf(choices: Sequence[str], *, leading_space: bool = False) -> str:
    """A GBNF grammar whose sentences are exactly ``choices`` (after one optional space where ``leading_space``,
    as a base model writes after a cue such as ``Answer:``).

    >>> print(choices_gbnf(["yes", "no"]))
    root ::= ("yes" | "no")
    """
    alternatives = " | ".join(gbnf_literal(choice) for choice in dict.fromkeys(choices))
    space = '" "? ' if leading_space else ""
    return f"root ::= {space}({alternatives})"


def canonical(schema: Mapping[str, Any]) -> str:
    """A schema as compact JSON with sorted keys (how a shape holds it)."""
    return json.dumps(schema, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
