"""The stages of human-gen: concept slots, then three stages that wait for people.

Each people stage reads the judgements of its task types for its records and either
decides (``ok`` / ``rejected``) or waits (:data:`~senseforge.pipelines.calls.AWAITING`),
naming the task it waits for. Records it has decided go on while the rest wait, so
checkers start on the first items while creators still write.

* :class:`CreateByPeople` — the slot's creator writes the item (``create``, only they may); what they say with
  it reaches QC as the comment of the history's first event;
* :class:`QualityControl` — rounds of ``qc`` (a checker: ``complete`` or
  ``needs_revision``) and ``revise`` (the creator) on ``<item>@<round>``, until complete,
  or rejected ``qc_unresolved`` after ``max_rounds`` sendings back; the history is kept;
* :class:`BlindAnswers` — ``k`` pool members other than the creator answer blind; an item
  more than ``max_flags`` of them flag as ambiguous is excluded (``review_excluded``),
  else the majority over them (ties to the label picked first in pool order) is recorded
  beside the creator's answer.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Self

from senseforge.data.concepts import Concept
from senseforge.data.schema import (
    AnswerJudgement,
    ConceptSlot,
    CreateJudgement,
    Draft,
    DraftItem,
    Judgement,
    MCItem,
    QCEvent,
    QCJudgement,
    ReviseJudgement,
)
from senseforge.evaluate.policies import parse_policy, ruling
from senseforge.pipelines.calls import AWAITING
from senseforge.pipelines.human_gen.records import BlindAnswer, HumanGenRecord
from senseforge.pipelines.outcomes import Outcome, ok, rejected
from senseforge.pipelines.panel import Panel
from senseforge.pipelines.review import EXCLUDED
from senseforge.pipelines.runstore import StageResult
from senseforge.pipelines.stage import PeopleStage, Waiting
from senseforge.pipelines.taskqueue import QueuedTask

QC_UNRESOLVED = "qc_unresolved"
"""Rejection reason: QC sent the item back ``max_qc_rounds`` times."""


def slot_id(lang: str, creator: str, concept: Concept, occurrence: int) -> str:
    """A stable item id for one creator's item from one concept (``hg_<lang>_<12 hex>``)."""
    key = "\x1f".join((lang, creator, concept.category, concept.concept, str(occurrence)))
    return f"hg_{lang}_{hashlib.sha256(key.encode('utf-8')).hexdigest()[:12]}"


def assign(concepts: Sequence[Concept], pool: Sequence[str], how: str) -> list[tuple[str, Concept]]:
    """(creator, concept) pairs, in pool order and then table order.

    ``pairs``: the pool in consecutive pairs; each category's concepts are cut into as many
    consecutive shares as there are pairs (when a category does not divide evenly, the
    longer shares go to the pairs in turn, across categories), and both members of a pair
    write from their share. ``each``: everyone writes
    from every concept. ``one``: each concept goes to the next creator in turn.
    """
    if how == "each":
        return [(creator, concept) for creator in pool for concept in concepts]
    if how == "one":
        return sorted(
            ((pool[i % len(pool)], concept) for i, concept in enumerate(concepts)), key=lambda p: pool.index(p[0])
        )
    pairs = [tuple(pool[i : i + 2]) for i in range(0, len(pool), 2)]
    share: dict[int, list[Concept]] = {i: [] for i in range(len(pairs))}
    categories = list(dict.fromkeys(c.category for c in concepts))
    turn = 0  # which pair gets the next concept left over when a category does not divide evenly
    for category in categories:
        members = [c for c in concepts if c.category == category]
        size, extra = divmod(len(members), len(pairs))
        longer = {(turn + i) % len(pairs) for i in range(extra)}
        turn = (turn + extra) % len(pairs)
        start = 0
        for index in range(len(pairs)):
            end = start + size + (1 if index in longer else 0)
            share[index] += members[start:end]
            start = end
    return [(creator, concept) for index, pair in enumerate(pairs) for creator in pair for concept in share[index]]


def _first(judged: Sequence[Any], kind: Any, item_id: str, by: str | None = None) -> Any | None:
    for judgement in judged:
        if isinstance(judgement, kind) and judgement.item_id == item_id and (by is None or judgement.annotator == by):
            return judgement
    return None


