"""Reading the LM's answers to the mCSQA prompts: a question, or two distractors.

Model output is untrusted input: labels, quotes, code fences, prose around JSON and
refusals are handled here, and anything unusable is ``None`` (the stage then records a
rejection with its reason).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache
from typing import Any

from pydantic import ValidationError

from senseforge.llm.jsonx import JSONExtractionError, extract_json
from senseforge.pipelines.mcsqa.templates import (
    DISTRACTORS_PREFIX,
    SUPPORTED_LANGUAGES,
    DistractorsReply,
    one_line,
    templates,
)

_OPEN_QUOTES = "\"'“”„‟«»‹›「『‘’‚`"
_CLOSE_QUOTES = "\"'“”„‟«»‹›」』‘’`"
_EN_QUESTION_LABELS = ("question", "q", "natural question", "refined question", "rewritten question")
_BULLET = re.compile(r"^(?:[-*•・+]|\(?\d{1,2}[.)．、]|\(?[A-Ea-e][.)])\s*(.+)$")
_SHORT_LABEL = re.compile(r"^[^:：\"“「]{1,30}[:：]\s*(.+)$")
_SPLIT = re.compile(r"\s*[,;，；、]\s*")
_END_PUNCT = (".", "。", ",", "、", ";", "；")
_QUOTED = re.compile(r'"([^"\n]*)"')
_QUOTED_REST = re.compile(r"[\s\[\]{},:]+")


def _strip_quotes(text: str) -> str:
    text = text.strip()
    while len(text) >= 2 and text[0] in _OPEN_QUOTES and text[-1] in _CLOSE_QUOTES:
        text = text[1:-1].strip()
    return text


def _strip_markup(line: str) -> str:
    line = line.strip().lstrip("#>").strip()
    for mark in ("**", "__"):
        line = line.replace(mark, "")
    return line.strip()


def _normalize_apostrophes(text: str) -> str:
    return text.replace("’", "'").replace("‘", "'")


def _is_refusal(line: str, markers: Sequence[str]) -> bool:
    head = _normalize_apostrophes(line).casefold()
    return any(head.startswith(_normalize_apostrophes(marker).casefold()) for marker in markers)


@cache
def _all_refusals() -> tuple[str, ...]:
    markers: list[str] = []
    for code in SUPPORTED_LANGUAGES:
        markers.extend(templates(code).refusals)
    return tuple(dict.fromkeys(markers))


def _strip_label(line: str, labels: Sequence[str]) -> tuple[str, bool]:
    folded = line.casefold()
    for label in sorted(labels, key=len, reverse=True):
        if folded.startswith(label.casefold()):
            rest = line[len(label) :].lstrip()
            if rest[:1] in (":", "："):
                return rest[1:].strip(), True
    return line, False


def parse_question(text: str, lang: str) -> str | None:
    """The question in a model's reply, or ``None`` when the reply is unusable.

    Takes the first non-empty line, skipping code fences and preface lines that end in a
    colon; strips Markdown emphasis, a leading label (``Question:``, ``質問：`` … in ``lang``
    or English) and surrounding quotes. Returns ``None`` for empty output, a refusal, or a
    line without any letter or digit. Whether the question keeps the recipe's rules is the
    rule filter's business, not this function's.

    Raises:
        ConfigError: for an unsupported language.
    """
    t = templates(lang)
    labels = (t.labels.question, t.labels.natural, *_EN_QUESTION_LABELS)
    markers = (*t.refusals, *templates("en").refusals)
    for raw in text.splitlines():
        line = _strip_markup(raw)
        if not line or line.startswith("```"):
            continue
        line, labelled = _strip_label(line, labels)
        line = _strip_quotes(line)
        if not line:
            continue
        if not labelled and line.endswith((":", "：")):
            continue
        if _is_refusal(line, markers) or not any(ch.isalnum() for ch in line):
            return None
        return line
    return None


def _items_from_json(value: Any) -> list[str] | None:
    """The choice strings in a parsed JSON value, or ``None`` when it is not a dict or list.

    The reply the prompt asks for (:class:`DistractorsReply`) is read as such; other objects and lists tolerantly.
    """
    try:
        return DistractorsReply.model_validate(value).distractors
    except ValidationError:
        pass
    if isinstance(value, dict):
        items = value.get("distractors")
        if not isinstance(items, list):
            lists = [v for v in value.values() if isinstance(v, list)]
            strings = [v for v in value.values() if isinstance(v, str)]
            items = lists[0] if lists else strings
    elif isinstance(value, list):
        items = value
    else:
        return None
    return [str(item) for item in items if isinstance(item, str | int | float) and not isinstance(item, bool)]


def _json_candidates(text: str) -> list[str] | None:
    for candidate in (text, DISTRACTORS_PREFIX + text):
        try:
            items = _items_from_json(extract_json(candidate))
        except JSONExtractionError:
            continue
        if items is not None:
            return items
    return None


def _looks_like_choice(item: str) -> bool:
    return 0 < len(item) <= 40 and len(item.split()) <= 6 and not item.endswith(("?", "!", "？", "！", ":", "："))


def _items_from_lines(text: str) -> list[str] | None:
    lines = [_strip_markup(line) for line in text.splitlines()]
    lines = [line for line in lines if line and not line.startswith("```")]
    if any(_is_refusal(line, _all_refusals()) for line in lines):
        return None
    bullets = [m.group(1) for line in lines if (m := _BULLET.match(line))]
    candidates = bullets if len(bullets) >= 2 else lines
    candidates = [c for c in candidates if not c.endswith((":", "："))]
    candidates = [(m.group(1) if (m := _SHORT_LABEL.match(c)) else c) for c in candidates]
    if len(candidates) == 1:
        candidates = _SPLIT.split(candidates[0])
    return [c for c in candidates if _looks_like_choice(_clean_item(c))]


def _clean_item(item: str) -> str:
    item = _strip_quotes(one_line(item))
    while item.endswith(_END_PUNCT):
        item = item[:-1].rstrip()
    return _strip_quotes(item)


def _items_from_quoted(text: str) -> list[str] | None:
    """The quoted strings of a reply made only of quoted strings and JSON punctuation.

    Base models often mangle the list they continue (``"a"], ["b"]}``); when nothing but
    brackets, braces, commas and colons lies between the quoted strings, the strings are
    the items. Key names (a string followed by a colon) are dropped.
    """
    if '"' not in text or _QUOTED_REST.sub("", _QUOTED.sub("", text)):
        return None
    return [m.group(1) for m in _QUOTED.finditer(text) if not text[m.end() :].lstrip().startswith(":")]


def parse_distractor_json(text: str) -> list[str] | None:
    """The choices of a chat model's JSON reply (fenced or with prose around it), or ``None``.

    Chat models are asked for a JSON object, so a reply without a complete JSON value —
    cut off, or prose only — is malformed here, however many words it holds.

    >>> parse_distractor_json('{"distractors": ["pond", "lake"]}')
    ['pond', 'lake']
    >>> parse_distractor_json('{"distractors": ["pond", ') is None
    True
    """
    try:
        items = _items_from_json(extract_json(text))
    except JSONExtractionError:
        return None
    if items is None:
        return None
    return [cleaned for item in items if (cleaned := _clean_item(item))]


def parse_distractor_items(text: str) -> list[str] | None:
    """Every candidate choice in a model's reply, cleaned, in order (duplicates kept).

    Tolerant, in order: quoted strings among JSON punctuation only (well-formed JSON, the
    bare continuation of a completion-style prompt ``"a", "b"]}``, or a mangled list);
    JSON anywhere in the text (fenced or with prose around it; the ``distractors`` list,
    else the first list in the object); else the non-empty lines (bullets and numbering removed; one line is
    split at commas or semicolons). ``None`` for empty output, a refusal or no list at all.

    >>> parse_distractor_items('"glass"], ["table"]}')
    ['glass', 'table']
    """
    stripped = text.strip()
    if not stripped:
        return None
    items = _items_from_quoted(stripped)
    if items is None:
        items = _json_candidates(stripped)
    if items is None:
        items = _items_from_lines(stripped)
    if items is None:
        return None
    return [cleaned for item in items if (cleaned := _clean_item(item))]


def parse_distractors(text: str) -> list[str] | None:
    """Two distractors from a model's reply, or ``None`` when the reply is unusable.

    Reads the reply as :func:`parse_distractor_items` does and returns the first two
    distinct items, or ``None`` for empty output, a refusal, or fewer than two items.
    """
    items = parse_distractor_items(text)
    if items is None:
        return None
    seen: set[str] = set()
    out: list[str] = []
    for item in items:
        cleaned = _clean_item(item)
        key = cleaned.casefold()
        if cleaned and key not in seen:
            seen.add(key)
            out.append(cleaned)
    return out[:2] if len(out) >= 2 else None
