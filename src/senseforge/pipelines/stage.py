"""What every recipe stage shares: the stage protocol, its outcomes, and the bases for LM and rule stages.

A stage maps the records that passed the previous stage to one outcome per record:

* a :class:`~senseforge.pipelines.runstore.StageResult` — ``ok`` with the new payload, or
  ``rejected`` with a reason — which the runner stores at once;
* :class:`Children` — the record became several (one model reply into its items, one
  context into its triples): each child has the id ``<parent>/<index>`` and is ``ok`` or
  ``rejected`` on its own; a record with no children is stored as rejected, never dropped;
* :data:`PENDING` — a call failed transiently (rate limit, timeout, 5xx, a truncated
  body); nothing is stored, the record is tried again in the next round (its completed
  calls come from the cache);
* :data:`AWAITING` — the record waits for people's judgements; ``--resume`` continues once
  they exist.

A stage holds model specs and settings, never a live model or store: the runner hands
its work to an executor together with a :class:`StageContext` (the models, and the
stored judgements the stage reads), so the work can be pickled and run elsewhere. The
judgements a stage makes go back in its :class:`StageOutput`; the runner stores them
with the batch.

Bases carry what most stages repeat: :class:`LMStage` (build requests → call → parse,
with the failure, retry and call-log handling written once), :class:`CheckStage` (keep
or reject by a rule) and :class:`PeopleStage` (a task people do in the annotation app,
then a decision from their judgements).

Every stage says what the runner needs to know of people's part in it, with two fields:
:attr:`Stage.people_tasks` (the task types whose judgements it reads; empty for model and
rule stages) and :attr:`Stage.pauses_run` (a record waiting at it stops the whole run, as a
review does, rather than only itself).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from typing import Any, Generic, Protocol

from typing_extensions import TypeVar

from senseforge.data.schema import Judgement
from senseforge.errors import BackendError, SenseforgeError
from senseforge.llm.base import LLM, Completion, GenerateRequest, Loglikelihood, LoglikelihoodRequest, Progress
from senseforge.llm.cache import cache_key
from senseforge.pipelines.runstore import (
    EVIDENCE,
    CallEntry,
    JudgementSource,
    Record,
    StageResult,
    StoredJudgement,
)
from senseforge.pipelines.taskqueue import QueuedTask

TRANSIENT_FAILURES = frozenset({"rate_limit", "timeout", "server_error", "truncated", "connection"})
"""Failure kinds worth another round: the same call may well succeed later."""
FATAL_FAILURES = frozenset({"auth", "not_found", "unsupported"})
"""Failure kinds that no record can get past: the run stops with the backend's message."""

LLM_ERROR = "llm_error"
"""Rejection reason: the model refused the request for good (e.g. a 400 for this prompt)."""
MALFORMED = "malformed_output"
"""Rejection reason: the model's output holds nothing usable (broken JSON, a refusal, no question)."""
NO_OUTPUT = "no_output"
"""Rejection reason: a stage that splits records made nothing of this one."""

__all__ = ["EVIDENCE"]  # the stored payload's key of a rejected record's evidence (what the check found)


class Wait(enum.Enum):
    """Outcomes that store nothing."""

    PENDING = "pending"
    AWAITING = "awaiting"


PENDING = Wait.PENDING
AWAITING = Wait.AWAITING


@dataclass(frozen=True)
class Children:
    """A record that became several: its children, ids ``<parent>/<index>`` (see :func:`child`)."""

    results: tuple[StageResult, ...]


Outcome = StageResult | Children | Wait
ProgressFactory = Callable[[str, int | None], AbstractContextManager[Progress]]
"""A factory of progress callbacks, ``(description, total or None)`` → context manager of ``advance(n)``."""


class RunIncomplete(SenseforgeError):
    """Calls still failed after every round; ``--resume`` tries them again."""


@dataclass
class StageOutput:
    """What a stage made of a batch: one outcome per record, the judgements it made, the work it wants done."""

    outcomes: Sequence[Outcome]
    judgements: Sequence[tuple[Judgement, JudgementSource]] = field(default_factory=list)
    tasks: Sequence[QueuedTask] = field(default_factory=list)
    """Tasks for people: those the :data:`AWAITING` records wait for, and any a stage hands out for records it
    passed (nobody waits for those). The runner queues them all in the annotation app with the batch."""


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


Data = Record
"""A record's new data: an instance of its recipe's record model."""


def _with_data(record: StageResult[Any], data: Data | None) -> StageResult[Any]:
    """``record`` with new data (``None``: as it is), its engine fields kept."""
    return record if data is None else replace(record, data=data)


