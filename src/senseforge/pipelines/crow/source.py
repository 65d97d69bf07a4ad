"""The CRoW recipe's inputs: source rows become *contexts* (the first records of a run).

Accepted inputs (``--source FILE``, repeatable; a folder means every data file in it):

* CRoW's internal per-task form (``crow/shot_samples.json``) and CRoW's released form —
  read by :mod:`senseforge.data.crow_shots` and :mod:`senseforge.data.crow`;
* CommonMT's CSV files (the source of CRoW's ``mt-zh-en``), by :mod:`senseforge.data.commonmt`;
* any other JSON Lines (or JSON array) file, mapped by a task spec: a row has the task's
  context field (or ``context``) and target field (or ``target``), an optional ``task``
  (else the run's single ``--task``), ``id``, ``label`` (the source label; default valid)
  and ``knowledge`` (``[{head, relation, tail[, dimension]}]``). A dialogue row without a
  target field takes its final turn as the target.

A task that rewrites its targets (WSG) gets one record per (context, target): the
original that is rewritten. A task that brings its wrong targets (translation) gets one
record per context, its first valid target as ``target`` and the rest under ``others``,
carried through unchanged. Record ids are ``<task>/<context id>[/<target id>]``.

The source filters of the task spec (:class:`~senseforge.pipelines.crow.tasks.SourceFilters`)
and the knowledge rule (a task that skips CKA must bring knowledge: ``no_knowledge``) are
applied here; a row that fails is stored as a rejected record with its reason, never
dropped. ``--n`` keeps a seeded sample of contexts per task (in source order).
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from senseforge.data._rows import RowError, convert, iter_json_records
from senseforge.data.crow import knowledge_triples, parse_label, text_of
from senseforge.data.loaders import FORMATS, detect_format, load_dataset
from senseforge.data.relations import parse_relation, verbalize
from senseforge.data.schema import BinaryExample, Triple
from senseforge.errors import ConfigError, DataValidationError
from senseforge.kb.words import SEGMENTED_BY_TOKENIZER, chinese_words, japanese_words
from senseforge.pipelines.crow.records import CrowRecord, CrowTriple, OtherTarget
from senseforge.pipelines.crow.tasks import TaskSpec, task_name
from senseforge.pipelines.runstore import StageResult

FEW_TURNS = "few_turns"
"""Rejection reason: the dialogue before the target has fewer turns than the task asks."""
SHORT_CONTEXT = "short_context"
"""Rejection reason: the context has fewer content words than the task asks."""
SHORT_TARGET = "short_target"
"""Rejection reason: the target has fewer content words than the task asks."""
NO_KNOWLEDGE = "no_knowledge"
"""Rejection reason: a task that skips CKA got a context without knowledge (or CKA found none)."""
DUPLICATE_SOURCE = "duplicate_source"
"""Rejection reason: the same (task, context, target) came twice."""
CONFLICTING_LABELS = "conflicting_labels"
"""Rejection reason: the context has the same target twice, once valid and once not (CommonMT has such a row)."""

_DATA_SUFFIXES = (".json", ".jsonl", ".ndjson", ".csv")
_BINARY_FORMATS = frozenset({"crow", "crow-shots", "commonmt", "senseforge"})


@dataclass
class SourceTarget:
    """One target of a context as the source gives it."""

    text: str
    label: bool
    id: str
    knowledge: list[CrowTriple] = field(default_factory=list)


@dataclass
class SourceContext:
    """One context with its targets, from one source row or a group of them."""

    task: str
    context_id: str
    context: str
    turns: list[str] | None
    targets: list[SourceTarget]
    origin: dict[str, str]


def knowledge_row(triple: Triple, verbalized: str | None = None) -> CrowTriple:
    """A given triple in the recipe's form: its relation normalised, its dimension from the relation table."""
    parsed = parse_relation(triple.relation, strict=False)
    dimension = parsed.dimension
    if parsed.base is None and not parsed.is_other and triple.dimension:
        dimension = triple.dimension  # a relation that maps nowhere keeps the dimension its source gave
    relation = parsed.label if parsed.base is not None or parsed.is_other else triple.relation.strip()
    return CrowTriple(
        head=triple.head.strip(),
        relation=relation,
        tail=triple.tail.strip(),
        dimension=dimension,
        verbalized=verbalized or verbalize(triple.head.strip(), relation, triple.tail.strip()),
    )


def _example_knowledge(example: BinaryExample) -> list[CrowTriple]:
    extras = example.metadata.get("knowledge_extra")
    rows = []
    for index, triple in enumerate(example.knowledge):
        extra = extras[index] if isinstance(extras, list) and index < len(extras) else {}
        said = extra.get("verbalized") if isinstance(extra, Mapping) else None
        rows.append(knowledge_row(triple, said if isinstance(said, str) and said.strip() else None))
    return rows


def _key(text: str) -> str:
    return re.sub(r"\s+", "_", text.strip()) or "_"


# -- reading -----------------------------------------------------------------------------------


