"""Starting or joining Ray: one call every ``--executor ray`` command makes before it submits work.

With no address, a local Ray is started with this machine's cores and a small object store (senseforge moves
records and scores, not tensors), without the dashboard; with an address (``auto``, ``ray://…`` or
``host:port``), the cluster there is joined.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from senseforge.errors import ConfigError, SenseforgeError

# records, prompts and scores are small: a local Ray needs far less than its default 30% of memory
LOCAL_OBJECT_STORE_BYTES = 256 * 1024**2


@dataclass(frozen=True)
class RayCluster:
    """The Ray this process is connected to.

    Attributes:
        address: the address joined, or ``None`` for a local Ray started here.
        nodes: how many nodes are alive.
        cpus: the cluster's CPUs.
        gpus: the cluster's GPUs.
    """

    address: str | None
    nodes: int
    cpus: float
    gpus: float


def import_ray() -> Any:
    """The ``ray`` module, or a one-line error naming the extra to install.

    Raises:
        ConfigError: Ray is not installed.
    """
    try:
        import ray
    except ImportError as exc:  # pragma: no cover - the dev extra installs it
        raise ConfigError("--executor ray needs Ray: pip install 'senseforge[ray]'") from exc
    return ray


def connect(address: str | None = None, *, num_cpus: int | None = None) -> RayCluster:
    """Join the Ray at ``address``, or start a local one; a second call reuses the connection.

    Args:
        address: a cluster's address; ``None`` starts a local Ray on this machine.
        num_cpus: the local Ray's CPUs (default: the cores this process may use); ignored with an address.

    Returns:
        What was joined.
    """
    ray = import_ray()
    if not ray.is_initialized():
        options: dict[str, Any] = {
            "include_dashboard": False,
            "log_to_driver": True,
            "configure_logging": False,
        }
        if address:
            options["address"] = address
        else:  # "local": a Ray of its own, even where another runs on this machine (RAY_ADDRESS, another user's)
            options["address"] = "local"
            options["num_cpus"] = num_cpus or len(os.sched_getaffinity(0))
            options["object_store_memory"] = LOCAL_OBJECT_STORE_BYTES
        ray.init(**options)
    alive = [node for node in ray.nodes() if node.get("Alive")]
    resources = ray.cluster_resources()
    return RayCluster(
        address=address or None,
        nodes=len(alive),
        cpus=float(resources.get("CPU", 0.0)),
        gpus=float(resources.get("GPU", 0.0)),
    )


def gather(futures: Sequence[Any]) -> list[Any]:
    """The results of Ray ``futures``, in order; an error of senseforge's own raised in a task or an actor (a bad
    dataset, a missing model folder) is raised here as itself, the same one-line error as in one process."""
    ray = import_ray()
    try:
        return list(ray.get(list(futures)))
    except ray.exceptions.RayTaskError as exc:
        cause = getattr(exc, "cause", None)
        if isinstance(cause, SenseforgeError):
            raise cause from None
        raise


def shutdown() -> None:
    """Leave Ray (a local Ray started by :func:`connect` stops)."""
    ray = import_ray()
    if ray.is_initialized():
        ray.shutdown()
