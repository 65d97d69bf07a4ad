"""COPA-style cause/effect items: XCOPA and COPAL-ID, as two-choice :class:`MCItem` records.

A COPA row gives a premise, two alternatives and whether the question asks for the
premise's ``cause`` or its ``effect``. It becomes an item whose question is the premise,
whose choices are ``A`` (``choice1``) and ``B`` (``choice2``), and whose
``metadata["copa_question"]`` says ``cause`` or ``effect`` (prompts pick the connector
word for the item's language from :mod:`senseforge.data.literals`).

Formats:
    * ``xcopa`` — GitHub ``cambridgeltl/xcopa``, ``data/<lang>/{val,test}.<lang>.jsonl``:
      ``premise, choice1, choice2, question, label (0|1), idx[, changed]``. The language
      comes from the ``<lang>`` folder or the ``.<lang>.`` part of the file name.
    * ``copal`` — GitHub ``haryoa/COPAL-ID``, ``data/v1/test_copal{,_colloquial}.csv``:
      the same columns plus ``Terminology, Culture, Language`` (0/1 flags for the kind of
      local knowledge needed). Indonesian; the standard and colloquial (Jakartan) versions
      are parallel, the file name says which (``metadata["variant"]``).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import Any

from senseforge.data._rows import (
    RowError,
    UniqueIds,
    convert,
    iter_csv_rows,
    iter_json_records,
    name_tokens,
    require_index,
    require_int,
    require_str,
)
from senseforge.data.schema import MCItem, Provenance

COPA_QUESTIONS: tuple[str, ...] = ("cause", "effect")
"""What a COPA question asks for."""

XCOPA_LANGS: tuple[str, ...] = ("et", "ht", "id", "it", "qu", "sw", "ta", "th", "tr", "vi", "zh")
"""The eleven XCOPA languages (their folder names are BCP-47 tags already)."""

COPAL_COLUMNS: tuple[str, ...] = ("premise", "choice1", "choice2", "question", "idx", "label")
"""Columns a COPAL-ID CSV must have."""

COPAL_FLAGS: tuple[str, ...] = ("Terminology", "Culture", "Language")
"""COPAL-ID's 0/1 columns for the kind of local knowledge an item needs."""

_XCOPA_KEYS = ("premise", "choice1", "choice2", "question", "label", "idx")


def copa_row_to_item(
    row: Mapping[str, Any],
    *,
    item_id: str,
    lang: str,
    recipe: str,
    metadata: Mapping[str, Any],
) -> MCItem:
    """The part shared by every COPA variant: premise, two choices, label, cause/effect.

    Raises:
        RowError: a field is missing or malformed (the message names it).
    """
    question = require_str(row, "question").strip().lower()
    if question not in COPA_QUESTIONS:
        raise RowError(f"question: expected 'cause' or 'effect', got {row['question']!r}")
    label = require_index(row.get("label"), "label", 2)
    return MCItem(
        id=item_id,
        lang=lang,
        question=require_str(row, "premise"),
        choices=[
            {"label": "A", "text": require_str(row, "choice1")},
            {"label": "B", "text": require_str(row, "choice2")},
        ],
        answer="AB"[label],
        provenance=Provenance(recipe=recipe, source_ids=[item_id]),
        metadata={"copa_question": question, **metadata},
    )


def xcopa_lang_from_path(path: Path) -> str | None:
    """The XCOPA language of a file: its ``.<lang>.`` name part or its ``<lang>`` folder."""
    for token in name_tokens(path):
        if token in XCOPA_LANGS:
            return token
    parent = path.parent.name.lower()
    return parent if parent in XCOPA_LANGS else None


def xcopa_row_to_item(row: Mapping[str, Any], lang: str, *, prefix: str, split: str | None = None) -> MCItem:
    """One XCOPA row as an item with id ``<prefix>-<idx>``; other fields go to ``metadata``."""
    idx = require_int(row.get("idx"), "idx")
    metadata: dict[str, Any] = {key: value for key, value in row.items() if key not in _XCOPA_KEYS}
    metadata["idx"] = idx
    if split is not None:
        metadata["split"] = split
    return copa_row_to_item(row, item_id=f"{prefix}-{idx}", lang=lang, recipe="xcopa", metadata=metadata)


def read_xcopa(path: str | Path, lang: str, *, split: str | None = None) -> list[MCItem]:
    """Read an XCOPA JSON Lines file.

    Args:
        path: e.g. ``xcopa/et/val.et.jsonl``.
        lang: BCP-47 tag of the items (see :func:`xcopa_lang_from_path`).
        split: ``validation``/``test``; part of the ids (``xcopa-et-validation-0``) since
            the two splits reuse the same ``idx`` values.

    Raises:
        DataValidationError: located at the first bad row (``file:line: field: problem``).
    """
    where_file = Path(path)
    prefix = "-".join(["xcopa", lang, *([split] if split else [])])
    seen = UniqueIds(where_file)
    items: list[MCItem] = []
    for where, row in iter_json_records(where_file):
        item = convert(where_file, where, partial(xcopa_row_to_item, row, lang, prefix=prefix, split=split))
        seen.add(item.id, where)
        items.append(item)
    return items


def copal_variant(path: Path) -> str:
    """``colloquial`` when the file name says so, else ``standard``."""
    return "colloquial" if "colloquial" in name_tokens(path) else "standard"


def _flag(row: Mapping[str, str], column: str) -> bool:
    value = row[column].strip()
    if value not in ("0", "1"):
        raise RowError(f"{column}: expected 0 or 1, got {row[column]!r}")
    return value == "1"


def copal_row_to_item(
    row: Mapping[str, str],
    *,
    variant: str,
    lang: str = "id",
    split: str | None = None,
) -> MCItem:
    """One COPAL-ID CSV row as an item with id ``copal-id-<variant>-<idx>``.

    The ``Terminology``, ``Culture`` and ``Language`` flags become booleans under their
    lower-case names in ``metadata``; columns this adapter does not know are kept as text.
    """
    idx = require_int(row.get("idx"), "idx")
    metadata: dict[str, Any] = {"variant": variant, "idx": idx}
    for column in COPAL_FLAGS:
        if column in row:
            metadata[column.lower()] = _flag(row, column)
    known = {*COPAL_COLUMNS, *COPAL_FLAGS}
    metadata.update({key: value for key, value in row.items() if key not in known})
    if split is not None:
        metadata["split"] = split
    return copa_row_to_item(row, item_id=f"copal-id-{variant}-{idx}", lang=lang, recipe="copal-id", metadata=metadata)


def read_copal(path: str | Path, lang: str = "id", *, split: str | None = None) -> list[MCItem]:
    """Read a COPAL-ID CSV file (standard or colloquial, told apart by the file name).

    Raises:
        DataValidationError: located at the first bad row (``file:line: field: problem``).
    """
    where_file = Path(path)
    variant = copal_variant(where_file)
    seen = UniqueIds(where_file)
    items: list[MCItem] = []
    for line, row in iter_csv_rows(where_file, COPAL_COLUMNS):
        item = convert(where_file, line, partial(copal_row_to_item, row, variant=variant, lang=lang, split=split))
        seen.add(item.id, line)
        items.append(item)
    return items
