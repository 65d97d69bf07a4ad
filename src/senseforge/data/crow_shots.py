"""CRoW's internal per-task form (``format="crow-shots"``), as :class:`BinaryExample` records.

CRoW's evaluation scripts keep, per task, one object per context with its list of
targets; the few-shot examples of those scripts (``SHOT_SAMPLES``) are in this form, and
``crow/shot_samples.json`` collects them as ``{task: [entry, …]}``. An entry has
``data_id`` (the context), a context field, a list of targets each with a ``label`` and
``knowledge`` triples, and ``type`` (the prompt the shot was written for):

==============  ===============  ==================  =====================================
task            context field    target list         a target's text and label
==============  ===============  ==================  =====================================
dialogue        ``dialogue``     ``final_turns``     ``text``; ``label`` 0/1
summarization   ``dialogue``     ``summaries``       ``text``; ``label`` 0/1
intent          ``headline``     ``intents``         ``text``; ``label`` 0/1
safety          ``scenario``     ``actions``         ``text``; ``label`` safe/unsafe
stance          ``belief``       ``instances``       ``argument`` (and its own ``belief``);
                                                     ``stance`` support/counter
translation     ``source``       ``targets``         ``text``; ``label`` 0/1; knowledge on
                                                     the entry; ``source_lang``/``target_lang``
==============  ===============  ==================  =====================================

The task comes from the target list's key (and the object key, when there is one);
translation becomes ``mt-<source_lang>-<target_lang>``. Context id: ``<task>/<data_id>``;
example id: ``<task>/<data_id>/<target id>``, where a target without ``id`` is named
``<data_id>-<label>`` as CRoW's translation script does. The same target repeated for
several prompt types is one example: its ``metadata["shot_types"]`` lists the types and
``metadata["rationales"]`` maps each type to that shot's worked answer. A repeat that
differs in context, target, label or knowledge is an error.

Files may be the ``{task: [entries]}`` object (rows located as ``task[index]``), a JSON
array of entries (``[index]``) or JSON Lines (line numbers).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from functools import partial
from pathlib import Path
from typing import Any

from senseforge.data._rows import (
    RowError,
    convert,
    first_char,
    first_line_object,
    iter_json_array,
    read_json_document,
    require,
    require_str,
)
from senseforge.data.crow import (
    context_key,
    knowledge_triples,
    mt_languages,
    normalize_task,
    parse_label,
    task_family,
    text_of,
)
from senseforge.data.io import iter_json_rows
from senseforge.data.schema import BinaryExample
from senseforge.errors import DataValidationError

SHOT_TARGET_LISTS: dict[str, str] = {
    "final_turns": "dialogue",
    "summaries": "summarization",
    "intents": "intent",
    "actions": "safety",
    "instances": "stance",
    "targets": "mt",
}
"""Key of an entry's target list → the task family it implies."""

_CONTEXT_FIELD = {
    "dialogue": "dialogue",
    "summarization": "dialogue",
    "intent": "headline",
    "safety": "scenario",
    "stance": "belief",
    "mt": "source",
}
_STANCE_ORIGINAL = ("belief", "argument", "stance")


def _entry_task(entry: Mapping[str, Any], hint: str | None) -> tuple[str, str]:
    lists = [key for key in SHOT_TARGET_LISTS if key in entry]
    if len(lists) != 1:
        found = lists or "none"
        raise RowError(f"targets: expected exactly one target list of {list(SHOT_TARGET_LISTS)}, found {found}")
    family = SHOT_TARGET_LISTS[lists[0]]
    if family == "mt":
        task = f"mt-{require_str(entry, 'source_lang').lower()}-{require_str(entry, 'target_lang').lower()}"
    else:
        task = family
    if hint is not None and hint != "translation" and task_family(normalize_task(hint, "task")) != family:
        raise RowError(f"{lists[0]}: a {family} entry filed under the task {hint!r}")
    return lists[0], task


def _target_parts(entry: Mapping[str, Any], target: Mapping[str, Any], family: str, where: str) -> tuple[str, str, Any]:
    """Context text, target text and raw label of one target."""
    if family == "stance":
        context = text_of(target.get("belief", entry.get("belief")), f"{where}.belief")
        text = text_of(target.get("argument", entry.get("argument")), f"{where}.argument")
        raw_label = target["label"] if target.get("label") is not None else require(target, "stance", f"{where}.")
        return context, text, raw_label
    context = text_of(require(entry, _CONTEXT_FIELD[family]), _CONTEXT_FIELD[family])
    return context, text_of(target.get("text"), f"{where}.text"), require(target, "label", f"{where}.")


