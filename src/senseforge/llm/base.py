"""The LM protocol: two batch-first verbs, and the request and result records.

A backend takes a whole batch and returns one result per request, in order. A request
that fails after the backend's retries does not raise: its result carries a typed
:class:`Failure`, so one bad call never loses the rest of a batch.
"""

from __future__ import annotations

import json
import math
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

from senseforge.llm.jsonx import extract_json

Progress = Callable[[int], None]
"""Called with the number of requests just finished (for progress bars)."""

MAX_TOP_LOGPROBS = 20
"""The most alternatives per position a request may ask for (OpenAI's limit)."""

TopLogprobs = tuple[tuple[tuple[str, float], ...], ...]
"""Per generated token position, in order: the most likely tokens there as ``(token, log-probability)``
(natural log), the most likely first."""

PromptStyle = Literal["chat", "completion"]
"""How a prompt is written: chat messages (for a model with a chat template), or a plain
few-shot text that a base model continues (a :class:`GenerateRequest`'s ``prompt``)."""

FailureKind = Literal[
    "rate_limit",  # 429 after all retries
    "timeout",  # no answer in time
    "server_error",  # 5xx
    "truncated",  # a response body that could not be decoded
    "connection",  # could not connect / connection dropped
    "bad_request",  # 4xx other than 401/403/404/429: retrying will not help
    "auth",  # 401 / 403
    "not_found",  # 404: unknown model or endpoint
    "unsupported",  # the backend cannot do this kind of request
    "backend",  # anything else the backend raised
    "awaiting_batch",  # sent in an API batch that has not finished: a later call collects it
]


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Message(_Frozen):
    """One chat message."""

    role: Literal["system", "user", "assistant"]
    """Who speaks."""
    content: str
    """What they say."""


class ReplyShape(_Frozen):
    """The shape a reply must take, declared once by the stage that parses it.

    Either a JSON schema (from the pydantic model the stage's parser validates against: :meth:`of_model`) or a
    closed set of strings (a letter, ``yes``/``no``, a verdict word: :meth:`one_of`). A backend that can constrain
    its decoding to the shape does; the stage's parser stays strict either way.

    >>> ReplyShape.one_of("verdict", ["yes", "no"]).choices
    ('yes', 'no')
    """

    name: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")
    """A short name for the shape (the stage's), as OpenAI's ``json_schema`` response format wants one."""
    json_schema: str | None = None
    """The JSON schema, as canonical JSON text (sorted keys, no spaces), so the shape is hashable and keyed stably."""
    choices: tuple[str, ...] | None = None
    """The reply is exactly one of these strings."""

    @model_validator(mode="after")
    def _one_form(self) -> ReplyShape:
        if (self.json_schema is None) == (self.choices is None):
            raise ValueError("give exactly one of json_schema and choices")
        if self.choices is not None and (not self.choices or any(not c for c in self.choices)):
            raise ValueError("choices must be non-empty strings, at least one")
        if self.json_schema is not None and not isinstance(json.loads(self.json_schema), dict):
            raise ValueError("json_schema must be a JSON object")
        return self

    @classmethod
    def of_model(cls, model: type[BaseModel], name: str | None = None) -> ReplyShape:
        """The shape of a reply that validates as ``model`` (its JSON schema, named after it unless ``name``)."""
        schema = model.model_json_schema()
        return cls(name=name or model.__name__, json_schema=json.dumps(schema, sort_keys=True, separators=(",", ":")))

    @classmethod
    def one_of(cls, name: str, choices: Iterable[str]) -> ReplyShape:
        """The shape of a reply that is exactly one of ``choices``."""
        return cls(name=name, choices=tuple(choices))

    def as_schema(self) -> dict[str, Any] | None:
        """The JSON schema as a dict (``None`` for a shape of choices)."""
        if self.json_schema is None:
            return None
        loaded: dict[str, Any] = json.loads(self.json_schema)
        return loaded


