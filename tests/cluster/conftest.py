"""Fixtures for the Ray tests: one local Ray for the whole session (a start costs seconds).

Every Ray test is in ``@pytest.mark.xdist_group("ray")``, so CI runs them on one worker.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from senseforge.cluster import runtime


@pytest.fixture(scope="session")
def local_ray() -> Iterator[runtime.RayCluster]:
    """A local Ray with two CPUs, stopped when the session ends."""
    cluster = runtime.connect(num_cpus=2)
    yield cluster
    runtime.shutdown()
