"""What an analysis reads: a file, a folder, or a comma-separated list of them, pooled into one side.

* a file: any dataset ``senseforge eval`` reads (senseforge JSONL, Putri et al.'s JSON
  arrays, CommonsenseQA, mCSQA …; see :func:`senseforge.data.loaders.load_dataset`);
* a run directory (it holds ``manifest.json``): the dataset files it wrote, per language
  (``dataset/*.jsonl`` and ``<lang>/dataset/*.jsonl``);
* any other folder: every ``.json`` / ``.jsonl`` data file below it, in path order.

Inputs are only read (a read-only folder is fine). Multiple-choice items are pooled; binary
examples are kept apart for the analyses that take them.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from senseforge.data.loaders import load_dataset
from senseforge.data.schema import BinaryExample, MCItem
from senseforge.errors import ConfigError

DATA_SUFFIXES = (".json", ".jsonl")
MANIFEST = "manifest.json"


@dataclass
class Side:
    """One side of an analysis: the records of every file it names, pooled."""

    spec: str
    """What was asked for (a path or a comma-separated list)."""
    items: list[MCItem] = field(default_factory=list)
    examples: list[BinaryExample] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)
    """The data files read, in order."""

    @property
    def name(self) -> str:
        """A short label for tables: the file or folder names."""
        return ",".join(Path(part).name or part for part in split_spec(self.spec))

    @property
    def langs(self) -> list[str]:
        """The languages of the items, in first-seen order."""
        return list(dict.fromkeys(item.lang for item in self.items))


def split_spec(spec: str) -> list[str]:
    """The paths of a comma-separated spec (blank parts dropped)."""
    return [part.strip() for part in spec.split(",") if part.strip()]


def data_files(path: Path) -> list[Path]:
    """The data files a path stands for (see the module docstring).

    Raises:
        ConfigError: no such path, or a folder with no data file.
    """
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise ConfigError(f"{path}: no such file or folder")
    if (path / MANIFEST).is_file():
        found = sorted([*path.glob("dataset/*.jsonl"), *path.glob("*/dataset/*.jsonl")])
    else:
        found = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in DATA_SUFFIXES)
        found = [p for p in found if p.name != MANIFEST and not p.name.startswith(("funnel", "cost", "ledger"))]
    if not found:
        raise ConfigError(f"{path}: no dataset files in this folder")
    return found


def read_side(spec: str | os.PathLike[str], *, lang: str | None = None) -> Side:
    """Every record of the files ``spec`` names, pooled.

    Raises:
        ConfigError: an empty spec, a missing path, a folder without data.
        DataValidationError: a malformed file (located).
    """
    text = os.fspath(spec)
    parts = split_spec(text)
    if not parts:
        raise ConfigError("give a file, a folder, or a comma-separated list of them")
    side = Side(text)
    for part in parts:
        for path in data_files(Path(part).expanduser()):
            loaded = load_dataset(path, lang=lang)
            side.items += loaded.items
            side.examples += loaded.examples
            side.files.append(path)
    return side


def read_sides(specs: Sequence[str], *, lang: str | None = None) -> list[Side]:
    """:func:`read_side` of each spec."""
    return [read_side(spec, lang=lang) for spec in specs]
