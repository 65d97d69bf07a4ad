"""One entry point for every dataset format senseforge reads: :func:`load_dataset`.

``load_dataset(path)`` picks the format from the file (see :data:`FORMATS` for each
format's detection rule), converts every row with that format's adapter and returns a
:class:`LoadedDataset` of :class:`MCItem` (``kind="mc"``) or :class:`BinaryExample`
(``kind="binary"``) records. A bad row stops the load with a located
:class:`~senseforge.errors.DataValidationError`; nothing is dropped silently.

>>> sorted(FORMATS)
['commonmt', 'copal', 'crow', 'crow-shots', 'csqa', 'jcommonsenseqa', 'putri', 'senseforge', 'xcopa']
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Literal

from senseforge.data import _rows
from senseforge.data.adapters import csqa_row_to_item, jcsqa_row_to_item
from senseforge.data.commonmt import COMMONMT_COLUMNS, commonmt_slug, read_commonmt
from senseforge.data.copa import COPAL_COLUMNS, copal_variant, read_copal, read_xcopa, xcopa_lang_from_path
from senseforge.data.crow import read_crow
from senseforge.data.crow_shots import SHOT_TARGET_LISTS, read_crow_shots
from senseforge.data.io import iter_json_rows
from senseforge.data.lang import normalize_tag
from senseforge.data.putri import putri_lang_from_path, putri_subset, read_putri
from senseforge.data.schema import BinaryExample, MCItem
from senseforge.errors import ConfigError, DataValidationError

Kind = Literal["mc", "binary"]
LangFrom = Literal["row", "flag", "path", "format", "none"]
"""Where a record's language came from: a field of its row (or its id), the ``lang`` argument, the file's
path (``xcopa/et/…``, ``…/sun/…``), the format's default (CommonsenseQA's ``en``: an assumption the file does
not state), or nowhere (``none``: no language, e.g. a bilingual pair)."""
_DATA_SUFFIXES = (".json", ".jsonl", ".ndjson", ".csv")


@dataclass
class LoadedDataset:
    """Records read from one file, with what is known about them."""

    name: str
    """Dataset name for reports, e.g. ``commonsenseqa``, ``xcopa-et``, ``crow-dialogue``."""
    fmt: str
    """The format key in :data:`FORMATS`."""
    kind: Kind
    """``mc`` (the records are in :attr:`items`) or ``binary`` (in :attr:`examples`)."""
    items: list[MCItem] = field(default_factory=list)
    """Multiple-choice items (``kind == "mc"``)."""
    examples: list[BinaryExample] = field(default_factory=list)
    """Binary (context, target) examples (``kind == "binary"``)."""
    split: str | None = None
    """``train``/``validation``/``test`` when given or named by the file, else ``None``."""
    path: Path | None = None
    """The file the records came from."""
    lang_from: list[LangFrom] = field(default_factory=list)
    """Per record (in :attr:`items` or :attr:`examples` order), where its ``lang`` came from."""

    def __len__(self) -> int:
        return len(self.items) if self.kind == "mc" else len(self.examples)


Reader = Callable[[Path, str | None, str | None], LoadedDataset]


@dataclass(frozen=True)
class FormatInfo:
    """What a format is, how it is recognised, and its reader."""

    kinds: tuple[Kind, ...]
    """Record kinds the format yields (``senseforge`` files hold either)."""
    description: str
    """The source and its layout, in one line."""
    detection: str
    """The rule :func:`detect_format` applies."""
    read: Reader
    """``read(path, lang, split)``."""


def _mc(name: str, fmt: str, items: list[MCItem], split: str | None, path: Path) -> LoadedDataset:
    return LoadedDataset(name=name, fmt=fmt, kind="mc", items=items, split=split, path=path)


def _binary(name: str, fmt: str, examples: list[BinaryExample], split: str | None, path: Path) -> LoadedDataset:
    return LoadedDataset(name=name, fmt=fmt, kind="binary", examples=examples, split=split, path=path)


def _read_senseforge(path: Path, lang: str | None, split: str | None) -> LoadedDataset:
    first = _rows.first_line_object(path) or {}
    binary = "context_id" in first
    records: list[Any] = []
    for number, row in iter_json_rows(path):
        record: MCItem | BinaryExample
        if binary:
            record = _rows.convert(path, number, partial(BinaryExample.model_validate, row))
        else:
            record = _rows.convert(path, number, partial(MCItem.model_validate, row))
        if lang is not None and record.lang != lang:
            raise DataValidationError(f"{path}:{number}: lang: is {record.lang!r}, but lang={lang!r} was asked for")
        records.append(record)
    if binary:
        return _binary(path.stem, "senseforge", records, split, path)
    return _mc(path.stem, "senseforge", records, split, path)


def _with_split(items: list[MCItem], split: str | None) -> list[MCItem]:
    if split is not None:
        for item in items:
            item.metadata.setdefault("split", split)
    return items


def row_lang(row: Mapping[str, Any]) -> str | None:
    """A raw row's own language field (``lang``), normalised; ``None`` when the row has none.

    Raises:
        RowError: the field is there but is not a language tag.
    """
    value = row.get("lang")
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise _rows.RowError(f"lang: expected a language tag, got {value!r}")
    try:
        return normalize_tag(value)
    except ValueError as exc:
        raise _rows.RowError(f"lang: {exc}") from exc


def _read_raw_mc(
    path: Path, lang: str | None, fmt: Literal["csqa", "jcommonsenseqa"], default: str
) -> tuple[list[MCItem], list[LangFrom]]:
    """The items of a CommonsenseQA- or JCommonsenseQA-format file, each in its row's ``lang`` when it has one
    (one that contradicts ``lang`` is a located error), else in ``lang``, else in the format's ``default``."""
    adapter = csqa_row_to_item if fmt == "csqa" else jcsqa_row_to_item
    items: list[MCItem] = []
    origins: list[LangFrom] = []

    def convert(row: Mapping[str, Any]) -> tuple[MCItem, LangFrom]:
        own = row_lang(row)
        if own is not None and lang is not None and own != lang:
            raise _rows.RowError(f"lang: is {own!r}, but lang={lang!r} was asked for")
        origin: LangFrom = "row" if own is not None else "flag" if lang is not None else "format"
        return adapter(row, own or lang or default, recipe=fmt), origin

    for number, row in iter_json_rows(path):
        item, origin = _rows.convert(path, number, partial(convert, row))
        items.append(item)
        origins.append(origin)
    return items, origins