def _files(path: Path) -> list[Path]:
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.is_file() and p.suffix.lower() in _DATA_SUFFIXES)
        if not files:
            raise ConfigError(f"{path}: no .json, .jsonl or .csv files in the folder")
        return files
    if not path.is_file():
        raise ConfigError(f"--source {path}: no such file or folder")
    return [path]


def _format(path: Path) -> str | None:
    try:
        found = detect_format(path)
    except ConfigError:
        return None
    return found if found in _BINARY_FORMATS else None


def _from_examples(path: Path, examples: Sequence[BinaryExample], specs: Mapping[str, TaskSpec]) -> list[SourceContext]:
    groups: dict[tuple[str, str], SourceContext] = {}
    for example in examples:
        task = task_name(example.task, specs)
        spec = specs[task]
        context_id = (
            example.context_id.split("/", 1)[1]
            if example.context_id.startswith(f"{example.task}/")
            else example.context_id
        )
        turns = example.context.split("\n") if spec.turns else None
        if turns is not None and task == "dialogue":
            context_id = f"{context_id}/prefix-{len(turns)}"
        key = (task, context_id)
        target_id = str(example.metadata.get("target_id") or example.id.rsplit("/", 1)[-1])
        target = SourceTarget(example.target, example.label, target_id, _example_knowledge(example))
        if key not in groups:
            groups[key] = SourceContext(task, context_id, example.context, turns, [], {"file": path.name})
        groups[key].targets.append(target)
    return list(groups.values())


def _user_row(row: Mapping[str, Any], where: str, spec: TaskSpec) -> SourceContext:
    context_raw = row.get(spec.context_field, row.get("context"))
    if context_raw is None:
        raise RowError(f"{spec.context_field}: missing (the context; also accepted: context)")
    target_raw = row.get(spec.target_field, row.get("target"))
    turns: list[str] | None = None
    if spec.turns:
        if isinstance(context_raw, str):
            context_raw = [line for line in context_raw.split("\n") if line.strip()]
        if not isinstance(context_raw, list) or not all(isinstance(t, str) and t.strip() for t in context_raw):
            raise RowError(f"{spec.context_field}: expected a list of turns")
        turns = list(context_raw)
        if target_raw is None:
            if len(turns) < 2:
                raise RowError(f"{spec.target_field}: missing, and the dialogue has no final turn to take")
            turns, target_raw = turns[:-1], turns[-1]
    context = "\n".join(turns) if turns is not None else text_of(context_raw, spec.context_field)
    target = text_of(target_raw, spec.target_field)
    label = parse_label(row["label"]) if row.get("label") is not None else True
    triples, extras = knowledge_triples(row.get("knowledge"))
    knowledge = [knowledge_row(t, (e or {}).get("verbalized")) for t, e in zip(triples, extras, strict=True)]
    raw_id = row.get("id", row.get("example_id", row.get("data_id")))
    source_id = str(raw_id) if raw_id is not None and str(raw_id).strip() else f"row-{where}"
    context_id = f"{source_id}/prefix-{len(turns)}" if turns is not None and spec.name == "dialogue" else source_id
    return SourceContext(
        spec.name,
        context_id,
        context,
        turns,
        [SourceTarget(target, label, str(row.get("target_id") or "0"), knowledge)],
        {"where": where},
    )


def _from_user_file(path: Path, specs: Mapping[str, TaskSpec], default_task: str | None) -> list[SourceContext]:
    contexts = []
    for where, row in iter_json_records(path):

        def make(row: Mapping[str, Any] = row, where: str = where) -> SourceContext:
            if row.get("task") is not None:
                try:
                    name = task_name(str(row["task"]), specs)
                except ConfigError as exc:
                    raise RowError(f"task: {exc}") from exc
            elif default_task is not None:
                name = default_task
            else:
                raise RowError("task: missing (give the row a task, or the run one --task)")
            return _user_row(row, where, specs[name])

        found = convert(path, where, make)
        found.origin["file"] = path.name
        contexts.append(found)
    return contexts


def read_sources(
    paths: Sequence[Path], specs: Mapping[str, TaskSpec], default_task: str | None = None
) -> list[SourceContext]:
    """Every context of the source files, in file order.

    Raises:
        ConfigError: a missing file, or a row naming an unknown task.
        DataValidationError: a malformed row, located (``file:line: field: problem``).
    """
    contexts: list[SourceContext] = []
    for given in paths:
        for path in _files(given):
            fmt = _format(path)
            if fmt is None:
                if path.suffix.lower() == ".csv":
                    raise ConfigError(f"{path}: a CSV source must be CommonMT's (columns chinese_source, …)")
                contexts += _from_user_file(path, specs, default_task)
            else:
                loaded = load_dataset(path, fmt)
                if loaded.kind != "binary":
                    raise ConfigError(f"{path}: {FORMATS[fmt].description} holds no (context, target) pairs")
                contexts += _from_examples(path, loaded.examples, specs)
    return _merged(contexts)


def _merged(contexts: Sequence[SourceContext]) -> list[SourceContext]:
    """Rows of one context (same task, id and text) as one context with all their targets, in first-seen order."""
    groups: dict[tuple[str, str, str], SourceContext] = {}
    for context in contexts:
        key = (context.task, context.context_id, context.context)
        if key in groups:
            groups[key].targets += context.targets
        else:
            groups[key] = SourceContext(
                context.task, context.context_id, context.context, context.turns, list(context.targets), context.origin
            )
    return list(groups.values())


