"""Concept tables: the (category, concept[, lang]) rows that culture-gen writes from and human-gen hands out.

The table is CSV (a header row with ``category`` and ``concept``, optionally ``lang``) or
JSON Lines / a JSON array of objects with the same keys. A row without ``lang`` belongs
to every language of the run.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from senseforge.data._rows import RowError, convert, first_char, iter_csv_rows, iter_json_records
from senseforge.data.lang import normalize_tag
from senseforge.errors import DataValidationError

CATEGORIES: tuple[str, ...] = ("culinary", "place", "culture", "history", "activity")
"""Putri et al.'s five categories (others are allowed, and reported as they are)."""
EXAMPLE_TABLE = "concepts.csv"
"""Our bundled example table (Indonesian and Sundanese, written by us)."""


@dataclass(frozen=True)
class Concept:
    """One row of the table."""

    category: str
    concept: str
    lang: str | None = None


def example_table() -> Path:
    """The path of the bundled example table."""
    return Path(str(resources.files("senseforge.data").joinpath("lexicon", EXAMPLE_TABLE)))


def _concept(row: dict[str, object]) -> Concept:
    values: dict[str, str | None] = {}
    for key in ("category", "concept", "lang"):
        value = row.get(key)
        if value is None or (isinstance(value, str) and not value.strip()):
            if key == "lang":
                values[key] = None
                continue
            raise RowError(f"{key}: missing")
        if not isinstance(value, str):
            raise RowError(f"{key}: expected text, got {type(value).__name__}")
        values[key] = " ".join(value.split())
    lang = values["lang"]
    try:
        tag = normalize_tag(lang) if lang else None
    except ValueError as exc:
        raise RowError(f"lang: {exc}") from exc
    return Concept(category=str(values["category"]).lower(), concept=str(values["concept"]), lang=tag)


def read_concepts(path: Path) -> list[Concept]:
    """The rows of a concept table, in order.

    Raises:
        DataValidationError: located at the first bad row (``file:line: field: problem``).
    """
    if not path.is_file():
        raise DataValidationError(f"{path}: no such concept table")
    if path.suffix.lower() == ".csv" or first_char(path) not in "[{":
        rows: list[tuple[str | int, dict[str, object]]] = [
            (line, dict(row)) for line, row in iter_csv_rows(path, ("category", "concept"))
        ]
    else:
        rows = [(where, row) for where, row in iter_json_records(path)]
    out = [convert(path, where, lambda row=row: _concept(row)) for where, row in rows]  # type: ignore[misc]
    if not out:
        raise DataValidationError(f"{path}: the concept table has no rows")
    return out
