"""What ``build crow`` writes when it finishes: the binary dataset per task, the release, the funnel by task.

A context's examples are its original targets (with their source labels) and its accepted
rewrites (with the opposite label: a safe original's rewrite is unsafe, an unsafe one's is
safe; a supporting argument's rewrite counters). Each rewrite carries the triples it
breaks; an original carries the union of its rewrites' triples (CRoW's per-dimension
scores read them), or, when none of its own rewrites survived, the triples kept for it.
A translation context's targets all carry the context's kept triples. A context without a
kept triple (``no_kept_knowledge``) or, for a task that rewrites, without an accepted
rewrite (``no_rewrite``) is left out.

Rows (``dataset/<task>.jsonl``, CRoW's released form, which ``senseforge eval`` reads):
``context_id`` (the source item's id; a dialogue's is its prefix's), ``example_id``
(SHA-256 of the canonical task, context and target), ``task``, the task's context and
target fields, ``label`` (1 valid, 0 not), ``knowledge`` (``head, relation, tail,
dimension, verbalized``), and where it came from (``origin``: ``source`` or ``rewrite``;
``source_id``; a rewrite's ``edits`` and ``flags``). ``release/public.jsonl`` holds the
same rows without labels, knowledge or origin; ``release/private.jsonl`` the full rows;
``release/baseline_submission.jsonl`` the majority-label baseline in the submission form
``{task, example_id, prediction}`` that ``senseforge eval score`` reads.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from senseforge.data.crow import CROW_TASKS
from senseforge.evaluate.policies import ACCEPT, agreement, votes_of
from senseforge.pipelines.contamination import GATE
from senseforge.pipelines.crow.records import CrowRecord, CrowTriple, required
from senseforge.pipelines.crow.tasks import TaskSpec
from senseforge.pipelines.recheck import REJECTED_ON_RECHECK
from senseforge.pipelines.report import write_jsonl
from senseforge.pipelines.runstore import RunStore, StageResult

NO_KEPT_KNOWLEDGE = "no_kept_knowledge"
"""A context left out: none of its triples was kept."""
NO_REWRITE = "no_rewrite"
"""A context left out: no rewrite of it was accepted."""
PUBLIC_KEYS = ("context_id", "example_id", "task")


def example_id(task: str, context: str, target: str) -> str:
    """SHA-256 of the canonical JSON of task, context and target.

    >>> len(example_id("safety", "a scenario", "an action"))
    64
    """
    canonical = json.dumps({"context": context, "target": target, "task": task}, ensure_ascii=False, sort_keys=True)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _source_of(record_id: str) -> str:
    """The source record a triple (or rewrite) record came from: its id without the last ``/<i>``."""
    return record_id.rsplit("/", 1)[0]


def _union(triples: Sequence[Sequence[CrowTriple]]) -> list[CrowTriple]:
    out: list[CrowTriple] = []
    for group in triples:
        for triple in group:
            if triple not in out:
                out.append(triple)
    return out


@dataclass
class TaskOutput:
    """One task's rows and what became of its contexts."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    contexts: int = 0
    kept: int = 0
    dropped: Counter[str] = field(default_factory=Counter)
    ids: set[str] = field(default_factory=set)


def _row(
    spec: TaskSpec,
    source: StageResult[CrowRecord],
    text: str,
    label: bool,
    knowledge: list[CrowTriple],
    extra: Mapping[str, Any],
) -> dict[str, Any]:
    data = source.data
    context = data.turns if spec.turns and data.turns else data.context
    row: dict[str, Any] = {
        "context_id": data.context_id,
        "example_id": example_id(spec.name, data.context, text),
        "task": spec.name,
        spec.context_field: context,
        spec.target_field: text,
        "label": int(label),
        "knowledge": [t.model_dump(mode="json") for t in knowledge],  # head, relation, tail, dimension, verbalized
    }
    if spec.translation:
        row["source_lang"], row["target_lang"] = spec.source_lang, spec.target_lang
    if spec.name not in CROW_TASKS:  # a task of the user's own: the generic fields too, so that eval reads it
        row["context"], row["target"] = data.context, text
    if data.contamination:  # what the contamination check flagged of the context, for people to see
        row["contamination"] = data.contamination
    return {**row, **extra, "source_id": source.record_id}