def _one_lang(items: list[MCItem], lang: str | None, default: str) -> str:
    langs = {item.lang for item in items}
    return lang or (langs.pop() if len(langs) == 1 else default)


def _read_csqa(path: Path, lang: str | None, split: str | None) -> LoadedDataset:
    items, origins = _read_raw_mc(path, lang, "csqa", "en")
    tag = _one_lang(items, lang, "en")
    name = "commonsenseqa" if tag == "en" else f"csqa-{tag}"
    loaded = _mc(name, "csqa", _with_split(items, split), split, path)
    loaded.lang_from = origins
    return loaded


def _read_jcsqa(path: Path, lang: str | None, split: str | None) -> LoadedDataset:
    items, origins = _read_raw_mc(path, lang, "jcommonsenseqa", "ja")
    loaded = _mc("jcommonsenseqa", "jcommonsenseqa", _with_split(items, split), split, path)
    loaded.lang_from = origins
    return loaded


def _read_putri(path: Path, lang: str | None, split: str | None) -> LoadedDataset:
    items = read_putri(path, lang, split=split)
    langs = "-".join(sorted({item.lang for item in items})) or lang or putri_lang_from_path(path) or "id"
    subsets = {str(item.metadata["subset"]) for item in items if item.metadata.get("subset")}
    if not items:
        subsets = {putri_subset(path, "") or ""} - {""}
    subset = f"{subsets.pop().replace('_', '-')}-" if len(subsets) == 1 else ""
    return _mc(f"id-csqa-{subset}{langs}", "putri", items, split, path)


def _read_xcopa(path: Path, lang: str | None, split: str | None) -> LoadedDataset:
    tag = lang or xcopa_lang_from_path(path)
    if tag is None:
        raise ConfigError(f"{path}: cannot tell the XCOPA language from the path; pass lang= (e.g. lang='et')")
    return _mc(f"xcopa-{tag}", "xcopa", read_xcopa(path, tag, split=split), split, path)


def _read_copal(path: Path, lang: str | None, split: str | None) -> LoadedDataset:
    variant = copal_variant(path)
    name = "copal-id" if variant == "standard" else f"copal-id-{variant}"
    return _mc(name, "copal", read_copal(path, lang or "id", split=split), split, path)


def _read_commonmt(path: Path, lang: str | None, split: str | None) -> LoadedDataset:
    return _binary(f"commonmt-{commonmt_slug(path)}", "commonmt", read_commonmt(path, lang, split=split), split, path)


def _crow_name(prefix: str, examples: list[BinaryExample]) -> str:
    tasks = sorted({example.task for example in examples})
    return f"{prefix}-{tasks[0]}" if len(tasks) == 1 else prefix


