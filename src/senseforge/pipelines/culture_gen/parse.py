"""What culture-gen makes of a model's reply: its items, each given to the batch concept it names.

Models return a JSON list (fenced or not, with prose around it), an object holding one
(``{"questions": [...]}``), or a single object. Keys vary: the answer as
``answer_creator``, ``answer`` or ``answerKey``; the concept as ``question_concepts``,
``question_concept`` or ``concept``; choices as an object ``{"A": …}``, a list of
``{"label", "text"}`` objects, an object of ``label``/``text`` lists, or strings such as
``"A. …"``. Parsing only reads; the checks (:mod:`~senseforge.pipelines.culture_gen.checks`)
judge what was read. An item goes to the concept it names, or failing that to the one
batch concept its question contains — never by its position in the list. The shape the prompts ask for,
:class:`~senseforge.pipelines.culture_gen.templates.WrittenItems`, goes with each request as its reply shape (for a
backend that constrains its decoding to it); this parser stays as tolerant as before.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from senseforge.data.text import fold
from senseforge.llm.jsonx import JSONExtractionError, extract_json
from senseforge.pipelines.choices import RawItem

ANSWER_KEYS = ("answer_creator", "answer", "answerKey")
CONCEPT_KEYS = ("question_concepts", "question_concept", "concept")
_LABELLED = re.compile(r"^\s*\(?([A-Za-z])[.):]\s*(.*)$", re.DOTALL)


def parse_reply(text: str, prefix: str = "") -> list[RawItem] | None:
    """The items of a reply (none for an empty list), or ``None`` when it holds no list of items at all."""
    for candidate in ((prefix + text) if prefix else text, text):
        try:
            value = extract_json(candidate)
        except JSONExtractionError:
            continue
        if value == []:  # a list with no item in it: the reply's shape, and no item for any concept
            return []
        rows = _rows(value)
        if rows is not None:
            items = [item for item in (_item(row) for row in rows) if item is not None]
            return items if items else None
    return None


def _rows(value: Any) -> list[Mapping[str, Any]] | None:
    if isinstance(value, list):
        rows = [v for v in value if isinstance(v, Mapping)]
        return rows or None
    if isinstance(value, Mapping):
        if "question" in value:
            return [value]
        lists = [v for v in value.values() if isinstance(v, list) and any(isinstance(x, Mapping) for x in v)]
        if len(lists) == 1:
            return [v for v in lists[0] if isinstance(v, Mapping)]
    return None


def _first(row: Mapping[str, Any], keys: Sequence[str]) -> Any:
    return next((row[key] for key in keys if row.get(key) not in (None, "")), None)


def _item(row: Mapping[str, Any]) -> RawItem | None:
    question = row.get("question")
    if not isinstance(question, str) or not question.strip():
        return None
    answer = _first(row, ANSWER_KEYS)
    concept = _first(row, CONCEPT_KEYS)
    if isinstance(concept, list):
        concept = concept[0] if concept and isinstance(concept[0], str) else None
    return RawItem(
        question=" ".join(question.split()),
        choices=tuple(_choices(row.get("choices"))),
        answer=str(answer).strip().rstrip(".):").strip().upper() if answer is not None else "",
        concept=str(concept).strip() if isinstance(concept, str) and concept.strip() else None,
    )


def _choices(value: Any) -> list[tuple[str, str]]:
    if isinstance(value, Mapping):
        labels, texts = value.get("label"), value.get("text")
        if isinstance(labels, list) and isinstance(texts, list):
            return [(str(label).strip(), str(text).strip()) for label, text in zip(labels, texts, strict=False)]
        return [(str(label).strip(), str(text).strip()) for label, text in value.items()]
    out: list[tuple[str, str]] = []
    if isinstance(value, list):
        for index, entry in enumerate(value):
            if isinstance(entry, Mapping):
                out.append((str(entry.get("label", "")).strip(), str(entry.get("text", "")).strip()))
            elif isinstance(entry, str):
                match = _LABELLED.match(entry)
                label, text = (match.group(1).upper(), match.group(2)) if match else (chr(ord("A") + index), entry)
                out.append((label, text.strip()))
    return out


def assign(items: Sequence[RawItem], concepts: Sequence[str]) -> tuple[dict[str, list[RawItem]], list[RawItem]]:
    """Each item to the batch concept it names (else the one its question contains); and those that fit none."""
    given: dict[str, list[RawItem]] = {concept: [] for concept in concepts}
    by_fold = {fold(concept): concept for concept in concepts}
    stray: list[RawItem] = []
    for item in items:
        target = by_fold.get(fold(item.concept)) if item.concept else None
        if target is None:
            inside = [c for c in concepts if fold(c) in fold(item.question)]
            target = inside[0] if len(inside) == 1 else None
        if target is None:
            stray.append(item)
        else:
            given[target].append(item)
    return given, stray
