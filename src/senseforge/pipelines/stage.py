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

Bases carry what most stages repeat: :class:`LMStage` (one request per record: build →
call → parse, with the failure, retry and call-log handling written once),
:class:`FanOutStage` (several requests per record, sent in one call per kind and handed
back to their records), :class:`YesNoStage` (yes/no questions, asked as each model can
answer them: see :class:`YesNo`), :class:`RuleStage` and :class:`CheckStage` (keep or
reject by a rule), and :class:`Route` (one of two sub-stages per record). Each base has
:meth:`~LMStage.applies`: the records a stage does not apply to pass through it unchanged
(or as its ``skipped`` says). Every request a base sends carries the stage's name as its
``tag``, which scripted models read to tell the stages apart (no part of the cache key).

Every stage says what the runner needs to know of people's part in it, with two fields:
:attr:`Stage.people_tasks` (the task types whose judgements it reads; empty for model and
rule stages) and :attr:`Stage.pauses_run` (a record waiting at it stops the whole run, as a
review does, rather than only itself). :class:`PeopleStage` is the base of a task people do
in the annotation app, then a decision from their judgements.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from typing import Any, Generic, Literal, Protocol

from typing_extensions import TypeVar

from senseforge.data.schema import Judgement
from senseforge.errors import BackendError, SenseforgeError
from senseforge.evaluate.extract import yes_no
from senseforge.llm.base import LLM, Completion, GenerateRequest, Loglikelihood, LoglikelihoodRequest, Progress
from senseforge.llm.cache import cache_key
from senseforge.llm.prompting import chat_template
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


Request = GenerateRequest | LoglikelihoodRequest
"""One call a stage makes."""
Reply = Completion | Loglikelihood
"""What one call came back with."""


def shown_text(request: Request) -> str:
    """A request as stored beside its record: a generation's prompt (:func:`request_text`), a score's text."""
    if isinstance(request, LoglikelihoodRequest):
        return request.context + request.continuation
    return request_text(request)


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
    prompt: str | None = None
    """The prompt to store beside the rejection (default: the stage's, if it stores one)."""
    response: str | None = None
    """The reply to store beside the rejection (default: the stage's, if it stores one)."""


Parsed = Data | list[Data | Reject] | Reject
"""What :meth:`LMStage.parse` makes of a reply: the record's new data, the data of the record's
children (each may be a :class:`Reject`), or a rejection."""


R = TypeVar("R", bound=Record, default=Record)
"""The record model a stage reads (``LMStage[McsqaRecord]``); the runner reads each stage's input with its recipe's."""


@dataclass(frozen=True)
class Asked:
    """One record's calls: its requests and their replies, in order, and what they come to."""

    requests: tuple[Request, ...]
    replies: tuple[Reply, ...]
    calls: tuple[CallEntry, ...]
    """The calls that succeeded, for the cost report."""
    status: str | Wait | None
    """What the replies come to (:func:`settle`): ``None`` when every call succeeded."""


def _kind(request: Request) -> Literal["generate", "loglikelihood"]:
    return "loglikelihood" if isinstance(request, LoglikelihoodRequest) else "generate"


def sliced(llm: LLM, calls: Sequence[tuple[Request, Reply]], sizes: Sequence[int]) -> list[Asked]:
    """Calls made for several records, in record order, handed back: ``sizes[i]`` of them to the ``i``-th.

    Raises:
        BackendError: a call failed in a way no record can get past (see :func:`failure_outcome`).
        ValueError: the sizes do not add up to the calls.
    """
    if sum(sizes) != len(calls):
        raise ValueError(f"{len(calls)} calls, but the records' shares add up to {sum(sizes)}")
    log = CallLog.of(llm)
    out: list[Asked] = []
    at = 0
    for size in sizes:
        mine = calls[at : at + size]
        at += size
        entries = tuple(log.add(_kind(request), request, reply) for request, reply in mine if reply.ok)
        replies = tuple(reply for _, reply in mine)
        out.append(Asked(tuple(request for request, _ in mine), replies, entries, settle(replies)))
    return out


