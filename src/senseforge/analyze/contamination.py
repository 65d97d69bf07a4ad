"""Is a dataset new? Its items checked against the contamination registry, and against each other.

For any finished dataset (a run, a released file, anyone's benchmark): each item's matches in the
registry (:mod:`senseforge.registry.check`: exact, normal-form and near copies, cross-lingual
translations), the items it holds twice, and the items one split shares with another (leakage).
A summary counts, per registry entry and kind, the items matched.

Every item's language is said, with where it came from (``lang_from``): its row (or id), ``--lang``
(``flag``), the file's path, ``identified`` by the ``langid`` extra where the file does not say, or
``assumed`` (the format's default) where nothing could tell. The cross-lingual check compares an item only
with registered items in another language; the report counts the items it compared and, when it compared
none, says why.
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
from senseforge.registry.store import LangReport, Registry, Unit, dataset_units, identify_langs


@dataclass
class ItemReport:
    """One item with what it matches."""

    id: str
    split: str | None
    matches: list[Match] = field(default_factory=list)
    lang: str | None = None
    """The language the item was checked in."""
    lang_from: str | None = None
    """Where :attr:`lang` came from: ``row``, ``flag``, ``path``, ``identified``, ``assumed`` or ``none``."""
    repeats: str | None = None
    """The id of an earlier item of the dataset it repeats."""
    repeat_kind: str | None = None
    leak: bool = False
    """It repeats an item of another split."""

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "id": self.id,
            "split": self.split,
            "lang": self.lang,
            "lang_from": self.lang_from,
            "matches": [m.to_json() for m in self.matches],
        }
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
    cross_lingual_compared: int = 0
    """Items the cross-lingual check compared with registered items in another language."""
    cross_lingual_reason: str | None = None
    """Why it compared none (``None`` when it compared some)."""
    languages: LangReport | None = None
    """How the items' languages were settled."""

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
            "cross_lingual_compared": self.cross_lingual_compared,
            "cross_lingual_reason": self.cross_lingual_reason,
            "languages": self.languages.to_json() if self.languages is not None else None,
            "items": len(self.items),
            "copies": self.copies,
            "flagged": self.flagged,
            "self_duplicates": self.repeats,
            "cross_split": self.leaks,
            "by_entry": self.summary(),
            "matched_items": [item.to_json() for item in self.items if item.matches or item.repeats is not None],
            "item_languages": [{"id": i.id, "lang": i.lang, "lang_from": i.lang_from} for i in self.items],
        }

    def rows(self) -> list[dict[str, Any]]:
        """One row per (item, match), and per repeated item, for the CSV."""
        rows: list[dict[str, Any]] = []
        for item in self.items:
            said = {"lang": item.lang, "lang_from": item.lang_from}
            for m in item.matches:
                rows.append({"id": item.id, "split": item.split, **said, **m.to_json()})
            if item.repeats is not None:
                kind = "cross_split" if item.leak else "self_duplicate"
                rows.append({"id": item.id, "split": item.split, **said, "kind": kind, "source_id": item.repeats})
        return rows


def read_units_with_splits(spec: str | os.PathLike[str], *, lang: str | None = None) -> list[tuple[Unit, str | None]]:
    """Every item of the files ``spec`` names (see :mod:`senseforge.analyze.inputs`), with its file's split.

    Each unit says where its language came from (``lang_from``; ``lang`` is given to every file, see
    :func:`~senseforge.data.loaders.load_dataset`).
    """
    parts = split_spec(os.fspath(spec))
    if not parts:
        raise ConfigError("give a file, a folder, or a comma-separated list of them")
    found: list[tuple[Unit, str | None]] = []
    for part in parts:
        for path in data_files(Path(part).expanduser()):
            loaded = load_dataset(path, lang=lang)
            found.extend((unit, loaded.split) for unit in dataset_units(loaded))
    return found


def _no_pair_reason(units: list[Unit], registry_langs: set[str]) -> str:
    said = sorted({u.lang for u in units if u.lang and u.text.strip()})
    if not said:
        return "no item has a language (give --lang)"
    held = ", ".join(sorted(registry_langs)) or "none"
    return f"every item is in the registry's languages ({held}); no cross-lingual pair"


def check_dataset(
    spec: str, registry: Registry, *, cross: bool = True, lang: str | None = None, identify: bool = True
) -> ContaminationReport:
    """Check every item of ``spec`` against ``registry`` and against the dataset's other items.

    Args:
        spec: a run directory, a dataset file or folder, or a comma list of them.
        registry: the registered benchmarks.
        cross: also look for translations (embeds the items compared).
        lang: the items' language where their rows do not say it (a row that says another is an error).
        identify: identify the language of items whose file does not say it (the ``langid`` extra).

    Raises:
        ConfigError: an empty registry, or nothing to read.
    """
    if not registry.entries:
        raise ConfigError(
            f"no benchmark registered in {registry.folder}: add one with `senseforge registry add FILE --name NAME`"
        )
    read = read_units_with_splits(spec, lang=lang)
    units, languages = identify_langs([unit for unit, _ in read], identify=identify)
    pairs = [(unit, split) for unit, (_, split) in zip(units, read, strict=True)]
    checker = Checker(registry, cross=CROSS_THRESHOLD if cross else None)
    compared = checker.cross_comparable(units)
    reason = checker.cross_skipped
    if reason == "not asked for":
        reason = "not asked for (--no-cross-lingual)"
    if reason is None and not compared:
        reason = _no_pair_reason(units, {lang for e in registry.entries for lang in e.langs})
    if compared:
        from senseforge.data.embeddings import e5_model
        from senseforge.errors import MissingDependencyError

        try:
            e5_model()
        except MissingDependencyError as exc:
            reason, compared = f"no embedding model ({exc})", []
            checker.cross = None
    matches = checker.check(units)
    items = [
        ItemReport(unit.id, split, found, lang=unit.lang, lang_from=unit.lang_from)
        for (unit, split), found in zip(pairs, matches, strict=True)
    ]
    for copy in copies_within(units):
        item = items[copy.index]
        item.repeats, item.repeat_kind = units[copy.earlier].id, copy.kind
        item.leak = pairs[copy.index][1] != pairs[copy.earlier][1]
    return ContaminationReport(
        data=spec,
        registry=str(registry.folder),
        registry_hash=registry.content_hash(),
        checked_against=checked_against(registry),
        cross_lingual_checked=bool(compared),
        items=items,
        cross_lingual_compared=len(compared),
        cross_lingual_reason=None if compared else reason,
        languages=languages,
    )
