"""The stages of ``build crow``: CKA → CKV → WSG → edits → dedup → WSV.

Each stage knows, per record, whether the record's task runs it (the task spec says); a
record whose task skips a stage passes through it unchanged, so one run builds tasks with
different stage choices side by side.

* **cka** turns a context into one record per knowledge triple (``<context>/<i>``): from a
  model's reply (CKA), or from the knowledge the source brought (tasks without CKA).
* **ckv** and **wsv** are the engine's review stage with an LM panel: each of ``k``
  validators is its own annotator (``lm:<spec>#<i>``, its own seed and its own phrasing of
  the question) and the item is kept with at least ``ckv_min`` / ``wsv_min`` votes. An item
  with a vote missing stays pending (the run stops incomplete and ``--resume`` asks again),
  never decided on fewer votes.
* **wsg** asks for one minimal rewrite per kept triple (the triple it must break is the
  one it is shown, recorded under ``violates``).
* **edits** checks the rewrite by word-level edit distance (:mod:`.edits`): unchanged or
  more than ``max_edits`` words changed is rejected; a negation-only rewrite is flagged
  (or rejected, by choice).
* **dedup** (a barrier: it sees every rewrite) keeps the first of identical rewrites of a
  context, with the union of the triples they break, and drops a rewrite that repeats one
  of the context's own targets.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Literal

from pydantic import BaseModel

from senseforge.data.crow_items import AnnotationItem, KnowledgeCheckItem, RewriteCheckItem, RewriteItem
from senseforge.data.schema import Judgement
from senseforge.kb.edits import check_rewrite
from senseforge.llm.base import GenerateRequest, PromptStyle
from senseforge.pipelines.calls import AWAITING
from senseforge.pipelines.crow.parse import NO_ALTERNATIVE, NO_KNOWLEDGE, parse_rewrite, parse_triples
from senseforge.pipelines.crow.records import CrowRecord, CrowTriple, KnowledgeFrom, required
from senseforge.pipelines.crow.tasks import TaskSpec
from senseforge.pipelines.crow.templates import cka_request, ckv_prompt, wsg_request, wsv_prompt
from senseforge.pipelines.outcomes import Children, Data, Outcome, Parsed, Reject, StageOutput, child_id, ok, rejected
from senseforge.pipelines.review import Review
from senseforge.pipelines.runstore import JudgementSource, StageResult
from senseforge.pipelines.stage import LMStage, PeopleStage, RuleStage, StageContext
from senseforge.pipelines.taskqueue import QueuedTask

UNCHANGED = "unchanged"
"""Rejection reason: the rewrite is the original target (after lower-casing and dropping punctuation)."""
TOO_MANY_EDITS = "too_many_edits"
"""Rejection reason: the rewrite changes more words than allowed."""
NEGATION_ONLY = "negation_only"
"""Flag (or rejection reason): the rewrite only adds or removes a negation."""
DUPLICATE = "duplicate"
"""Rejection reason: the context already has this target."""


def _spec(tasks: Mapping[str, TaskSpec], record: StageResult[CrowRecord]) -> TaskSpec:
    return tasks[record.data.task]


def _shown(triple: CrowTriple) -> dict[str, Any]:
    return triple.model_dump(mode="json")


def with_triple(data: CrowRecord, triple: CrowTriple, index: int, origin: KnowledgeFrom) -> CrowRecord:
    """A context's record narrowed to one of its triples."""
    return data.with_(triple=triple, triple_index=index, knowledge_from=origin)


