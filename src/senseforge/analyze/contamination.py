"""Is a dataset new? Its items checked against the contamination registry, and against each other.

For any finished dataset (a run, a released file, anyone's benchmark): each item's matches in the
registry (:mod:`senseforge.registry.check`: exact, normal-form and near copies, cross-lingual
translations), the items it holds twice, and the items one split shares with another (leakage).
A summary counts, per registry entry and kind, the items matched.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from senseforge.analyze.inputs import data_files, split_spec
from senseforge.data.loaders import load_dataset
from senseforge.errors import ConfigError
from senseforge.registry.check import CROSS_THRESHOLD, KINDS, Checker, Match, checked_against, copies_within
from senseforge.registry.store import Registry, Unit, units_of


@dataclass
class ItemReport:
    """One item with what it matches."""

    id: str
    split: str | None
    matches: list[Match] = field(default_factory=list)
    repeats: str | None = None
    """The id of an earlier item of the dataset it repeats."""
    repeat_kind: str | None = None
    leak: bool = False
    """It repeats an item of another split."""

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"id": self.id, "split": self.split, "matches": [m.to_json() for m in self.matches]}
        if self.repeats is not None:
            doc.update(repeats=self.repeats, repeat_kind=self.repeat_kind, leak=self.leak)
        return doc


@dataclass
class ContaminationReport:
    """The check of one dataset: per item, and summed per registry entry and kind."""

    data: str
    registry: str
    registry_hash: str
    checked_against: list[dict[str, Any]]
    cross_lingual_checked: bool
    items: list[ItemReport]

    def summary(self) -> dict[str, dict[str, int]]:
        """Items matched, per entry and kind (an item counted once per entry, under its strongest kind)."""
        counts: dict[str, Counter[str]] = {e["name"]: Counter() for e in self.checked_against}
        for item in self.items:
            strongest: dict[str, str] = {}
            for match in item.matches:  # strongest first
                strongest.setdefault(match.entry, match.kind)
            for entry, kind in strongest.items():
                counts[entry][kind] += 1
        return {entry: {kind: counter.get(kind, 0) for kind in KINDS} for entry, counter in counts.items()}

    @property
    def copies(self) -> int:
        """Items a gate would reject: an exact, normal-form or near copy of a registered item."""
        return sum(1 for item in self.items if any(m.rejects for m in item.matches))

    @property
    def flagged(self) -> int:
        """Items only flagged (a cross-lingual match, no copy)."""
        return sum(1 for item in self.items if item.matches and not any(m.rejects for m in item.matches))

    @property
    def repeats(self) -> int:
        return sum(1 for item in self.items if item.repeats is not None)

    @property
    def leaks(self) -> int:
        return sum(1 for item in self.items if item.leak)

    def to_json(self) -> dict[str, Any]:
        return {
            "data": self.data,
            "registry": self.registry,
            "registry_hash": self.registry_hash,
            "checked_against": self.checked_against,
            "cross_lingual_checked": self.cross_lingual_checked,
            "items": len(self.items),
            "copies": self.copies,
            "flagged": self.flagged,
            "self_duplicates": self.repeats,
            "cross_split": self.leaks,
            "by_entry": self.summary(),
            "matched_items": [item.to_json() for item in self.items if item.matches or item.repeats is not None],
        }

    def rows(self) -> list[dict[str, Any]]:
        """One row per (item, match), and per repeated item, for the CSV."""
        rows: list[dict[str, Any]] = []
        for item in self.items:
            for m in item.matches:
                rows.append({"id": item.id, "split": item.split, **m.to_json()})
            if item.repeats is not None:
                kind = "cross_split" if item.leak else "self_duplicate"
                rows.append({"id": item.id, "split": item.split, "kind": kind, "source_id": item.repeats})
        return rows


def read_units_with_splits(spec: str | os.PathLike[str]) -> list[tuple[Unit, str | None]]:
    """Every item of the files ``spec`` names (see :mod:`senseforge.analyze.inputs`), with its file's split."""
    parts = split_spec(os.fspath(spec))
    if not parts:
        raise ConfigError("give a file, a folder, or a comma-separated list of them")
    found: list[tuple[Unit, str | None]] = []
    for part in parts:
        for path in data_files(Path(part).expanduser()):
            loaded = load_dataset(path)
            found.extend((unit, loaded.split) for unit in units_of(loaded.items, loaded.examples))
    return found


def check_dataset(spec: str, registry: Registry, *, cross: bool = True) -> ContaminationReport:
    """Check every item of ``spec`` against ``registry`` and against the dataset's other items.

    Raises:
        ConfigError: an empty registry, or nothing to read.
    """
    if not registry.entries:
        raise ConfigError(
            f"no benchmark registered in {registry.folder}: add one with `senseforge registry add FILE --name NAME`"
        )
    pairs = read_units_with_splits(spec)
    units = [unit for unit, _ in pairs]
    checker = Checker(registry, cross=CROSS_THRESHOLD if cross else None)
    matches = checker.check(units)
    items = [ItemReport(unit.id, split, found) for (unit, split), found in zip(pairs, matches, strict=True)]
    for copy in copies_within(units):
        item = items[copy.index]
        item.repeats, item.repeat_kind = units[copy.earlier].id, copy.kind
        item.leak = pairs[copy.index][1] != pairs[copy.earlier][1]
    return ContaminationReport(
        data=spec,
        registry=str(registry.folder),
        registry_hash=registry.content_hash(),
        checked_against=checked_against(registry),
        cross_lingual_checked=checker.cross_checked,
        items=items,
    )
