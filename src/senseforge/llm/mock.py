"""The scripted backend: replays queued responses or calls a function. No model.

Used by the tests, by docs examples and by ``--dry-run``. From a ``provider/model``
string:

* ``scripted/echo`` — answers each request with its last user turn (or prompt), and
  scores a continuation by a deterministic, length-based pseudo log-probability;
* ``scripted/<file.jsonl>`` — replays the ``text`` of each line in order (a line may also
  carry ``top_logprobs``, or ``failure`` to script a failed call); running out is a recorded failure;
* ``scripted/<file.py>:<function>`` — calls ``function(request)`` for each request: it
  returns the text of a generation request (or a :class:`Completion`, or a dict
  ``{"text": ..., "top_logprobs": [[[token, logprob], ...], ...]}``) and the
  log-probability of a log-likelihood request (a float, or a :class:`Loglikelihood`).
  Scripted top log-probabilities reach the caller as an endpoint's would: only for a request
  that asks for them (:attr:`GenerateRequest.top_logprobs`), at most that many per token.
  The model's identity holds the SHA-256 of the file, so an edited responder never
  replays answers cached for the old one;
* ``scripted/<name>`` — a named responder handed in by the caller (recipes register their
  dry-run authors, e.g. ``scripted/mcsqa-author``; this layer knows none of them).

In code, :class:`ScriptedLLM` takes a queue of strings or a function.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import threading
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict, ValidationError

from senseforge.errors import ConfigError
from senseforge.llm.base import (
    Completion,
    Failure,
    GenerateRequest,
    Loglikelihood,
    LoglikelihoodRequest,
    Progress,
    TopLogprobs,
    options_identity,
)

if TYPE_CHECKING:
    from senseforge.store.db import Store

Responder = Callable[[GenerateRequest], "str | Completion"]
Scorer = Callable[[LoglikelihoodRequest], "float | Loglikelihood"]
AnyResponder = Callable[
    [GenerateRequest | LoglikelihoodRequest], "str | float | Completion | Loglikelihood | dict[str, Any]"
]
"""One function for both kinds of request: text (or a completion, or a dict with ``text`` and
``top_logprobs``) for a generation request, a log-probability (or a :class:`Loglikelihood`) for a
log-likelihood request."""


def echo(request: GenerateRequest) -> str:
    """The last user turn (or the prompt), unchanged."""
    return request.as_messages()[-1].content


def length_score(request: LoglikelihoodRequest) -> float:
    """A deterministic stand-in score: shorter continuations score higher."""
    return -float(len(request.continuation))


def written(request: GenerateRequest, text: str, top_logprobs: TopLogprobs | None = None) -> Completion:
    """The completion of a scripted answer ``text``: cut at the request's first stop string, words counted as
    tokens, and ``top_logprobs`` as the request asked for them (see :func:`as_asked`)."""
    for stop in request.stop:
        if stop and stop in text:
            text = text[: text.index(stop)]
    completion = Completion(
        text=text,
        finish_reason="stop",
        tokens_in=sum(len(m.content.split()) for m in request.as_messages()),
        tokens_out=len(text.split()),
        top_logprobs=top_logprobs,
    )
    return as_asked(completion, request)


def as_asked(completion: Completion, request: GenerateRequest) -> Completion:
    """A scripted completion's top log-probabilities as an endpoint gives them: none unless the request asks
    (:attr:`GenerateRequest.top_logprobs`), and then at most that many alternatives per token."""
    top = completion.top_logprobs
    if top is None:
        return completion
    kept = tuple(position[: request.top_logprobs] for position in top) if request.top_logprobs else None
    return completion if kept == top else completion.model_copy(update={"top_logprobs": kept})


class ScriptedLLM:
    """A backend whose answers are scripted.

    Args:
        responses: answers handed out in order (strings or ready-made completions).
        responder: a function from request to answer, used when the queue is empty.
        scorer: a function giving a log-probability for a log-likelihood request.
        name: the ``provider/model`` string to report.
    """

    def __init__(
        self,
        responses: Iterable[str | Completion] = (),
        *,
        responder: Responder | None = None,
        scorer: Scorer | None = None,
        name: str = "scripted/custom",
        identity: Mapping[str, str] | None = None,
        chat: bool = True,
    ) -> None:
        self._queue: deque[str | Completion] = deque(responses)
        self._responder = responder
        self._scorer = scorer or length_score
        self._name = name
        self._identity = {"scripted": name, **(identity or {})}
        self._chat = chat
        self._lock = threading.Lock()
        self.generate_calls: list[GenerateRequest] = []
        """Every generate request this backend received (for assertions in tests)."""
        self.loglikelihood_calls: list[LoglikelihoodRequest] = []
        """Every log-likelihood request this backend received."""

    @property
    def name(self) -> str:
        return self._name

    def identity(self) -> dict[str, str]:
        return dict(self._identity)

    def chat_template(self) -> str | None:
        """``scripted`` when it stands in for a chat model (the default), ``None`` when it stands in for a base
        model (``-o chat=false``): then chat turns are refused, as a base model's provider refuses them."""
        return "scripted" if self._chat else None

    def push(self, *responses: str | Completion) -> None:
        """Queue more answers."""
        with self._lock:
            self._queue.extend(responses)

    def _answer(self, request: GenerateRequest) -> Completion:
        with self._lock:
            self.generate_calls.append(request)
        if request.messages is not None and not self._chat:
            return Completion(
                attempts=0,
                failure=Failure(kind="unsupported", message=f"{self._name} stands in for a base model: no chat turns"),
            )
        with self._lock:
            scripted = self._queue.popleft() if self._queue else None
        if scripted is None and self._responder is not None:
            scripted = self._responder(request)
        if scripted is None:
            return Completion(failure=Failure(kind="backend", message="scripted backend ran out of responses"))
        if isinstance(scripted, Completion):
            return as_asked(scripted, request)
        return written(request, scripted)

    def generate(self, requests: Sequence[GenerateRequest], progress: Progress | None = None) -> list[Completion]:
        out = []
        for request in requests:
            out.append(self._answer(request))
            if progress:
                progress(1)
        return out

    def loglikelihood(
        self, requests: Sequence[LoglikelihoodRequest], progress: Progress | None = None
    ) -> list[Loglikelihood]:
        out = []
        for request in requests:
            with self._lock:
                self.loglikelihood_calls.append(request)
            score = self._scorer(request)
            if not isinstance(score, Loglikelihood):
                score = Loglikelihood(logprob=score, is_greedy=False, n_tokens=len(request.continuation.split()))
            out.append(score)
            if progress:
                progress(1)
        return out

    def close(self) -> None:
        return None


