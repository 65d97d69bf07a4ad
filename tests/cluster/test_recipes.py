"""The ``ray`` executor of recipes: the same bytes as ``local``, and its one-line refusals."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from senseforge.cluster import runtime
from senseforge.errors import ConfigError
from senseforge.kb.conceptnet import import_dump
from senseforge.llm.mock import ScriptedLLM
from senseforge.llm.registry import DEFAULT_MODEL
from senseforge.pipelines.mcsqa import MCSQA, McsqaConfig
from senseforge.pipelines.runner import build
from senseforge.store.db import Store

from ..pipelines.conftest import demo_kb  # noqa: F401 (a fixture)
from ..pipelines.golden import compare_with_golden
from ..pipelines.mcsqa.test_golden import GOLDEN

AUTHOR = "scripted/mcsqa-author"

pytestmark = [pytest.mark.xdist_group("ray"), pytest.mark.usefixtures("local_ray")]


def outputs(run_dir: Path) -> dict[str, Any]:
    """Every file of a run but its stores, as bytes; the manifest without the run's id and store, and of the ledger
    report its calls (batches at once may each miss the cache for the same request, as streamed local batches do,
    so its split into cache hits and backend attempts may differ)."""
    found: dict[str, Any] = {}
    for path in sorted(run_dir.rglob("*")):
        if not path.is_file() or path.name.startswith("run.db"):
            continue
        name = str(path.relative_to(run_dir))
        if name == "manifest.json":
            found[name] = {k: v for k, v in json.loads(path.read_text()).items() if k not in ("run_id", "store_url")}
        elif name == "ledger.json":
            found[name] = json.loads(path.read_text())["calls"]
        else:
            found[name] = path.read_bytes()
    return found


def test_a_dry_run_on_ray_writes_the_bytes_of_local(demo_kb: Path, tmp_path: Path) -> None:  # noqa: F811
    config = McsqaConfig(lang="en", n=40, kb=str(demo_kb), model=AUTHOR, reviewers=(AUTHOR,), lm_review_as_hard=True)
    on_ray = build(MCSQA, config, tmp_path / "ray", store=Store(f"sqlite:///{tmp_path / 'ray.db'}"), executor="ray")
    local = build(MCSQA, config, tmp_path / "local", store=Store(f"sqlite:///{tmp_path / 'local.db'}"))
    assert on_ray.state == local.state == "done"
    compare_with_golden(tmp_path / "ray", GOLDEN / "dry-en")
    assert outputs(tmp_path / "ray") == outputs(tmp_path / "local")


def test_backends_given_in_code_are_refused(demo_kb: Path, tmp_path: Path) -> None:  # noqa: F811
    config = McsqaConfig(lang="en", n=4, kb=str(demo_kb), model=AUTHOR)
    with pytest.raises(ConfigError, match="backends given in code"):
        build(MCSQA, config, tmp_path / "run", store=Store(), llms={AUTHOR: ScriptedLLM()}, executor="ray")
    assert not (tmp_path / "run").exists()


def test_a_batch_api_is_refused(demo_kb: Path, tmp_path: Path) -> None:  # noqa: F811
    model = "openai/gpt-4o-mini"
    config = McsqaConfig(lang="en", n=4, kb=str(demo_kb), model=model, model_options={model: {"batch": True}})
    with pytest.raises(ConfigError, match="Batch API"):
        build(MCSQA, config, tmp_path / "run", store=Store(), executor="ray")
    assert not (tmp_path / "run").exists()


def test_unknown_executors_name_the_known_ones() -> None:
    assert "ray" in __import__("senseforge.pipelines.executor", fromlist=["EXECUTORS"]).EXECUTORS
    assert runtime.import_ray().is_initialized()


def test_a_sqlite_store_is_refused_on_several_nodes(demo_kb: Path, tmp_path: Path) -> None:  # noqa: F811
    """On Ray's test cluster of two nodes on this machine (the session's local Ray is started again after)."""
    from ray.cluster_utils import Cluster

    runtime.shutdown()
    nodes = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "object_store_memory": 100 * 1024**2})
    try:
        nodes.add_node(num_cpus=1, object_store_memory=100 * 1024**2)
        nodes.wait_for_nodes()
        assert runtime.connect(nodes.address).nodes == 2
        config = McsqaConfig(lang="en", n=4, kb=str(demo_kb), model=AUTHOR)
        with pytest.raises(ConfigError, match="cannot share the SQLite store"):
            build(MCSQA, config, tmp_path / "run", store=Store(f"sqlite:///{tmp_path / 'c.db'}"), executor="ray")
        assert not (tmp_path / "run").exists()
    finally:
        runtime.shutdown()
        nodes.shutdown()
        runtime.connect(num_cpus=2)


def test_api_bound_batches_share_the_jobs_http_actor_across_runs(demo_kb: Path, tmp_path: Path) -> None:  # noqa: F811
    """A dry run over the loopback server: the bytes of local, and a second run on the same (surviving) actor."""
    from senseforge.cluster.recipes import http_service
    from senseforge.llm.loopback import LoopbackOpenAI
    from senseforge.pipelines.mcsqa.dryrun import body_reply

    model = "openai/loopback"
    with LoopbackOpenAI(body_reply) as server:
        config = McsqaConfig(
            lang="en",
            n=8,
            kb=str(demo_kb),
            model=model,
            reviewers=(model,),
            lm_review_as_hard=True,
            model_options={model: {"base_url": server.base_url}},
        )
        first = build(MCSQA, config, tmp_path / "ray", store=Store(f"sqlite:///{tmp_path / 'ray.db'}"), executor="ray")
        actor = http_service(wait=True)._actor_id
        again = build(
            MCSQA, config, tmp_path / "ray2", store=Store(f"sqlite:///{tmp_path / 'ray2.db'}"), executor="ray"
        )
        assert http_service(wait=True)._actor_id == actor
        local = build(MCSQA, config, tmp_path / "local", store=Store(f"sqlite:///{tmp_path / 'local.db'}"))
    assert first.state == again.state == local.state == "done"
    assert outputs(tmp_path / "ray") == outputs(tmp_path / "ray2") == outputs(tmp_path / "local")


@pytest.mark.slow
def test_the_bundled_model_builds_the_demos_bytes_on_ray(tmp_path: Path) -> None:
    """The demo's English mCSQA build with the bundled model (its author, reviewers and verifier in process) on Ray,
    a replica per CPU at one thread each: the demo's golden bytes, as the local build writes them."""
    from senseforge.pipelines.demo import demo_config

    from ..cli.test_build_cli import GOLDEN_DEMO

    kb = tmp_path / "kb"
    import_dump("demo", kb)
    config = demo_config("en", kb, DEFAULT_MODEL, None)
    summary = build(MCSQA, config, tmp_path / "run", store=Store(f"sqlite:///{tmp_path / 'run.db'}"), executor="ray")
    assert summary.state == "done"
    compare_with_golden(tmp_path / "run", GOLDEN_DEMO / "mcsqa-en")


