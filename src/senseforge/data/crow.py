"""CRoW (Ismayilzada et al., 2023) in its released form, as :class:`BinaryExample` records.

CRoW pairs a *context* (the unchanged part of a task example) with *targets* (the
original and its commonsense-violating rewrites); a model says whether each target is
valid for its context. Knowledge triples carry one of six dimensions.

The released form (``format="crow"``). Our copy of the release has no data file, so the
field names below are inferred from the benchmark's website (each example has ``task``,
``example_id``, a task-specific context field and a task-specific target field), its
submission checker (tasks ``dialogue, summarization, intent, safety, stance, mt_zh_en,
mt_en_de, mt_en_fr, mt_en_ru``; 1 = valid, 0 = invalid) and the internal per-task form of
its evaluation scripts. Accepted per row, one JSON object per line or a JSON array:

==============  ===============================  ====================================
task            context field (first found)      target field (first found)
==============  ===============================  ====================================
dialogue        ``dialogue``, ``context``        ``response``, ``final_turn``, ``target``
summarization   ``dialogue``, ``context``        ``summary``, ``target``
intent          ``headline``, ``context``        ``intent``, ``target``
safety          ``scenario``, ``context``        ``action``, ``target``
stance          ``belief``, ``context``          ``argument``, ``target``
mt_<src>_<tgt>  ``sentence``, ``source``,        ``translation``, ``target``
                ``context``
==============  ===============================  ====================================

* A field may be a string, a list of strings (dialogue turns, joined by newlines) or an
  object with ``text`` (and then possibly its own ``label`` and ``knowledge``).
* The label is ``label`` (0/1, true/false, yes/no, valid/invalid, correct/incorrect,
  safe/unsafe, support/counter); for stance a missing ``label`` falls back to
  ``stance`` (support = valid). Without any, the row is an error: evaluation needs gold.
* The example id is ``example_id`` (else ``instance_id`` or ``id``). The context id is
  ``<task>/<context_id or data_id>`` when the row has one, else ``<task>/ctx-`` and a
  hash of the context text, so targets of one context group together.
* ``knowledge`` is a list of ``{head, relation, tail[, dimension, id, …]}``; the
  dimension is normalised by :func:`normalize_dimension`, the id becomes
  :attr:`Triple.source`, other keys go to ``metadata["knowledge_extra"]``.
* Task names are written with hyphens inside senseforge (``mt_zh_en`` → ``mt-zh-en``).
  Examples are English (``lang="en"``) except translation pairs, which get
  ``lang=None`` and ``metadata`` ``source_lang``/``target_lang``.
* A task that is none of CRoW's is read when the row has the generic ``context`` and
  ``target`` fields (``build crow`` writes them for a task of the user's own); it has no
  language unless ``lang`` is given.
* Fields not used above are kept in ``metadata``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import Any

from senseforge.data._rows import RowError, UniqueIds, convert, iter_json_records, require
from senseforge.data.relations import DIMENSIONS
from senseforge.data.schema import BinaryExample, Triple

CROW_TASKS: tuple[str, ...] = (
    "dialogue",
    "summarization",
    "intent",
    "safety",
    "stance",
    "mt-zh-en",
    "mt-en-de",
    "mt-en-fr",
    "mt-en-ru",
)
"""CRoW's tasks; each translation pair counts as its own task."""

_DIMENSION_ALIASES: dict[str, str | None] = {
    "attribution": "attributional",
    "attributional": "attributional",
    "attribute": "attributional",
    "physical": "physical/spatial",
    "spatial": "physical/spatial",
    "physical/spatial": "physical/spatial",
    "physical-spatial": "physical/spatial",
    "physical_spatial": "physical/spatial",
    "physical spatial": "physical/spatial",
    "temporal": "temporal",
    "causal": "causal",
    "social": "social",
    "comparative": "comparative",
    "comparison": "comparative",
    "other": None,
    "none": None,
    "": None,
}
_TASK_ALIASES = {
    "dialogue": "dialogue",
    "dialog": "dialogue",
    "open-domain-dialogue": "dialogue",
    "summarization": "summarization",
    "summarisation": "summarization",
    "dialogue-summarization": "summarization",
    "intent": "intent",
    "intent-detection": "intent",
    "safety": "safety",
    "safety-detection": "safety",
    "stance": "stance",
    "stance-classification": "stance",
}
_CONTEXT_FIELDS = {
    "dialogue": ("dialogue", "context"),
    "summarization": ("dialogue", "context"),
    "intent": ("headline", "context"),
    "safety": ("scenario", "context"),
    "stance": ("belief", "context"),
    "mt": ("sentence", "source", "context"),
}
_TARGET_FIELDS = {
    "dialogue": ("response", "final_turn", "target"),
    "summarization": ("summary", "target"),
    "intent": ("intent", "target"),
    "safety": ("action", "target"),
    "stance": ("argument", "target"),
    "mt": ("translation", "target"),
}
_TRUE = {"1", "true", "yes", "valid", "correct", "plausible", "safe", "support", "supporting"}
_FALSE = {"0", "false", "no", "invalid", "incorrect", "implausible", "unsafe", "counter", "countering"}
_MT_TASK = re.compile(r"^mt-([a-z]{2,3})-([a-z]{2,3})$")
_KNOWLEDGE_KEYS = ("head", "relation", "tail", "dimension", "id")


