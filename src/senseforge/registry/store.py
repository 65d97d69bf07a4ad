"""The registry folder: one fingerprint file per registered benchmark and ``registry.json`` naming them.

A registered benchmark keeps, per item, its source id and language and what
:mod:`senseforge.registry.fingerprint` makes of its text — the exact and normal keys of the item's
text and of its gold answer, a MinHash signature, and a float16 sentence embedding — and nothing from
which the text can be read back: a benchmark whose licence forbids redistribution can be registered
locally. ``registry.json`` records each entry's source, licence, languages, item count and the
SHA-256 of its fingerprint file, and the MinHash settings; a registry made under other settings is
refused on load (its signatures would compare silently wrong).

An item's *text* is the question of a multiple-choice item, the context of a binary example (once
per context), and its *answer* the gold choice's text (none for binary examples).

Every file is replaced atomically; ``registry.json`` last.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Final

import numpy as np

from senseforge.data.io import atomic_open
from senseforge.data.loaders import LoadedDataset, load_dataset
from senseforge.data.schema import BinaryExample, MCItem
from senseforge.errors import ConfigError, DataValidationError, StoreError
from senseforge.registry.fingerprint import SETTINGS, MinHashSettings, exact_key, normal_key, numbers_key, signatures
from senseforge.store.db import senseforge_home, sha256_file

REGISTRY_FILE: Final = "registry.json"
FORMAT: Final = 1
_DATA_SUFFIXES: Final = (".json", ".jsonl", ".ndjson", ".csv")
_NAME_OK: Final = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-_.")


def default_registry_dir() -> Path:
    """``SENSEFORGE_REGISTRY``, else ``$SENSEFORGE_HOME/registry``."""
    env = os.environ.get("SENSEFORGE_REGISTRY")
    return Path(env).expanduser() if env else senseforge_home() / "registry"


@dataclass(frozen=True)
class Unit:
    """What is fingerprinted of one item: its id, language, text and gold answer."""

    id: str
    lang: str | None
    text: str
    answer: str | None = None
    lang_from: str | None = None
    """Where :attr:`lang` came from: a :data:`~senseforge.data.loaders.LangFrom` of the file read, then
    ``identified`` (by :func:`identify_langs`) or ``assumed`` (the format's default, nothing said otherwise);
    ``None`` when not tracked."""


def embedded_text(unit: Unit) -> str:
    """What is embedded of an item: its text, then its gold answer (a translation keeps both)."""
    return f"{unit.text} {unit.answer}" if unit.answer else unit.text


def units_of(items: Sequence[MCItem], examples: Sequence[BinaryExample] = ()) -> list[Unit]:
    """The units of multiple-choice items (question, gold answer) and binary examples (each context once)."""
    out: list[Unit] = []
    for item in items:
        gold = next((c.text for c in item.choices if c.label == item.answer), None)
        out.append(Unit(item.id, item.lang, item.question, gold))
    seen: set[str] = set()
    for example in examples:
        if example.context_id not in seen:
            seen.add(example.context_id)
            out.append(Unit(example.context_id, example.lang, example.context))
    return out


def dataset_units(dataset: LoadedDataset) -> list[Unit]:
    """:func:`units_of` a loaded file, each unit saying where its language came from (``lang_from``)."""
    origins = dataset.lang_from
    records = len(dataset.items) + len(dataset.examples)
    if len(origins) != records:  # a reader that does not say: nothing claimed
        origins = ["none"] * records
    units = [
        replace(unit, lang_from=origin)
        for unit, origin in zip(units_of(dataset.items), origins[: len(dataset.items)], strict=True)
    ]
    seen: set[str] = set()
    for example, origin in zip(dataset.examples, origins[len(dataset.items) :], strict=True):
        if example.context_id not in seen:
            seen.add(example.context_id)
            units.append(Unit(example.context_id, example.lang, example.context, lang_from=origin))
    return units


@dataclass(frozen=True)
class LangReport:
    """How the units' languages were settled (:func:`identify_langs`)."""

    counts: dict[str, dict[str, int]]
    """Units per language (``unknown`` for none) and per ``lang_from``."""
    note: str | None = None
    """What could not be done and what was assumed instead (identification unavailable), else ``None``."""

    def to_json(self) -> dict[str, Any]:
        return {"by_lang": self.counts, "note": self.note}


def identify_langs(units: Sequence[Unit], *, identify: bool = True) -> tuple[list[Unit], LangReport]:
    """Units whose language the file did not state (``lang_from`` ``format`` or ``none``), identified.

    Each such unit's text (with its gold answer) goes to the ``langid`` extra's identifier, the units read as
    one set (:func:`senseforge.data.langid.detect_set`): a language found is kept (``identified``); where it
    cannot tell,
    or ``identify`` is false, or the extra is not installed, a format's default stays (``assumed``) and a unit
    without one stays without (``none``). A row's field, a ``lang`` given, or the file's path are kept as they
    are.
    """
    missing: str | None = None
    unsaid = [i for i, u in enumerate(units) if u.lang_from in ("format", "none")]
    identified: dict[int, str | None] = {}
    if identify and unsaid:
        from senseforge.data.langid import detect_set
        from senseforge.errors import MissingDependencyError

        try:
            identified = dict(zip(unsaid, detect_set([embedded_text(units[i]) for i in unsaid]), strict=True))
        except MissingDependencyError as exc:
            missing = str(exc)
    out: list[Unit] = []
    for index, unit in enumerate(units):
        if unit.lang_from in ("format", "none"):
            found = identified.get(index)
            if found is not None:
                unit = replace(unit, lang=found, lang_from="identified")
            elif unit.lang_from == "format":
                unit = replace(unit, lang_from="assumed")
        out.append(unit)
    counts: dict[str, dict[str, int]] = {}
    for unit in out:
        per = counts.setdefault(unit.lang or "unknown", {})
        per[unit.lang_from or "none"] = per.get(unit.lang_from or "none", 0) + 1
    assumed = sorted({u.lang for u in out if u.lang_from == "assumed" and u.lang})
    note = None
    if missing is not None and assumed:
        note = (
            f"language identification is not available ({missing}); "
            f"{sum(1 for u in out if u.lang_from == 'assumed'):,} item(s) whose file does not say their language "
            f"are assumed to be in {', '.join(assumed)} (their format's default): give --lang if they are not"
        )
    elif not identify and assumed:
        note = f"items whose file does not say their language are assumed to be in {', '.join(assumed)}"
    return out, LangReport({lang: dict(sorted(per.items())) for lang, per in sorted(counts.items())}, note)


@dataclass
class Entry:
    """One registered benchmark, as ``registry.json`` lists it."""

    name: str
    source: str
    """The file or folder it was read from (as given)."""
    formats: list[str]
    langs: list[str]
    items: int
    licence: str | None
    added_at: str
    sha256: str
    """Of its fingerprint file."""
    embedding: str | None
    """The embedding model, or ``None`` when added without embeddings."""

    @property
    def file(self) -> str:
        return f"{self.name}.npz"


@dataclass
class Fingerprints:
    """One entry's fingerprints, a row per item."""

    ids: np.ndarray
    langs: np.ndarray
    exact: np.ndarray
    normal: np.ndarray
    answer: np.ndarray
    """The gold answer's normal key (0: none)."""
    numbers: np.ndarray
    """A key of the numbers written in the text (0: none), for the cross-lingual verifier."""
    minhash: np.ndarray
    embedding: np.ndarray
    """float16 ``[items, dim]``; ``[items, 0]`` without embeddings."""

    def __len__(self) -> int:
        return int(self.ids.shape[0])

    def to_bytes(self) -> bytes:
        buffer = io.BytesIO()
        np.savez(buffer, **{name: getattr(self, name) for name in _ARRAYS})
        return buffer.getvalue()


_ARRAYS: Final = ("ids", "langs", "exact", "normal", "answer", "numbers", "minhash", "embedding")


def fingerprint(units: Sequence[Unit], *, embed: bool = True, settings: MinHashSettings = SETTINGS) -> Fingerprints:
    """The fingerprints of ``units`` (embeddings with :func:`senseforge.data.embeddings.embed_passages`)."""
    if embed:
        from senseforge.data.embeddings import embed_passages

        vectors = embed_passages([embedded_text(u) for u in units]).astype(np.float16)
    else:
        vectors = np.zeros((len(units), 0), dtype=np.float16)
    return Fingerprints(
        ids=np.array([u.id for u in units], dtype=str),
        langs=np.array([u.lang or "" for u in units], dtype=str),
        exact=np.array([exact_key(u.text) for u in units], dtype=np.uint64),
        normal=np.array([normal_key(u.text) for u in units], dtype=np.uint64),
        answer=np.array([normal_key(u.answer) if u.answer else 0 for u in units], dtype=np.uint64),
        numbers=np.array([numbers_key(u.text) for u in units], dtype=np.uint64),
        minhash=signatures([u.text for u in units], settings).reshape(len(units), settings.num_perm),
        embedding=vectors,
    )


def read_units(path: Path, *, fmt: str | None = None, lang: str | None = None) -> tuple[list[Unit], list[str]]:
    """The units of a dataset file, or of every data file below a folder (in path order), and the formats read.

    Raises:
        ConfigError: no such path, or no data file in the folder.
        DataValidationError: a bad row (located), or two items with one id.
    """
    if not path.exists():
        raise ConfigError(f"{path}: no such file or folder")
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.suffix.lower() in _DATA_SUFFIXES)
    if not files:
        raise ConfigError(f"{path}: no data file (.json, .jsonl, .csv) in the folder")
    units: list[Unit] = []
    formats: list[str] = []
    for file in files:
        dataset: LoadedDataset = load_dataset(file, fmt, lang=lang)
        formats.append(dataset.fmt)
        units.extend(dataset_units(dataset))
    seen: set[str] = set()
    for unit in units:
        if unit.id in seen:
            raise DataValidationError(f"{path}: item id {unit.id!r} appears twice; register the files separately")
        seen.add(unit.id)
    return units, list(dict.fromkeys(formats))


