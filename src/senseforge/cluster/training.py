"""The transfer study on Ray: each fine-tune one Ray task with its resources; the matrix assembled as today.

The study's 2N+1 fine-tunes (N languages) are independent: each becomes a task asking for the CPUs given (torch
uses as many threads) and a GPU when the config's device is a CUDA one (``auto`` asks for one when the cluster
has any). The driver gathers the outcomes in the study's order and writes the tables, so ``transfer.json`` is
the same as in one process. A task whose worker dies is retried; its setting's run folder resumes where it
stopped. Run folders are written by the workers: across nodes the study folder must be on a shared file system.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from senseforge.cluster.runtime import gather, import_ray
from senseforge.errors import ConfigError
from senseforge.evaluate.finetune import FinetuneConfig, Progress
from senseforge.evaluate.transfer import SettingJob, SettingOutcome, SettingRunner, train_setting

__all__ = ["ray_setting_runner", "task_resources"]

RETRIES = 2
"""How many times a fine-tune whose worker died is retried before the study fails."""


def _train(job: SettingJob, config: FinetuneConfig, threads: int) -> SettingOutcome:
    import torch

    torch.set_num_threads(threads)
    return train_setting(job, config)


def task_resources(config: FinetuneConfig, cpus: int, cluster_gpus: float) -> dict[str, Any]:
    """The Ray options of one fine-tune.

    Args:
        config: the fine-tune's config (its ``device`` decides the GPU).
        cpus: the CPUs (and torch threads) of each fine-tune.
        cluster_gpus: the connected cluster's GPUs (``device=auto`` asks for one when there are any).

    Raises:
        ConfigError: ``cpus`` is below 1.
    """
    if cpus < 1:
        raise ConfigError(f"cpus per fine-tune: {cpus}: give 1 or more")
    wants_gpu = config.device.startswith("cuda") or (config.device == "auto" and cluster_gpus > 0)
    return {
        "num_cpus": cpus,
        "num_gpus": 1 if wants_gpu else 0,
        "max_retries": RETRIES,
        "runtime_env": {"env_vars": {"SENSEFORGE_THREADS": str(cpus), "OMP_NUM_THREADS": str(cpus)}},
    }


def ray_setting_runner(cpus: int = 1) -> SettingRunner:
    """A :data:`~senseforge.evaluate.transfer.SettingRunner` running each fine-tune as a task on the connected Ray.

    Args:
        cpus: the CPUs (and torch threads) of each fine-tune.
    """

    def run(jobs: Sequence[SettingJob], config: FinetuneConfig, progress: Progress) -> list[SettingOutcome]:
        ray = import_ray()
        options = task_resources(config, cpus, float(ray.cluster_resources().get("GPU", 0.0)))
        task = ray.remote(_train).options(**options)
        futures = []
        for job in jobs:
            progress(f"{job.setting}: training on {', '.join(job.trained_on)} (a Ray task)")
            futures.append(task.remote(job, config, cpus))
        return gather(futures)  # a bad dataset, setting or model folder: the one-line error of local

    return run
