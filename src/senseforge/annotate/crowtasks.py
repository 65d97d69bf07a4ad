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

from senseforge.annotate.fields import InvalidSubmission, TaskType
from senseforge.annotate.forms import (
    DIGITS,
    Form,
    FormField,
    Shown,
    comment_field,
    triples_text,
    yes_no_field,
)
from senseforge.annotate.i18n import N_, Said
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
from senseforge.kb.edits import check_rewrite

CONDITION_TEXTS: dict[str, str] = {
    "minimal": "Only a few words differ from the original",
    "violates": "It goes against the knowledge",
    "flips": "For this task it is the opposite of the original",
    "on_topic": "It stays on the topic of the context",
}
"""What each of CRoW's four conditions asks, as the page shows it."""


PAIR_SHOWN: tuple[Shown, ...] = (
    Shown("context", "Context", lambda view: f"{view['context_name']}: {view['context']}"),
    Shown("target", "Target", lambda view: f"{view['target_name']}: {view['target']} (label: {view['label']})"),
)
"""What every CRoW task shows of its pair."""


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
    form: Form = Form(
        "Does the knowledge hold as common sense, and does it link the context and the target?",
        (*PAIR_SHOWN, Shown("triple", "Knowledge", triples_text("triple"))),
        (yes_no_field("accept", "Does it hold and link the two?", texts=("Yes, it holds", "No")), comment_field()),
    )

    def view(self, task: KnowledgeCheckItem) -> dict[str, Any]:
        return {**_pair_view(task), "triple": task.triple.model_dump(mode="json")}

    def parse(self, task: KnowledgeCheckItem, fields: Mapping[str, Any]) -> Judgement:
        values, problems = self.form.read(self.view(task), fields)
        if problems:
            raise InvalidSubmission(problems)
        return KnowledgeCheckJudgement(
            item_id=task.id, annotator="?", accept=values["accept"], comment=values["comment"]
        )


class CheckSchema(TaskType):
    """WSV by people: CRoW's four conditions on a rewrite, each ticked or not."""

    name: str = "wsv"
    input_model: type[BaseModel] = RewriteCheckItem
    form: Form = Form(
        "Check the rewrite of the target on CRoW's four conditions: tick each that holds.",
        (
            *PAIR_SHOWN,
            Shown("rewrite", "Rewrite", lambda view: f"{view['rewrite']} (label: {view['flipped']})"),
            Shown("violates", "The knowledge it should go against", triples_text("violates")),
        ),
        (
            FormField(
                "conditions", "multi-choice", "The conditions that hold (tick each)", SCHEMA_CONDITIONS,
                option_texts=tuple(CONDITION_TEXTS[name] for name in SCHEMA_CONDITIONS), keys=DIGITS[:4],
            ),
            comment_field(),
        ),
    )  # fmt: skip

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
        values, problems = self.form.read(self.view(task), fields)
        if problems:
            raise InvalidSubmission(problems)
        conditions = {name: name in values["conditions"] for name in SCHEMA_CONDITIONS}
        comment = values["comment"]
        return SchemaCheckJudgement(
            item_id=task.id, annotator="?", accept=all(conditions.values()), conditions=conditions, comment=comment
        )


MAX_TEXT = 500


class AnnotateKnowledge(TaskType):
    """CKA by people: the knowledge that links a pair, as one to five triples."""

    name: str = "cka"
    votes: bool = False
    input_model: type[BaseModel] = AnnotationItem
    form: Form = Form(
        "Give the common-sense knowledge that links the context and the target as triples (head, relation, tail):"
        " head and tail a span of the text or a short phrase, the relation one of CRoW's (each may be negated).",
        (*PAIR_SHOWN,),
        (
            FormField(
                "triples", "triples", "Knowledge triples", tuple(r.name for r in relations()),
                rows=lambda view: int(view["max_triples"]), max_length=MAX_TEXT,
            ),
            yes_no_field("no_knowledge", "No such knowledge links them", required=False),
            comment_field(),
        ),
    )  # fmt: skip

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
        values, problems = self.form.read(self.view(task), fields)
        none_found = values["no_knowledge"] is True
        rows: list[dict[str, Any]] = values["triples"]
        triples: list[KnowledgeTriple] = []
        for number, row in enumerate(rows, start=1):
            parts = [str(row.get(key) or "").strip() for key in ("head", "relation", "tail")]
            head, relation, tail = parts
            if not all(parts):
                problems.append(Said(N_("triple %(n)s: give a head, a relation and a tail"), n=number))
                continue
            if max(len(head.split()), len(tail.split())) > MAX_PHRASE_WORDS or max(len(head), len(tail)) > MAX_TEXT:
                problems.append(
                    Said(
                        N_("triple %(n)s: a head or tail is a short phrase (at most %(words)s words)"),
                        n=number,
                        words=MAX_PHRASE_WORDS,
                    )
                )
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
            problems.append(N_("no_knowledge: give triples or say there is no knowledge, not both"))
        elif not none_found and not rows:
            problems.append(Said(N_("triples: give one to %(n)s, or say there is no knowledge"), n=task.max_triples))
        if len(rows) > task.max_triples:
            problems.append(Said(N_("triples: at most %(n)s (got %(got)s)"), n=task.max_triples, got=len(rows)))
        keys = [(t.head.casefold(), t.relation, t.tail.casefold()) for t in triples]
        if len(set(keys)) != len(keys):
            problems.append(N_("triples: the same triple twice"))
        comment = values["comment"]
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
    form: Form = Form(
        "Rewrite the target so that it breaks the knowledge and flips its label, staying on topic and changing"
        " at most a few words; or say there is no such rewrite.",
        (
            *PAIR_SHOWN,
            Shown("flipped", "The label the rewrite should have"),
            Shown("triples", "The knowledge to break (cite it by number)", triples_text("triples", numbered=True)),
        ),
        (
            FormField("rewrite", "text", "Your rewrite of the target", squash=True, max_length=MAX_TEXT * 4),
            FormField(
                "violates", "multi-choice", "The knowledge it breaks (default the first)", ("0",),
                options_from=lambda view: [str(n) for n in range(len(view["triples"]))],
            ),
            yes_no_field("no_alternative", "No such rewrite exists", required=False),
            comment_field(),
        ),
    )  # fmt: skip

    def view(self, task: RewriteItem) -> dict[str, Any]:
        return {
            **_pair_view(task),
            "flipped": task.flipped,
            "flipped_valid": task.flipped_valid,
            "triples": [t.model_dump(mode="json") for t in task.triples],
            "max_edits": task.max_edits,
        }

    def parse(self, task: RewriteItem, fields: Mapping[str, Any]) -> Judgement:
        values, problems = self.form.read(self.view(task), fields)
        none_found = values["no_alternative"] is True
        rewrite: str = values["rewrite"] or ""
        cited = [int(n) for n in values["violates"]]
        if none_found and rewrite and not check_rewrite(task.target, rewrite, task.lang).unchanged:
            problems.append(N_("no_alternative: give a rewrite or say there is none, not both"))
        elif not none_found:
            if not rewrite:
                problems.append(N_("rewrite: required (or say there is no alternative)"))
            elif len(rewrite) <= MAX_TEXT * 4:
                check = check_rewrite(task.target, rewrite, task.lang, limit=task.max_edits)
                if check.unchanged:
                    problems.append(N_("rewrite: it is the original target"))
                elif not check.within:
                    problems.append(
                        Said(N_("rewrite: changes %(n)s words; at most %(limit)s"), n=check.edits, limit=task.max_edits)
                    )
        comment = values["comment"]
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
