"""JSON Lines, the canonical on-disk form of records, and atomic writes.

Files are written atomically (a temporary file in the same folder, then a rename), so
an interrupted write leaves either the old file or the new one, never half of it.
Reading reports the first bad row as ``file:line: field: problem``.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any, TypeVar

from pydantic import BaseModel, ValidationError

from senseforge.data.schema import JUDGEMENT, Judgement
from senseforge.errors import DataValidationError

R = TypeVar("R", bound=BaseModel)


_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)


def _new_sibling(dest: Path) -> tuple[int, Path]:
    """A new, empty hidden file beside ``dest``, open for writing: ``(descriptor, path)``.

    It gets the permissions a plain ``open()`` gives a new file (``0o666`` less the umask,
    so ``0o644`` under the usual umask), not the owner-only ``0o600`` of
    :func:`tempfile.mkstemp`: the file it becomes must be readable by whoever shares the folder.
    """
    for _ in range(100):
        tmp = dest.with_name(f".{dest.name}.{secrets.token_hex(4)}.tmp")
        try:
            return os.open(tmp, _CREATE, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"{dest.parent}: no free name for a temporary file beside {dest.name}")


_JSON_PROBLEMS = (
    ("Expecting value", "a value was expected here (a string, number, object, array, true, false or null)"),
    ("Expecting ',' delimiter", "a comma or a closing bracket was expected here"),
    ("Expecting ':' delimiter", "a colon after the key was expected here"),
    ("Expecting property name", "a key in double quotes was expected here (a comma ends no object)"),
    ("Illegal trailing comma", "a comma before the closing bracket (JSON allows none)"),
    ("Unterminated string", "a string starts here and is never closed"),
    ("Invalid \\escape", "a backslash escape JSON does not know, inside a string"),
    ("Invalid \\uXXXX escape", "a \\u escape without four hex digits, inside a string"),
    ("Extra data", "more text after the JSON value ends"),
)
"""The parser's messages (their first words), each in our words."""

_CONTROL_NAMES = {"\t": "a tab", "\n": "a line break", "\r": "a carriage return"}


def json_problem(exc: json.JSONDecodeError) -> str:
    """Where and what a JSON syntax error is, in words: ``column 32: a tab inside a string …``.

    The column counts characters from 1 on the error's line; the line itself is for the
    caller to name (a file's line, or a record's).

    >>> import json
    >>> try:
    ...     json.loads('{"q": "a' + chr(9) + 'b"}')
    ... except json.JSONDecodeError as exc:
    ...     print(json_problem(exc))
    column 9: a tab (U+0009) inside a string: write it escaped, as \\t
    """
    if exc.msg.startswith("Invalid control character"):
        char = exc.doc[exc.pos : exc.pos + 1]
        if char:
            name = _CONTROL_NAMES.get(char, "a control character")
            problem = f"{name} (U+{ord(char):04X}) inside a string: write it escaped, as {json.dumps(char)[1:-1]}"
        else:
            problem = "a control character inside a string: write it escaped"
    else:
        problem = next(
            (words for start, words in _JSON_PROBLEMS if exc.msg.startswith(start)),
            exc.msg.removesuffix(" at").lower(),
        )
    return f"column {exc.colno}: {problem}"


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike[str], mode: str = "w") -> Iterator[IO[Any]]:
    """Open ``path`` for writing so that it appears complete or not at all.

    Args:
        path: destination file; its folder is created when missing.
        mode: ``"w"`` (UTF-8 text) or ``"wb"``.
    """
    if mode not in ("w", "wb"):
        raise ValueError("atomic_open supports 'w' and 'wb' only")
    dest = Path(path)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _new_sibling(dest)
    try:
        encoding = None if "b" in mode else "utf-8"
        newline = None if "b" in mode else "\n"
        with os.fdopen(fd, mode, encoding=encoding, newline=newline) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, dest)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def dump_record(record: BaseModel) -> str:
    """One record as a single JSON line (no trailing newline)."""
    return record.model_dump_json()


def write_jsonl(path: str | os.PathLike[str], records: Iterable[BaseModel]) -> int:
    """Write records one per line, atomically. Returns how many were written."""
    count = 0
    with atomic_open(path) as handle:
        for record in records:
            handle.write(dump_record(record))
            handle.write("\n")
            count += 1
    return count


def iter_json_rows(path: str | os.PathLike[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line_number, row)`` for each non-blank line of a JSON Lines file.

    Raises:
        DataValidationError: on a line that is not UTF-8, not JSON, or not an object.
    """
    where = Path(path)
    try:
        handle = where.open("rb")
    except OSError as exc:
        raise DataValidationError(f"{where}: cannot read: {exc.strerror or exc}") from exc
    with handle:
        for number, raw in enumerate(handle, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise DataValidationError(f"{where}:{number}: not UTF-8 ({exc.reason})") from exc
            if not line.strip():
                continue
            try:
                row = json.loads(line.rstrip("\r\n"))  # a string left open ends with its line, not at a line break
            except json.JSONDecodeError as exc:
                raise DataValidationError(f"{where}:{number}: invalid JSON at {json_problem(exc)}") from exc
            if not isinstance(row, dict):
                raise DataValidationError(f"{where}:{number}: expected a JSON object, got {type(row).__name__}")
            yield number, row


def format_validation_error(exc: ValidationError) -> str:
    """The first problem of a pydantic error as ``field: message``."""
    first = exc.errors()[0]
    field = ".".join(str(part) for part in first["loc"]) or "(record)"
    extra = f" ({exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"{field}: {first['msg']}{extra}"


def read_jsonl(path: str | os.PathLike[str], model: type[R]) -> list[R]:
    """Read a JSON Lines file of ``model`` records.

    Raises:
        DataValidationError: located at the first bad row (``file:line: field: problem``).
    """
    return list(iter_jsonl(path, model))


def read_judgements(path: str | os.PathLike[str]) -> list[Judgement]:
    """Read a JSON Lines file of judgements, each validated as the body its ``task`` names.

    Raises:
        DataValidationError: located at the first bad row (``file:line: field: problem``).
    """
    out: list[Judgement] = []
    for number, row in iter_json_rows(path):
        try:
            out.append(JUDGEMENT.validate_python(row))
        except ValidationError as exc:
            raise DataValidationError(f"{path}:{number}: {format_validation_error(exc)}") from exc
    return out


def iter_jsonl(path: str | os.PathLike[str], model: type[R]) -> Iterator[R]:
    """Stream records of ``model`` from a JSON Lines file (see :func:`read_jsonl`)."""
    for number, row in iter_json_rows(path):
        try:
            yield model.model_validate(row)
        except ValidationError as exc:
            raise DataValidationError(f"{path}:{number}: {format_validation_error(exc)}") from exc