def normalize_dimension(value: Any, field: str = "dimension") -> str | None:
    """A dimension name as one of :data:`~senseforge.data.relations.DIMENSIONS`, or ``None`` when absent.

    Raises:
        RowError: the value names no known dimension.

    >>> normalize_dimension("Attribution"), normalize_dimension("physical"), normalize_dimension(None)
    ('attributional', 'physical/spatial', None)
    """
    if value is None:
        return None
    if not isinstance(value, str):
        raise RowError(f"{field}: expected a string, got {type(value).__name__}")
    key = value.strip().lower()
    if key not in _DIMENSION_ALIASES:
        raise RowError(f"{field}: unknown dimension {value!r}; expected one of {list(DIMENSIONS)}")
    return _DIMENSION_ALIASES[key]


def normalize_task(value: Any, field: str = "task") -> str:
    """A CRoW task name in senseforge's spelling: ``mt_zh_en`` → ``mt-zh-en``.

    Raises:
        RowError: the value names no CRoW task.
    """
    if not isinstance(value, str):
        raise RowError(f"{field}: expected a string, got {type(value).__name__}")
    key = re.sub(r"[\s_]+", "-", value.strip().lower())
    if key in _TASK_ALIASES:
        return _TASK_ALIASES[key]
    if _MT_TASK.match(key):
        return key
    raise RowError(f"{field}: unknown CRoW task {value!r}; expected one of {list(CROW_TASKS)}")


def task_family(task: str) -> str:
    """``mt`` for every translation pair, else the task itself."""
    return "mt" if task.startswith("mt-") else task


def mt_languages(task: str) -> dict[str, str]:
    """``{"source_lang": …, "target_lang": …}`` of a translation task, else ``{}``."""
    match = _MT_TASK.match(task)
    return {"source_lang": match[1], "target_lang": match[2]} if match else {}


def parse_label(value: Any, field: str = "label") -> bool:
    """A validity label from 0/1, a boolean or one of CRoW's label words.

    Raises:
        RowError: the value is none of these.
    """
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return value == 1
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise RowError(f"{field}: expected 0/1 or a label word such as valid/invalid, got {value!r}")


def text_of(value: Any, field: str) -> str:
    """Text of a context or target: a string, a list of turns (joined by newlines) or ``{text}``."""
    if isinstance(value, Mapping):
        return text_of(value.get("text"), f"{field}.text")
    if isinstance(value, list) and value and all(isinstance(turn, str) for turn in value):
        return "\n".join(value)
    if isinstance(value, str) and value.strip():
        return value
    if value is None:
        raise RowError(f"{field}: missing")
    raise RowError(f"{field}: expected text or a list of turns, got {value!r:.60}")


def knowledge_triples(value: Any, field: str = "knowledge") -> tuple[list[Triple], list[dict[str, Any]]]:
    """CRoW knowledge as triples, plus the keys each triple did not use (``verbalized`` …).

    Raises:
        RowError: the knowledge is not a list of objects, or a triple is incomplete.
    """
    if value is None:
        return [], []
    if isinstance(value, Mapping):
        value = [value]
    if not isinstance(value, list):
        raise RowError(f"{field}: expected a list of {{head, relation, tail}} objects, got {type(value).__name__}")
    triples: list[Triple] = []
    extras: list[dict[str, Any]] = []
    for index, raw in enumerate(value):
        where = f"{field}.{index}"
        if not isinstance(raw, Mapping):
            raise RowError(f"{where}: expected an object, got {type(raw).__name__}")
        parts: dict[str, str] = {}
        for key in ("head", "relation", "tail"):
            part = require(raw, key, f"{where}.")
            if not isinstance(part, str) or not part.strip():
                raise RowError(f"{where}.{key}: expected non-empty text, got {part!r}")
            parts[key] = part
        source = raw.get("id")
        triples.append(
            Triple(
                head=parts["head"],
                relation=parts["relation"],
                tail=parts["tail"],
                dimension=normalize_dimension(raw.get("dimension"), f"{where}.dimension"),
                source=None if source is None else str(source),
            )
        )
        extras.append({key: item for key, item in raw.items() if key not in _KNOWLEDGE_KEYS})
    return triples, extras


