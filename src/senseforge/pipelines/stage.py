"""What every recipe stage shares: the stage protocol, its outcomes, and the bases for LM and rule stages.

A stage maps the records that passed the previous stage to one outcome per record:

* a :class:`~senseforge.pipelines.runstore.StageResult` — ``ok`` with the new payload, or
  ``rejected`` with a reason — which the runner stores at once;
* :class:`~senseforge.pipelines.outcomes.Children` — the record became several (one model reply into its items, one
  context into its triples): each child has the id ``<parent>/<index>`` and is ``ok`` or
  ``rejected`` on its own; a record with no children is stored as rejected, never dropped;
* :data:`~senseforge.pipelines.calls.PENDING` — a call failed transiently (rate limit, timeout, 5xx, a truncated
  body); nothing is stored, the record is tried again in the next round (its completed
  calls come from the cache);
* :data:`~senseforge.pipelines.calls.AWAITING` — the record waits for people's judgements; ``--resume`` continues once
  they exist.

A stage holds model specs and settings, never a live model or store: the runner hands
its work to an executor together with a :class:`StageContext` (the models, and the
stored judgements the stage reads), so the work can be pickled and run elsewhere. The
judgements a stage makes go back in its :class:`StageOutput`; the runner stores them
with the batch.

Bases carry what most stages repeat: :class:`LMStage` (one request per record: build →
call → parse, with the failure, retry and call-log handling written once),
:class:`FanOutStage` (several requests per record, sent in one call per kind and handed
back to their records), :class:`YesNoStage` (yes/no questions, asked as each model can
answer them: see :class:`YesNo`), :class:`RuleStage` and :class:`CheckStage` (keep or
reject by a rule), and :class:`Route` (one of two sub-stages per record). Each base has
:meth:`~LMStage.applies`: the records a stage does not apply to pass through it unchanged
(or as its ``skipped`` says). Every request a base sends carries the stage's name as its
``tag``, which scripted models read to tell the stages apart (no part of the cache key). How a
stage calls its models (:func:`ask`, :class:`~senseforge.pipelines.calls.Recorder`, :class:`YesNo`, what replies
come to) is :mod:`senseforge.pipelines.calls`; the outcomes are :mod:`senseforge.pipelines.outcomes`.

Every stage says what the runner needs to know of people's part in it, with two fields:
:attr:`Stage.people_tasks` (the task types whose judgements it reads; empty for model and
rule stages) and :attr:`Stage.pauses_run` (a record waiting at it stops the whole run, as a
review does, rather than only itself). :class:`PeopleStage` is the base of a task people do
in the annotation app, then a decision from their judgements.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, runtime_checkable

from typing_extensions import TypeVar

from senseforge.data.schema import Judgement
from senseforge.llm.base import LLM, Completion, GenerateRequest
from senseforge.pipelines.calls import AWAITING, Reply, Request, Said, YesNo, ask, ask_yes_no, shown_text
from senseforge.pipelines.outcomes import (
    Outcome,
    Parsed,
    StageOutput,
    cut_off,
    failed,
    ok,
    outcome,
    rejected,
    split_run,
)
from senseforge.pipelines.runstore import Record, StageResult, StoredJudgement
from senseforge.pipelines.taskqueue import QueuedTask


class StageContext(Protocol):
    """What a stage may use while it runs: live models, and the judgements it reads."""

    def llm(self, spec: str) -> LLM:
        """The model of ``spec``, through the run's cache and ledger."""
        ...

    @property
    def judgements(self) -> Mapping[str, Sequence[StoredJudgement]]:
        """Stored judgements of the stage's :attr:`Stage.people_tasks`, per record id of the batch (also those of
        ``<id>@<round>``)."""
        ...