def ok(
    record: StageResult[Any],
    data: Data | None = None,
    *,
    prompt: str | None = None,
    response: str | None = None,
    review: JudgementSource | None = None,
) -> StageResult[Any]:
    """The record passed: its new data (its data as it entered when none), with the calls it made so far."""
    kept = _with_data(record, data)
    return replace(
        kept, status="ok", reason=None, prompt=prompt, response=response, evidence=None, review=review or kept.review
    )


def rejected(
    record: StageResult[Any],
    reason: str,
    *,
    payload: Data | None = None,
    prompt: str | None = None,
    response: str | None = None,
    evidence: Mapping[str, Any] | None = None,
) -> StageResult[Any]:
    """The record is rejected, and why: its data as it entered (or ``payload``), the calls it made, and
    ``evidence``, what the check found (``rejects.jsonl`` shows it beside the reason)."""
    kept = _with_data(record, payload)
    found = dict(evidence) if evidence else (kept.evidence if payload is not None else None)
    return replace(kept, status="rejected", reason=reason, prompt=prompt, response=response, evidence=found or None)


def spent(record: StageResult[Any], stage: str, entries: Sequence[CallEntry]) -> StageResult[Any]:
    """``record`` with the calls ``stage`` made for it recorded (replacing any the stage recorded before)."""
    return replace(record, calls={**record.calls, stage: tuple(entries)})


def child_id(parent: str, index: int) -> str:
    """The id of a parent's ``index``-th child."""
    return f"{parent}/{index}"


def request_text(request: GenerateRequest) -> str:
    """A generation request as stored beside its record (chat turns labelled)."""
    if request.prompt is not None:
        return request.prompt
    return "\n".join(f"[{m.role}]\n{m.content}" for m in request.as_messages())


def failure_outcome(result: Completion | Loglikelihood) -> str | Wait | None:
    """``None`` for a success; :data:`PENDING` for a transient failure; else the rejection reason.

    Raises:
        BackendError: a failure that would sink every record (bad key, unknown model).
    """
    failure = result.failure
    if failure is None:
        return None
    if failure.kind in TRANSIENT_FAILURES:
        return PENDING
    if failure.kind in FATAL_FAILURES:
        raise BackendError(f"{failure.kind}: {failure.message}")
    return LLM_ERROR


def settle(results: Sequence[Completion | Loglikelihood]) -> str | Wait | None:
    """The joint outcome of the calls one record needed: pending if any is, else the first rejection, else ``None``."""
    statuses = [failure_outcome(result) for result in results]
    if PENDING in statuses:
        return PENDING
    return next((s for s in statuses if isinstance(s, str)), None)


@dataclass
class CallLog:
    """The calls a stage's model made, for cost reports that do not depend on the cache.

    Each entry names the call by its cache key, so a request repeated by several records
    (one distractor call per question set) counts once.
    """

    model: str
    identity: dict[str, str]
    entries: list[CallEntry] = field(default_factory=list)

    @classmethod
    def of(cls, llm: LLM) -> CallLog:
        """A log for ``llm``'s calls."""
        return cls(llm.name, llm.identity())

    def add(
        self, kind: str, request: GenerateRequest | LoglikelihoodRequest, result: Completion | Loglikelihood
    ) -> CallEntry:
        provider = self.model.split("/", 1)[0]
        entry = CallEntry(
            key=cache_key(provider, self.identity, kind, request),  # type: ignore[arg-type]
            model=self.model,
            tokens_in=result.tokens_in,
            tokens_out=result.tokens_out,
        )
        self.entries.append(entry)
        return entry


@dataclass(frozen=True)
class Reject:
    """A parser's verdict that the reply (or one child of it) is unusable, and why."""

    reason: str = MALFORMED
    payload: Data | None = None
    """What the rejected child carries (default: the parent's data)."""
    evidence: dict[str, Any] | None = None
    """What the check found (stored under :data:`EVIDENCE`)."""


Parsed = Data | list[Data | Reject] | Reject
"""What :meth:`LMStage.parse` makes of a reply: the record's new data, the data of the record's
children (each may be a :class:`Reject`), or a rejection."""


R = TypeVar("R", bound=Record, default=Record)
"""The record model a stage reads (``LMStage[McsqaRecord]``); the runner reads each stage's input with its recipe's."""