def context_key(task: str, explicit: Any, context: str) -> str:
    """``<task>/<explicit id>``, or ``<task>/ctx-<hash of the context text>``."""
    if explicit is not None and str(explicit).strip():
        return f"{task}/{explicit}"
    digest = hashlib.sha1(context.encode("utf-8"), usedforsecurity=False).hexdigest()[:16]
    return f"{task}/ctx-{digest}"


def _pick(row: Mapping[str, Any], names: tuple[str, ...], what: str) -> tuple[str, Any]:
    for name in names:
        if row.get(name) is not None:
            return name, row[name]
    raise RowError(f"{names[0]}: missing (the {what}; also accepted: {', '.join(names[1:])})")


def _label(row: Mapping[str, Any], target: Any, task: str) -> bool:
    if row.get("label") is not None:
        return parse_label(row["label"])
    if isinstance(target, Mapping) and target.get("label") is not None:
        return parse_label(target["label"], "target.label")
    if task == "stance" and row.get("stance") is not None:
        return parse_label(row["stance"], "stance")
    raise RowError("label: missing (1 = valid target, 0 = invalid); a file without gold labels cannot be evaluated")


def crow_row_to_example(row: Mapping[str, Any], lang: str | None = None) -> BinaryExample:
    """One example of CRoW's released form (see the module notes for the accepted fields).

    Args:
        row: the JSON object.
        lang: language tag; ``None`` means ``en``, or no language for translation pairs.

    Raises:
        RowError: a field is missing or malformed (the message names it).
    """
    raw_task = require(row, "task")
    try:
        task = normalize_task(raw_task)
        family: str | None = task_family(task)
    except RowError:
        if not (isinstance(raw_task, str) and raw_task.strip() and "context" in row and "target" in row):
            raise
        task, family = raw_task.strip().lower(), None  # a task of one's own, with the generic fields
    context_field, context_raw = _pick(row, _CONTEXT_FIELDS[family] if family else ("context",), "context")
    target_field, target_raw = _pick(row, _TARGET_FIELDS[family] if family else ("target",), "target")
    context = text_of(context_raw, context_field)
    target = text_of(target_raw, target_field)
    label = _label(row, target_raw, task)
    id_field, example_id = _pick(row, ("example_id", "instance_id", "id"), "example id")
    knowledge_raw = row.get("knowledge")
    if knowledge_raw is None and isinstance(target_raw, Mapping):
        knowledge_raw = target_raw.get("knowledge")
    knowledge, extras = knowledge_triples(knowledge_raw)
    used = {"task", id_field, context_field, target_field, "label", "knowledge", "context_id"}
    metadata: dict[str, Any] = {key: value for key, value in row.items() if key not in used}
    if isinstance(target_raw, Mapping):
        unused = {k: v for k, v in target_raw.items() if k not in ("text", "label", "knowledge")}
        if unused:
            metadata["target_extra"] = unused
    if any(extras):
        metadata["knowledge_extra"] = extras
    metadata.update({k: v for k, v in mt_languages(task).items() if k not in metadata})
    return BinaryExample(
        id=str(example_id),
        context_id=context_key(task, row.get("context_id", row.get("data_id")), context),
        context=context,
        target=target,
        label=label,
        task=task,
        lang=lang if lang is not None else (None if family in ("mt", None) else "en"),
        knowledge=knowledge,
        metadata=metadata,
    )


def read_crow(path: str | Path, lang: str | None = None) -> list[BinaryExample]:
    """Read CRoW's released form: one JSON object per line, or a JSON array of them.

    Raises:
        DataValidationError: located at the first bad row (``file:line: field: problem``
            or ``file:[index]: field: problem``), or at a repeated example id.
    """
    where_file = Path(path)
    seen = UniqueIds(where_file)
    examples: list[BinaryExample] = []
    for where, row in iter_json_records(where_file):
        example = convert(where_file, where, partial(crow_row_to_example, row, lang))
        seen.add(example.id, where)
        examples.append(example)
    return examples
