"""The ``ray`` executor of recipes: batches of model stages run on Ray actors; the driver alone writes the run store.

A batch of a stage that calls a model goes to a Ray actor kept for the run, which opens its own :class:`ModelPool`
from the run's config, cache store URL, run label and responders once, and writes cache and ledger rows as its
calls finish (so a lost actor's batch, redone by Ray, takes its finished calls from the cache). Stages that call no
model and ``InOrder`` stages (state kept across batches) run on the driver. What the runner reads from its pool
comes back with each batch: the models' diagnoses. Every process of the job, the driver too, takes its endpoints'
limiters from the job's governors (:mod:`senseforge.cluster.limits`), and a batch's calls wait for their slots with
the rank the driver's flow gave its stage.

Refused, in one line: backends given in code (``llms=``: they cannot travel), a Batch API (``-o batch=true``: its
open batches live on the workers), and a cache store in a SQLite file on a cluster of several nodes.
"""

from __future__ import annotations

import os
import queue
import threading
import uuid
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from senseforge.errors import ConfigError
from senseforge.llm.base import Progress
from senseforge.llm.limits import RANK, govern, ranked
from senseforge.llm.registry import provider_info
from senseforge.pipelines.config import RecipeConfig
from senseforge.pipelines.executor import LocalExecutor, ModelPool, register_executor
from senseforge.pipelines.outcomes import StageOutput
from senseforge.pipelines.runstore import StageResult, StoredJudgement
from senseforge.pipelines.stage import InOrder, Stage
from senseforge.store.db import Store

from . import limits
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

    def __init__(
        self,
        config: RecipeConfig,
        store_url: str,
        run_label: str,
        responders: Mapping[str, Any],
        threads: int | None = None,
    ) -> None:
        if threads is not None:  # an in-process model's replica: as many threads as its CPUs (see default_threads)
            os.environ["SENSEFORGE_THREADS"] = str(threads)
        self.config = config
        self.store_url = store_url
        self.run_label = run_label
        self.responders = responders
        self._opened: tuple[Store, ModelPool] | None = None
        self._lock = threading.Lock()

    def _pool(self) -> ModelPool:
        with self._lock:
            if self._opened is None:
                limits.install()  # this process's API calls keep to the job's limits
                store = Store(self.store_url)
                self._opened = (store, ModelPool(self.config, store, self.run_label, responders=self.responders))
            return self._opened[1]

    def warm(self, specs: Sequence[str]) -> None:
        """Open the store, the pool and the models of ``specs`` ahead of the first batch."""
        pool = self._pool()
        for spec in specs:
            pool.get(spec)

    def run(
        self,
        stage: Stage,
        batch: Sequence[StageResult],
        judgements: Mapping[str, Sequence[StoredJudgement]],
        rank: int = 0,
    ) -> tuple[StageOutput, int, dict[str, str]]:
        """One batch of ``stage``, its calls waiting for their slots with ``rank`` (see :mod:`senseforge.llm.limits`).

        Returns:
            The stage's output, the requests its models answered, and their diagnoses by spec.
        """
        pool = self._pool()
        answered = [0]

        def count(n: int) -> None:
            answered[0] += n

        with ranked(rank):
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


class HttpService:
    """The actor of API-bound batches, one per Ray job (this driver), shared by its runs: it keeps a
    :class:`BatchWorker` per run, from the run's first batch (or :meth:`warm`) to :meth:`release`, so neither a
    batch nor a later run pays for its process and imports. Every call carries what opens the run's worker, so an
    actor started again after a loss opens it again."""

    def __init__(self) -> None:
        self._workers: dict[str, BatchWorker] = {}
        self._lock = threading.Lock()
        # Ray gives each call a thread of its own pool; the batches run on threads of ours instead, which a batch
        # takes again once it is idle: each keeps its event loop and HTTP clients, with their open connections,
        # from one batch to the next (a thread new to a batch connects anew)
        self._threads = ThreadPoolExecutor(max_workers=HTTP_CONCURRENCY, thread_name_prefix="senseforge-http")

    def ready(self) -> bool:
        """True, once the actor is up (its imports done)."""
        return True

    def _worker(self, key: str, opens: tuple[RecipeConfig, str, str, Mapping[str, Any]]) -> BatchWorker:
        with self._lock:
            if key not in self._workers:
                self._workers[key] = BatchWorker(*opens)
            return self._workers[key]

    def warm(self, key: str, opens: tuple[RecipeConfig, str, str, Mapping[str, Any]], specs: Sequence[str]) -> None:
        """Open the run's store, pool and the models of ``specs`` ahead of its first batch."""
        self._worker(key, opens).warm(specs)

    def run(
        self,
        key: str,
        opens: tuple[RecipeConfig, str, str, Mapping[str, Any]],
        stage: Stage,
        batch: Sequence[StageResult],
        judgements: Mapping[str, Sequence[StoredJudgement]],
        rank: int = 0,
    ) -> tuple[StageOutput, int, dict[str, str]]:
        """One batch of the run ``key`` (see :meth:`BatchWorker.run`), on one of the actor's kept threads."""
        worker = self._worker(key, opens)
        return self._threads.submit(worker.run, stage, batch, judgements, rank).result()

    def release(self, key: str) -> None:
        """Close the run's pool and store."""
        with self._lock:
            worker = self._workers.pop(key, None)
        if worker is not None:
            worker.close()