def ask(llm: LLM, tag: str, requests: Sequence[Sequence[Request]]) -> list[Asked]:
    """Every record's requests, tagged ``tag`` (the stage's name), sent in one call per kind; each record's back.

    Raises:
        BackendError: a call failed in a way no record can get past.
    """
    flat: list[Request] = [request.model_copy(update={"tag": tag}) for group in requests for request in group]
    replies: list[Reply | None] = [None] * len(flat)
    texts = [(i, q) for i, q in enumerate(flat) if isinstance(q, GenerateRequest)]
    scores = [(i, q) for i, q in enumerate(flat) if isinstance(q, LoglikelihoodRequest)]
    if texts:
        for (i, _), completion in zip(texts, llm.generate([q for _, q in texts]), strict=True):
            replies[i] = completion
    if scores:
        for (i, _), score in zip(scores, llm.loglikelihood([q for _, q in scores]), strict=True):
            replies[i] = score
    calls = [(request, reply) for request, reply in zip(flat, replies, strict=True) if reply is not None]
    return sliced(llm, calls, [len(group) for group in requests])


class Recorder:
    """A model that tags each request with a stage's name and keeps every call, in order: for a stage that asks
    through code it does not own (the evaluation harness), which then hands each record its calls (:meth:`sliced`).
    """

    def __init__(self, inner: LLM, tag: str) -> None:
        self.inner = inner
        self.tag = tag
        self.calls: list[tuple[Request, Reply]] = []

    @property
    def name(self) -> str:
        return self.inner.name

    def identity(self) -> dict[str, str]:
        return self.inner.identity()

    def chat_template(self) -> str | None:
        return chat_template(self.inner)

    def generate(self, requests: Sequence[GenerateRequest], progress: Progress | None = None) -> list[Completion]:
        tagged = [request.model_copy(update={"tag": self.tag}) for request in requests]
        results = self.inner.generate(tagged, progress)
        self.calls += zip(tagged, results, strict=True)
        return results

    def loglikelihood(
        self, requests: Sequence[LoglikelihoodRequest], progress: Progress | None = None
    ) -> list[Loglikelihood]:
        tagged = [request.model_copy(update={"tag": self.tag}) for request in requests]
        results = self.inner.loglikelihood(tagged, progress)
        self.calls += zip(tagged, results, strict=True)
        return results

    def close(self) -> None:
        self.inner.close()

    def sliced(self, sizes: Sequence[int]) -> list[Asked]:
        """The calls so far, ``sizes[i]`` of them to the ``i``-th record (see :func:`sliced`)."""
        return sliced(self.inner, self.calls, sizes)


def in_chat(llm: LLM) -> bool:
    """Whether ``llm`` answers in chat turns (it has a chat template), rather than being a base model."""
    return chat_template(llm) is not None


@dataclass(frozen=True)
class Said:
    """A model's answer to a :class:`YesNo` question."""

    yes: bool | None
    """``None``: no answer (a failed call, a reply that says neither)."""
    note: str = ""
    """What the model said: its reply, or its log-likelihoods of " yes" and " no"."""


@dataclass(frozen=True)
class YesNo:
    """A yes/no question, asked as the model can answer it (:func:`in_chat`).

    A chat model gets :attr:`prompt` as one user turn and answers in text: the first yes or
    no of :attr:`words` among its first words, anything else is no answer. A base model is
    scored on " yes" and " no" after the prompt and :attr:`cue`, and says yes when " yes" is
    the likelier; with :attr:`blank` (the question with nothing to judge) the log-odds are
    calibrated by the blank's (contextual calibration, Zhao et al. 2021), since small base
    models prefer " yes" to any question.
    """

    prompt: str
    blank: str | None = None
    cue: str = ""
    """What follows the prompt for a base model (e.g. ``"\\nAnswer:"``)."""
    seed: int = 0
    temperature: float = 0.0
    words: tuple[tuple[str, str], ...] = (("yes", "no"),)
    """The (yes, no) words a chat reply is read for, in turn."""

    def requests(self, chat: bool) -> list[Request]:
        """One chat request, or the log-likelihood requests (" yes", " no"; then the blank's) of a base model."""
        if chat:
            return [GenerateRequest.chat(self.prompt, max_tokens=8, temperature=self.temperature, seed=self.seed)]
        contexts = [self.prompt] if self.blank is None else [self.prompt, self.blank]
        return [
            LoglikelihoodRequest(context=context + self.cue, continuation=answer)
            for context in contexts
            for answer in (" yes", " no")
        ]

    def answer(self, chat: bool, replies: Sequence[Reply]) -> Said:
        """What the replies to :meth:`requests` say."""
        if chat:
            reply = replies[0]
            text = reply.text if isinstance(reply, Completion) and reply.ok else ""
            for yes, no in self.words:
                said = yes_no(text, yes, no)
                if said is not None:
                    return Said(said, text.strip())
            return Said(None, text.strip())
        logprobs = [r.logprob if isinstance(r, Loglikelihood) and r.ok else None for r in replies]
        if any(lp is None for lp in logprobs):
            return Said(None)
        yes_lp, no_lp, *blank = (float(lp or 0.0) for lp in logprobs)
        odds = yes_lp - no_lp - (blank[0] - blank[1] if blank else 0.0)
        return Said(odds > 0, f"loglik yes={yes_lp:.4f} no={no_lp:.4f}")