class GenerateRequest(_Frozen):
    """A generation request: a plain prompt or a chat, plus sampling parameters."""

    prompt: str | None = None
    """Plain text prompt (completion style). Exactly one of ``prompt`` and ``messages``."""
    messages: tuple[Message, ...] | None = None
    """Chat messages. Exactly one of ``prompt`` and ``messages``."""
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    """Sampling temperature; 0 means greedy."""
    top_p: float = Field(default=1.0, ge=0.0, le=1.0)
    """Nucleus sampling mass."""
    seed: int | None = 0
    """Sampling seed (part of the cache key)."""
    max_tokens: int = Field(default=256, ge=1)
    """Most tokens to generate."""
    stop: tuple[str, ...] = ()
    """Strings that end generation (not included in the text)."""
    json_mode: bool = False
    """Ask for a JSON object (native JSON mode where the backend has one)."""
    reply_shape: ReplyShape | None = None
    """The shape the reply must take (:class:`ReplyShape`), for backends that constrain decoding to it.

    Part of the cache key when set; unset, it is left out of every dump, so a request without one is keyed, ledgered
    and batched as before the field existed."""
    top_logprobs: int = Field(default=0, ge=0, le=MAX_TOP_LOGPROBS)
    """Ask for this many most likely tokens at each generated position, with their log-probabilities
    (:attr:`Completion.top_logprobs`), where the backend gives them; 0 (the default) asks for none.

    Part of the cache key when above 0; at 0 it is left out of every dump, so a default request's key, ledger
    row and batch line are what they were before the field existed."""
    tag: str | None = Field(default=None, exclude=True)
    """Who asks (a recipe stage's name), for scripted models that answer each stage its own way.

    Never sent to a provider and left out of every dump, so it is no part of the cache key."""

    @model_validator(mode="after")
    def _one_input(self) -> GenerateRequest:
        if (self.prompt is None) == (self.messages is None):
            raise ValueError("give exactly one of prompt and messages")
        if self.messages is not None and not self.messages:
            raise ValueError("messages must not be empty")
        return self

    @model_serializer(mode="wrap")
    def _no_top_logprobs(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        shown: dict[str, Any] = handler(self)
        if shown.get("top_logprobs") == 0:  # not asked: dumped (and keyed) as before the field existed
            del shown["top_logprobs"]
        if "reply_shape" in shown and shown["reply_shape"] is None:  # likewise
            del shown["reply_shape"]
        return shown

    @classmethod
    def chat(cls, user: str, *, system: str | None = None, **sampling: Any) -> GenerateRequest:
        """A chat request with one user turn (and an optional system turn)."""
        messages = [Message(role="system", content=system)] if system else []
        messages.append(Message(role="user", content=user))
        return cls(messages=tuple(messages), **sampling)

    def as_messages(self) -> tuple[Message, ...]:
        """The request as chat messages (a plain prompt becomes one user turn)."""
        if self.messages is not None:
            return self.messages
        assert self.prompt is not None
        return (Message(role="user", content=self.prompt),)


class LoglikelihoodRequest(_Frozen):
    """Score ``continuation`` as the text that follows ``context``."""

    context: str
    """Text before the continuation (may be empty)."""
    continuation: str = Field(min_length=1)
    """The scored text, e.g. one answer choice (usually starting with a space)."""
    tag: str | None = Field(default=None, exclude=True)
    """Who asks (see :attr:`GenerateRequest.tag`): no part of the cache key."""


class Failure(_Frozen):
    """Why a request failed after all retries."""

    kind: FailureKind
    """Category of failure."""
    message: str
    """The last error, in one line."""
    status: int | None = None
    """HTTP status where there was one."""


class _Result(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tokens_in: int | None = None
    """Prompt tokens billed or evaluated (None when the backend does not say)."""
    tokens_out: int | None = None
    """Generated tokens."""
    latency_s: float = 0.0
    """Wall time spent on this request, from asking to answer: retries and their backoff included, and any wait in
    the client for a concurrency slot or a rate budget (see :attr:`service_s` and :attr:`queue_s`)."""
    service_s: float | None = None
    """Seconds the server had the request: each attempt from its sending to its answer, summed (``None`` where a
    provider does not measure it apart from :attr:`latency_s`). Never stored in the cache."""
    queue_s: float | None = None
    """Seconds the request waited in the client before its attempts were sent (for a concurrency slot, a rate or
    token budget, an endpoint's ``Retry-After``), summed; ``None`` where not measured. Never stored in the cache."""
    attempts: int = 1
    """Backend attempts made (1 = no retry; 0 = answered from the cache)."""
    failure: Failure | None = None
    """Set when the request failed after all retries."""
    retry_errors: tuple[str, ...] = ()
    """One short line per failed attempt, e.g. ``429 rate_limit: …`` or ``timeout: …``.

    Holds the attempts that were retried and, for a failed request, the one that gave up
    (which is also in :attr:`failure`). Never stored in the cache: a hit has none.
    """
    cached: bool = False
    """True when the result came from the cache and no backend call was made."""
    concurrency: int | None = None
    """The endpoint's concurrency level when the request's last attempt was sent (a provider that adapts it to
    the endpoint's limits; ``None`` elsewhere and for a cache hit). Never stored in the cache."""
    batched: bool = False
    """Answered through an API's batch endpoint, at its price (see :data:`senseforge.llm.prices.BATCH_SHARE`);
    kept in the cache, so a hit still says so."""

    @property
    def ok(self) -> bool:
        """Whether the request succeeded."""
        return self.failure is None


class Completion(_Result):
    """The result of one :class:`GenerateRequest`."""

    text: str = ""
    """Generated text (empty on failure)."""
    finish_reason: str | None = None
    """``stop``, ``length`` … as reported by the backend."""
    top_logprobs: TopLogprobs | None = None
    """Where the request asked for them (:attr:`GenerateRequest.top_logprobs`) and the backend gives them: per
    generated token, the most likely tokens there with their log-probabilities (see :data:`TopLogprobs`) and
    :func:`letter_probabilities`. ``None`` otherwise, and then left out of every dump, so a cached completion
    without them is stored as before the field existed. An alternative whose log-probability is not finite
    (``-inf``: probability 0) is dropped, as JSON, and so the cache, cannot keep it."""

    constrained: bool | None = None
    """Whether the backend constrained its decoding to the request's :attr:`GenerateRequest.reply_shape`: ``True``
    where it did (a grammar from the schema or the choices, a strict ``json_schema`` response format), ``False``
    where a shape was asked for and not enforced in full (a plain ``json_object``, or no form the endpoint takes).
    ``None`` for a request without a shape and for backends that do not say (scripted models), and then left out
    of every dump, so a cached completion without it is stored as before the field existed."""

    @field_validator("top_logprobs")
    @classmethod
    def _finite(cls, value: TopLogprobs | None) -> TopLogprobs | None:
        if value is None:
            return None
        return tuple(tuple((token, lp) for token, lp in position if math.isfinite(lp)) for position in value)

    @model_serializer(mode="wrap")
    def _no_top_logprobs(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        shown: dict[str, Any] = handler(self)
        for name in ("top_logprobs", "constrained"):
            if name in shown and shown[name] is None:
                del shown[name]
        return shown

    def json(self) -> Any:  # type: ignore[override]
        """The JSON value in the text, found tolerantly (code fences, prose around it).

        Raises:
            ValueError: when the text holds no JSON value.
        """
        return extract_json(self.text)


class Loglikelihood(_Result):
    """The result of one :class:`LoglikelihoodRequest`."""

    logprob: float | None = None
    """Sum of the continuation tokens' log-probabilities (natural log)."""
    is_greedy: bool | None = None
    """Whether every continuation token is the most likely next token."""
    n_tokens: int | None = None
    """How many tokens the continuation has."""


_TOKEN_MARKS = frozenset("\u2581\u0120")
"""Word-start marks some tokenizers leave in a token's text (SentencePiece's ``▁``, byte-level BPE's ``Ġ``)."""


def _bare(token: str) -> str:
    """``token`` without the spaces, punctuation and word-start marks around it: ``" (B"`` → ``B``."""

    def edge(char: str) -> bool:
        return char.isspace() or char in _TOKEN_MARKS or unicodedata.category(char).startswith("P")

    start, end = 0, len(token)
    while start < end and edge(token[start]):
        start += 1
    while end > start and edge(token[end - 1]):
        end -= 1
    return token[start:end]


def letter_probabilities(completion: Completion, letters: Sequence[str]) -> dict[str, float] | None:
    """The probability of each answer letter where the completion writes its answer, from its top log-probabilities.

    The answer's position is the first generated token whose most likely alternative is more than spaces and
    punctuation (a leading ``(``, ``**`` or newline is passed over). There, each letter's probability is the sum
    of ``exp(logprob)`` over the alternatives that are that letter once spaces and punctuation around it are
    dropped (``" B"``, ``"B"``, ``"(B"``, ``"B."``), compared without case (as the evaluation reads a written
    answer); 0.0 for a letter among none of them (its mass lies below the alternatives the endpoint gave).
    ``None`` when the completion carries no top log-probabilities (not asked for, or the backend gives none) or
    no position has more than spaces and punctuation.

    >>> reply = Completion(text="(B)", top_logprobs=(
    ...     (("(", -0.01), (" ", -4.6)),
    ...     (("B", -0.2231), (" B", -2.9957), ("A", -2.3026), ("Answer", -3.0)),
    ... ))
    >>> {letter: round(p, 3) for letter, p in letter_probabilities(reply, ["A", "B", "C"]).items()}
    {'A': 0.1, 'B': 0.85, 'C': 0.0}
    >>> letter_probabilities(Completion(text="B"), ["A", "B"]) is None
    True
    """
    if not completion.top_logprobs:
        return None
    wanted = {letter.casefold(): letter for letter in letters}
    for alternatives in completion.top_logprobs:
        if not alternatives or not _bare(alternatives[0][0]):
            continue
        out = dict.fromkeys(letters, 0.0)
        for token, logprob in alternatives:
            letter = wanted.get(_bare(token).casefold())
            if letter is not None and math.isfinite(logprob):
                out[letter] = min(1.0, out[letter] + math.exp(logprob))
        return out
    return None


@runtime_checkable
class LLM(Protocol):
    """A language model behind a ``provider/model`` string."""

    @property
    def name(self) -> str:
        """The ``provider/model`` string."""
        ...

    def identity(self) -> dict[str, str]:
        """What determines the answers, for caching: the weights (a file hash, or a served name plus
        base URL) and the provider options that can change outputs (see :func:`options_identity`)."""
        ...

    def generate(self, requests: Sequence[GenerateRequest], progress: Progress | None = None) -> list[Completion]:
        """One completion per request, in order."""
        ...

    def loglikelihood(
        self, requests: Sequence[LoglikelihoodRequest], progress: Progress | None = None
    ) -> list[Loglikelihood]:
        """One score per request, in order."""
        ...

    def close(self) -> None:
        """Release resources (model memory, connections)."""
        ...


def output_changing(options_type: type[BaseModel], covered: Iterable[str] = ()) -> tuple[str, ...]:
    """The fields of a provider's ``Options`` that can change what its backend returns, sorted.

    Every field counts unless the class lists it in its ``OUTPUT_NEUTRAL`` class variable
    (a ``ClassVar[frozenset[str]]``, e.g. a thread count, a timeout or a retry budget),
    so a new option is output-changing until someone shows it is not. ``covered`` leaves
    out fields whose effect the backend's identity already records in resolved form.

    >>> from typing import ClassVar
    >>> class Demo(BaseModel):
    ...     OUTPUT_NEUTRAL: ClassVar[frozenset[str]] = frozenset({"threads"})
    ...     threads: int = 1
    ...     window: int = 512
    >>> output_changing(Demo)
    ('window',)

    Raises:
        TypeError: ``OUTPUT_NEUTRAL`` or ``covered`` names something that is not a field.
    """
    neutral = frozenset(getattr(options_type, "OUTPUT_NEUTRAL", frozenset()))
    fields = set(options_type.model_fields)
    unknown = sorted((neutral | set(covered)) - fields)
    if unknown:
        raise TypeError(f"{options_type.__qualname__}: OUTPUT_NEUTRAL or covered names no option field: {unknown}")
    return tuple(sorted(fields - neutral - set(covered)))


def options_identity(options: BaseModel, *, covered: Iterable[str] = ()) -> dict[str, str]:
    """The ``"options"`` entry of a backend's :meth:`LLM.identity`: its output-changing options.

    All of them (see :func:`output_changing`), defaults included, as compact JSON with
    sorted keys, so that two runs share cache entries only when every setting that can
    change an answer is the same. Options that cannot (``OUTPUT_NEUTRAL``) stay out and
    share the cache. No entry when no option can change outputs, so a backend without
    options keeps a bare identity.

    >>> from typing import ClassVar
    >>> class Demo(BaseModel):
    ...     OUTPUT_NEUTRAL: ClassVar[frozenset[str]] = frozenset({"threads"})
    ...     window: int = 512
    ...     threads: int = 1
    ...     mode: str | None = None
    >>> options_identity(Demo(threads=8))
    {'options': '{"mode":null,"window":512}'}
    """
    names = output_changing(type(options), covered)
    if not names:
        return {}
    values = options.model_dump(mode="json", include=set(names))
    return {"options": json.dumps(values, sort_keys=True, separators=(",", ":"), ensure_ascii=False)}