def assemble(
    run: RunStore, specs: Mapping[str, TaskSpec], tasks: Sequence[str], final_stage: str, kept_stage: str
) -> dict[str, TaskOutput]:
    """Every task's rows, from the run store (see the module notes).

    Args:
        run: the run store.
        specs: the task specs.
        tasks: the run's tasks, in order.
        final_stage: the last stage (its kept records are accepted rewrites, or a translation's kept triples).
        kept_stage: the stage whose kept records are a context's kept triples (CKV).
    """
    gated = {r.record_id: r for r in run.results(GATE, "rejected", CrowRecord)}
    flagged = {r.record_id: r for r in run.results(GATE, "ok", CrowRecord) if r.data.contamination}
    sources = [gated.get(r.record_id) or flagged.get(r.record_id, r) for r in run.results("contexts", "ok", CrowRecord)]
    finals: dict[str, list[StageResult[CrowRecord]]] = {}
    for record in run.results(final_stage, "ok", CrowRecord):
        finals.setdefault(_source_of(record.record_id), []).append(record)
    kept_triples: dict[str, list[CrowTriple]] = {}
    for record in run.results(kept_stage, "ok", CrowRecord):
        kept_triples.setdefault(_source_of(record.record_id), []).append(required(record.data.triple, "triple"))
    outputs = {task: TaskOutput() for task in tasks}
    groups: dict[tuple[str, str], list[StageResult[CrowRecord]]] = {}
    for source in sources:
        groups.setdefault((source.data.task, source.data.context_id), []).append(source)
    for (task, _context_id), members in sorted(groups.items()):
        spec, out = specs[task], outputs[task]
        out.contexts += 1
        if all(m.record_id in gated for m in members):  # a copy of a registered benchmark's context
            out.dropped[str(gated[members[0].record_id].reason)] += 1
            continue
        if not any(kept_triples.get(m.record_id) for m in members):
            out.dropped[NO_KEPT_KNOWLEDGE] += 1
            continue
        rows = _rewritten(spec, members, finals, kept_triples) if spec.rewrites else _carried(spec, members, finals)
        if not rows:
            out.dropped[NO_REWRITE] += 1
            continue
        for row in rows:  # the same target twice (a rewrite repeating another original): the first stays
            if row["example_id"] not in out.ids:
                out.ids.add(row["example_id"])
                out.rows.append(row)
        out.kept += 1
    return outputs


def _rewritten(
    spec: TaskSpec,
    members: Sequence[StageResult[CrowRecord]],
    finals: Mapping[str, list[StageResult[CrowRecord]]],
    kept_triples: Mapping[str, list[CrowTriple]],
) -> list[dict[str, Any]]:
    """A rewritten context's rows: each original, then its accepted rewrites; none when no rewrite survived."""
    if not any(finals.get(m.record_id) for m in members):
        return []
    originals: list[dict[str, Any]] = []
    rewrites: list[dict[str, Any]] = []
    for member in sorted(members, key=lambda m: m.record_id):
        own = sorted(finals.get(member.record_id, []), key=lambda r: r.record_id)
        label = member.data.label
        broken = [required(r.data.violates, "violates") for r in own]
        union = _union(broken) or _union([kept_triples.get(member.record_id, [])])
        originals.append(_row(spec, member, member.data.target, label, union, {"origin": "source"}))
        for record, violates in zip(own, broken, strict=True):
            extra = {
                "origin": "rewrite",
                "original": member.data.target,
                "edits": record.data.edits,
                "flags": record.data.flags,
            }
            rewritten = required(record.data.rewrite, "rewrite")
            rewrites.append(_row(spec, member, rewritten, not label, violates, extra))
    return originals + rewrites


def _carried(
    spec: TaskSpec, members: Sequence[StageResult[CrowRecord]], finals: Mapping[str, list[StageResult[CrowRecord]]]
) -> list[dict[str, Any]]:
    """A translation context's rows: every target it brought, each with the context's kept triples."""
    rows: list[dict[str, Any]] = []
    for member in sorted(members, key=lambda m: m.record_id):
        triples = _union([[required(r.data.triple, "triple") for r in finals.get(member.record_id, [])]])
        if not triples:
            continue
        rows.append(_row(spec, member, member.data.target, member.data.label, triples, {"origin": "source"}))
        for other in member.data.others:
            rows.append(_row(spec, member, other.text, other.label, triples, {"origin": "source"}))
    return rows