def ask_yes_no(llm: LLM, tag: str, questions: Sequence[Sequence[YesNo]]) -> list[tuple[Asked, list[Said]]]:
    """Each record's yes/no questions asked of ``llm`` (chat or base: :func:`in_chat`), and their answers."""
    chat = in_chat(llm)
    plans = [[question.requests(chat) for question in group] for group in questions]
    asked = ask(llm, tag, [[request for part in plan for request in part] for plan in plans])
    out: list[tuple[Asked, list[Said]]] = []
    for group, plan, got in zip(questions, plans, asked, strict=True):
        said: list[Said] = []
        at = 0
        for question, part in zip(group, plan, strict=True):
            said.append(question.answer(chat, got.replies[at : at + len(part)]))
            at += len(part)
        out.append((got, said))
    return out


def split_run(
    records: Sequence[StageResult[Any]],
    choose: Callable[[StageResult[Any]], bool],
    chosen: Callable[[Sequence[StageResult[Any]]], StageOutput],
    others: Callable[[Sequence[StageResult[Any]]], StageOutput],
) -> StageOutput:
    """``chosen`` run on the records ``choose`` picks and ``others`` on the rest (each only when it has some):
    the outcomes back in the records' order, the judgements and tasks of both."""
    picked = [choose(record) for record in records]
    outcomes: dict[int, Outcome] = {}
    judgements: list[tuple[Judgement, JudgementSource]] = []
    tasks: list[QueuedTask] = []
    for want, run in ((True, chosen), (False, others)):
        indices = [i for i, p in enumerate(picked) if p == want]
        if not indices:
            continue
        output = run([records[i] for i in indices])
        outcomes.update(zip(indices, output.outcomes, strict=True))
        judgements += output.judgements
        tasks += output.tasks
    return StageOutput([outcomes[i] for i in range(len(records))], judgements, tasks)


def outcome(
    name: str,
    record: StageResult[Any],
    parsed: Parsed,
    calls: Sequence[CallEntry],
    *,
    prompt: str | None = None,
    response: str | None = None,
) -> Outcome:
    """What stage ``name`` made of ``record`` from its parsed replies, with the ``calls`` it paid for and the
    ``prompt`` and ``response`` it shows (a :class:`Reject` may show its own)."""
    if isinstance(parsed, Reject):
        made = spent(_with_data(record, parsed.payload), name, calls)
        shown = parsed.prompt if parsed.prompt is not None else prompt
        said = parsed.response if parsed.response is not None else response
        return rejected(made, parsed.reason, prompt=shown, response=said, evidence=parsed.evidence)
    if not isinstance(parsed, list):
        return ok(spent(_with_data(record, parsed), name, calls), prompt=prompt, response=response)
    children: list[StageResult[Any]] = []
    for index, part in enumerate(parsed):
        kid = outcome(
            name,
            replace(record, record_id=child_id(record.record_id, index)),
            part,
            calls,
            prompt=prompt,
            response=response,
        )
        assert isinstance(kid, StageResult)  # a child's part is data or a Reject
        children.append(kid)
    return Children(tuple(children))


def failed(name: str, record: StageResult[Any], got: Asked) -> Outcome | None:
    """:data:`PENDING` when a call failed transiently; rejected (the first refused request shown, with the
    backend's message; the calls that succeeded paid for) when one was refused; ``None`` when all succeeded."""
    if got.status is None or isinstance(got.status, Wait):
        return got.status
    request, reply = next((q, r) for q, r in zip(got.requests, got.replies, strict=True) if not r.ok)
    made = spent(record, name, got.calls) if got.calls else record
    message = reply.failure.message if reply.failure else ""
    return rejected(made, got.status, prompt=shown_text(request), response=message)


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
    call log for the cost report are handled here, once.
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
                outcome(self.name, record, self.parse(record, text), got.calls, prompt=prompt, response=text)
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
                failure = outcome(self.name, record, self.parse(record, got.replies), got.calls)
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
                failure if failure is not None else outcome(self.name, record, self.decide(record, said), got.calls)
            )
        return StageOutput(outcomes)


@dataclass
class RuleStage(_Applying[R]):
    """A stage that calls no model and reads no judgements: subclasses write :meth:`rule` (or :meth:`run`)."""

    name: str
    barrier = False
    people_tasks = ()
    pauses_run = False

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
