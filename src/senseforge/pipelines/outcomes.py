"""What a stage makes of its records: the outcomes (``ok``, ``rejected``, :class:`Children`, waiting), the
rejection a parser returns (:class:`Reject`), the batch's :class:`StageOutput`, and the helpers that turn a
parsed reply and its calls into an outcome. :mod:`senseforge.pipelines.stage` builds the stage bases on these.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from senseforge.data.schema import Judgement
from senseforge.errors import SenseforgeError
from senseforge.pipelines.calls import Asked, Wait, shown_text
from senseforge.pipelines.runstore import CallEntry, JudgementSource, Record, StageResult
from senseforge.pipelines.taskqueue import QueuedTask

MALFORMED = "malformed_output"
"""Rejection reason: the model's output holds nothing usable (broken JSON, a refusal, no question)."""
TRUNCATED = "truncated"
"""Rejection reason: the reply was cut off at the request's token limit (``finish_reason`` ``length``) and does not
parse; told apart from :data:`MALFORMED`, a complete reply that does not parse (raise the stage's ``max_tokens``)."""
NO_OUTPUT = "no_output"
"""Rejection reason: a stage that splits records made nothing of this one."""


@dataclass(frozen=True)
class Children:
    """A record that became several: its children, ids ``<parent>/<index>`` (see :func:`child`)."""

    results: tuple[StageResult, ...]


Outcome = StageResult | Children | Wait


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
    asked: int | None = None
    """Requests the stage's models were sent for the batch, as the executor counted them (``None``: not counted)."""
    failed: int = 0
    """Of those, the ones that came back failed."""


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
    """The record passed: its new data (its data as it entered when none), with the calls it made so far.

    Passed as it came (its data, its review, no evidence), it keeps the payload it was read from
    (:attr:`StageResult.stored`): the run store writes that again rather than dumping the record anew."""
    kept = _with_data(record, data)
    passed = replace(
        kept, status="ok", reason=None, prompt=prompt, response=response, evidence=None, review=review or kept.review
    )
    if data is None and record.stored is not None and not record.evidence and passed.review == record.review:
        passed.keep_stored(record.stored)
    return passed


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


def cut_off(parsed: Parsed, replies: Sequence[object]) -> Parsed:
    """``parsed`` with each :data:`MALFORMED` rejection made :data:`TRUNCATED` when a reply it was read from stopped
    at the token limit (``finish_reason`` ``length``); anything else as it is (the reply kept beside it either way).

    >>> from senseforge.llm.base import Completion
    >>> cut_off(Reject(), [Completion(text='{"a": [', finish_reason="length")]).reason
    'truncated'
    >>> cut_off(Reject(), [Completion(text="{", finish_reason="stop")]).reason
    'malformed_output'
    """
    if not any(getattr(reply, "finish_reason", None) == "length" for reply in replies):
        return parsed
    if isinstance(parsed, list):
        return [_cut(part) if isinstance(part, Reject) else part for part in parsed]
    return _cut(parsed) if isinstance(parsed, Reject) else parsed


def _cut(reject: Reject) -> Reject:
    return replace(reject, reason=TRUNCATED) if reject.reason == MALFORMED else reject


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