@dataclass
class Registry:
    """The registry in ``folder`` (see the module's doc)."""

    folder: Path
    entries: list[Entry] = field(default_factory=list)
    settings: MinHashSettings = SETTINGS
    last_languages: LangReport | None = None
    """How the languages of the last benchmark added were settled."""

    @classmethod
    def open(cls, folder: Path | None = None) -> Registry:
        """The registry in ``folder`` (default :func:`default_registry_dir`); an empty one when none is there.

        Raises:
            StoreError: an unreadable ``registry.json``, one of another format, or made with other MinHash settings.
        """
        folder = (folder or default_registry_dir()).expanduser()
        pointer = folder / REGISTRY_FILE
        if not pointer.is_file():
            return cls(folder)
        try:
            payload = json.loads(pointer.read_text(encoding="utf-8"))
            entries = [Entry(**raw) for raw in payload["entries"]]
            stored = payload["minhash"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise StoreError(f"{pointer} is unreadable ({exc})") from exc
        if payload.get("format") != FORMAT:
            raise StoreError(f"{pointer}: registry format {payload.get('format')!r}, this version reads {FORMAT}")
        if stored != SETTINGS.to_json():
            raise StoreError(
                f"{pointer}: its signatures were made with other MinHash settings ({stored}; this version uses "
                f"{SETTINGS.to_json()}); they would compare wrong: register its benchmarks again in a new folder"
            )
        return cls(folder, entries)

    @property
    def exists(self) -> bool:
        return bool(self.entries)

    def entry(self, name: str) -> Entry:
        for entry in self.entries:
            if entry.name == name:
                return entry
        known = ", ".join(e.name for e in self.entries) or "none"
        raise ConfigError(f"no registry entry {name!r} in {self.folder} (entries: {known})")

    def add(
        self,
        path: Path,
        name: str,
        *,
        fmt: str | None = None,
        lang: str | None = None,
        licence: str | None = None,
        embed: bool = True,
        replace: bool = False,
        identify: bool = True,
    ) -> Entry:
        """Register the benchmark at ``path`` (any format ``eval run`` reads, or a folder of them) as ``name``.

        Items whose file does not say their language, and ``lang`` is not given, are identified
        (:func:`identify_langs`; ``identify=False`` keeps their format's default); how is kept in
        :attr:`last_languages`.

        Raises:
            ConfigError: a bad name, a name taken (without ``replace``), nothing to read.
            DataValidationError: a bad row, or no item.
        """
        if not name or set(name) - _NAME_OK:
            raise ConfigError(f"registry name {name!r}: use lower-case letters, digits, '-', '_' and '.'")
        if not replace and any(e.name == name for e in self.entries):
            raise ConfigError(f"{name!r} is registered already; `registry remove {name}` first, or --replace")
        units, formats = read_units(path, fmt=fmt, lang=lang)
        if not units:
            raise DataValidationError(f"{path}: no item to register")
        units, self.last_languages = identify_langs(units, identify=identify)
        prints = fingerprint(units, embed=embed)
        self.folder.mkdir(parents=True, exist_ok=True)
        with atomic_open(self.folder / f"{name}.npz", "wb") as handle:
            handle.write(prints.to_bytes())
        from senseforge.data.embeddings import E5_NAME

        entry = Entry(
            name=name,
            source=str(path),
            formats=formats,
            langs=sorted({u.lang for u in units if u.lang}),
            items=len(units),
            licence=licence,
            added_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            sha256=sha256_file(self.folder / f"{name}.npz"),
            embedding=E5_NAME if embed else None,
        )
        self.entries = [e for e in self.entries if e.name != name] + [entry]
        self._write()
        return entry

    def remove(self, name: str) -> Entry:
        """Drop an entry and its fingerprint file.

        Raises:
            ConfigError: no such entry.
        """
        entry = self.entry(name)
        self.entries = [e for e in self.entries if e.name != name]
        self._write()
        (self.folder / entry.file).unlink(missing_ok=True)
        return entry

    def fingerprints(self, entry: Entry) -> Fingerprints:
        """An entry's fingerprints, checked against the SHA-256 recorded for them.

        Raises:
            StoreError: the file is missing or changed since it was registered.
        """
        path = self.folder / entry.file
        if not path.is_file() or sha256_file(path) != entry.sha256:
            raise StoreError(f"{path} is missing or changed since it was registered; register {entry.name!r} again")
        with np.load(path, allow_pickle=False) as data:
            return Fingerprints(**{name: data[name] for name in _ARRAYS})

    def content_hash(self) -> str:
        """SHA-256 of what the checks read: the settings and every entry's name, licence and fingerprints."""
        what = {
            "minhash": self.settings.to_json(),
            "entries": sorted((e.name, e.licence, e.sha256, e.embedding) for e in self.entries),
        }
        return hashlib.sha256(json.dumps(what, sort_keys=True).encode("utf-8")).hexdigest()

    def _write(self) -> None:
        payload = {
            "format": FORMAT,
            "minhash": self.settings.to_json(),
            "entries": [asdict(e) for e in self.entries],
        }
        with atomic_open(self.folder / REGISTRY_FILE) as handle:
            handle.write(json.dumps(payload, ensure_ascii=False, indent=1) + "\n")


def describe(entry: Entry) -> dict[str, Any]:
    """An entry as ``registry list --json`` prints it."""
    return asdict(entry)