def leave_out(outputs: Mapping[str, TaskOutput], dropped: frozenset[str]) -> dict[str, dict[str, dict[str, Any]]]:
    """Take the examples people rejected on a re-check (by ``example_id``) out of ``outputs``, the others as they
    were; a context left with no example is no longer kept (``rejected_on_recheck``). Per task, what was taken out,
    by id, its released row (``rejects.jsonl`` shows it)."""
    removed: dict[str, dict[str, dict[str, Any]]] = {}
    for task, out in outputs.items():
        gone = [row for row in out.rows if row["example_id"] in dropped]
        if not gone:
            continue
        out.rows = [row for row in out.rows if row["example_id"] not in dropped]
        out.ids -= {row["example_id"] for row in gone}
        still = {row["context_id"] for row in out.rows}
        emptied = {row["context_id"] for row in gone} - still
        out.kept -= len(emptied)
        if emptied:
            out.dropped[REJECTED_ON_RECHECK] += len(emptied)
        removed[task] = {row["example_id"]: dict(row) for row in gone}  # the released row, as it was
    return removed


# -- files ---------------------------------------------------------------------------------------


def public_row(row: Mapping[str, Any], spec: TaskSpec) -> dict[str, Any]:
    """A row as the public release shows it: no label, no knowledge, nothing that tells an original from a rewrite."""
    keys = (*PUBLIC_KEYS, spec.context_field, spec.target_field, "context", "target", "source_lang", "target_lang")
    return {key: row[key] for key in keys if key in row}


def write_outputs(run_dir: Path, outputs: Mapping[str, TaskOutput], specs: Mapping[str, TaskSpec]) -> None:
    """``dataset/<task>.jsonl`` per task and the ``release/`` files, each written atomically."""
    dataset = run_dir / "dataset"
    wanted = {f"{task}.jsonl" for task, out in outputs.items() if out.rows}
    if dataset.is_dir():
        for stale in dataset.glob("*.jsonl"):
            if stale.name not in wanted:
                stale.unlink()
    everything: list[dict[str, Any]] = []
    public: list[dict[str, Any]] = []
    baseline: list[dict[str, Any]] = []
    for task, out in outputs.items():
        if out.rows:  # a task that kept nothing has no file (its funnel says why)
            write_jsonl(dataset / f"{task}.jsonl", out.rows)
        everything += out.rows
        public += [public_row(row, specs[task]) for row in out.rows]
        labels = Counter(row["label"] for row in out.rows)
        majority = 1 if labels[1] >= labels[0] else 0
        baseline += [{"task": task, "example_id": row["example_id"], "prediction": majority} for row in out.rows]
    write_jsonl(run_dir / "release" / "public.jsonl", public)
    write_jsonl(run_dir / "release" / "private.jsonl", everything)
    write_jsonl(run_dir / "release" / "baseline_submission.jsonl", baseline)


# -- the funnel's figures --------------------------------------------------------------------------


def dimension_counts(dimensions: Iterable[str | None]) -> dict[str, int]:
    """How many triples each dimension has (``other`` for none), sorted by dimension name."""
    counts = Counter(str(dimension or "other") for dimension in dimensions)
    return dict(sorted(counts.items()))


def validation_figures(run: RunStore, judgement_task: str, task: str) -> dict[str, Any] | None:
    """How one task's validators (``ckv`` or ``wsv``) voted: items, raters, items every rater voted on, their
    agreement as a panel (:func:`senseforge.evaluate.policies.agreement`, rounded) and the share of accepts;
    ``None`` when the task had no such validation."""
    stored = run.judgements_for(judgement_task)
    ours = sorted(item for item in stored if item.startswith(f"{task}/"))
    by_item = {item: [entry.judgement for entry in stored[item]] for item in ours}
    if not by_item:
        return None
    votes = [votes_of(judgements) for judgements in by_item.values()]
    raters = {annotator for item_votes in votes for annotator, _ in item_votes}
    stats = agreement(by_item, judgement_task, panel=True)
    cast = [vote for item_votes in votes for _, vote in item_votes]
    return {
        "items": len(by_item),
        "raters": len(raters),
        "complete_items": sum(len(item_votes) == len(raters) for item_votes in votes),
        "fleiss_kappa": _rounded(stats.fleiss_kappa),
        "krippendorff_alpha": _rounded(stats.krippendorff_alpha),
        "accept_rate": round(sum(vote == ACCEPT for vote in cast) / len(cast), 6) if cast else None,
    }


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 6)
