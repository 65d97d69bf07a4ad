"""CRoW's task types: people write knowledge (``cka``) and rewrites (``wsg``), tick triples (``ckv``) and check
rewrites (``wsv``).

``cka``
    A (context, target) pair: the annotator gives one to five triples — head and tail a
    span of the text (selected and sent to a field with ``h`` / ``t``) or a short phrase of
    their own, the relation one of CRoW's 36 (each may be negated), or ``Other`` with
    their words — or says there is no such knowledge. Form fields ``head``, ``relation``,
    ``negated`` (the row numbers ticked), ``other`` and ``tail`` repeat per row; JSON sends
    ``{"triples": [{"head", "relation", "tail"}], "no_knowledge": false}``.
``wsg``
    A target and the kept triple(s) it rests on: the annotator writes a rewrite that breaks
    one (cited in ``violates``, default the first), flips the label, stays on topic and
    changes at most five words — the page counts the words as you type, and the server
    checks again (422 with the count) — or says there is no alternative. A rewrite that
    only adds or removes a negation is accepted with a warning on the page. The page's box
    starts as the original target: "no alternative" with the box left unchanged is no rewrite.

``ckv``
    One triple of a (context, target) pair, shown with the pair: does it hold as common
    sense, and does it link the two? ``accept`` (yes/no) and an optional comment. Votes
    combine as CRoW's: a triple is kept with at least two ticks of three.
``wsv``
    A rewrite beside the original target and the triples it should break, with CRoW's four
    conditions each ticked or not: ``minimal`` (few words changed), ``violates`` (it goes
    against the knowledge), ``flips`` (it is the opposite label for the task), ``on_topic``.
    The rewrite is accepted when all four hold. A form sends the ticked ones as repeated
    ``conditions`` fields; JSON may send ``{"conditions": {"minimal": true, …}}``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from senseforge.annotate.fields import InvalidSubmission, TaskType, comment_of, one, values_of, yes_no
from senseforge.data.crow_items import AnnotationItem, CrowPair, KnowledgeCheckItem, RewriteCheckItem, RewriteItem
from senseforge.data.relations import DIMENSIONS, MAX_PHRASE_WORDS, parse_relation, relations, verbalize
from senseforge.data.schema import (
    SCHEMA_CONDITIONS,
    Judgement,
    KnowledgeAnnotationJudgement,
    KnowledgeCheckJudgement,
    KnowledgeTriple,
    RewriteJudgement,
    SchemaCheckJudgement,
)
from senseforge.evaluate.policies import Policy, parse_policy
from senseforge.kb.edits import check_rewrite

CONDITION_TEXTS: dict[str, str] = {
    "minimal": "Only a few words differ from the original",
    "violates": "It goes against the knowledge",
    "flips": "For this task it is the opposite of the original",
    "on_topic": "It stays on the topic of the context",
}
"""What each of CRoW's four conditions asks, as the page shows it."""


def _pair_view(item: CrowPair) -> dict[str, Any]:
    return {
        "id": item.id,
        "task": item.task,
        "lang": item.lang,
        "context_name": item.context_name,
        "context": item.context,
        "target_name": item.target_name,
        "target": item.target,
        "label": item.label,
    }


class CheckKnowledge(TaskType):
    """CKV by people: tick a triple that holds and links the pair."""

    name: str = "ckv"
    input_model: type[BaseModel] = KnowledgeCheckItem
    policy: Policy | None = parse_policy("at-least:2/3")

    def view(self, task: KnowledgeCheckItem) -> dict[str, Any]:
        return {**_pair_view(task), "triple": task.triple.model_dump(mode="json")}

    def parse(self, task: KnowledgeCheckItem, fields: Mapping[str, Any]) -> Judgement:
        problems: list[str] = []
        accept = yes_no(fields, "accept", problems, required=True)
        comment = comment_of(fields, "comment", problems)
        if problems or accept is None:
            raise InvalidSubmission(problems)
        return KnowledgeCheckJudgement(item_id=task.id, annotator="?", accept=accept, comment=comment)