# -- filters and records -----------------------------------------------------------------------


def content_words(text: str, lang: str) -> int:
    """Words of ``text`` that are not stopwords (tokenizer words for Japanese and Chinese)."""
    from senseforge.data.matching import stopwords

    primary = lang.split("-", 1)[0].lower()
    if primary in SEGMENTED_BY_TOKENIZER:
        split = japanese_words() if primary == "ja" else chinese_words()
        tokens = [t for t in split(text) if re.search(r"\w", t)]
    else:
        tokens = re.findall(r"\w+(?:'\w+)?", text.casefold())
    ignored = stopwords(primary) if primary in ("en", "id", "su") else frozenset()
    return sum(1 for token in tokens if token.casefold() not in ignored)


def filter_reason(context: SourceContext, target: SourceTarget, spec: TaskSpec) -> str | None:
    """Why a (context, target) fails the task's source filters, or ``None``."""
    rules = spec.filters
    if rules.min_context_turns is not None and len(context.turns or [context.context]) < rules.min_context_turns:
        return FEW_TURNS
    context_lang = spec.source_lang or spec.lang
    least = rules.min_context_content_words
    if least is not None and content_words(context.context, context_lang) < least:
        return SHORT_CONTEXT
    least = rules.min_target_content_words
    if least is not None and content_words(target.text, spec.lang) < least:
        return SHORT_TARGET
    if not spec.runs("cka") and not target.knowledge:
        return NO_KNOWLEDGE
    return None


def _record(context: SourceContext, spec: TaskSpec, target: SourceTarget, others: list[SourceTarget]) -> CrowRecord:
    return CrowRecord(
        task=spec.name,
        context_id=context.context_id,
        context=context.context,
        turns=context.turns,
        target=target.text,
        label=target.label,
        target_id=target.id,
        others=[OtherTarget(text=o.text, label=o.label, id=o.id, knowledge=o.knowledge) for o in others],
        knowledge=target.knowledge,
        source=context.origin,
    )


def _records_of(context: SourceContext, spec: TaskSpec) -> Iterator[tuple[str, CrowRecord, str | None]]:
    """(record id, data, rejection reason) for each record a context makes."""
    base = f"{spec.name}/{_key(context.context_id)}"
    labels: dict[str, set[bool]] = {}
    for target in context.targets:
        labels.setdefault(" ".join(target.text.split()), set()).add(target.label)
    conflicting = {text for text, seen in labels.items() if len(seen) > 1}

    def reason(target: SourceTarget) -> str | None:
        if " ".join(target.text.split()) in conflicting:
            return CONFLICTING_LABELS
        return filter_reason(context, target, spec)

    if spec.rewrites:
        for target in context.targets:
            yield f"{base}/{_key(target.id)}", _record(context, spec, target, []), reason(target)
        return
    ordered = sorted(context.targets, key=lambda t: not t.label)  # a valid target first, if there is one
    first, others = ordered[0], ordered[1:]
    reasons = [reason(t) for t in ordered]
    yield base, _record(context, spec, first, others), next((r for r in reasons if r is not None), None)


def source_records(
    contexts: Sequence[SourceContext],
    specs: Mapping[str, TaskSpec],
    tasks: Sequence[str],
    *,
    n: int | None,
    seed: int,
) -> tuple[list[StageResult[CrowRecord]], dict[str, Any]]:
    """The first records of a run, and per task how many contexts the source had and how many were kept.

    Raises:
        DataValidationError: no context of a task the run asks for.
    """
    records: list[StageResult[CrowRecord]] = []
    facts: dict[str, Any] = {"tasks": {}}
    for task in tasks:
        spec = specs[task]
        mine = [c for c in contexts if c.task == task]
        if not mine:
            raise DataValidationError(f"no source row is a {task} example; check --source and --task")
        made = [(c, list(_records_of(c, spec))) for c in mine]
        passing = [index for index, (_, rows) in enumerate(made) if any(reason is None for _, _, reason in rows)]
        chosen = set(passing)
        if n is not None and len(passing) > n:
            chosen = set(random.Random(f"{seed}:{task}").sample(passing, n))
        seen: set[str] = set()
        kept = 0
        for index, (_context, rows) in enumerate(made):
            if index in set(passing) and index not in chosen:
                continue  # left out of the sample: not part of this run
            kept += index in chosen
            for record_id, data, reason in rows:
                rid = record_id
                if rid in seen:
                    suffix = 2
                    while f"{record_id}~{suffix}" in seen:
                        suffix += 1
                    rid, reason = f"{record_id}~{suffix}", DUPLICATE_SOURCE
                seen.add(rid)
                if reason is None:
                    records.append(StageResult(rid, "ok", data))
                else:
                    records.append(StageResult(rid, "rejected", data, reason=reason))
        facts["tasks"][task] = {"contexts": len(mine), "passed_filters": len(passing), "sampled": kept}
    return records, facts
