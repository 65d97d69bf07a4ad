"""Reading what CKA and WSG models reply: knowledge triples, and a rewritten target.

Model output is bad input until it parses: every problem is a named rejection, never a crash.

**CKA** replies are a JSON list of ``{head, relation, tail}`` objects (also under a
``triples`` or ``knowledge`` key), or — from a base model continuing a few-shot page —
lines ``head | relation | tail`` (a leading ``-`` allowed). ``[]``, ``none`` or ``no
knowledge`` means the model found none (:data:`NO_KNOWLEDGE` for the whole context). Each
triple is checked on its own: a relation outside the table (``unknown_relation``), an
empty or over-long head or tail (``malformed_triple``; at most :data:`MAX_PHRASE_WORDS`
words), a repeat (``duplicate_triple``), one past the limit (``too_many_triples``).

**WSG** replies are ``{"rewrite": "…"}`` (``null`` for "no alternative") from a chat
model, one line from a base model; a plain line from a chat model is taken too. "None",
"no alternative" and the like drop the pair (:data:`NO_ALTERNATIVE`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from senseforge.data.relations import MAX_PHRASE_WORDS, parse_relation, verbalize
from senseforge.llm.jsonx import JSONExtractionError, extract_json
from senseforge.pipelines.crow.records import CrowTriple
from senseforge.pipelines.outcomes import MALFORMED, Reject

NO_KNOWLEDGE = "no_knowledge"
NO_ALTERNATIVE = "no_alternative"
UNKNOWN_RELATION = "unknown_relation"
MALFORMED_TRIPLE = "malformed_triple"
DUPLICATE_TRIPLE = "duplicate_triple"
TOO_MANY_TRIPLES = "too_many_triples"

_NONE_WORDS = re.compile(
    r"^\W*(none|no knowledge|no alternative|no rewrite|n/?a|nothing|null|impossible|not possible)\W*$", re.IGNORECASE
)
_LINE = re.compile(r"^\s*(?:[-*•]|\d+[.)])?\s*(?P<head>[^|]+?)\s*\|\s*(?P<relation>[^|]+?)\s*\|\s*(?P<tail>[^|]+?)\s*$")


def triple_row(head: str, relation: str, tail: str) -> CrowTriple:
    """A triple in the recipe's form (its relation as the table labels it, with dimension and a sentence).

    Raises:
        ValueError: the relation is not in the table.
    """
    parsed = parse_relation(relation, strict=True)
    return CrowTriple(
        head=head,
        relation=parsed.label,
        tail=tail,
        dimension=parsed.dimension,
        verbalized=verbalize(head, parsed.label, tail),
    )


def _candidates(text: str) -> list[Any] | None:
    """The raw triples of a reply (objects or ``[head, relation, tail]`` lists), or ``None`` when it holds none."""
    try:
        value = extract_json(text)
    except JSONExtractionError:
        value = None
    if isinstance(value, Mapping):
        value = value.get("triples", value.get("knowledge", [value] if "head" in value else None))
    if isinstance(value, list):
        return value
    rows: list[Any] = []
    for line in text.splitlines():
        match = _LINE.match(line)
        if match:
            rows.append({key: match[key] for key in ("head", "relation", "tail")})
    return rows or None


def _one(raw: Any) -> CrowTriple | Reject:
    if isinstance(raw, list | tuple) and len(raw) == 3:
        raw = dict(zip(("head", "relation", "tail"), raw, strict=True))
    shown = {"triple": raw if isinstance(raw, Mapping | list | tuple | str) else repr(raw)}
    if not isinstance(raw, Mapping):
        return Reject(MALFORMED_TRIPLE, evidence=shown)
    parts = {key: raw.get(key) for key in ("head", "relation", "tail")}
    if not all(isinstance(v, str) and v.strip() for v in parts.values()):
        return Reject(MALFORMED_TRIPLE, evidence=shown)
    head, relation, tail = (str(parts[key]).strip().strip("\"'") for key in ("head", "relation", "tail"))
    if not head or not tail or max(len(head.split()), len(tail.split())) > MAX_PHRASE_WORDS:
        return Reject(MALFORMED_TRIPLE, evidence={**shown, "max_phrase_words": MAX_PHRASE_WORDS})
    try:
        return triple_row(head, relation, tail)
    except ValueError:
        return Reject(UNKNOWN_RELATION, evidence={**shown, "relation": relation})


def parse_triples(text: str, limit: int) -> list[CrowTriple | Reject] | Reject:
    """The triples of a CKA reply, each checked (see the module notes), or why the reply gives none."""
    stripped = text.strip()
    if not stripped or _NONE_WORDS.match(stripped):
        return Reject(NO_KNOWLEDGE) if stripped else Reject(MALFORMED)
    raws = _candidates(stripped)
    if raws is None:
        return Reject(MALFORMED)
    if not raws:
        return Reject(NO_KNOWLEDGE)
    out: list[CrowTriple | Reject] = []
    seen: set[tuple[str, str, str]] = set()
    kept = 0
    for raw in raws:
        triple = _one(raw)
        if isinstance(triple, CrowTriple):
            key = (triple.head.casefold(), triple.relation, triple.tail.casefold())
            shown = {"triple": {"head": triple.head, "relation": triple.relation, "tail": triple.tail}}
            if key in seen:
                triple = Reject(DUPLICATE_TRIPLE, evidence=shown)
            elif kept >= limit:
                triple = Reject(TOO_MANY_TRIPLES, evidence={**shown, "limit": limit})
            else:
                seen.add(key)
                kept += 1
        out.append(triple)
    return out


def parse_rewrite(text: str) -> str | Reject:
    """The rewritten target of a WSG reply, or why there is none."""
    stripped = text.strip()
    if not stripped:
        return Reject(MALFORMED)
    value: Any = None
    if stripped[:1] in "{[" or "```" in stripped:
        try:
            value = extract_json(stripped)
        except JSONExtractionError:
            return Reject(MALFORMED)
        if isinstance(value, list) and value:
            value = value[0]
        if not isinstance(value, Mapping) or "rewrite" not in value:
            return Reject(MALFORMED)
        found = value["rewrite"]
        if found is None:
            return Reject(NO_ALTERNATIVE)
        if not isinstance(found, str):
            return Reject(MALFORMED)
        stripped = found.strip()
    else:
        stripped = next(line for line in stripped.splitlines() if line.strip()).strip()
        stripped = re.sub(r"^(rewrite|new target)\s*(\([^)]*\))?\s*:\s*", "", stripped, flags=re.IGNORECASE)
    stripped = stripped.strip().strip("\"'“”").strip()
    if not stripped or _NONE_WORDS.match(stripped):
        return Reject(NO_ALTERNATIVE) if stripped else Reject(MALFORMED)
    return stripped
