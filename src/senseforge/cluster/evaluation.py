"""``eval run`` on Ray: an actor per model replica, (model, dataset) pairs as shards.

Each actor opens its model once (its cache and ledger in the job's store), with the CPUs the model's options
ask for (``n_threads``, else 1) and as many threads (``SENSEFORGE_THREADS``), and a GPU when its ``device`` is
a CUDA one. The pairs of a model are dealt round-robin to its replicas; every pair is evaluated by
:func:`senseforge.evaluate.pairs.evaluate_pair`, as ``--executor local`` does, so its outputs are the same.
An actor that dies is restarted and its unfinished pair redone (the calls that finished are read back from
the cache). Outputs are written by the actors: across nodes the output folders must be on a shared file
system. The replicas of a model behind an API share its endpoint's limits (:mod:`senseforge.cluster.limits`).
"""

from __future__ import annotations

import contextlib
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
    """

    def __init__(self, spec: ModelSpec, judge: ModelSpec | None = None) -> None:
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
    """The Ray options of one replica of ``spec``: CPUs and threads from ``n_threads``, a GPU for CUDA.

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
        "runtime_env": {"env_vars": {"SENSEFORGE_THREADS": str(cpus)}},
    }


def ray_pair_runner(
    models: Mapping[str, ModelSpec],
    *,
    judge: ModelSpec | None = None,
    replicas: int = 1,
    on_start: Callable[[list[Any]], None] | None = None,
) -> PairRunner:
    """A :data:`~senseforge.evaluate.pairs.PairRunner` that evaluates on the connected Ray cluster.

    Args:
        models: each evaluated model's spec, by name.
        judge: the judge of ``--formulation open``.
        replicas: the actors per model.
        on_start: called with the actors once they are created (tests use it to kill one).

    Raises:
        ConfigError: ``replicas`` is below 1.
    """
    if replicas < 1:
        raise ConfigError(f"replicas={replicas}: give 1 or more")

    def run(pairs: Sequence[Pair], settings: PairSettings) -> list[tuple[EvalResults, Path]]:
        ray = import_ray()
        limits.start()  # the job's governors of API endpoints, owned by this driver
        remote = ray.remote(ModelReplica)
        actors: dict[str, list[Any]] = {}
        for pair in pairs:
            if pair.model not in actors:
                spec = models[pair.model]
                actors[pair.model] = [
                    remote.options(**actor_resources(spec)).remote(spec, judge) for _ in range(replicas)
                ]
        try:
            if on_start is not None:
                on_start([actor for group in actors.values() for actor in group])
            dealt: dict[str, int] = {}
            futures = []
            for pair in pairs:
                turn = dealt.get(pair.model, 0)
                dealt[pair.model] = turn + 1
                group = actors[pair.model]
                futures.append(group[turn % len(group)].evaluate.remote(pair, settings))
            return gather(futures)  # a bad dataset, setting or model folder: the one-line error of local
        finally:
            for group in actors.values():
                for actor in group:
                    with contextlib.suppress(ray.exceptions.RayError):
                        ray.get(actor.close.remote())
                    ray.kill(actor)

    return run