def _when(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


@dataclass
class CreateByPeople(PeopleStage[HumanGenRecord]):
    """The slot's creator writes a question, its options, the answer and one hard distractor."""

    options: int = 5
    people_tasks = ("create",)

    def shown(self, record: StageResult[HumanGenRecord]) -> QueuedTask:
        data = record.data
        slot = ConceptSlot(
            id=record.record_id,
            lang=data.lang,
            category=data.category,
            concept=data.concept,
            creator=data.creator,
            options=self.options,
        )
        return QueuedTask("create", slot, k=1, group="human-gen", eligible=(data.creator,))

    def decide(self, record: StageResult[HumanGenRecord], judged: Sequence[Judgement]) -> Outcome:
        data = record.data
        made = _first(judged, CreateJudgement, record.record_id, data.creator)
        if made is None:
            return AWAITING
        said = {"create_comment": made.comment} if made.comment else {}  # unset without one: stored as before
        return ok(record, data.with_(draft=made.draft, created_at=_when(made.created_at), **said))


@dataclass
class QualityControl(PeopleStage[HumanGenRecord]):
    """Rounds of QC and revision until a checker marks the item complete (each round's task is its own)."""

    pool: tuple[str, ...] = ()
    checkers: tuple[str, ...] = ()
    max_rounds: int = 3
    people_tasks = ("qc", "revise")

    def checkers_for(self, creator: str) -> tuple[str, ...]:
        return tuple(name for name in (self.checkers or self.pool) if name != creator)

    def decide(self, record: StageResult[HumanGenRecord], judged: Sequence[Judgement]) -> Outcome | Waiting:
        data = record.data
        creator = data.creator
        draft = data.current_draft()
        history = [QCEvent(status="submitted", by=creator, round=0, comment=data.create_comment, at=data.created_at)]
        for round_no in range(1, self.max_rounds + 1):
            task_id = f"{record.record_id}@{round_no}"

            checked = [j for j in judged if j.annotator != creator]  # the store never offers one's own item
            verdict: QCJudgement | None = _first(checked, QCJudgement, task_id)
            if verdict is None:
                queued = QueuedTask(
                    "qc",
                    _draft_item(record, task_id, draft, history),
                    k=1,
                    group="human-gen",
                    creator=creator,
                    eligible=self.checkers_for(creator),
                )
                return Waiting(queued)
            status = "complete" if verdict.verdict == "complete" else "needs_revision"
            history.append(
                QCEvent(
                    status=status, by=verdict.annotator, round=round_no, comment=verdict.comment, at=verdict.created_at
                )
            )
            if verdict.verdict == "complete":
                return ok(record, data.with_(draft=draft, qc_history=history))
            if round_no == self.max_rounds:
                break
            edit: ReviseJudgement | None = _first(judged, ReviseJudgement, task_id, creator)
            if edit is None:
                revise = _draft_item(record, task_id, draft, history)
                return Waiting(QueuedTask("revise", revise, k=1, group="human-gen", eligible=(creator,)))
            draft = edit.draft
            history.append(
                QCEvent(status="revised", by=creator, round=round_no, comment=edit.comment, at=edit.created_at)
            )
        return rejected(record, QC_UNRESOLVED, payload=data.with_(draft=draft, qc_history=history))


def _draft_item(record: StageResult[HumanGenRecord], task_id: str, draft: Draft, history: list[QCEvent]) -> DraftItem:
    """The input of one round's ``qc`` or ``revise`` task: the item as it stands, and its history so far."""
    data = record.data
    return DraftItem(
        id=task_id,
        item_id=record.record_id,
        lang=data.lang,
        category=data.category,
        concept=data.concept,
        creator=data.creator,
        draft=draft,
        history=list(history),
    )


def answer_item(record: StageResult[HumanGenRecord]) -> MCItem:
    """The item answerers see (the task keeps the answer and creator; the page shows neither)."""
    data = record.data
    draft = data.current_draft()
    return MCItem(
        id=record.record_id,
        lang=data.lang,
        question=draft.question,
        question_concept=data.concept,
        choices=draft.choices,
        answer=draft.answer,
        category=data.category,
        metadata={"creator": data.creator},
    )


@dataclass
class BlindAnswers(PeopleStage[HumanGenRecord]):
    """``k`` pool members other than the creator answer; exclusion, then the majority."""

    pool: tuple[str, ...] = ()
    k: int = 1
    policy: str = "majority,exclude-ambiguous:3"
    """How the answers decide (Putri et al.: the majority, excluding an item more than three answerers flag)."""
    adjudicate: bool = False
    """A tied majority waits for an admin's adjudication (else the tie goes to the first in pool order)."""
    people_tasks = ("answer",)

    @classmethod
    def of_panel(cls, name: str, panel: Panel, *, pool: tuple[str, ...]) -> Self:
        """The stage a people :class:`~senseforge.pipelines.panel.Panel` of ``pool`` describes (``k`` ``None``:
        every pool member but the creator)."""
        k = panel.k if panel.k is not None else len(pool) - 1
        return cls(name, pool=pool, k=k, policy=panel.policy, adjudicate=panel.adjudicate)

    def answerers(self, creator: str) -> tuple[str, ...]:
        return tuple(name for name in self.pool if name != creator)

    def shown(self, record: StageResult[HumanGenRecord]) -> QueuedTask:
        creator = record.data.creator
        eligible = self.answerers(creator)
        return QueuedTask(
            "answer", answer_item(record), k=self.k, group="human-gen", creator=creator, eligible=eligible
        )

    def decide(self, record: StageResult[HumanGenRecord], judged: Sequence[Judgement]) -> Outcome | Waiting:
        data = record.data
        answerers = self.answerers(data.creator)
        given: dict[str, AnswerJudgement] = {}
        for judgement in judged:
            if isinstance(judgement, AnswerJudgement) and judgement.annotator in answerers:
                given.setdefault(judgement.annotator, judgement)
        if len(given) < self.k:
            return AWAITING
        ordered = [given[name] for name in answerers if name in given][: self.k]
        decision = ruling(judged) or parse_policy(self.policy)(ordered)
        if self.adjudicate and decision.status == "accepted" and not decision.reason.startswith("adjudicated"):
            top = sorted(decision.votes.values(), reverse=True)
            if len(top) > 1 and top[0] == top[1]:
                return Waiting()  # a tie: an admin settles it in the app's adjudication view
        answers = [
            BlindAnswer(annotator=j.annotator, choice=j.choice, certain=j.certain, flags=list(j.flags), reason=j.reason)
            for j in ordered
        ]
        answered = data.with_(answers=answers, answer_majority=decision.value)
        if decision.status == "excluded":
            return rejected(record, EXCLUDED, payload=answered.with_(excluded=decision.reason))
        return ok(record, answered)