_SERVICES: dict[str, Any] = {}
_SERVICE_LOCK = threading.Lock()


def http_service(*, wait: bool = False) -> Any:
    """The :class:`HttpService` actor of this Ray job, started on first use (it takes no CPU).

    Args:
        wait: return only once it is up (a benchmark starts it with Ray, before its timings).
    """
    ray = import_ray()
    context = ray.get_runtime_context()
    job = context.get_job_id()
    key = f"{context.get_node_id()}/{job}"  # a Ray started again numbers its jobs from 1 again
    with _SERVICE_LOCK:
        actor = _SERVICES.get(key)
        if actor is None:  # a handle kept here: Ray ends an actor no handle holds, named or not
            _SERVICES.clear()  # those of a Ray left before
            actor = _SERVICES[key] = (
                ray.remote(HttpService)
                .options(
                    name=f"senseforge-http-{job}",
                    get_if_exists=True,
                    num_cpus=0,
                    max_concurrency=HTTP_CONCURRENCY,
                    max_restarts=RETRIES,
                    max_task_retries=RETRIES,
                )
                .remote()
            )
    if wait:
        ray.get(actor.ready.remote())
    return actor


class RayExecutor:
    """Runs the batches of model stages on Ray actors kept for the run (joining the Ray this process is connected
    to, or starting a local one).

    Stages whose models all sit behind an API go to the job's :class:`HttpService` actor (:func:`http_service`),
    which takes no CPU and runs up to :data:`HTTP_CONCURRENCY` batches at once in threads, as the local executor
    does; it outlives the run, and starts (if not up yet) when the executor is made, beside the driver's first steps.
    Stages with an in-process model go to up to one actor per CPU of the cluster (a replica each), one batch at a
    time each, for the run. Every actor keeps the run's store and pool from its first batch to :meth:`close`. A lost
    actor is started again and its batches run again (their finished calls come from the cache).

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
        self._key = uuid.uuid4().hex
        self._opens: Any = None
        self._replicas: list[Any] = []
        self._idle: queue.Queue[Any] = queue.Queue()
        limits.start()  # the job's governors, owned by this driver
        config = pool.config
        if "model" not in type(config).unused:  # the run's API models: their actor starts now, beside the driver's
            # first steps (its process, imports and store cost a second or two, once)
            self._warm([config.model, *config.stage_models.values()])
        # last, so that a refusal above leaves this process's limiters as they were; undone by close()
        self._governed = limits.install()  # the driver's own API calls (in-order stages) keep to the governors too

    def _on_driver(self, stage: Stage) -> bool:
        return not stage.specs or isinstance(stage, InOrder)

    def _start(self, *, cpus: int, concurrency: int) -> Any:
        actor = self._actor_class.options(
            num_cpus=cpus, max_concurrency=concurrency, max_restarts=RETRIES, max_task_retries=RETRIES
        )
        pool = self.pool
        return actor.remote(pool.config, pool.store.url, pool.run_label, pool.responders, threads=cpus)

    def _http_actor(self) -> tuple[Any, Any]:
        """The job's HTTP actor, and what opens this run's worker there (put in the object store once)."""
        with self._lock:
            if self._http is None:
                pool = self.pool
                self._opens = self.ray.put((pool.config, pool.store.url, pool.run_label, pool.responders))
                self._http = http_service()
            return self._http, self._opens

    def _warm(self, specs: Sequence[str]) -> None:
        """Start the HTTP actor, if one of ``specs`` is behind an API, and have it open those models; not awaited
        (a first batch queues behind it)."""
        remote = sorted({spec for spec in specs if provider_info(spec).remote})
        if remote:
            actor, opens = self._http_actor()
            actor.warm.remote(self._key, opens, remote)

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
        rank = RANK.get()  # the flow's rank of the stage: sent along (a context variable stays in its process)
        if all(provider_info(spec).remote for spec in stage.specs):
            actor, opens = self._http_actor()
            done: tuple[StageOutput, int, dict[str, str]] = self.ray.get(
                actor.run.remote(self._key, opens, stage, list(batch), judgements, rank)
            )
        else:
            replica = self._take_replica()
            try:
                done = self.ray.get(replica.run.remote(stage, list(batch), judgements, rank))
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
        self._warm([spec for stage in stages if not self._on_driver(stage) for spec in stage.specs])
        return max(1, int(self.cluster.cpus))

    def close(self) -> None:
        with self._lock:
            http, replicas = self._http, self._replicas
            self._http, self._replicas = None, []
        try:  # the actors close this run's pools and stores; the replicas go, the job's HTTP actor stays
            closing = [replica.close.remote() for replica in replicas]
            if http is not None:
                closing.append(http.release.remote(self._key))
            self.ray.get(closing)
        finally:
            for replica in replicas:
                self.ray.kill(replica)
            self.pool.close()
            govern(self._governed)


register_executor(NAME, RayExecutor)