class Options(BaseModel):
    """The scripted provider takes no options.

    One added later is part of the model's identity (and so of its cache keys) unless it is
    listed in ``OUTPUT_NEUTRAL``; with none, the identity stays what it always was.
    """

    model_config = ConfigDict(extra="forbid")

    OUTPUT_NEUTRAL: ClassVar[frozenset[str]] = frozenset()
    """Options that cannot change an answer: none. (``chat`` enters the identity as its own entry, and only
    when false, so the identity of a default scripted model stays what it always was.)"""

    chat: bool = True
    """Stand in for a chat model (the default); ``false``: for a base model without a chat template."""


def _load_script(path: Path) -> list[str | Completion]:
    items: list[str | Completion] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            if "failure" in row:
                items.append(Completion(failure=Failure.model_validate(row["failure"])))
            elif "top_logprobs" in row:
                text, top = _reply_fields(row)
                items.append(Completion(text=text, finish_reason="stop", top_logprobs=top))
            else:
                items.append(str(row["text"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise ConfigError(
                f'{path}:{number}: a script line needs {{"text": ...}} (and optionally "top_logprobs") or '
                f'{{"failure": ...}} ({exc})'
            ) from exc
    return items


def _reply_fields(reply: Mapping[str, object]) -> tuple[str, TopLogprobs | None]:
    """The text and top log-probabilities of a ``{"text": ..., "top_logprobs": [[[token, logprob], ...], ...]}``
    reply (a script line or a responder's answer).

    Raises:
        ValueError: it has no text, another key, or ``top_logprobs`` of another shape.
    """
    unknown = sorted(set(reply) - {"text", "top_logprobs"})
    if unknown:
        raise ValueError(f"unknown keys {unknown}: a reply has text and top_logprobs")
    text = reply.get("text")
    if not isinstance(text, str):
        raise ValueError("a reply needs its text")
    given = reply.get("top_logprobs")
    if given is None:
        return text, None
    if not isinstance(given, list | tuple):
        raise ValueError("top_logprobs is a list with one list of [token, logprob] pairs per generated token")
    try:
        completion = Completion(text=text, top_logprobs=given)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise ValueError(f"{where}: {first['msg']} (top_logprobs holds [[token, logprob], ...] per token)") from None
    return text, completion.top_logprobs


def from_responder(
    name: str, respond: AnyResponder, identity: Mapping[str, str] | None = None, *, chat: bool = True
) -> ScriptedLLM:
    """A scripted model that asks ``respond`` for every request, of either kind.

    A reply of the wrong kind (a float for a generation request, text for a score) is a
    recorded failure of that request, not a crash.
    """

    def generate(request: GenerateRequest) -> str | Completion:
        reply = respond(request)
        if isinstance(reply, str | Completion):
            return reply
        if isinstance(reply, dict):
            try:
                text, top = _reply_fields(reply)
            except (TypeError, ValueError) as exc:
                failure = Failure(kind="backend", message=f"{name}: a generation request got {reply!r:.120} ({exc})")
                return Completion(failure=failure)
            return written(request, text, top)
        return Completion(failure=Failure(kind="backend", message=f"{name}: a generation request got {reply!r}"))

    def score(request: LoglikelihoodRequest) -> float | Loglikelihood:
        reply = respond(request)
        if isinstance(reply, Loglikelihood):
            return reply
        if isinstance(reply, int | float) and not isinstance(reply, bool):
            return float(reply)
        return Loglikelihood(failure=Failure(kind="backend", message=f"{name}: a log-likelihood request got {reply!r}"))

    return ScriptedLLM(responder=generate, scorer=score, name=name, identity=identity, chat=chat)


def _load_responder(model: str, identity: Mapping[str, str] | None = None, *, chat: bool = True) -> ScriptedLLM:
    """``<file.py>:<function>`` as a scripted model (identity: the file's SHA-256, plus ``identity``)."""
    file_part, _, function = model.rpartition(":")
    path = Path(file_part)
    if not path.is_file():
        raise ConfigError(f"scripted model {model!r}: no such responder file {file_part!r}")
    code = path.read_bytes()
    digest = hashlib.sha256(code).hexdigest()
    spec = importlib.util.spec_from_file_location(f"_senseforge_responder_{digest[:16]}", path)
    if spec is None or spec.loader is None:
        raise ConfigError(f"scripted model {model!r}: {file_part} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        problem = f"{type(exc).__name__}: {exc}"
        raise ConfigError(f"scripted model {model!r}: {file_part} failed to load ({problem})") from exc
    respond = getattr(module, function, None)
    if not callable(respond):
        raise ConfigError(f"scripted model {model!r}: {file_part} has no function {function!r}")
    return from_responder(f"scripted/{model}", respond, {"responder_sha256": digest, **(identity or {})}, chat=chat)


def chat_template_of(model: str, options: Options) -> str | None:
    """What :meth:`ScriptedLLM.chat_template` will answer (for config-time decisions)."""
    del model
    return "scripted" if options.chat else None


def create(
    model: str, options: Options, store: Store | None = None, *, responders: Mapping[str, AnyResponder] | None = None
) -> ScriptedLLM:
    """Registry factory for ``scripted/<model>``; ``responders`` are the named ones the caller knows."""
    del store
    settings = options_identity(options, covered={"chat"})
    if not options.chat:
        settings["chat"] = "false"
    if model == "echo":
        return ScriptedLLM(responder=echo, name="scripted/echo", identity=settings, chat=options.chat)
    named = dict(responders or {})
    if model in named:
        return from_responder(f"scripted/{model}", named[model], settings, chat=options.chat)
    if model.endswith(".py") or ".py:" in model:
        if ":" not in model.rpartition(".py")[2]:
            raise ConfigError(f"scripted model {model!r}: name the function, e.g. scripted/{model}:respond")
        return _load_responder(model, settings, chat=options.chat)
    path = Path(model)
    if not path.is_file():
        known = ", ".join(f"'scripted/{name}'" for name in ["echo", *sorted(named)])
        raise ConfigError(
            f"scripted model {model!r}: use {known}, 'scripted/<responses.jsonl>' "
            "or 'scripted/<file.py>:<function>' (no such file)"
        )
    return ScriptedLLM(_load_script(path), name=f"scripted/{model}", identity=settings, chat=options.chat)
