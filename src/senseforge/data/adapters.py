"""Adapters: raw benchmark formats to records, at the edge.

Each format has a ``*_row_to_item`` function for one row and a reader that locates the
first bad row. :func:`read_items` picks the adapter from the first row's keys.

Formats:
    * ``csqa`` — the flat Hugging Face schema of CommonsenseQA and mCSQA:
      ``id, question, question_concept, choices{label[], text[]}, answerKey[, hard]``.
      ``answerKey`` may be missing or empty (mCSQA's test split withholds answers).
    * ``jcommonsenseqa`` — JGLUE's JCommonsenseQA: ``q_id, question, choice0..choice4,
      label`` (an integer index). Choices are labelled ``A``–``E`` in order.
"""

from __future__ import annotations

import os
import string
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Literal

from pydantic import ValidationError

from senseforge.data._rows import RowError, choice_dict, require
from senseforge.data.io import format_validation_error, iter_json_rows
from senseforge.data.schema import MCItem, Provenance
from senseforge.errors import DataValidationError

Format = Literal["csqa", "jcommonsenseqa"]
_JCSQA_CHOICES = tuple(f"choice{i}" for i in range(5))


def csqa_row_to_item(row: Mapping[str, Any], lang: str, *, recipe: str | None = None) -> MCItem:
    """One row of the flat CommonsenseQA / mCSQA schema as an :class:`MCItem`.

    ``hard`` (mCSQA) becomes ``difficulty``; a missing or empty ``answerKey`` becomes
    ``answer=None``.
    """
    choices = choice_dict(row)
    answer = row.get("answerKey") or None
    hard = row.get("hard")
    if hard is not None and not isinstance(hard, bool):
        raise RowError(f"hard: expected true/false, got {hard!r}")
    difficulty = None if hard is None else ("hard" if hard else "easy")
    return MCItem(
        id=str(require(row, "id")),
        lang=lang,
        question=require(row, "question"),
        question_concept=row.get("question_concept"),
        # dicts, not Choice objects: MCItem validates them in place, so errors read choices.N.field
        choices=choices,
        answer=answer,
        difficulty=difficulty,
        provenance=Provenance(recipe=recipe, source_ids=[str(row["id"])]),
    )


def item_to_csqa_row(item: MCItem) -> dict[str, Any]:
    """An item in the published mCSQA schema (``hard`` only when the difficulty is known)."""
    row: dict[str, Any] = {
        "id": item.id,
        "question": item.question,
        "question_concept": item.question_concept,
        "choices": {"label": [c.label for c in item.choices], "text": [c.text for c in item.choices]},
        "answerKey": item.answer if item.answer is not None else "",
    }
    if item.difficulty is not None:
        row["hard"] = item.difficulty == "hard"
    return row


def jcsqa_row_to_item(row: Mapping[str, Any], lang: str = "ja", *, recipe: str | None = "jcommonsenseqa") -> MCItem:
    """One JCommonsenseQA row as an :class:`MCItem`, choices labelled ``A``–``E``."""
    texts = [require(row, key) for key in _JCSQA_CHOICES]
    label = row.get("label")
    if label is not None and (isinstance(label, bool) or not isinstance(label, int) or not 0 <= label < len(texts)):
        raise RowError(f"label: expected an index 0..{len(texts) - 1}, got {label!r}")
    letters = string.ascii_uppercase[: len(texts)]
    return MCItem(
        id=str(require(row, "q_id")),
        lang=lang,
        question=require(row, "question"),
        choices=[{"label": letter, "text": text} for letter, text in zip(letters, texts, strict=True)],
        answer=None if label is None else letters[label],
        provenance=Provenance(recipe=recipe, source_ids=[str(row["q_id"])]),
    )


def detect_format(row: Mapping[str, Any]) -> Format:
    """Guess a row's format from its keys."""
    if "choices" in row and "question" in row:
        return "csqa"
    if "q_id" in row and "choice0" in row:
        return "jcommonsenseqa"
    raise RowError(f"unknown format: keys {sorted(row)} match neither csqa nor jcommonsenseqa")


def iter_items(
    path: str | os.PathLike[str],
    lang: str,
    fmt: Format | None = None,
    *,
    recipe: str | None = None,
) -> Iterator[MCItem]:
    """Stream :class:`MCItem` records from a JSON Lines file in a known raw format.

    Args:
        path: the file.
        lang: BCP-47 tag of the items.
        fmt: the format, or ``None`` to detect it from the first row.
        recipe: provenance label (defaults to the format name).

    Raises:
        DataValidationError: located at the first bad row.
    """
    adapter: Callable[..., MCItem] | None = None
    for number, row in iter_json_rows(path):
        try:
            if adapter is None:
                fmt = fmt or detect_format(row)
                adapter = csqa_row_to_item if fmt == "csqa" else jcsqa_row_to_item
            yield adapter(row, lang, recipe=recipe or fmt)
        except RowError as exc:
            raise DataValidationError(f"{path}:{number}: {exc}") from exc
        except ValidationError as exc:
            raise DataValidationError(f"{path}:{number}: {format_validation_error(exc)}") from exc


def read_items(
    path: str | os.PathLike[str],
    lang: str,
    fmt: Format | None = None,
    *,
    recipe: str | None = None,
) -> list[MCItem]:
    """Read all items of a raw file (see :func:`iter_items`)."""
    return list(iter_items(path, lang, fmt, recipe=recipe))
