"""Reading raw dataset files and locating their bad rows (shared by the adapters).

Every reader here yields ``(where, row)`` pairs. ``where`` names the row in error
messages: a line number for JSON Lines and CSV (``12``), an index for JSON arrays
(``[3]``), or a key and an index for a JSON object of arrays (``dialogue[0]``). The
adapters turn a bad row into ``file:where: field: problem`` with :func:`convert`.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from pydantic import ValidationError

from senseforge.data.io import format_validation_error, iter_json_rows, json_problem
from senseforge.errors import DataValidationError

T = TypeVar("T")


class RowError(ValueError):
    """A row does not fit its format; the message names the field."""


_SPLIT_ALIASES = {
    "test": "test",
    "val": "validation",
    "valid": "validation",
    "validation": "validation",
    "dev": "validation",
    "train": "train",
}


def located(path: Path, where: str | int, exc: Exception) -> DataValidationError:
    """A :class:`DataValidationError` reading ``file:where: field: problem``."""
    detail = format_validation_error(exc) if isinstance(exc, ValidationError) else str(exc)
    return DataValidationError(f"{path}:{where}: {detail}")


def convert(path: Path, where: str | int, make: Callable[[], T]) -> T:
    """Run one row's adapter; a :class:`RowError` or pydantic error becomes a located error."""
    try:
        return make()
    except (RowError, ValidationError) as exc:
        raise located(path, where, exc) from exc


def require(row: Mapping[str, Any], key: str, prefix: str = "") -> Any:
    """``row[key]``, or a :class:`RowError` naming the missing field (after ``prefix``, e.g. ``targets.0.``)."""
    if key not in row or row[key] is None:
        raise RowError(f"{prefix}{key}: missing")
    return row[key]


def require_str(row: Mapping[str, Any], key: str, *, allow_empty: bool = False) -> str:
    """``row[key]`` as a string (non-empty unless ``allow_empty``)."""
    value = require(row, key)
    if not isinstance(value, str):
        raise RowError(f"{key}: expected a string, got {type(value).__name__}")
    if not allow_empty and not value.strip():
        raise RowError(f"{key}: empty")
    return value


def require_int(value: Any, key: str) -> int:
    """A whole number ``>= 0``; digit strings (CSV cells) are accepted."""
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise RowError(f"{key}: expected a whole number, got {value!r}")
    return value


def require_index(value: Any, key: str, size: int) -> int:
    """An integer index ``0 <= value < size``; digit strings (CSV cells) are accepted."""
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < size:
        raise RowError(f"{key}: expected an index 0..{size - 1}, got {value!r}")
    return value


def choice_dict(row: Mapping[str, Any]) -> list[dict[str, str]]:
    """``choices{label[], text[]}`` (the CommonsenseQA layout) as a list of choice dicts."""
    choices = require(row, "choices")
    if (
        not isinstance(choices, Mapping)
        or not isinstance(choices.get("label"), list)
        or not isinstance(choices.get("text"), list)
    ):
        raise RowError("choices: expected {label: [...], text: [...]}")
    labels, texts = choices["label"], choices["text"]
    if len(labels) != len(texts):
        raise RowError(f"choices: {len(labels)} labels but {len(texts)} texts")
    return [{"label": str(label), "text": text} for label, text in zip(labels, texts, strict=True)]


def not_utf8(path: Path, exc: UnicodeDecodeError) -> DataValidationError:
    """The error for a file that is not UTF-8, located at its first undecodable line and column."""
    try:
        with path.open("rb") as handle:
            for number, raw in enumerate(handle, start=1):
                try:
                    raw.decode("utf-8")
                except UnicodeDecodeError as bad:
                    return DataValidationError(
                        f"{path}:{number}: not UTF-8 (byte {raw[bad.start]:#04x} at column {bad.start + 1}: "
                        f"{bad.reason}); save the file as UTF-8"
                    )
    except OSError:
        pass
    return DataValidationError(f"{path}: not UTF-8 ({exc.reason}); save the file as UTF-8")


def first_char(path: Path) -> str:
    """The first non-blank character of a UTF-8 file (a BOM skipped), ``""`` when empty."""
    try:
        with path.open("r", encoding="utf-8-sig") as handle:
            while chunk := handle.read(4096):
                stripped = chunk.lstrip()
                if stripped:
                    return stripped[0]
    except UnicodeDecodeError as exc:
        raise not_utf8(path, exc) from exc
    except OSError as exc:
        raise DataValidationError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    return ""


