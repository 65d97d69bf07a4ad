"""Putri et al.'s culturally relevant Indonesian and Sundanese commonsense QA.

The release (GitHub ``rifkiaputri/id-csqa``, folder ``dataset/``) holds three subsets,
each a JSON array of questions per language::

    llm_adapt/{ind,sun}/filtered_{validation,test}.json   CommonsenseQA adapted by an LLM
    llm_gen/{ind,sun}/filtered_test{,_clean}.json         written by an LLM from concepts
    human_gen/{ind,sun}/filtered_test.json                written by people, answered by five more

A row has ``id, question, question_concept, choices{label[], text[]}, answer_creator``
and, depending on the subset, ``category`` and the annotation of five answerers
(``answer_majority``, ``answers``, ``answers_uncertainty``, ``question_ambiguity``,
``option_ambiguity``, ``reason``, each keyed by annotator).

The creator's answer is the item's answer. Every source field except ``id``,
``question`` and ``choices`` is kept unchanged in ``metadata`` (annotations included);
``category`` also becomes :attr:`MCItem.category`. The data is CC BY-NC 4.0: read it,
never ship it.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import Any

from senseforge.data._rows import RowError, UniqueIds, choice_dict, convert, iter_json_records, require_str
from senseforge.data.lang import normalize_tag
from senseforge.data.schema import MCItem, Provenance

PUTRI_LANGS: dict[str, str] = {"ind": "id", "sun": "su"}
"""The release's folder names and the BCP-47 tags they stand for."""

PUTRI_SUBSETS: tuple[str, ...] = ("llm_adapt", "llm_gen", "human_gen")
"""The three ways the questions were made."""

_ID_PREFIXES = {"adapt_": "llm_adapt", "orig_m_": "llm_gen", "orig_h_": "human_gen", "gen_": "llm_gen"}
_ID_LANGS = {"_ind_": "id", "_sun_": "su"}
_NOT_METADATA = ("id", "question", "choices")


def putri_lang_from_path(path: Path) -> str | None:
    """The language named by a folder of the path (``…/ind/…`` → ``id``), if any."""
    for part in reversed(path.parts[:-1]):
        if part.lower() in PUTRI_LANGS:
            return PUTRI_LANGS[part.lower()]
    return None


def putri_subset(path: Path | None, item_id: str) -> str | None:
    """The subset of a row: from a folder of its path, else from its id prefix."""
    if path is not None:
        for part in reversed(path.parts[:-1]):
            if part.lower() in PUTRI_SUBSETS:
                return part.lower()
    for prefix, subset in _ID_PREFIXES.items():
        if item_id.startswith(prefix):
            return subset
    return None


def _lang_from_id(item_id: str) -> str | None:
    for marker, lang in _ID_LANGS.items():
        if marker in item_id:
            return lang
    return None


def _row_lang(row: Mapping[str, Any]) -> str | None:
    value = row.get("lang")
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise RowError(f"lang: expected a language tag, got {value!r}")
    try:
        return normalize_tag(value)
    except ValueError as exc:
        raise RowError(f"lang: {exc}") from exc


def _check_annotations(row: Mapping[str, Any], labels: list[str]) -> None:
    majority = row.get("answer_majority")
    if majority is not None and majority not in labels:
        raise RowError(f"answer_majority: {majority!r} is not one of the choice labels {labels}")
    for key in ("answers", "answers_uncertainty", "question_ambiguity", "option_ambiguity", "reason"):
        if key in row and not isinstance(row[key], Mapping):
            raise RowError(f"{key}: expected an object keyed by annotator, got {type(row[key]).__name__}")


def putri_row_to_item(
    row: Mapping[str, Any],
    lang: str | None = None,
    *,
    subset: str | None = None,
    split: str | None = None,
) -> MCItem:
    """One row of Putri et al.'s release as an :class:`MCItem`.

    Args:
        row: the JSON object.
        lang: BCP-47 tag; ``None`` reads it from the row's ``lang`` when it has one (senseforge's
            culture-gen output), else from the id (``…_ind_…`` → ``id``, ``…_sun_…`` → ``su``).
        subset: ``llm_adapt``, ``llm_gen`` or ``human_gen``; ``None`` reads it from the id prefix.
        split: recorded in ``metadata["split"]`` when given.

    Raises:
        RowError: a field is missing or malformed (the message names it).
    """
    item_id = require_str(row, "id")
    choices = choice_dict(row)
    labels = [c["label"] for c in choices]
    answer = require_str(row, "answer_creator")
    if answer not in labels:
        raise RowError(f"answer_creator: {answer!r} is not one of the choice labels {labels}")
    _check_annotations(row, labels)
    tag = lang or _row_lang(row) or _lang_from_id(item_id)
    if tag is None:
        raise RowError(f"id: cannot tell the language of {item_id!r}; pass lang= ('id' or 'su')")
    subset = subset or putri_subset(None, item_id)
    category = row.get("category")
    if category is not None and not isinstance(category, str):
        raise RowError(f"category: expected a string, got {type(category).__name__}")
    metadata: dict[str, Any] = {key: value for key, value in row.items() if key not in _NOT_METADATA}
    metadata.setdefault("subset", subset)
    if split is not None:
        metadata.setdefault("split", split)
    return MCItem(
        id=item_id,
        lang=tag,
        question=require_str(row, "question"),
        question_concept=row.get("question_concept"),
        # dicts, not Choice objects: MCItem validates them in place, so errors read choices.N.field
        choices=choices,
        answer=answer,
        category=category,
        provenance=Provenance(
            recipe="id-csqa",
            source_ids=[item_id],
            review="human" if subset == "human_gen" else None,
        ),
        metadata=metadata,
    )


def read_putri(path: str | Path, lang: str | None = None, *, split: str | None = None) -> list[MCItem]:
    """Read one file of Putri et al.'s release (a JSON array; JSON Lines also works).

    Args:
        path: the file, e.g. ``human_gen/sun/filtered_test.json``.
        lang: BCP-47 tag; ``None`` takes it from an ``ind``/``sun`` folder of the path or
            else from each row's id.
        split: recorded in each item's metadata.

    Raises:
        DataValidationError: located at the first bad row (``file:[index]: field: problem``).
    """
    where_file = Path(path)
    tag = lang or putri_lang_from_path(where_file)
    subset = putri_subset(where_file, "")
    seen = UniqueIds(where_file)
    items: list[MCItem] = []
    for where, row in iter_json_records(where_file):
        item = convert(where_file, where, partial(putri_row_to_item, row, tag, subset=subset, split=split))
        seen.add(item.id, where)
        items.append(item)
    return items