class Stage(Protocol):
    """One step of a recipe."""

    name: str
    barrier: bool
    """A barrier stage sees all its records at once (e.g. a split), only when its input is complete."""

    @property
    def specs(self) -> tuple[str, ...]:
        """The model specs the stage calls (none for rule stages)."""
        ...

    @property
    def people_tasks(self) -> tuple[str, ...]:
        """The task types whose judgements the stage reads (and whose tasks it may queue); empty for model and
        rule stages. Priced per human judgement in ``cost.json``; ``--decisions`` takes judgements of these."""
        ...

    @property
    def pauses_run(self) -> bool:
        """A record waiting for people here stops the whole run (a review); otherwise the records the stage has
        decided go on while the rest wait, and the run stops only before a barrier or a stage that pauses it."""
        ...

    def run(self, records: Sequence[StageResult[Any]], ctx: StageContext) -> StageOutput:
        """One outcome per record, in order (the records' data is the recipe's record model)."""
        ...


@runtime_checkable
class InOrder(Protocol):
    """A stage deciding each record from the records before it in record-id order, and from nothing after it
    (dropping a copy of an earlier kept question): instead of a barrier, it streams.

    The runner gives it records only in record-id order, one batch at a time, each once no record before it is
    still on its way through the stages before (or waiting for people there); before its first batch of a
    pass it calls :meth:`recall` with what the stage passed in earlier passes. Such a stage makes no model
    calls (a record tried again would come out of order).
    """

    def recall(self, earlier: Sequence[StageResult[Any]]) -> None:
        """Begin a pass: forget the last one, then remember ``earlier``, the records this stage passed before,
        in record-id order."""
        ...


R = TypeVar("R", bound=Record, default=Record)
"""The record model a stage reads (``LMStage[McsqaRecord]``); the runner reads each stage's input with its recipe's."""


class _Applying(Generic[R]):
    """What every base stage has: :meth:`applies` and :meth:`skipped`."""

    def applies(self, record: StageResult[R]) -> bool:
        """Whether the stage works on the record (default: every record); the others pass (:meth:`skipped`)."""
        return True

    def skipped(self, record: StageResult[R]) -> Outcome:
        """What becomes of a record the stage does not apply to (default: it passes unchanged)."""
        return ok(record)

    def _applied(
        self, records: Sequence[StageResult[Any]], run: Callable[[Sequence[StageResult[Any]]], StageOutput]
    ) -> StageOutput:
        return split_run(records, self.applies, run, lambda rest: StageOutput([self.skipped(r) for r in rest]))


@dataclass
class ModelStage(_Applying[R]):
    """What the model stages share: a name, the model they ask, and the records they apply to.

    Subclasses write :meth:`_run` over the records the stage applies to; a stage that calls the model
    through code it does not own (mCSQA's verification, through the evaluation harness) starts here and
    logs its calls with :class:`Recorder`.
    """

    name: str
    spec: str
    """The model the stage asks."""
    barrier = False
    people_tasks = ()
    pauses_run = False
    replayable = True
    """Its outcome for a record depends on its settings, the record and its calls' answers alone: a rebuild may
    replay it (:mod:`senseforge.pipelines.replay`). A subclass that reads anything else says ``False``."""

    @property
    def specs(self) -> tuple[str, ...]:
        return (self.spec,)

    def run(self, records: Sequence[StageResult[Any]], ctx: StageContext) -> StageOutput:
        return self._applied(records, lambda mine: self._run(mine, ctx))

    def _run(self, records: Sequence[StageResult[Any]], ctx: StageContext) -> StageOutput:
        """One outcome per record the stage applies to."""
        raise NotImplementedError