def test_the_http_actors_batches_take_its_idle_threads_again() -> None:
    """Batches one after the other run on one kept thread of the HTTP actor (so its HTTP clients and open
    connections serve the next batch), whatever thread Ray called the actor on; batches at once get threads of
    their own."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from senseforge.cluster.recipes import HttpService

    seen: list[int] = []
    names: set[str] = set()
    gate = threading.Barrier(2, timeout=10)

    class Worker:
        def run(self, stage: Any, batch: Any, judgements: Any, rank: int) -> Any:
            if stage == "together":
                gate.wait()
            seen.append(threading.get_ident())
            names.add(threading.current_thread().name.rsplit("_", 1)[0])
            return stage, len(batch), {}

    service = HttpService()
    service._worker = lambda key, opens: Worker()  # type: ignore[method-assign]
    with ThreadPoolExecutor(4) as callers:  # Ray's threads: a different caller each time
        for _ in range(3):
            assert callers.submit(service.run, "k", None, "alone", [1, 2], {}).result() == ("alone", 2, {})
        assert len(set(seen)) == 1 and seen[0] != threading.get_ident()
        both = [callers.submit(service.run, "k", None, "together", [], {}) for _ in range(2)]
        assert [future.result() for future in both] == [("together", 0, {})] * 2
    assert len(set(seen[3:])) == 2
    assert names == {"senseforge-http"}  # the actor's own threads, not its callers'
