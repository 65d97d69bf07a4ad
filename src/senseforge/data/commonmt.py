"""CommonMT: Chinese→English commonsense translation pairs as CRoW-style binary examples.

The test suite (GitHub ``tjunlp-lab/CommonMT``, folder ``commonMT test suite/``) has one
CSV file per kind of ambiguity — ``lexical ambiguity.csv``, ``contextless syntactic
ambiguity.csv``, ``contextual syntactic ambiguity.csv`` — with the columns
``chinese_source, english_target_correct, english_target_wrong``. It is the source of
CRoW's zh-en task.

Each row is one context (the Chinese sentence) with two targets: the correct translation
(label ``True``) and the wrong one (``False``). Both examples share the context id
``commonmt-<file slug>-<row number>`` and carry the task ``mt-zh-en``, no knowledge, and
the file, ambiguity type and line in ``metadata``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import Any

from senseforge.data._rows import convert, iter_csv_rows, require_str
from senseforge.data.schema import BinaryExample

COMMONMT_COLUMNS: tuple[str, ...] = ("chinese_source", "english_target_correct", "english_target_wrong")
"""Columns every CommonMT CSV has."""

COMMONMT_TASK = "mt-zh-en"
"""CRoW's task name for Chinese→English translation."""


def commonmt_slug(path: Path) -> str:
    """A file's stem as an id part: ``lexical ambiguity.csv`` → ``lexical-ambiguity``."""
    return re.sub(r"[^a-z0-9]+", "-", path.stem.lower()).strip("-") or "commonmt"


def commonmt_row_to_examples(
    row: Mapping[str, str],
    *,
    context_id: str,
    metadata: Mapping[str, Any],
    lang: str | None = None,
) -> list[BinaryExample]:
    """The two examples (correct, then wrong translation) of one CommonMT row.

    Raises:
        RowError: a cell is empty (the message names its column).
    """
    source = require_str(row, "chinese_source")
    extra = {key: value for key, value in row.items() if key not in COMMONMT_COLUMNS}
    examples = []
    pairs = (("english_target_correct", "correct", True), ("english_target_wrong", "wrong", False))
    for column, suffix, label in pairs:
        examples.append(
            BinaryExample(
                id=f"{context_id}-{suffix}",
                context_id=context_id,
                context=source,
                target=require_str(row, column),
                label=label,
                task=COMMONMT_TASK,
                lang=lang,
                metadata={**metadata, **extra, "source_lang": "zh", "target_lang": "en"},
            )
        )
    return examples


def read_commonmt(path: str | Path, lang: str | None = None, *, split: str | None = None) -> list[BinaryExample]:
    """Read one CommonMT CSV file as binary examples (two per row).

    Args:
        path: e.g. ``commonMT test suite/lexical ambiguity.csv``.
        lang: language tag for the examples; ``None`` (the default) because the pair is
            bilingual — ``metadata`` says ``source_lang: zh``, ``target_lang: en``.
        split: recorded in ``metadata`` when given.

    Raises:
        DataValidationError: located at the first bad row (``file:line: field: problem``).
    """
    where_file = Path(path)
    slug = commonmt_slug(where_file)
    examples: list[BinaryExample] = []
    for number, (line, row) in enumerate(iter_csv_rows(where_file, COMMONMT_COLUMNS), start=1):
        metadata: dict[str, Any] = {"source_file": where_file.name, "ambiguity": where_file.stem, "line": line}
        if split is not None:
            metadata["split"] = split
        context_id = f"commonmt-{slug}-{number}"
        make = partial(commonmt_row_to_examples, row, context_id=context_id, metadata=metadata, lang=lang)
        examples.extend(convert(where_file, line, make))
    return examples
