"""Where stage work runs: the executor seam, and the model pool of a run.

The runner hands each batch of a stage to an executor with the judgements the stage
reads (and, to count the requests its models answer, a progress callback); the executor runs it where it likes
and returns the stage's output. Stages hold
model specs and settings only, so a batch can be pickled and run elsewhere: a ``ray``
executor opens its own pool on the worker. ``local`` (the default) runs in this process.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from senseforge.errors import ConfigError
from senseforge.llm.base import LLM, Completion, GenerateRequest, Loglikelihood, LoglikelihoodRequest, Progress
from senseforge.llm.cache import CachedLLM, open_llm
from senseforge.llm.prompting import chat_template
from senseforge.pipelines.config import RecipeConfig
from senseforge.pipelines.outcomes import StageOutput
from senseforge.pipelines.runstore import StageResult, StoredJudgement
from senseforge.pipelines.stage import Stage
from senseforge.store.db import Store


class ModelPool:
    """The run's models, opened once each, all through the cache and ledger.

    Args:
        config: the run's config (provider options per spec).
        store: the cache and ledger.
        run_label: the ledger's name for this run.
        given: backends already built, by spec (tests, custom providers).
        responders: named scripted responders (recipes' dry-run authors).
    """

    def __init__(
        self,
        config: RecipeConfig,
        store: Store,
        run_label: str,
        given: Mapping[str, LLM] | None = None,
        responders: Mapping[str, Any] | None = None,
    ) -> None:
        self.config = config
        self.store = store
        self.run_label = run_label
        self.given = dict(given or {})
        self.responders = dict(responders or {})
        self.open: dict[str, CachedLLM] = {}
        self.reported: dict[str, str] = {}
        """Diagnoses of models opened elsewhere (an executor's workers), by spec."""
        self._lock = threading.Lock()  # batches of several stages may open models at once

    def get(self, spec: str) -> CachedLLM:
        """The model of ``spec`` (opened on first use)."""
        with self._lock:
            return self._get(spec)

    def _get(self, spec: str) -> CachedLLM:
        if spec not in self.open:
            if spec in self.given:
                self.open[spec] = CachedLLM(self.given[spec], self.store, run=self.run_label)
            else:
                options = self.config.options_for(spec)
                self.open[spec] = open_llm(
                    spec, options, store=self.store, run=self.run_label, responders=self.responders
                )
        return self.open[spec]

    def identities(self, specs: Sequence[str]) -> dict[str, dict[str, str]]:
        """``{spec: identity}`` of the given models, sorted by spec."""
        return {spec: self.get(spec).identity() for spec in sorted(set(specs))}

    def awaiting_batches(self) -> list[str]:
        """The batches at an API whose answers the run's models last found not ready yet, by id: what its records
        answered ``awaiting_batch`` wait for."""
        with self._lock:
            llms = list(self.open.values())
        return list(dict.fromkeys(batch_id for llm in llms for batch_id in llm.awaited_batches()))

    def diagnoses(self) -> list[str]:
        """The diagnosis of every model the run opened that has one (here, or on an executor's workers)."""
        found = {spec: text for spec, llm in self.open.items() if (text := llm.diagnosis()) is not None}
        found.update({spec: text for spec, text in self.reported.items() if spec not in found})
        return list(found.values())

    def close(self) -> None:
        for llm in self.open.values():
            llm.close()


@dataclass
class Tally:
    """Requests sent through a batch's models, and how many came back failed."""

    asked: int = 0
    failed: int = 0

    def __post_init__(self) -> None:
        self._lock = threading.Lock()

    def add(self, results: Sequence[Completion | Loglikelihood]) -> None:
        with self._lock:
            self.asked += len(results)
            self.failed += sum(not result.ok for result in results)


@dataclass
class _Context:
    pool: ModelPool
    judgements: Mapping[str, Sequence[StoredJudgement]]
    answered: Progress | None = None
    tally: Tally | None = None

    def llm(self, spec: str) -> LLM:
        llm = self.pool.get(spec)
        return llm if self.answered is None and self.tally is None else Counted(llm, self.answered, self.tally)


class Counted:
    """A model that also tells ``answered`` of every request it answers, as the backend reports them (as they
    arrive from a concurrent API, one by one from a local model), besides any progress callback it is given."""

    def __init__(self, inner: LLM, answered: Progress | None, tally: Tally | None = None) -> None:
        self.inner = inner
        self.answered = answered
        self.tally = tally

    @property
    def name(self) -> str:
        return self.inner.name

    def identity(self) -> dict[str, str]:
        return self.inner.identity()

    def chat_template(self) -> str | None:
        return chat_template(self.inner)

    def generate(self, requests: Sequence[GenerateRequest], progress: Progress | None = None) -> list[Completion]:
        results = self.inner.generate(requests, self._both(progress))
        if self.tally is not None:
            self.tally.add(results)
        return results

    def loglikelihood(
        self, requests: Sequence[LoglikelihoodRequest], progress: Progress | None = None
    ) -> list[Loglikelihood]:
        scores = self.inner.loglikelihood(requests, self._both(progress))
        if self.tally is not None:
            self.tally.add(scores)
        return scores

    def close(self) -> None:
        self.inner.close()

    def _both(self, progress: Progress | None) -> Progress | None:
        answered = self.answered
        if progress is None or answered is None:
            return progress or answered

        def both(n: int) -> None:
            answered(n)
            progress(n)

        return both


class Executor(Protocol):
    """Runs one batch of a stage somewhere and returns what the stage made of it."""

    def run(
        self,
        stage: Stage,
        batch: Sequence[StageResult],
        judgements: Mapping[str, Sequence[StoredJudgement]],
        answered: Progress | None = None,
    ) -> StageOutput:
        """The stage's output for ``batch``; ``answered`` is told of each request its models answer (an executor
        running the batch elsewhere may tell it once, when the batch comes back)."""
        ...

    def width(self, stages: Sequence[Stage]) -> int:
        """Batches of ``stages`` it can work on at once (1: one at a time)."""
        ...

    def close(self) -> None: ...


class LocalExecutor:
    """Runs stage work in this process, with the run's model pool."""

    def __init__(self, pool: ModelPool) -> None:
        self.pool = pool

    def run(
        self,
        stage: Stage,
        batch: Sequence[StageResult],
        judgements: Mapping[str, Sequence[StoredJudgement]],
        answered: Progress | None = None,
    ) -> StageOutput:
        tally = Tally()
        output = stage.run(batch, _Context(self.pool, judgements, answered, tally))
        output.asked, output.failed = tally.asked, tally.failed
        return output

    def width(self, stages: Sequence[Stage]) -> int:
        return 1

    def close(self) -> None:
        self.pool.close()


ExecutorFactory = Callable[[ModelPool], Executor]
"""Makes an executor for a run's pool."""

EXECUTORS: dict[str, ExecutorFactory] = {"local": LocalExecutor}
"""Executors by name: ``local`` here; ``ray`` is registered by :mod:`senseforge.cluster` (which ``pipelines``
cannot import) through :func:`register_executor`."""


def register_executor(name: str, factory: ExecutorFactory) -> None:
    """Make ``factory`` the executor called ``name`` (a later registration replaces an earlier one)."""
    EXECUTORS[name] = factory


def make_executor(name: str, pool: ModelPool) -> Executor:
    """The executor called ``name``.

    Raises:
        ConfigError: an unknown executor.
    """
    factory = EXECUTORS.get(name)
    if factory is None:
        raise ConfigError(f"unknown executor {name!r}: use one of {', '.join(sorted(EXECUTORS))}")
    return factory(pool)