@dataclass
class _TaskLM(LMStage[CrowRecord]):
    """An LM stage that asks only for the records whose task runs :attr:`stage`; :meth:`skipped` says what
    becomes of the others (by default they pass unchanged)."""

    tasks: Mapping[str, TaskSpec] = field(default_factory=dict)
    style: PromptStyle = "chat"
    temperature: float = 0.0
    max_tokens: int = 384
    seed: int = 0
    stage: ClassVar[str] = ""
    make: ClassVar[Callable[..., GenerateRequest]]

    def requests(self, records: Sequence[StageResult[CrowRecord]]) -> list[GenerateRequest]:
        sampling = {"temperature": self.temperature, "max_tokens": self.max_tokens, "seed": self.seed}
        return [type(self).make(r.data, _spec(self.tasks, r), self.style, **sampling) for r in records]

    def applies(self, record: StageResult[CrowRecord]) -> bool:
        return _spec(self.tasks, record).runs(self.stage)


@dataclass
class Annotate(_TaskLM):
    """CKA: a context's knowledge triples, one child record each (the source's own for a task without CKA)."""

    max_triples: int = 5
    stage: ClassVar[str] = "cka"
    make: ClassVar[Callable[..., GenerateRequest]] = cka_request

    def parse(self, record: StageResult[CrowRecord], text: str) -> Parsed:
        found = parse_triples(text if self.style == "chat" else "-" + text, self.max_triples)
        if not isinstance(found, list):
            return found
        data = record.data
        children: list[Data | Reject] = [
            t if isinstance(t, Reject) else with_triple(data, t, i, "cka") for i, t in enumerate(found)
        ]
        return children

    def skipped(self, record: StageResult[CrowRecord]) -> Outcome:
        return _given(record)


def _pair(record: StageResult[CrowRecord], spec: TaskSpec) -> dict[str, Any]:
    """What every task people do on a record shows of its pair."""
    data = record.data
    return {
        "id": record.record_id,
        "task": spec.name,
        "lang": spec.lang,
        "context_name": spec.context_name,
        "context": data.context,
        "target_name": spec.target_name,
        "target": data.target,
        "label": spec.label_word(data.label),
    }


@dataclass
class _ByPeople(PeopleStage[CrowRecord]):
    """A stage one person does per record in the app: a record of a task that skips the stage passes
    (:meth:`skipped`), one with its person's judgement is decided by it (:meth:`from_judgement`), the rest wait
    for the task :meth:`item` makes."""

    tasks: Mapping[str, TaskSpec] = field(default_factory=dict)
    stage: ClassVar[str] = ""

    @property
    def people_tasks(self) -> tuple[str, ...]:
        return (self.stage,)

    def applies(self, record: StageResult[CrowRecord]) -> bool:
        return _spec(self.tasks, record).runs(self.stage)

    def item(self, record: StageResult[CrowRecord], spec: TaskSpec) -> BaseModel:
        raise NotImplementedError

    def from_judgement(self, record: StageResult[CrowRecord], made: Any) -> Outcome:
        raise NotImplementedError

    def shown(self, record: StageResult[CrowRecord]) -> QueuedTask:
        shown = self.item(record, _spec(self.tasks, record))
        return QueuedTask(type=self.stage, input=shown, k=1, group=f"crow-{self.stage}")

    def decide(self, record: StageResult[CrowRecord], judged: Sequence[Judgement]) -> Outcome:
        made = next((j for j in judged if j.task == self.stage), None)  # one person writes each
        return AWAITING if made is None else self.from_judgement(record, made)


@dataclass
class PeopleAnnotate(_ByPeople):
    """CKA by people: each context waits for one person's triples (a ``cka`` task), then becomes one record each."""

    max_triples: int = 5
    stage: ClassVar[str] = "cka"

    def skipped(self, record: StageResult[CrowRecord]) -> Outcome:
        return _given(record)

    def item(self, record: StageResult[CrowRecord], spec: TaskSpec) -> BaseModel:
        others = [{"text": o.text, "label": spec.label_word(o.label)} for o in record.data.others]
        return AnnotationItem.model_validate({**_pair(record, spec), "others": others, "max_triples": self.max_triples})

    def from_judgement(self, record: StageResult[CrowRecord], made: Any) -> Outcome:
        if made.no_knowledge:
            return rejected(record, NO_KNOWLEDGE)
        data = record.data
        kids = [
            ok(
                replace(record, record_id=child_id(record.record_id, i)),
                with_triple(data, CrowTriple.model_validate(t.model_dump(mode="json")), i, "human"),
            )
            for i, t in enumerate(made.triples)
        ]
        return Children(tuple(kids))


