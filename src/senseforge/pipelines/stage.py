"""What every recipe stage shares: the stage protocol, LM call bookkeeping and the runner.

A stage maps the records that passed the previous stage to one outcome per record:

* a :class:`~senseforge.pipelines.runstore.StageResult` — ``ok`` with the new payload, or
  ``rejected`` with a reason — which the runner stores at once;
* :data:`PENDING` — a call failed transiently (rate limit, timeout, 5xx, a truncated
  body); nothing is stored, the record is tried again in the next round (its completed
  calls come from the cache);
* :data:`AWAITING` — the record waits for human judgements; the run stops there and
  ``--resume`` continues once they exist.

The runner stores each batch in one transaction, so ``in = out + Σ rejected`` holds for
every finished stage and a killed run resumes at the first unstored batch.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

from senseforge.errors import BackendError, SenseforgeError
from senseforge.llm.base import Completion, GenerateRequest, Loglikelihood, LoglikelihoodRequest, Progress
from senseforge.llm.cache import cache_key
from senseforge.pipelines.runstore import RunStore, StageResult

TRANSIENT_FAILURES = frozenset({"rate_limit", "timeout", "server_error", "truncated", "connection"})
"""Failure kinds worth another round: the same call may well succeed later."""
FATAL_FAILURES = frozenset({"auth", "not_found", "unsupported"})
"""Failure kinds that no record can get past: the run stops with the backend's message."""

LLM_ERROR = "llm_error"
"""Rejection reason: the model refused the request for good (e.g. a 400 for this prompt)."""
MALFORMED = "malformed_output"
"""Rejection reason: the model's output holds nothing usable (broken JSON, a refusal, no question)."""


class Wait(enum.Enum):
    """Outcomes that store nothing."""

    PENDING = "pending"
    AWAITING = "awaiting"


PENDING = Wait.PENDING
AWAITING = Wait.AWAITING

Outcome = StageResult | Wait
ProgressFactory = Callable[[str, int], AbstractContextManager[Progress]]


class RunIncomplete(SenseforgeError):
    """Calls still failed after every round; ``--resume`` tries them again."""


class Stage(Protocol):
    """One step of a recipe."""

    name: str
    barrier: bool
    """A barrier stage sees all its records at once (e.g. a split), only when its input is complete."""

    def run(self, records: Sequence[StageResult]) -> list[Outcome]:
        """One outcome per record, in order."""
        ...


def ok(
    record: StageResult, payload: dict[str, Any], *, prompt: str | None = None, response: str | None = None
) -> StageResult:
    """The record passed: its new payload."""
    return StageResult(record.record_id, "ok", payload, prompt=prompt, response=response)


def rejected(
    record: StageResult,
    reason: str,
    *,
    payload: dict[str, Any] | None = None,
    prompt: str | None = None,
    response: str | None = None,
) -> StageResult:
    """The record is rejected, and why: its payload as it entered (plus the calls the stage made)."""
    kept = record.payload if payload is None else payload
    return StageResult(record.record_id, "rejected", kept, reason=reason, prompt=prompt, response=response)


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


@dataclass
class CallLog:
    """The calls a stage's model made, for cost reports that do not depend on the cache.

    Each entry names the call by its cache key, so a request repeated by several records
    (one distractor call per question set) counts once.
    """

    model: str
    identity: dict[str, str]
    entries: list[dict[str, Any]] = field(default_factory=list)

    def add(
        self, kind: str, request: GenerateRequest | LoglikelihoodRequest, result: Completion | Loglikelihood
    ) -> dict[str, Any]:
        provider = self.model.split("/", 1)[0]
        entry = {
            "key": cache_key(provider, self.identity, kind, request),  # type: ignore[arg-type]
            "model": self.model,
            "tokens_in": result.tokens_in,
            "tokens_out": result.tokens_out,
        }
        self.entries.append(entry)
        return entry


def add_call(payload: dict[str, Any], stage: str, entries: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """A copy of ``payload`` with the stage's call entries recorded under ``calls``."""
    calls = dict(payload.get("calls", {}))
    calls[stage] = list(entries)
    return {**payload, "calls": calls}


@contextmanager
def _no_progress(_description: str, _total: int) -> Iterator[Progress]:
    yield lambda _n: None


@dataclass
class StageReport:
    """What one pass of the runner left behind for a stage."""

    stored: int = 0
    awaiting: list[StageResult] = field(default_factory=list)


def run_stage(
    stage: Stage,
    inputs: Sequence[StageResult],
    store: RunStore,
    *,
    batch_size: int,
    rounds: int,
    progress: ProgressFactory | None = None,
) -> StageReport:
    """Run ``stage`` over the inputs that have no stored result yet.

    Raises:
        RunIncomplete: records whose calls kept failing transiently after ``rounds`` passes.
    """
    bar = progress or _no_progress
    report = StageReport()
    done = store.done_ids(stage.name)
    todo = [record for record in inputs if record.record_id not in done]
    if not todo:
        return report
    if stage.barrier and len(todo) != len(inputs):
        raise SenseforgeError(f"stage {stage.name}: partly stored; the run store is inconsistent")
    size = len(todo) if stage.barrier else batch_size
    for round_no in range(rounds):
        pending: list[StageResult] = []
        label = stage.name if round_no == 0 else f"{stage.name} (retry {round_no})"
        with bar(label, len(todo)) as advance:
            for start in range(0, len(todo), size):
                batch = todo[start : start + size]
                outcomes = stage.run(batch)
                if len(outcomes) != len(batch):
                    raise SenseforgeError(f"stage {stage.name}: {len(outcomes)} outcomes for {len(batch)} records")
                results = [o for o in outcomes if isinstance(o, StageResult)]
                store.put(stage.name, results)
                report.stored += len(results)
                for record, outcome in zip(batch, outcomes, strict=True):
                    if outcome is PENDING:
                        pending.append(record)
                    elif outcome is AWAITING:
                        report.awaiting.append(record)
                advance(len(batch))
        todo = pending
        if not todo:
            return report
    raise RunIncomplete(
        f"stage {stage.name}: {len(todo)} record(s) still failing after {rounds} round(s) of transient errors "
        "(see the ledger); run again with --resume to retry them"
    )