def _conditions(fields: Mapping[str, Any], problems: list[str]) -> dict[str, bool]:
    raw = fields.get("conditions")
    if isinstance(raw, Mapping):
        unknown = sorted(set(map(str, raw)) - set(SCHEMA_CONDITIONS))
        if unknown:
            problems.append(f"conditions: unknown {unknown[:4]} (known: {', '.join(SCHEMA_CONDITIONS)})")
        ticked: dict[str, bool] = {}
        for name in SCHEMA_CONDITIONS:
            value = raw.get(name)
            if not isinstance(value, bool):
                problems.append(f"conditions.{name}: required (true or false)")
            else:
                ticked[name] = value
        return ticked
    given = values_of(fields, "conditions")
    unknown = sorted(set(given) - set(SCHEMA_CONDITIONS))
    if unknown:
        problems.append(f"conditions: unknown {unknown[:4]} (known: {', '.join(SCHEMA_CONDITIONS)})")
    return {name: name in given for name in SCHEMA_CONDITIONS}


class CheckSchema(TaskType):
    """WSV by people: CRoW's four conditions on a rewrite, each ticked or not."""

    name: str = "wsv"
    input_model: type[BaseModel] = RewriteCheckItem
    policy: Policy | None = parse_policy("at-least:2/3")

    def view(self, task: RewriteCheckItem) -> dict[str, Any]:
        return {
            **_pair_view(task),
            "rewrite": task.rewrite,
            "flipped": task.flipped,
            "violates": [t.model_dump(mode="json") for t in task.violates],
            "edits": task.edits,
            "flags": list(task.flags),
            "conditions": [{"name": name, "text": CONDITION_TEXTS[name]} for name in SCHEMA_CONDITIONS],
        }

    def parse(self, task: RewriteCheckItem, fields: Mapping[str, Any]) -> Judgement:
        problems: list[str] = []
        conditions = _conditions(fields, problems)
        comment = comment_of(fields, "comment", problems)
        if problems:
            raise InvalidSubmission(problems)
        return SchemaCheckJudgement(
            item_id=task.id, annotator="?", accept=all(conditions.values()), conditions=conditions, comment=comment
        )


MAX_TEXT = 500


