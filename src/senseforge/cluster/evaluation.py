"""``eval run`` on Ray: an actor per model replica, (model, dataset) pairs as shards.

Each actor opens its model once (its cache and ledger in the job's store), with the CPUs the model's options
ask for (``n_threads``, else 1) and as many threads (``SENSEFORGE_THREADS``), and a GPU when its ``device`` is
a CUDA one. A model gets a replica per pair of it, up to as many as the cluster holds at once (or ``replicas``);
each replica takes the model's next pair when it is done with one, and goes (giving its CPUs to the next model's
replicas) once its model has no pair left. Every pair is evaluated by
:func:`senseforge.evaluate.pairs.evaluate_pair`, as ``--executor local`` does, so its outputs are the same.
An actor that dies is restarted and its unfinished pair redone (the calls that finished are read back from
the cache). Outputs are written by the actors: across nodes the output folders must be on a shared file
system. The replicas of a model behind an API share its endpoint's limits (:mod:`senseforge.cluster.limits`).
"""

from __future__ import annotations

import contextlib
import os
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from senseforge.cluster import limits
from senseforge.cluster.runtime import gather, import_ray
from senseforge.errors import ConfigError
from senseforge.evaluate.pairs import ModelSpec, Pair, PairRunner, PairSettings, evaluate_pair
from senseforge.evaluate.records import EvalResults

__all__ = ["ModelReplica", "actor_resources", "ray_pair_runner"]

RESTARTS = 2
"""How many times a dead replica is restarted (and its unfinished pair retried) before the job fails."""


def _open(spec: ModelSpec, run: str) -> Any:
    from senseforge.llm.cache import open_llm
    from senseforge.pipelines.recipes import dry_run_authors
    from senseforge.store.db import Store

    return open_llm(
        spec.name,
        dict(spec.options),
        store=Store(spec.store),
        read_cache=spec.read_cache,
        run=run,
        responders=dry_run_authors(),
    )


class ModelReplica:
    """One replica of an evaluated model (and of the judge, when there is one), living in a Ray actor.

    Args:
        spec: the evaluated model.
        judge: the judge of ``--formulation open``, opened with no provider options.
        threads: this process's ``SENSEFORGE_THREADS`` (the CPUs the replica holds).
    """

    def __init__(self, spec: ModelSpec, judge: ModelSpec | None = None, threads: int | None = None) -> None:
        if threads is not None:
            os.environ["SENSEFORGE_THREADS"] = str(threads)
        limits.install()  # an API model's calls keep to the job's limits, across replicas
        self._llm = _open(spec, "eval")
        self._judge = _open(judge, "eval") if judge is not None else None

    def evaluate(self, pair: Pair, settings: PairSettings) -> tuple[EvalResults, Path]:
        """Evaluate one pair of this replica's model; writes its outputs and returns them."""
        return evaluate_pair(pair, self._llm, settings, judge=self._judge)

    def pid(self) -> int:
        """The actor's process id (tests kill it to check that a lost pair is redone)."""
        import os

        return os.getpid()

    def close(self) -> None:
        """Close the model and the judge."""
        self._llm.close()
        if self._judge is not None:
            self._judge.close()


def actor_resources(spec: ModelSpec) -> dict[str, Any]:
    """The Ray options of one replica of ``spec``: CPUs from ``n_threads`` (its threads, :class:`ModelReplica`'s
    ``threads``), a GPU for CUDA.

    Raises:
        ConfigError: ``n_threads`` is not a whole number of at least 1.
    """
    threads = spec.options.get("n_threads", 1)
    try:
        cpus = int(threads)
    except (TypeError, ValueError):
        cpus = 0
    if cpus < 1:
        raise ConfigError(f"{spec.name}: n_threads={threads!r}: give a whole number of threads, 1 or more")
    gpus = 1 if str(spec.options.get("device", "")).startswith("cuda") else 0
    return {
        "num_cpus": cpus,
        "num_gpus": gpus,
        "max_restarts": RESTARTS,
        "max_task_retries": RESTARTS,
    }


def _fits(resources: Mapping[str, Any], cluster: Mapping[str, float]) -> int:
    """How many replicas of ``resources`` the cluster holds at once (at least 1)."""
    held = [
        cluster.get(kind, 0.0) // need
        for kind, need in (("CPU", resources["num_cpus"]), ("GPU", resources["num_gpus"]))
        if need
    ]
    return max(1, int(min(held))) if held else 1


def ray_pair_runner(
    models: Mapping[str, ModelSpec],
    *,
    judge: ModelSpec | None = None,
    replicas: int | None = None,
    on_start: Callable[[list[Any]], None] | None = None,
) -> PairRunner:
    """A :data:`~senseforge.evaluate.pairs.PairRunner` that evaluates on the connected Ray cluster.

    Args:
        models: each evaluated model's spec, by name.
        judge: the judge of ``--formulation open``.
        replicas: the most actors per model (default: one per pair of it, up to what the cluster holds at once).
        on_start: called with the actors once they are created (tests use it to kill one).

    Raises:
        ConfigError: ``replicas`` is below 1.
    """
    if replicas is not None and replicas < 1:
        raise ConfigError(f"--replicas {replicas}: give 1 or more")

    def run(pairs: Sequence[Pair], settings: PairSettings) -> list[tuple[EvalResults, Path]]:
        ray = import_ray()
        limits.start()  # the job's governors of API endpoints, owned by this driver
        remote = ray.remote(ModelReplica)
        cluster = ray.cluster_resources()
        waiting: dict[str, deque[int]] = {}
        for index, pair in enumerate(pairs):
            waiting.setdefault(pair.model, deque()).append(index)
        idle: dict[str, list[Any]] = {}
        actors: list[Any] = []
        for model, queued in waiting.items():
            spec = models[model]
            resources = actor_resources(spec)
            count = min(len(queued), replicas or _fits(resources, cluster))
            threads = int(resources["num_cpus"])
            idle[model] = [remote.options(**resources).remote(spec, judge, threads) for _ in range(count)]
            actors += idle[model]
        results: list[Any] = [None] * len(pairs)
        running: dict[Any, tuple[Any, str, int]] = {}

        def deal(model: str) -> None:
            """The model's idle replicas take its next pairs; with none left, they go (their CPUs free)."""
            while idle[model] and waiting[model]:
                actor, index = idle[model].pop(), waiting[model].popleft()
                running[actor.evaluate.remote(pairs[index], settings)] = (actor, model, index)
            if not waiting[model]:
                for actor in idle[model]:
                    _retire(ray, actor)
                    actors.remove(actor)
                idle[model].clear()

        try:
            if on_start is not None:
                on_start(list(actors))
            for model in waiting:
                deal(model)
            while running:
                [ready], _ = ray.wait(list(running), num_returns=1)
                actor, model, index = running.pop(ready)
                [results[index]] = gather([ready])  # a bad dataset, setting or model folder: local's one-line error
                idle[model].append(actor)
                deal(model)
            return results
        finally:
            for actor in actors:
                _retire(ray, actor)

    return run


def _retire(ray: Any, actor: Any) -> None:
    """Close a replica's models and end it (one already gone is let be)."""
    with contextlib.suppress(ray.exceptions.RayError):
        ray.get(actor.close.remote())
    with contextlib.suppress(ray.exceptions.RayError, ValueError):
        ray.kill(actor)