def read_json_document(path: Path) -> Any:
    """The whole file parsed as one JSON document, with the position of a syntax error."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise not_utf8(path, exc) from exc
    except OSError as exc:
        raise DataValidationError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataValidationError(f"{path}:{exc.lineno}: invalid JSON at {json_problem(exc)}") from exc


def first_line_object(path: Path) -> dict[str, Any] | None:
    """The first non-blank line parsed as a JSON object, or ``None`` when it is not one.

    Tells JSON Lines (every line an object) from a pretty-printed JSON document.
    """
    try:
        with path.open("r", encoding="utf-8-sig") as handle:
            for line in handle:
                if line.strip():
                    try:
                        row = json.loads(line)
                    except json.JSONDecodeError:
                        return None
                    return row if isinstance(row, dict) else None
    except (OSError, UnicodeDecodeError):
        return None
    return None


def iter_json_array(path: Path, document: Any = None, *, key: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Yield ``("[i]", row)`` for each object of a JSON array (``"key[i]"`` under an object key)."""
    data = read_json_document(path) if document is None else document
    if not isinstance(data, list):
        where = f"{path}:{key}" if key else str(path)
        raise DataValidationError(f"{where}: expected a JSON array of objects, got {type(data).__name__}")
    for index, row in enumerate(data):
        where = f"{key}[{index}]"
        if not isinstance(row, dict):
            raise DataValidationError(f"{path}:{where}: expected a JSON object, got {type(row).__name__}")
        yield where, row


def iter_json_records(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """Rows of a JSON array (located ``[i]``) or of a JSON Lines file (located by line)."""
    if first_char(path) == "[":
        yield from iter_json_array(path)
        return
    for number, row in iter_json_rows(path):
        yield str(number), row


def iter_csv_rows(path: Path, required: Sequence[str]) -> Iterator[tuple[int, dict[str, str]]]:
    """Yield ``(line, row)`` for each data row of a CSV file with a header row.

    ``line`` is the physical line the row starts on (quoted cells may span lines).

    Raises:
        DataValidationError: a required column is missing (``file:1``), or a row has
            more or fewer cells than the header.
    """
    try:
        handle = path.open("r", encoding="utf-8-sig", newline="")
    except OSError as exc:
        raise DataValidationError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    with handle:
        reader = csv.reader(handle)
        try:
            header = next(reader, None)
            if header is None:
                raise DataValidationError(f"{path}:1: empty file: expected a header row")
            missing = [name for name in required if name not in header]
            if missing:
                raise DataValidationError(f"{path}:1: header: missing column(s) {missing}, found {header}")
            start = reader.line_num + 1
            for cells in reader:
                line, start = start, reader.line_num + 1
                if not any(cell.strip() for cell in cells):
                    continue
                if len(cells) != len(header):
                    raise DataValidationError(f"{path}:{line}: row has {len(cells)} cells, header has {len(header)}")
                yield line, dict(zip(header, cells, strict=True))
        except UnicodeDecodeError as exc:
            raise not_utf8(path, exc) from exc
        except csv.Error as exc:
            raise DataValidationError(f"{path}:{reader.line_num}: malformed CSV: {exc}") from exc


def csv_header(path: Path) -> list[str]:
    """The header row of a CSV file (empty when the file is empty)."""
    try:
        with path.open("r", encoding="utf-8-sig", newline="") as handle:
            return next(csv.reader(handle), [])
    except UnicodeDecodeError as exc:
        raise not_utf8(path, exc) from exc
    except (OSError, csv.Error) as exc:
        raise DataValidationError(f"{path}: cannot read a CSV header: {exc}") from exc


def name_tokens(path: Path) -> list[str]:
    """Lower-case words of a file name without its extension: ``val.et.jsonl`` → ``[val, et]``."""
    return [t for t in re.split(r"[._\-\s]+", path.name.lower().removesuffix(path.suffix.lower())) if t]


def split_from_name(path: Path) -> str | None:
    """``test``, ``validation`` or ``train`` when the file name says so, else ``None``."""
    for token in name_tokens(path):
        if token in _SPLIT_ALIASES:
            return _SPLIT_ALIASES[token]
    return None


def normalize_split(split: str) -> str:
    """Canonical split name (``val``/``dev`` → ``validation``); other names pass unchanged."""
    return _SPLIT_ALIASES.get(split.strip().lower(), split.strip())


class UniqueIds:
    """Remembers where each id was seen; a second sighting is a located error."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._seen: dict[str, str] = {}

    def add(self, record_id: str, where: str | int) -> None:
        """Record ``record_id`` at ``where``.

        Raises:
            DataValidationError: the id was already used by an earlier row.
        """
        first = self._seen.setdefault(record_id, str(where))
        if first != str(where):
            raise DataValidationError(f"{self._path}:{where}: id: {record_id!r} repeats the row at {first}")