@dataclass
class LMStage(Generic[R]):
    """A stage that sends one generation request per record and parses the reply.

    Subclasses write :meth:`requests` and :meth:`parse`; failures (transient → another
    round, fatal → the run stops, refused → rejected), the raw prompt and reply, and the
    call log for the cost report are handled here, once.
    """

    name: str
    spec: str
    """The model the stage asks."""
    barrier = False
    people_tasks = ()
    pauses_run = False

    @property
    def specs(self) -> tuple[str, ...]:
        return (self.spec,)

    def requests(self, records: Sequence[StageResult[R]]) -> list[GenerateRequest]:
        raise NotImplementedError

    def parse(self, record: StageResult[R], text: str) -> Parsed:
        raise NotImplementedError

    def run(self, records: Sequence[StageResult[Any]], ctx: StageContext) -> StageOutput:
        llm = ctx.llm(self.spec)
        requests = self.requests(records)
        completions = llm.generate(requests)
        log = CallLog.of(llm)
        outcomes: list[Outcome] = []
        for record, request, completion in zip(records, requests, completions, strict=True):
            prompt = request_text(request)
            status = failure_outcome(completion)
            if isinstance(status, str):
                message = completion.failure.message if completion.failure else ""
                outcomes.append(rejected(record, status, prompt=prompt, response=message))
                continue
            if status is not None:
                outcomes.append(status)
                continue
            call = log.add("generate", request, completion)
            outcomes.append(self._outcome(record, self.parse(record, completion.text), call, prompt, completion.text))
        return StageOutput(outcomes)

    def _outcome(self, record: StageResult[Any], parsed: Parsed, call: CallEntry, prompt: str, text: str) -> Outcome:
        if isinstance(parsed, Reject):
            made = spent(_with_data(record, parsed.payload), self.name, [call])
            return rejected(made, parsed.reason, prompt=prompt, response=text, evidence=parsed.evidence)
        if not isinstance(parsed, list):
            return ok(spent(_with_data(record, parsed), self.name, [call]), prompt=prompt, response=text)
        children = []
        for index, part in enumerate(parsed):
            kid = replace(record, record_id=child_id(record.record_id, index))
            if isinstance(part, Reject):
                made = spent(_with_data(kid, part.payload), self.name, [call])
                children.append(rejected(made, part.reason, prompt=prompt, response=text, evidence=part.evidence))
            else:
                children.append(ok(spent(_with_data(kid, part), self.name, [call]), prompt=prompt, response=text))
        return Children(tuple(children))


@dataclass
class RuleStage(Generic[R]):
    """A stage that calls no model and reads no judgements: subclasses write :meth:`run`."""

    name: str
    barrier = False
    people_tasks = ()
    pauses_run = False

    @property
    def specs(self) -> tuple[str, ...]:
        return ()

    def run(self, records: Sequence[StageResult[Any]], ctx: StageContext) -> StageOutput:
        raise NotImplementedError


@dataclass
class CheckStage(RuleStage[R]):
    """A stage that keeps a record as it is or rejects it for the reason a rule gives (with its evidence)."""

    def reason(self, data: R) -> str | None:
        """Why the record's data fails the rule, or ``None``."""
        raise NotImplementedError

    def evidence(self, data: R, reason: str) -> dict[str, Any] | None:
        """What the rule found when it rejected ``data`` for ``reason`` (none by default)."""
        return None

    def run(self, records: Sequence[StageResult[Any]], ctx: StageContext) -> StageOutput:
        outcomes: list[Outcome] = []
        for record in records:
            reason = self.reason(record.data)
            if reason is None:
                outcomes.append(ok(record))
            else:
                outcomes.append(rejected(record, reason, evidence=self.evidence(record.data, reason)))
        return StageOutput(outcomes)


@dataclass(frozen=True)
class Waiting:
    """What :meth:`PeopleStage.decide` returns for a record that waits for a task other than :meth:`PeopleStage.shown`
    makes (a round of checking), or for none (an admin's ruling in the app)."""

    task: QueuedTask | None = None


@dataclass
class PeopleStage(Generic[R]):
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


def no_progress(_description: str, _total: int | None) -> AbstractContextManager[Progress]:
    """A progress factory that shows nothing."""
    return _Quiet()


class _Quiet:
    def __enter__(self) -> Progress:
        return lambda _n: None

    def __exit__(self, *_exc: object) -> None:
        return None


def iter_batches(records: Sequence[StageResult[Any]], size: int) -> Iterator[Sequence[StageResult[Any]]]:
    """Consecutive batches of at most ``size`` records."""
    for start in range(0, len(records), size):
        yield records[start : start + size]
