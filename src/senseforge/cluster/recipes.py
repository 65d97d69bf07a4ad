"""The ``ray`` executor of recipes: batches of model stages run as Ray tasks; the driver alone writes the run store.

A batch of a stage that calls a model goes to a Ray task, which opens its own :class:`ModelPool` from the run's
config, cache store URL, run label and responders, and writes cache and ledger rows as its calls finish (so a
lost worker's batch, redone by Ray, takes its finished calls from the cache). Stages that call no model and
``InOrder`` stages (state kept across batches) run on the driver. What the runner reads from its pool comes back
with each batch: the models' diagnoses.

Refused, in one line: backends given in code (``llms=``: they cannot travel), a Batch API (``-o batch=true``: its
open batches live on the workers), and a cache store in a SQLite file on a cluster of several nodes.
"""

from __future__ import annotations

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


def run_batch(
    config: RecipeConfig,
    store_url: str,
    run_label: str,
    responders: Mapping[str, Any],
    stage: Stage,
    batch: Sequence[StageResult],
    judgements: Mapping[str, Sequence[StoredJudgement]],
) -> tuple[StageOutput, int, dict[str, str]]:
    """One batch of ``stage`` with a pool of its own (what a Ray task runs).

    Returns:
        The stage's output, the requests its models answered, and their diagnoses by spec.
    """
    store = Store(store_url)
    pool = ModelPool(config, store, run_label, responders=responders)
    answered = [0]

    def count(n: int) -> None:
        answered[0] += n

    try:
        output = LocalExecutor(pool).run(stage, batch, judgements, count)
        diagnoses = {spec: text for spec, llm in pool.open.items() if (text := llm.diagnosis()) is not None}
        return output, answered[0], diagnoses
    finally:
        pool.close()
        store.close()


class RayExecutor:
    """Runs the batches of model stages as Ray tasks (joining the Ray this process is connected to, or starting a
    local one).

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
        self._task = self.ray.remote(run_batch)
        self._shared: tuple[Any, Any] | None = None

    def _on_driver(self, stage: Stage) -> bool:
        return not stage.specs or isinstance(stage, InOrder)

    def run(
        self,
        stage: Stage,
        batch: Sequence[StageResult],
        judgements: Mapping[str, Sequence[StoredJudgement]],
        answered: Progress | None = None,
    ) -> StageOutput:
        if self._on_driver(stage):
            return self.local.run(stage, batch, judgements, answered)
        if self._shared is None:  # put once: every task reads the same config and responders
            self._shared = (self.ray.put(self.pool.config), self.ray.put(self.pool.responders))
        config, responders = self._shared
        remote = all(provider_info(spec).remote for spec in stage.specs)
        task = self._task.options(num_cpus=0 if remote else 1)
        ref = task.remote(config, self.pool.store.url, self.pool.run_label, responders, stage, list(batch), judgements)
        done: tuple[StageOutput, int, dict[str, str]] = self.ray.get(ref)
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
        self.pool.close()


register_executor(NAME, RayExecutor)