@dataclass
class PeopleRewrite(_ByPeople):
    """WSG by people: each kept triple waits for one person's rewrite (a ``wsg`` task), or "no alternative"."""

    max_edits: int = 5
    stage: ClassVar[str] = "wsg"

    def item(self, record: StageResult[CrowRecord], spec: TaskSpec) -> BaseModel:
        data = record.data
        return RewriteItem.model_validate(
            {
                **_pair(record, spec),
                "flipped": spec.label_word(not data.label),
                "flipped_valid": not data.label,
                "triples": [_shown(required(data.triple, "triple"))],
                "max_edits": self.max_edits,
            }
        )

    def from_judgement(self, record: StageResult[CrowRecord], made: Any) -> Outcome:
        if made.no_alternative:
            return rejected(record, NO_ALTERNATIVE)
        return ok(record, _rewritten(record.data, made.rewrite))


def _rewritten(data: CrowRecord, rewrite: str) -> CrowRecord:
    """A triple's record with its rewrite, which breaks that triple."""
    return data.with_(rewrite=rewrite, violates=[required(data.triple, "triple")])


def _given(record: StageResult[CrowRecord]) -> Children:
    """A context's own knowledge (a task without CKA), one record per triple."""
    data = record.data
    kids = [
        ok(replace(record, record_id=child_id(record.record_id, i)), with_triple(data, t, i, "source"))
        for i, t in enumerate(data.knowledge)
    ]
    return Children(tuple(kids))


@dataclass
class _Validate(Review[CrowRecord]):
    """The review stage with an LM panel over one kind of item (triples or rewrites)."""

    tasks: Mapping[str, TaskSpec] = field(default_factory=dict)
    stage: Literal["ckv", "wsv"] = "ckv"

    def applies(self, record: StageResult[CrowRecord]) -> bool:
        return _spec(self.tasks, record).runs(self.stage)

    def judge_prompt(self, record: StageResult[CrowRecord]) -> str:
        return self.judge_prompt_for(record, 0)

    def judge_prompt_for(self, record: StageResult[CrowRecord], judge: int) -> str:
        spec = _spec(self.tasks, record)
        make = ckv_prompt if self.stage == "ckv" else wsv_prompt
        return make(record.data, spec, judge)

    def task_item(self, record: StageResult[CrowRecord]) -> BaseModel:
        """What a person validating the record sees (a ``ckv`` or ``wsv`` task of the app)."""
        spec, data = _spec(self.tasks, record), record.data
        pair = _pair(record, spec)
        if self.stage == "ckv":
            return KnowledgeCheckItem.model_validate({**pair, "triple": _shown(required(data.triple, "triple"))})
        return RewriteCheckItem.model_validate(
            {
                **pair,
                "rewrite": required(data.rewrite, "rewrite"),
                "flipped": spec.label_word(not data.label),
                "violates": [_shown(t) for t in required(data.violates, "violates")],
                "edits": data.edits,
                "flags": data.flags,
            }
        )

    def accepted(self, record: StageResult[CrowRecord], by: JudgementSource) -> CrowRecord:
        data = record.data
        return data.with_(ckv_by=by) if self.stage == "ckv" else data.with_(wsv_by=by)


@dataclass
class ValidateKnowledge(_Validate):
    """CKV: does the triple hold, and does it link the context with the target?"""

    stage: Literal["ckv", "wsv"] = "ckv"


@dataclass
class ValidateSchema(_Validate):
    """WSV: does the rewrite meet the four conditions?"""

    stage: Literal["ckv", "wsv"] = "wsv"


