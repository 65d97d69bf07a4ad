"""The ``ray`` executor of recipes: batches of model stages run on Ray actors; the driver alone writes the run store.

A batch of a stage that calls a model goes to a Ray actor kept for the run, which opens its own :class:`ModelPool`
from the run's config, cache store URL, run label and responders once, and writes cache and ledger rows as its
calls finish (so a lost actor's batch, redone by Ray, takes its finished calls from the cache). Stages that call no
model and ``InOrder`` stages (state kept across batches) run on the driver. What the runner reads from its pool
comes back with each batch: the models' diagnoses.

Refused, in one line: backends given in code (``llms=``: they cannot travel), a Batch API (``-o batch=true``: its
open batches live on the workers), and a cache store in a SQLite file on a cluster of several nodes.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from senseforge.errors import ConfigError
from senseforge.llm.base import Progress
from senseforge.llm.registry import provider_info
from senseforge.pipelines.config import RecipeConfig
from senseforge.pipelines.executor import LocalExecutor, ModelPool, register_executor
from senseforge.pipelines.outcomes import StageOutput
from senseforge.pipelines.runstore import StageResult, StoredJudgement
from senseforge.pipelines.stage import InOrder, Stage
from senseforge.store.db import Store

from .runtime import connect, import_ray

NAME = "ray"


def _on(value: Any) -> bool:
    return str(value).lower() in ("true", "1", "yes", "on")


# batches one HTTP actor runs at once (threads; its calls wait on the network, as the local executor's threads do)
HTTP_CONCURRENCY = 64
# a lost actor is started again, and the batches it held run again, at most this many times (Ray's task default)
RETRIES = 3


class BatchWorker:
    """A pool of its own, kept for the whole run (what a Ray actor holds): it opens its :class:`Store` and
    :class:`ModelPool` from the run's config, cache store URL, run label and responders on its first batch, and
    closes them when the run ends, so a batch pays for neither (nor for loading an in-process model again)."""

    def __init__(self, config: RecipeConfig, store_url: str, run_label: str, responders: Mapping[str, Any]) -> None:
        self.config = config
        self.store_url = store_url
        self.run_label = run_label
        self.responders = responders
        self._opened: tuple[Store, ModelPool] | None = None
        self._lock = threading.Lock()

    def _pool(self) -> ModelPool:
        with self._lock:
            if self._opened is None:
                store = Store(self.store_url)
                self._opened = (store, ModelPool(self.config, store, self.run_label, responders=self.responders))
            return self._opened[1]

    def run(
        self, stage: Stage, batch: Sequence[StageResult], judgements: Mapping[str, Sequence[StoredJudgement]]
    ) -> tuple[StageOutput, int, dict[str, str]]:
        """One batch of ``stage``.

        Returns:
            The stage's output, the requests its models answered, and their diagnoses by spec.
        """
        pool = self._pool()
        answered = [0]

        def count(n: int) -> None:
            answered[0] += n

        output = LocalExecutor(pool).run(stage, batch, judgements, count)
        diagnoses = {spec: text for spec, llm in list(pool.open.items()) if (text := llm.diagnosis()) is not None}
        return output, answered[0], diagnoses

    def close(self) -> None:
        """Close the pool and the store (a later batch opens them again)."""
        with self._lock:
            if self._opened is not None:
                store, pool = self._opened
                self._opened = None
                pool.close()
                store.close()


class RayExecutor:
    """Runs the batches of model stages on Ray actors kept for the run (joining the Ray this process is connected
    to, or starting a local one).

    Stages whose models all sit behind an API share one actor that takes no CPU and runs up to
    :data:`HTTP_CONCURRENCY` batches at once in threads, as the local executor does; stages with an in-process
    model go to up to one actor per CPU of the cluster (a replica each), one batch at a time each. Every actor keeps
    its store and pool from its first batch to :meth:`close`. A lost actor is started again and its batches run
    again (their finished calls come from the cache).

    Raises:
        ConfigError: backends given in code, or a SQLite cache store on a cluster of several nodes.
    """

    def __init__(self, pool: ModelPool) -> None:
        if pool.given:
            raise ConfigError(
                f"--executor ray cannot take backends given in code ({', '.join(sorted(pool.given))}): "
                "name them in the config"
            )
        batched = sorted(spec for spec, options in pool.config.model_options.items() if _on(options.get("batch")))
        if batched:
            raise ConfigError(f"--executor ray cannot use a Batch API (-o batch=true, model {batched[0]})")
        self.pool = pool
        self.local = LocalExecutor(pool)
        self.cluster = connect()
        if self.cluster.nodes > 1 and pool.store.url.startswith("sqlite"):
            raise ConfigError(
                f"a Ray cluster of {self.cluster.nodes} nodes cannot share the SQLite store {pool.store.url}: "
                "give --store a PostgreSQL URL"
            )
        self.ray = import_ray()
        self._actor_class = self.ray.remote(BatchWorker)
        self._lock = threading.Lock()
        self._http: Any = None
        self._replicas: list[Any] = []
        self._idle: queue.Queue[Any] = queue.Queue()

    def _on_driver(self, stage: Stage) -> bool:
        return not stage.specs or isinstance(stage, InOrder)

    def _start(self, *, cpus: int, concurrency: int) -> Any:
        actor = self._actor_class.options(
            num_cpus=cpus, max_concurrency=concurrency, max_restarts=RETRIES, max_task_retries=RETRIES
        )
        return actor.remote(self.pool.config, self.pool.store.url, self.pool.run_label, self.pool.responders)

    def _http_actor(self) -> Any:
        with self._lock:
            if self._http is None:
                self._http = self._start(cpus=0, concurrency=HTTP_CONCURRENCY)
            return self._http

    def _take_replica(self) -> Any:
        with self._lock:
            if self._idle.empty() and len(self._replicas) < max(1, int(self.cluster.cpus)):
                self._replicas.append(self._start(cpus=1, concurrency=1))
                return self._replicas[-1]
        return self._idle.get()

    def run(
        self,
        stage: Stage,
        batch: Sequence[StageResult],
        judgements: Mapping[str, Sequence[StoredJudgement]],
        answered: Progress | None = None,
    ) -> StageOutput:
        if self._on_driver(stage):
            return self.local.run(stage, batch, judgements, answered)
        if all(provider_info(spec).remote for spec in stage.specs):
            done: tuple[StageOutput, int, dict[str, str]] = self.ray.get(
                self._http_actor().run.remote(stage, list(batch), judgements)
            )
        else:
            replica = self._take_replica()
            try:
                done = self.ray.get(replica.run.remote(stage, list(batch), judgements))
            finally:
                self._idle.put(replica)
        output, count, diagnoses = done
        for spec, text in diagnoses.items():
            self.pool.reported.setdefault(spec, text)
        if answered is not None and count:
            answered(count)
        return output

    def width(self, stages: Sequence[Stage]) -> int:
        if all(self._on_driver(stage) for stage in stages):
            return 1
        return max(1, int(self.cluster.cpus))

    def close(self) -> None:
        with self._lock:
            actors = [actor for actor in (self._http, *self._replicas) if actor is not None]
            self._http, self._replicas = None, []
        try:
            if actors:  # the actors close their pools and stores, then go
                self.ray.get([actor.close.remote() for actor in actors])
        finally:
            for actor in actors:
                self.ray.kill(actor)
            self.pool.close()


register_executor(NAME, RayExecutor)