def _rows(fields: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The triples a cka submission gives: JSON ``triples``, or the repeated form fields row by row."""
    raw = fields.get("triples")
    if isinstance(raw, list):
        return [dict(t) if isinstance(t, Mapping) else {"bad": t} for t in raw]
    heads, relations_, tails = values_of(fields, "head"), values_of(fields, "relation"), values_of(fields, "tail")
    others, negated = values_of(fields, "other"), set(values_of(fields, "negated"))
    rows = []
    for index in range(max(len(heads), len(relations_), len(tails))):
        head = heads[index].strip() if index < len(heads) else ""
        relation = relations_[index].strip() if index < len(relations_) else ""
        tail = tails[index].strip() if index < len(tails) else ""
        if not (head or tail):
            continue  # an empty row of the form
        if relation == "Other":
            words = others[index].strip() if index < len(others) else ""
            relation = f"Other: {words}" if words else "Other"
        if str(index) in negated and relation:
            relation = f"Not {relation}"
        rows.append({"head": head, "relation": relation, "tail": tail})
    return rows


class AnnotateKnowledge(TaskType):
    """CKA by people: the knowledge that links a pair, as one to five triples."""

    name: str = "cka"
    votes: bool = False
    input_model: type[BaseModel] = AnnotationItem
    policy: Policy | None = None

    def view(self, task: AnnotationItem) -> dict[str, Any]:
        return {
            **_pair_view(task),
            "others": [o.model_dump(mode="json") for o in task.others],
            "max_triples": task.max_triples,
            "dimensions": [
                {
                    "name": d,
                    "relations": [
                        {"name": r.name, "description": r.description} for r in relations() if r.dimension == d
                    ],
                }
                for d in DIMENSIONS
            ],
        }

    def parse(self, task: AnnotationItem, fields: Mapping[str, Any]) -> Judgement:
        problems: list[str] = []
        none_found = yes_no(fields, "no_knowledge", problems, required=False) is True
        rows = _rows(fields)
        triples: list[KnowledgeTriple] = []
        for number, row in enumerate(rows, start=1):
            parts = [str(row.get(key) or "").strip() for key in ("head", "relation", "tail")]
            head, relation, tail = parts
            if not all(parts):
                problems.append(f"triple {number}: give a head, a relation and a tail")
                continue
            if max(len(head.split()), len(tail.split())) > MAX_PHRASE_WORDS or max(len(head), len(tail)) > MAX_TEXT:
                problems.append(f"triple {number}: a head or tail is a short phrase (at most {MAX_PHRASE_WORDS} words)")
                continue
            try:
                parsed = parse_relation(relation, strict=True)
            except ValueError as exc:
                problems.append(f"triple {number}: {exc}")
                continue
            said = verbalize(head, parsed.label, tail)
            triples.append(
                KnowledgeTriple(
                    head=head, relation=parsed.label, tail=tail, dimension=parsed.dimension, verbalized=said
                )
            )
        if none_found and rows:
            problems.append("no_knowledge: give triples or say there is no knowledge, not both")
        elif not none_found and not rows:
            problems.append(f"triples: give one to {task.max_triples}, or say there is no knowledge")
        if len(rows) > task.max_triples:
            problems.append(f"triples: at most {task.max_triples} (got {len(rows)})")
        keys = [(t.head.casefold(), t.relation, t.tail.casefold()) for t in triples]
        if len(set(keys)) != len(keys):
            problems.append("triples: the same triple twice")
        comment = comment_of(fields, "comment", problems)
        if problems:
            raise InvalidSubmission(problems)
        return KnowledgeAnnotationJudgement(
            item_id=task.id, annotator="?", triples=triples, no_knowledge=none_found, comment=comment
        )


class WriteRewrite(TaskType):
    """WSG by people: a minimal rewrite that breaks a kept triple and flips the label."""

    name: str = "wsg"
    votes: bool = False
    input_model: type[BaseModel] = RewriteItem
    policy: Policy | None = None

    def view(self, task: RewriteItem) -> dict[str, Any]:
        return {
            **_pair_view(task),
            "flipped": task.flipped,
            "triples": [t.model_dump(mode="json") for t in task.triples],
            "max_edits": task.max_edits,
        }

    def parse(self, task: RewriteItem, fields: Mapping[str, Any]) -> Judgement:
        problems: list[str] = []
        none_found = yes_no(fields, "no_alternative", problems, required=False) is True
        rewrite = " ".join((one(fields, "rewrite") or "").split())
        cited_raw = fields.get("violates")
        cited_values = cited_raw if isinstance(cited_raw, list) else values_of(fields, "violates")
        cited: list[int] = []
        for value in cited_values:
            try:
                index = int(value)
            except (TypeError, ValueError):
                problems.append(f"violates: {str(value)[:20]!r} is not a triple number")
                continue
            if not 0 <= index < len(task.triples):
                problems.append(f"violates: {index} is not one of the triples 0–{len(task.triples) - 1}")
            elif index not in cited:
                cited.append(index)
        if none_found and rewrite and not check_rewrite(task.target, rewrite, task.lang).unchanged:
            problems.append("no_alternative: give a rewrite or say there is none, not both")
        elif not none_found:
            if not rewrite:
                problems.append("rewrite: required (or say there is no alternative)")
            elif len(rewrite) > MAX_TEXT * 4:
                problems.append(f"rewrite: at most {MAX_TEXT * 4} characters")
            else:
                check = check_rewrite(task.target, rewrite, task.lang, limit=task.max_edits)
                if check.unchanged:
                    problems.append("rewrite: it is the original target")
                elif not check.within:
                    problems.append(f"rewrite: changes {check.edits} words; at most {task.max_edits}")
        comment = comment_of(fields, "comment", problems)
        if problems:
            raise InvalidSubmission(problems)
        return RewriteJudgement(
            item_id=task.id,
            annotator="?",
            rewrite=None if none_found else rewrite,
            violates=[] if none_found else (cited or [0]),
            no_alternative=none_found,
            comment=comment,
        )