@dataclass
class Rewrite(_TaskLM):
    """WSG: one minimal rewrite of the target per kept triple (a task without WSG passes as it is)."""

    stage: ClassVar[str] = "wsg"
    make: ClassVar[Callable[..., GenerateRequest]] = wsg_request

    def parse(self, record: StageResult[CrowRecord], text: str) -> Parsed:
        found = parse_rewrite(text)
        if not isinstance(found, str):
            return found
        return _rewritten(record.data, found)


@dataclass
class CheckEdits(RuleStage[CrowRecord]):
    """The minimal-edit rule on every rewrite (see the module notes)."""

    tasks: Mapping[str, TaskSpec] = field(default_factory=dict)
    max_edits: int = 5
    negation_only: Literal["flag", "reject"] = "flag"

    def applies(self, record: StageResult[CrowRecord]) -> bool:
        return _spec(self.tasks, record).runs("wsg")

    def rule(self, records: Sequence[StageResult[CrowRecord]], ctx: StageContext) -> StageOutput:
        outcomes: list[Outcome] = []
        for record in records:
            spec = _spec(self.tasks, record)
            data = record.data
            check = check_rewrite(data.target, required(data.rewrite, "rewrite"), spec.lang, limit=self.max_edits)
            checked = data.with_(edits=check.edits, flags=[NEGATION_ONLY] if check.negation_only else [])
            found = {"edits": check.edits, "max_edits": self.max_edits}
            if check.unchanged:
                outcomes.append(rejected(record, UNCHANGED, payload=checked, evidence=found))
            elif not check.within:
                outcomes.append(rejected(record, TOO_MANY_EDITS, payload=checked, evidence=found))
            elif check.negation_only and self.negation_only == "reject":
                outcomes.append(rejected(record, NEGATION_ONLY, payload=checked, evidence=found))
            else:
                outcomes.append(ok(record, checked))
        return StageOutput(outcomes)


def _same(text: str) -> str:
    return " ".join(text.split())


@dataclass
class Dedup(RuleStage[CrowRecord]):
    """Identical rewrites of a context become one (see the module notes)."""

    tasks: Mapping[str, TaskSpec] = field(default_factory=dict)
    barrier = True

    def applies(self, record: StageResult[CrowRecord]) -> bool:
        return _spec(self.tasks, record).runs("wsg")

    def rule(self, records: Sequence[StageResult[CrowRecord]], ctx: StageContext) -> StageOutput:
        originals: dict[tuple[str, str], set[str]] = {}
        for record in records:
            data = record.data
            originals.setdefault((data.task, data.context_id), set()).add(_same(data.target))
        first: dict[tuple[str, str, str], str] = {}
        merged: dict[str, list[CrowTriple]] = {}
        verdict: dict[str, str | None] = {}
        copies: dict[str, dict[str, Any]] = {}
        for record in sorted(records, key=lambda r: r.record_id):
            data = record.data
            key = (data.task, data.context_id)
            text = _same(required(data.rewrite, "rewrite"))
            if text in originals[key]:
                verdict[record.record_id] = DUPLICATE
                copies[record.record_id] = {"same_as": "an original target of the context"}
                continue
            seen = first.setdefault((*key, text), record.record_id)
            if seen == record.record_id:
                merged[seen] = list(required(data.violates, "violates"))
                verdict[record.record_id] = None
                continue
            verdict[record.record_id] = DUPLICATE
            copies[record.record_id] = {"same_as": seen}
            for triple in required(data.violates, "violates"):
                if triple not in merged[seen]:
                    merged[seen].append(triple)
        outcomes: list[Outcome] = []
        for record in records:
            reason = verdict.get(record.record_id)
            if reason is not None:
                outcomes.append(rejected(record, reason, evidence=copies.get(record.record_id)))
            else:
                outcomes.append(ok(record, record.data.with_(violates=merged[record.record_id])))
        return StageOutput(outcomes)