@dataclass
class LMStage(ModelStage[R]):
    """A stage that sends one generation request per record and parses the reply.

    Subclasses write :meth:`requests` and :meth:`parse`; failures (transient → another
    round, fatal → the run stops, refused → rejected), the raw prompt and reply, and the
    call log for the cost report are handled here, once. A reply cut off at the token limit that
    :meth:`parse` finds malformed is rejected as :data:`~senseforge.pipelines.outcomes.TRUNCATED`
    (:func:`~senseforge.pipelines.outcomes.cut_off`; so in every base).
    """

    @property
    def tag(self) -> str:
        """The tag of the stage's requests (default: its name)."""
        return self.name

    def requests(self, records: Sequence[StageResult[R]]) -> list[GenerateRequest]:
        raise NotImplementedError

    def parse(self, record: StageResult[R], text: str) -> Parsed:
        raise NotImplementedError

    def _run(self, records: Sequence[StageResult[Any]], ctx: StageContext) -> StageOutput:
        llm = ctx.llm(self.spec)
        asked = ask(llm, self.tag, [[request] for request in self.requests(records)])
        outcomes: list[Outcome] = []
        for record, got in zip(records, asked, strict=True):
            failure = failed(self.name, record, got)
            if failure is not None:
                outcomes.append(failure)
                continue
            text = got.replies[0].text if isinstance(got.replies[0], Completion) else ""
            prompt = shown_text(got.requests[0])
            outcomes.append(
                outcome(
                    self.name,
                    record,
                    cut_off(self.parse(record, text), got.replies),
                    got.calls,
                    prompt=prompt,
                    response=text,
                )
            )
        return StageOutput(outcomes)


@dataclass
class FanOutStage(ModelStage[R]):
    """A stage that sends several requests per record (of either kind) and parses their replies together.

    Subclasses write :meth:`requests` and :meth:`parse`. The base sends a batch's requests
    in one call per kind, hands each record its replies in order, and settles failures as
    :class:`LMStage` does: one transient failure of a record's calls → another round (the
    others come from the cache), fatal → the run stops, refused → rejected. The calls that
    succeeded are recorded per record for the cost report.
    """

    def requests(self, record: StageResult[R]) -> Sequence[Request]:
        raise NotImplementedError

    def parse(self, record: StageResult[R], replies: Sequence[Reply]) -> Parsed:
        raise NotImplementedError

    def _run(self, records: Sequence[StageResult[Any]], ctx: StageContext) -> StageOutput:
        asked = ask(ctx.llm(self.spec), self.name, [self.requests(record) for record in records])
        outcomes: list[Outcome] = []
        for record, got in zip(records, asked, strict=True):
            failure = failed(self.name, record, got)
            if failure is None:
                failure = outcome(self.name, record, cut_off(self.parse(record, got.replies), got.replies), got.calls)
            outcomes.append(failure)
        return StageOutput(outcomes)


@dataclass
class YesNoStage(ModelStage[R]):
    """A stage that asks yes/no questions of each record (:class:`YesNo`) and decides by the answers.

    Subclasses write :meth:`questions` and :meth:`decide`; the calls go as :class:`FanOutStage`'s do.
    """

    def questions(self, record: StageResult[R]) -> Sequence[YesNo]:
        raise NotImplementedError

    def decide(self, record: StageResult[R], said: Sequence[Said]) -> Parsed:
        raise NotImplementedError

    def _run(self, records: Sequence[StageResult[Any]], ctx: StageContext) -> StageOutput:
        answered = ask_yes_no(ctx.llm(self.spec), self.name, [self.questions(record) for record in records])
        outcomes: list[Outcome] = []
        for record, (got, said) in zip(records, answered, strict=True):
            failure = failed(self.name, record, got)
            outcomes.append(
                failure
                if failure is not None
                else outcome(self.name, record, cut_off(self.decide(record, said), got.replies), got.calls)
            )
        return StageOutput(outcomes)


@dataclass
class RuleStage(_Applying[R]):
    """A stage that calls no model and reads no judgements: subclasses write :meth:`rule` (or :meth:`run`)."""

    name: str
    barrier = False
    people_tasks = ()
    pauses_run = False
    replayable = False
    """See :attr:`ModelStage.replayable`: a rule may read anything (other records, files), so only the check
    bases say ``True``."""

    @property
    def specs(self) -> tuple[str, ...]:
        return ()

    def rule(self, records: Sequence[StageResult[R]], ctx: StageContext) -> StageOutput:
        """One outcome per record the stage applies to."""
        raise NotImplementedError

    def run(self, records: Sequence[StageResult[Any]], ctx: StageContext) -> StageOutput:
        return self._applied(records, lambda mine: self.rule(mine, ctx))