def _read_crow(path: Path, lang: str | None, split: str | None) -> LoadedDataset:
    examples = read_crow(path, lang)
    return _binary(_crow_name("crow", examples), "crow", examples, split, path)


def _read_crow_shots(path: Path, lang: str | None, split: str | None) -> LoadedDataset:
    examples = read_crow_shots(path, lang)
    return _binary(_crow_name("crow-shots", examples), "crow-shots", examples, split, path)


FORMATS: dict[str, FormatInfo] = {
    "senseforge": FormatInfo(
        ("mc", "binary"),
        "senseforge's own JSON Lines of MCItem or BinaryExample records (senseforge.data.io)",
        ".jsonl whose first row has `lang` and a list of `choices` (MCItem) or `context_id` and `target` (binary)",
        _read_senseforge,
    ),
    "csqa": FormatInfo(
        ("mc",),
        "CommonsenseQA / mCSQA flat schema: id, question, question_concept, choices{label,text}, answerKey",
        "JSON Lines whose first row has `question` and an object `choices`; lang from a row's `lang`, else en",
        _read_csqa,
    ),
    "jcommonsenseqa": FormatInfo(
        ("mc",),
        "JGLUE JCommonsenseQA: q_id, question, choice0..choice4, label",
        "JSON Lines (even when named .json) whose first row has `q_id` and `choice0`; lang from a row's `lang`, "
        "else ja",
        _read_jcsqa,
    ),
    "putri": FormatInfo(
        ("mc",),
        "Putri et al.'s Indonesian/Sundanese culturally relevant QA (id-csqa), JSON arrays",
        "first row has `answer_creator`; lang from an ind/sun folder (id/su) or the row id",
        _read_putri,
    ),
    "xcopa": FormatInfo(
        ("mc",),
        "XCOPA: premise, choice1, choice2, question (cause|effect), label, idx",
        "JSON Lines whose first row has `premise`, `choice1`, `choice2`; lang from xcopa/<lang>/ or *.<lang>.jsonl",
        _read_xcopa,
    ),
    "copal": FormatInfo(
        ("mc",),
        "COPAL-ID (Indonesian COPA, standard or colloquial): CSV with COPA columns and knowledge flags",
        ".csv whose header has premise, choice1, choice2, question, idx, label",
        _read_copal,
    ),
    "commonmt": FormatInfo(
        ("binary",),
        "CommonMT zh→en test suite: chinese_source, english_target_correct, english_target_wrong",
        ".csv whose header has chinese_source, english_target_correct, english_target_wrong",
        _read_commonmt,
    ),
    "crow": FormatInfo(
        ("binary",),
        "CRoW released form: task, example_id, a context field, a target field, label, knowledge",
        "JSON Lines or a JSON array whose first row has `task` and `example_id`",
        _read_crow,
    ),
    "crow-shots": FormatInfo(
        ("binary",),
        "CRoW internal per-task form ({task: [entries]}, as crow/shot_samples.json): data_id, context, targets",
        "an object of task lists, or rows with `data_id` and a target list (final_turns, summaries, …)",
        _read_crow_shots,
    ),
}
"""Every format :func:`load_dataset` reads, by key."""


def _format_list() -> str:
    return ", ".join(FORMATS)  # the keys a user types; the module they are defined in is no help to them


def detect_row_format(row: Mapping[str, Any]) -> str | None:
    """The format a first row (or a whole JSON object) belongs to, or ``None``."""
    keys = set(row)
    if {"task", "example_id"} <= keys:
        return "crow"
    if "context_id" in keys and "target" in keys and "label" in keys:
        return "senseforge"
    if "lang" in keys and isinstance(row.get("choices"), list):
        return "senseforge"
    if "answer_creator" in keys:
        return "putri"
    if {"premise", "choice1", "choice2"} <= keys:
        return "xcopa"
    if {"q_id", "choice0"} <= keys:
        return "jcommonsenseqa"
    if "question" in keys and isinstance(row.get("choices"), Mapping):
        return "csqa"
    if "data_id" in keys and keys & set(SHOT_TARGET_LISTS):
        return "crow-shots"
    if row and all(isinstance(value, list) for value in row.values()):
        first = next((v[0] for v in row.values() if v and isinstance(v[0], Mapping)), None)
        if first is not None and detect_row_format(first) == "crow-shots":
            return "crow-shots"
    return None


def _first_json_row(path: Path) -> Mapping[str, Any] | None:
    start = _rows.first_char(path)
    if start == "[":
        document = _rows.read_json_document(path)
        return document[0] if isinstance(document, list) and document and isinstance(document[0], dict) else None
    if start != "{":
        return None
    line = _rows.first_line_object(path)
    if line is not None:
        return line
    document = _rows.read_json_document(path)
    return document if isinstance(document, dict) else None


