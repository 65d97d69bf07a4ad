"""The shared layer of the exports (:mod:`senseforge.data.export`): splits in, rows out, one folder at a time.

Splits are read and checked here (:func:`read_splits`), turned into the one export row shape
(:data:`COLUMNS`, :func:`item_to_row`), and written into a folder atomically
(:func:`atomic_dir`). The optional packages an export needs are imported through
:func:`require`.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from senseforge.data.adapters import item_to_csqa_row, iter_items
from senseforge.data.io import iter_json_rows, read_jsonl
from senseforge.data.lang import normalize_tag
from senseforge.data.schema import MCItem
from senseforge.errors import ConfigError, DataValidationError, MissingDependencyError

Splits = Mapping[str, Sequence[MCItem]]
"""Split name (``train``, ``validation``, ``test`` …) → items."""

SplitsLike = Splits | str | os.PathLike[str]
"""Splits, or a folder of split files (see :func:`read_splits`)."""

SPLIT_FILES = ("train", "validation", "dev", "test")
"""Split files :func:`read_splits` looks for (``{name}.jsonl``); ``dev`` is read as ``validation``."""

COLUMNS = ("id", "question", "question_concept", "choices", "answerKey", "hard", "lang", "difficulty", "category")
"""Columns of every export, in order: the published mCSQA schema, then ``lang, difficulty, category``."""

_SPLIT_NAME = re.compile(r"^\w+(\.\w+)*$")


# --------------------------------------------------------------------------- reading


def read_splits(folder: str | os.PathLike[str], *, lang: str | None = None) -> dict[str, list[MCItem]]:
    """Read the split files of a folder: ``train``, ``validation`` (or ``dev``) and ``test`` ``.jsonl``.

    Each file holds either our :class:`MCItem` records (choices as a list of objects) or rows
    of the flat mCSQA/CommonsenseQA schema (choices as ``{label: [...], text: [...]}``), which
    need ``lang``. ``dev.jsonl`` is returned as the ``validation`` split.

    Args:
        folder: the folder.
        lang: BCP-47 tag of flat-schema rows (MCItem records carry their own language).

    Raises:
        DataValidationError: no split file, an empty file, or a bad row (``file:line: field: problem``).
        ConfigError: flat rows without ``lang``, or both ``validation.jsonl`` and ``dev.jsonl``.
    """
    where = Path(folder)
    if not where.is_dir():
        raise DataValidationError(f"{where}: not a folder (expected a folder of split .jsonl files)")
    found = {name: where / f"{name}.jsonl" for name in SPLIT_FILES if (where / f"{name}.jsonl").is_file()}
    if not found:
        others = sorted(p.name for p in where.glob("*.jsonl"))
        seen = f"; found {', '.join(others)}" if others else ""
        raise DataValidationError(
            f"{where}: no split files (expected train.jsonl, validation.jsonl or dev.jsonl, test.jsonl){seen}"
        )
    if "validation" in found and "dev" in found:
        raise ConfigError(f"{where}: both validation.jsonl and dev.jsonl; keep one (dev is read as validation)")
    splits: dict[str, list[MCItem]] = {}
    for name, path in found.items():
        items = _read_split_file(path, lang)
        if not items:
            raise DataValidationError(f"{path}: no items (remove the file or fill it)")
        splits["validation" if name == "dev" else name] = items
    _check(splits)
    return splits


def _read_split_file(path: Path, lang: str | None) -> list[MCItem]:
    first = next(iter_json_rows(path), None)
    if first is None:
        return []
    _, row = first
    if isinstance(row.get("choices"), list):
        return read_jsonl(path, MCItem)
    if lang is None:
        raise ConfigError(f"{path}: rows in the flat mCSQA/CSQA schema need their language: pass --lang (lang=...)")
    try:
        tag = normalize_tag(lang)
    except ValueError as exc:
        raise ConfigError(f"--lang: {exc}") from exc
    return list(iter_items(path, tag))


def resolve_splits(splits: SplitsLike, lang: str | None = None) -> dict[str, list[MCItem]]:
    """The splits of an export, read from a folder (:func:`read_splits`) or copied and checked."""
    if isinstance(splits, str | os.PathLike):
        return read_splits(splits, lang=lang)
    resolved = {name: list(items) for name, items in splits.items()}
    _check(resolved)
    return resolved


def _check(splits: Mapping[str, Sequence[MCItem]]) -> None:
    """Split names usable as file and HF split names, no empty split, no id in two places."""
    if not splits:
        raise DataValidationError("no splits to export")
    seen: dict[str, str] = {}
    for name, items in splits.items():
        if not _SPLIT_NAME.match(name):
            raise ConfigError(f"split name {name!r}: use letters, digits and underscores (e.g. train, validation)")
        if not items:
            raise DataValidationError(f"split {name!r}: no items")
        for index, item in enumerate(items):
            if not isinstance(item, MCItem):
                raise DataValidationError(
                    f"split {name!r}, item {index}: expected an MCItem, got {type(item).__name__}"
                )
            if item.id in seen:
                where = "twice in" if seen[item.id] == name else f"in both {seen[item.id]!r} and"
                raise DataValidationError(f"item id {item.id!r} appears {where} split {name!r} (ids must be unique)")
            seen[item.id] = name


# --------------------------------------------------------------------------- rows


def item_to_row(item: MCItem) -> dict[str, Any]:
    """One item as an export row (:data:`COLUMNS`): the published mCSQA schema plus lang, difficulty, category."""
    row = item_to_csqa_row(item)
    extra = {"hard": row.get("hard"), "lang": item.lang, "difficulty": item.difficulty, "category": item.category}
    return {column: row[column] if column in row else extra[column] for column in COLUMNS}


def require(module: str, package: str) -> Any:
    """Import an optional module an export needs, or say which package to install."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingDependencyError(
            f"exporting needs {package}: pip install -c constraints.txt {package} ({exc})"
        ) from exc


# --------------------------------------------------------------------------- atomic folders


@contextlib.contextmanager
def atomic_dir(out_dir: Path, *, overwrite: bool) -> Iterator[Path]:
    """Yield a temporary sibling of ``out_dir`` to fill; on success it replaces ``out_dir``."""
    if out_dir.exists():
        if not out_dir.is_dir():
            raise ConfigError(f"{out_dir}: exists and is not a folder")
        if any(out_dir.iterdir()) and not overwrite:
            raise ConfigError(f"{out_dir}: folder is not empty; choose another --out or pass --overwrite")
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_dir.with_name(f".{out_dir.name}.{secrets.token_hex(4)}.tmp")
    tmp.mkdir()
    try:
        yield tmp
        if out_dir.exists():
            old = out_dir.with_name(f".{out_dir.name}.{secrets.token_hex(4)}.old")
            os.rename(out_dir, old)
            os.rename(tmp, out_dir)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def write_text(path: Path, text: str) -> None:
    """Write UTF-8 text with ``\\n`` line endings on every platform."""
    path.write_text(text, encoding="utf-8", newline="\n")