def shot_entry_to_examples(
    entry: Mapping[str, Any],
    task_hint: str | None = None,
    lang: str | None = None,
) -> list[BinaryExample]:
    """The examples of one internal-form entry (one per target).

    Args:
        entry: the JSON object.
        task_hint: the key the entry was filed under (``dialogue``, ``translation`` …).
        lang: language tag; ``None`` means ``en``, or no language for translation pairs.

    Raises:
        RowError: a field is missing or malformed (the message names it).
    """
    list_key, task = _entry_task(entry, task_hint)
    family = task_family(task)
    data_id = str(require(entry, "data_id"))
    targets = entry[list_key]
    if not isinstance(targets, list) or not targets:
        raise RowError(f"{list_key}: expected a non-empty list of targets")
    shot_type = entry.get("type")
    skip = {list_key, "knowledge", "type", "data_id", _CONTEXT_FIELD[family]}
    if family == "stance":
        skip.update(_STANCE_ORIGINAL)
    shared: dict[str, Any] = {key: value for key, value in entry.items() if key not in skip}
    shared.update(mt_languages(task))
    if family == "stance":
        shared["original"] = {key: entry[key] for key in _STANCE_ORIGINAL if key in entry}
    examples = []
    for index, target in enumerate(targets):
        where = f"{list_key}.{index}"
        if not isinstance(target, Mapping):
            raise RowError(f"{where}: expected an object, got {type(target).__name__}")
        context, text, raw_label = _target_parts(entry, target, family, where)
        label = parse_label(raw_label, f"{where}.label")
        knowledge_raw = target["knowledge"] if "knowledge" in target else entry.get("knowledge")
        knowledge, extras = knowledge_triples(knowledge_raw, f"{where}.knowledge")
        target_id = str(target.get("id") or f"{data_id}-{raw_label}")
        used = {"id", "text", "label", "knowledge", "answer", "belief", "argument"}
        metadata: dict[str, Any] = {**shared, **{k: v for k, v in target.items() if k not in used}}
        metadata.update(data_id=data_id, target_id=target_id, shot_types=[shot_type] if shot_type else [])
        answer = target.get("answer")
        metadata["rationales"] = {} if answer is None else {str(shot_type or "default"): answer}
        if any(extras):
            metadata["knowledge_extra"] = extras
        examples.append(
            BinaryExample(
                id=f"{task}/{data_id}/{target_id}",
                context_id=context_key(task, data_id, context),
                context=context,
                target=text,
                label=label,
                task=task,
                lang=lang if lang is not None else (None if family == "mt" else "en"),
                knowledge=knowledge,
                metadata=metadata,
            )
        )
    return examples


def _iter_entries(path: Path) -> Iterator[tuple[str, dict[str, Any], str | None]]:
    """``(where, entry, task key or None)`` for each entry, whichever container the file uses."""
    start = first_char(path)
    if start == "[":
        for where, row in iter_json_array(path):
            yield where, row, None
        return
    if start != "{":
        raise DataValidationError(f"{path}: expected JSON (an object of task lists, an array or JSON Lines)")
    line = first_line_object(path)
    if line is not None and "data_id" in line:
        for number, row in iter_json_rows(path):
            yield str(number), row, None
        return
    document = read_json_document(path)
    if not isinstance(document, dict):
        raise DataValidationError(f"{path}: expected an object mapping task names to lists of entries")
    for key, entries in document.items():
        for where, row in iter_json_array(path, entries, key=key):
            yield where, row, key


def _same(a: BinaryExample, b: BinaryExample) -> bool:
    fields = ("context_id", "context", "target", "label", "task", "knowledge")
    return all(getattr(a, name) == getattr(b, name) for name in fields)


def read_crow_shots(path: str | Path, lang: str | None = None) -> list[BinaryExample]:
    """Read CRoW's internal per-task form, merging targets repeated across prompt types.

    Raises:
        DataValidationError: located at the first bad entry (``file:task[index]: field:
            problem``), or at a repeat that contradicts the first sighting.
    """
    where_file = Path(path)
    merged: dict[str, tuple[BinaryExample, str]] = {}
    for where, entry, key in _iter_entries(where_file):
        for example in convert(where_file, where, partial(shot_entry_to_examples, entry, key, lang)):
            if example.id not in merged:
                merged[example.id] = (example, where)
                continue
            first, first_where = merged[example.id]
            if not _same(first, example):
                target_id = example.metadata["target_id"]
                raise DataValidationError(
                    f"{where_file}:{where}: {target_id}: differs from the same target at {first_where}"
                )
            for shot_type in example.metadata["shot_types"]:
                if shot_type not in first.metadata["shot_types"]:
                    first.metadata["shot_types"].append(shot_type)
            for shot_type, answer in example.metadata["rationales"].items():
                first.metadata["rationales"].setdefault(shot_type, answer)
    return [example for example, _ in merged.values()]
