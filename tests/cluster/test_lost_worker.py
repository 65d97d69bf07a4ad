"""A Ray worker killed mid-run: Ray runs its batch again, its finished calls come from the cache."""

from __future__ import annotations

import concurrent.futures as cf
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from senseforge.cluster import runtime
from senseforge.pipelines.mcsqa import MCSQA, McsqaConfig
from senseforge.pipelines.mcsqa.recipe import mcsqa_author
from senseforge.pipelines.runner import build
from senseforge.store.db import Store

from ..pipelines.conftest import demo_kb  # noqa: F401 (a fixture)
from .test_recipes import outputs

pytestmark = [pytest.mark.xdist_group("ray"), pytest.mark.usefixtures("local_ray")]

MODEL = "scripted/stop-once"


class StopOnce:
    """The mCSQA author, except that the third call of the first process to make one writes its pid to ``marker``
    and never returns (the test kills that process)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker
        self.calls = 0

    def __call__(self, request: Any) -> Any:
        self.calls += 1
        if self.calls == 3 and not self.marker.exists():
            self.marker.write_text(str(os.getpid()))
            threading.Event().wait()
        return mcsqa_author(request)


def _pid(marker: Path, running: cf.Future[Any]) -> int:
    """The pid the responder wrote (bounded only for a hung build: a slow one gets there)."""
    deadline = time.monotonic() + 600
    while not (marker.exists() and marker.read_text()):
        assert not running.done(), running.result()
        assert time.monotonic() < deadline, "the build never reached the call that stops"
        time.sleep(0.02)
    return int(marker.read_text())


def test_a_killed_worker_changes_no_output_and_repeats_no_finished_call(
    demo_kb: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    runtime.import_ray().cloudpickle.register_pickle_by_value(sys.modules[__name__])
    config = McsqaConfig(lang="en", n=12, kb=str(demo_kb), model=MODEL)
    killed_store = Store(f"sqlite:///{tmp_path / 'ray.db'}")
    marker = tmp_path / "stopped.pid"
    responders = {"stop-once": StopOnce(marker)}
    with cf.ThreadPoolExecutor(1) as pool:
        running = pool.submit(
            build,
            MCSQA,
            config,
            tmp_path / "ray",
            store=killed_store,
            responders=responders,
            executor="ray",
            streaming=False,
        )
        os.kill(_pid(marker, running), signal.SIGKILL)
        on_ray = running.result(timeout=600)
    local_store = Store(f"sqlite:///{tmp_path / 'local.db'}")
    local = build(MCSQA, config, tmp_path / "local", store=local_store, responders={"stop-once": mcsqa_author})
    assert on_ray.state == local.state
    assert outputs(tmp_path / "ray") == outputs(tmp_path / "local")
    label = json.loads((tmp_path / "ray" / "manifest.json").read_text())["run_id"]
    local_label = json.loads((tmp_path / "local" / "manifest.json").read_text())["run_id"]
    # the killed call never finished; every finished one was made once (its redo came from the cache)
    assert (
        killed_store.ledger_summary(label)["backend_attempts"]
        == local_store.ledger_summary(local_label)["backend_attempts"]
    )
