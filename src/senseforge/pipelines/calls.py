"""How a stage calls its models: requests sent in one call per kind and handed back to their records, what the
replies come to (success, a transient failure worth another round, a refusal), the log of calls a cost report
reads, and yes/no questions asked as each model can answer them.

The outcomes that store nothing (:data:`PENDING`, :data:`AWAITING`) live here too, since what a record's calls come
to may be one of them; :mod:`senseforge.pipelines.stage` builds the stage bases on these.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from senseforge.errors import BackendError
from senseforge.evaluate.extract import yes_no
from senseforge.llm.base import (
    LLM,
    Completion,
    GenerateRequest,
    Loglikelihood,
    LoglikelihoodRequest,
    Progress,
    ReplyShape,
)
from senseforge.llm.cache import cache_key
from senseforge.llm.prompting import chat_template
from senseforge.pipelines.runstore import CallEntry

TRANSIENT_FAILURES = frozenset({"rate_limit", "timeout", "server_error", "truncated", "connection", "awaiting_batch"})
"""Failure kinds worth another round: the same call may well succeed later (a batch at an API, once it is done)."""


FATAL_FAILURES = frozenset({"auth", "not_found", "unsupported"})
"""Failure kinds that no record can get past: the run stops with the backend's message."""


LLM_ERROR = "llm_error"
"""Rejection reason: the model refused the request for good (e.g. a 400 for this prompt)."""


class Wait(enum.Enum):
    """Outcomes that store nothing."""

    PENDING = "pending"
    AWAITING = "awaiting"


PENDING = Wait.PENDING


AWAITING = Wait.AWAITING


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
            batched=isinstance(result, Completion) and result.batched,
        )
        self.entries.append(entry)
        return entry


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


@functools.cache
def _yes_no_shape(words: tuple[tuple[str, str], ...]) -> ReplyShape:
    """:attr:`YesNo.shape` for ``words``: made once per set of words (a frozen shape, shared by every request)."""
    return ReplyShape.one_of("yes_no", dict.fromkeys(word for pair in words for word in pair))


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

    @property
    def shape(self) -> ReplyShape:
        """The shape of a chat reply: one of :attr:`words` (every pair's, in turn), the answer alone."""
        return _yes_no_shape(self.words)

    def requests(self, chat: bool) -> list[Request]:
        """One chat request (its reply shaped as :attr:`shape`), or the log-likelihood requests (" yes", " no";
        then the blank's) of a base model."""
        if chat:
            shape = self.shape
            return [
                GenerateRequest.chat(
                    self.prompt, max_tokens=8, temperature=self.temperature, seed=self.seed, reply_shape=shape
                )
            ]
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
