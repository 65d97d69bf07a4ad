"""The scripted backend: replays queued responses or calls a function. No model.

Used by the tests, by docs examples and by ``--dry-run``. From a ``provider/model``
string:

* ``scripted/echo`` — answers each request with its last user turn (or prompt), and
  scores a continuation by a deterministic, length-based pseudo log-probability;
* ``scripted/mcsqa-author`` — a stand-in author for dry runs of the mCSQA recipe with
  chat prompts (:mod:`senseforge.pipelines.mcsqa.dryrun`);
* ``scripted/<file.jsonl>`` — replays the ``text`` of each line in order (a line may also
  carry ``failure`` to script a failed call); running out is a recorded failure.

In code, :class:`ScriptedLLM` takes a queue of strings or a function.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

from senseforge.errors import ConfigError
from senseforge.llm.base import (
    Completion,
    Failure,
    GenerateRequest,
    Loglikelihood,
    LoglikelihoodRequest,
    Progress,
)

if TYPE_CHECKING:
    from senseforge.store.db import Store

Responder = Callable[[GenerateRequest], "str | Completion"]
Scorer = Callable[[LoglikelihoodRequest], "float | Loglikelihood"]


def echo(request: GenerateRequest) -> str:
    """The last user turn (or the prompt), unchanged."""
    return request.as_messages()[-1].content


def length_score(request: LoglikelihoodRequest) -> float:
    """A deterministic stand-in score: shorter continuations score higher."""
    return -float(len(request.continuation))


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
    ) -> None:
        self._queue: deque[str | Completion] = deque(responses)
        self._responder = responder
        self._scorer = scorer or length_score
        self._name = name
        self._lock = threading.Lock()
        self.generate_calls: list[GenerateRequest] = []
        """Every generate request this backend received (for assertions in tests)."""
        self.loglikelihood_calls: list[LoglikelihoodRequest] = []
        """Every log-likelihood request this backend received."""

    @property
    def name(self) -> str:
        return self._name

    def identity(self) -> dict[str, str]:
        return {"scripted": self._name}

    def push(self, *responses: str | Completion) -> None:
        """Queue more answers."""
        with self._lock:
            self._queue.extend(responses)

    def _answer(self, request: GenerateRequest) -> Completion:
        with self._lock:
            self.generate_calls.append(request)
            scripted = self._queue.popleft() if self._queue else None
        if scripted is None and self._responder is not None:
            scripted = self._responder(request)
        if scripted is None:
            return Completion(failure=Failure(kind="backend", message="scripted backend ran out of responses"))
        if isinstance(scripted, Completion):
            return scripted
        text = scripted
        for stop in request.stop:
            if stop and stop in text:
                text = text[: text.index(stop)]
        return Completion(
            text=text,
            finish_reason="stop",
            tokens_in=sum(len(m.content.split()) for m in request.as_messages()),
            tokens_out=len(text.split()),
        )

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
    """The scripted provider takes no options."""

    model_config = ConfigDict(extra="forbid")


def _load_script(path: Path) -> list[str | Completion]:
    items: list[str | Completion] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            if "failure" in row:
                items.append(Completion(failure=Failure.model_validate(row["failure"])))
            else:
                items.append(str(row["text"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise ConfigError(
                f'{path}:{number}: a script line needs {{"text": ...}} or {{"failure": ...}} ({exc})'
            ) from exc
    return items


def create(model: str, options: Options, store: Store | None = None) -> ScriptedLLM:
    """Registry factory for ``scripted/<model>``."""
    del options, store
    if model == "echo":
        return ScriptedLLM(responder=echo, name="scripted/echo")
    if model == "mcsqa-author":
        from senseforge.pipelines.mcsqa.dryrun import author_reply

        return ScriptedLLM(responder=lambda request: author_reply(request.as_messages()), name="scripted/mcsqa-author")
    path = Path(model)
    if not path.is_file():
        raise ConfigError(
            f"scripted model {model!r}: use 'scripted/echo', 'scripted/mcsqa-author' "
            "or 'scripted/<responses.jsonl>' (no such file)"
        )
    return ScriptedLLM(_load_script(path), name=f"scripted/{model}")