def detect_format(path: str | os.PathLike[str]) -> str:
    """The format key of a file, from its extension and its first row's keys.

    Raises:
        ConfigError: no format matches; the message lists the formats.
    """
    where = Path(path)
    found: str | None = None
    if where.suffix.lower() == ".csv":
        header = set(_rows.csv_header(where))
        if set(COMMONMT_COLUMNS) <= header:
            found = "commonmt"
        elif set(COPAL_COLUMNS) <= header:
            found = "copal"
    elif where.suffix.lower() in (".json", ".jsonl", ".ndjson"):
        row = _first_json_row(where)
        found = detect_row_format(row) if row is not None else None
    if found is None:
        if where.is_file() and where.stat().st_size == 0:
            raise ConfigError(f"{where}: the file is empty")
        raise ConfigError(
            f"{where}: cannot tell the dataset format from its first row; name it (--format, or a recipe's "
            f"format setting) as one of: {_format_list()}"
        )
    return found


def _resolve(path: Path, split: str | None) -> Path:
    """A data file; in a folder, the one file whose name matches ``split``."""
    if not path.is_dir():
        if not path.exists():
            raise ConfigError(f"{path}: no such file")
        return path
    files = sorted(p for p in path.iterdir() if p.is_file() and p.suffix.lower() in _DATA_SUFFIXES)
    if split is not None:
        files = [p for p in files if _rows.split_from_name(p) == split]
    if len(files) != 1:
        names = [p.name for p in files] or "none"
        wanted = f" for split {split!r}" if split else ""
        raise ConfigError(f"{path}: expected one data file{wanted} in the folder, found {names}; pass a file or split=")
    return files[0]


def load_dataset(
    path: str | os.PathLike[str],
    fmt: str | None = None,
    *,
    lang: str | None = None,
    split: str | None = None,
) -> LoadedDataset:
    """Read a dataset file in any format of :data:`FORMATS` into records.

    Args:
        path: the file, or a folder holding one data file per split (then ``split``
            picks the file, e.g. ``xcopa/et`` with ``split="validation"``).
        fmt: a key of :data:`FORMATS`; ``None`` detects it (:func:`detect_format`).
        lang: BCP-47 tag of the records, overriding what the format or path implies
            (for ``senseforge`` files, and rows of CommonsenseQA or JCommonsenseQA files that
            carry a ``lang`` field, it is a check: every such record must have it).
            :attr:`LoadedDataset.lang_from` says, per record, where its language came from.
        split: ``train``, ``validation`` (or ``val``/``dev``) or ``test``; recorded on
            the dataset and in the metadata of records converted from a raw format;
            ``None`` takes it from the file name when the name says one.

    Raises:
        ConfigError: unknown ``fmt``, a malformed ``lang``, an undetectable format, or a
            ``split`` that contradicts the file name.
        DataValidationError: located at the first bad row.
    """
    if fmt is not None and fmt not in FORMATS:
        raise ConfigError(f"unknown dataset format {fmt!r}; known formats: {_format_list()}")
    tag: str | None = None
    if lang is not None:
        try:
            tag = normalize_tag(lang)
        except ValueError as exc:
            raise ConfigError(str(exc)) from exc
    wanted = _rows.normalize_split(split) if split is not None else None
    where = _resolve(Path(path), wanted)
    named = _rows.split_from_name(where)
    if wanted is not None and named is not None and named != wanted:
        raise ConfigError(f"{where}: the file name says split {named!r}, but split={split!r} was asked for")
    key = fmt or detect_format(where)
    loaded = FORMATS[key].read(where, tag, wanted or named)
    if not loaded.lang_from:
        loaded.lang_from = _lang_origins(loaded, tag)
    return loaded


_FORMAT_LANG_FROM: dict[str, LangFrom] = {"senseforge": "row", "xcopa": "path", "putri": "row"}
"""Where a format's records get their language when ``lang`` is not given (else: the format's default)."""


def _lang_origins(loaded: LoadedDataset, tag: str | None) -> list[LangFrom]:
    """Where each record's language came from, for the formats whose readers do not say."""
    given: LangFrom = _FORMAT_LANG_FROM.get(loaded.fmt, "format")
    if loaded.fmt == "senseforge":
        tag = None  # the rows carry it; lang= only checks it
    elif loaded.fmt == "putri" and loaded.path is not None and putri_lang_from_path(loaded.path):
        given = "path"
    records: list[MCItem] | list[BinaryExample] = loaded.items if loaded.kind == "mc" else loaded.examples
    return [("none" if record.lang is None else "flag" if tag is not None else given) for record in records]