@dataclass
class CheckStage(RuleStage[R]):
    """A stage that keeps a record as it is or rejects it for the reason a rule gives (with its evidence)."""

    replayable = True

    def reason(self, data: R) -> str | None:
        """Why the record's data fails the rule, or ``None``."""
        raise NotImplementedError

    def evidence(self, data: R, reason: str) -> dict[str, Any] | None:
        """What the rule found when it rejected ``data`` for ``reason`` (none by default)."""
        return None

    def rule(self, records: Sequence[StageResult[R]], ctx: StageContext) -> StageOutput:
        outcomes: list[Outcome] = []
        for record in records:
            reason = self.reason(record.data)
            if reason is None:
                outcomes.append(ok(record))
            else:
                outcomes.append(rejected(record, reason, evidence=self.evidence(record.data, reason)))
        return StageOutput(outcomes)


@dataclass
class Route:
    """One of two sub-stages per record: those ``choose`` picks go to :attr:`chosen`, the rest to :attr:`others`;
    the outcomes come back in the records' order, the judgements and tasks of both.

    ``choose`` is a module-level function (the stage travels to executors by pickling).
    """

    name: str
    choose: Callable[[StageResult[Any]], bool]
    chosen: Stage
    others: Stage
    barrier = False
    pauses_run = False

    @property
    def replayable(self) -> bool:
        return bool(getattr(self.chosen, "replayable", False) and getattr(self.others, "replayable", False))

    @property
    def specs(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys((*self.chosen.specs, *self.others.specs)))

    @property
    def people_tasks(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys((*self.chosen.people_tasks, *self.others.people_tasks)))

    def run(self, records: Sequence[StageResult[Any]], ctx: StageContext) -> StageOutput:
        return split_run(
            records, self.choose, lambda mine: self.chosen.run(mine, ctx), lambda rest: self.others.run(rest, ctx)
        )


@dataclass(frozen=True)
class Waiting:
    """What :meth:`PeopleStage.decide` returns for a record that waits for a task other than :meth:`PeopleStage.shown`
    makes (a round of checking), or for none (an admin's ruling in the app)."""

    task: QueuedTask | None = None


@dataclass
class PeopleStage(_Applying[R]):
    """A stage people do in the annotation app, record by record (write, check, revise, answer, judge).

    Subclasses write :meth:`shown` (the task a waiting record is queued as) and :meth:`decide` (the outcome from
    people's judgements, or :data:`AWAITING` while they are not enough). Records it has decided go on to the next
    stages while others still wait (unless :attr:`pauses_run`); the runner queues the tasks and reads the
    judgements of :attr:`people_tasks`. Only people's judgements are handed to :meth:`decide`, in the order
    they were stored.
    """

    name: str
    barrier = False
    pauses_run = False

    @property
    def specs(self) -> tuple[str, ...]:
        return ()

    @property
    def people_tasks(self) -> tuple[str, ...]:
        raise NotImplementedError

    def shown(self, record: StageResult[R]) -> QueuedTask:
        """The task people are given for a record that waits."""
        raise NotImplementedError

    def decide(self, record: StageResult[R], judged: Sequence[Judgement]) -> Outcome | Waiting:
        """The record's outcome from people's judgements on it (its own and its rounds' ``<id>@<round>``);
        :data:`AWAITING` while it waits for the task :meth:`shown` makes, :class:`Waiting` for another (or none)."""
        raise NotImplementedError

    def run(self, records: Sequence[StageResult[Any]], ctx: StageContext) -> StageOutput:
        return self._applied(records, lambda mine: self._decided(mine, ctx))

    def _decided(self, records: Sequence[StageResult[Any]], ctx: StageContext) -> StageOutput:
        outcomes: list[Outcome] = []
        tasks: list[QueuedTask] = []
        for record in records:
            stored = ctx.judgements.get(record.record_id, ())
            decided = self.decide(record, [s.judgement for s in stored if s.source == "human"])
            if decided is AWAITING:
                decided = Waiting(self.shown(record))
            if isinstance(decided, Waiting):
                outcomes.append(AWAITING)
                tasks += [decided.task] if decided.task is not None else []
            else:
                outcomes.append(decided)
        return StageOutput(outcomes, tasks=tasks)
