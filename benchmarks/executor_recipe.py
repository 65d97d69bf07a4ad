#!/usr/bin/env python3
"""A recipe against the loopback server at a fixed latency: ``--executor local`` against ``--executor ray``.

The dry-run mCSQA build (the author's replies from :func:`senseforge.pipelines.mcsqa.dryrun.body_reply`) over the
loopback OpenAI-compatible server, run in a process of its own with ``--latency`` seconds per answer, is built
twice with the same config, each time into a fresh folder with a fresh cache store (no cache hits): once with the
local executor and once with the ray executor. Ray, and the job's actor of API-bound batches
(``senseforge.cluster.recipes.http_service``, which outlives a run), are started before the timings (their start-up
is reported apart: a cluster runs many builds). The pair of builds is made ``--repeats`` times, local and ray taking
turns to go first (a machine's drift falls on both alike), and each executor's median wall time counts. Prints the
wall times, their ratio, the batches sent to Ray and the overhead per batch (``(ray - local) / batches``), and checks
that every run wrote the same files (every file of the
run but its stores, its manifest and its ledger, which carry the run's id, store and timings). Goal: ray within 5%
of local (``ray / local ≤ 1.05``) with identical outputs; exits 1 when missed.

:func:`measure_recipe` is also run by ``benchmarks/executor_scaling.py``.

Examples::

    .venv/bin/python benchmarks/executor_recipe.py
    .venv/bin/python benchmarks/executor_recipe.py --n 60 --latency 0.1 --json /tmp/recipe.json

On a loaded machine the figures say more about the load than about Ray.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
GOAL_RATIO = 1.05
MODEL = "openai/loopback"
RESPONDER = "senseforge.pipelines.mcsqa.dryrun:body_reply"
SKIPPED = ("manifest.json", "ledger.json")


@contextmanager
def loopback(latency: float) -> Iterator[str]:
    """The loopback server in a process of its own (it shares no interpreter with the build); yields its URL."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    args = [sys.executable, "-m", "senseforge.llm.loopback", "--responder", RESPONDER, "--latency", str(latency)]
    server = subprocess.Popen(args, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        url = server.stdout.readline().strip()
        if not url.startswith("http"):
            raise SystemExit(f"the loopback server did not start (it printed {url!r})")
        yield url
    finally:
        assert server.stdin is not None
        server.stdin.close()  # the server stops when its stdin closes
        server.wait(timeout=30)


def outputs(run_dir: Path) -> dict[str, bytes]:
    """Every file of a run, as bytes, but its stores, manifest and ledger."""
    return {
        str(path.relative_to(run_dir)): path.read_bytes()
        for path in sorted(run_dir.rglob("*"))
        if path.is_file() and not path.name.startswith("run.db") and path.name not in SKIPPED
    }


def _build(work: Path, name: str, config: Any, executor: str) -> tuple[float, str]:
    from senseforge.pipelines.mcsqa import MCSQA
    from senseforge.pipelines.runner import build
    from senseforge.store.db import Store

    shutil.rmtree(work / name, ignore_errors=True)  # a fresh run and a fresh cache (a kept --workdir's too)
    for old in work.glob(f"{name}.db*"):
        old.unlink()
    store = Store(f"sqlite:///{work / name}.db")
    try:
        started = time.perf_counter()
        summary = build(MCSQA, config, work / name, store=store, executor=executor)
        wall = time.perf_counter() - started
    finally:
        store.close()
    if summary.state not in ("done", "awaiting_review"):  # the dry recipe stops at its people's review
        raise SystemExit(f"the {executor} build ended {summary.state}")
    return wall, summary.state


@contextmanager
def _counting_batches() -> Iterator[list[int]]:
    """Counts the batches the ray executor sends to its actors (model stages that do not run on the driver)."""
    from senseforge.cluster.recipes import RayExecutor

    counted = [0]
    original = RayExecutor.run

    def run(self: RayExecutor, stage: Any, *args: Any, **kwargs: Any) -> Any:
        if not self._on_driver(stage):
            counted[0] += 1
        return original(self, stage, *args, **kwargs)

    RayExecutor.run = run  # type: ignore[method-assign]
    try:
        yield counted
    finally:
        RayExecutor.run = original  # type: ignore[method-assign]


def measure_recipe(
    *,
    n: int = 30,
    latency: float = 0.05,
    lang: str = "en",
    num_cpus: int = 2,
    workdir: Path | None = None,
    repeats: int = 3,
) -> dict[str, Any]:
    """Build the dry mCSQA recipe over the loopback server with each executor; their figures.

    Args:
        n: items the recipe is asked for.
        latency: seconds the loopback server waits before each answer.
        lang: the recipe's language.
        num_cpus: the local Ray's CPUs (a Ray already connected is used as it is).
        workdir: keep the knowledge base, stores and runs here (default: a temporary folder).
        repeats: how many times each executor builds (their medians count).

    Returns:
        ``walls_s`` (local, ray: the medians), ``all_walls_s`` (every build's), ``ray_startup_s``, ``ratio``
        (ray / local), ``batches`` (sent to Ray), ``overhead_per_batch_s``, ``identical``, ``files`` (compared),
        ``load`` (1-minute load average at the start) and ``met`` (ratio within the goal and identical outputs).
    """
    sys.path.insert(0, str(ROOT / "src"))
    # Ray's workers (started by connect) import this checkout's senseforge too
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")]))
    from senseforge.cluster.recipes import http_service
    from senseforge.cluster.runtime import connect
    from senseforge.kb.conceptnet import import_dump
    from senseforge.pipelines.mcsqa import McsqaConfig

    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as temp:
        work = workdir or Path(temp)
        work.mkdir(parents=True, exist_ok=True)
        kb = work / "kb"
        if not kb.exists():
            import_dump("demo", kb)
        started = time.perf_counter()
        cluster = connect(num_cpus=num_cpus)  # before the timings; a Ray already connected costs nothing here
        startup = time.perf_counter() - started
        http_service(wait=True)  # the job's actor of API-bound batches, up with Ray (it outlives a run)
        with loopback(latency) as url:
            config = McsqaConfig(
                lang=lang,
                n=n,
                kb=str(kb),
                model=MODEL,
                reviewers=(MODEL,),
                lm_review_as_hard=True,
                model_options={MODEL: {"base_url": url}},
            )
            walls: dict[str, list[float]] = {"local": [], "ray": []}
            found: list[dict[str, bytes]] = []
            states: set[str] = set()
            counts = []
            for turn in range(repeats):
                for executor in ("local", "ray") if turn % 2 == 0 else ("ray", "local"):
                    with _counting_batches() as counted:
                        wall, state = _build(work, executor, config, executor)
                    walls[executor].append(wall)
                    states.add(state)
                    found.append(outputs(work / executor))
                    if executor == "ray":
                        counts.append(counted[0])
        local_state = next(iter(states))
    local, ray = statistics.median(walls["local"]), statistics.median(walls["ray"])
    ratio = ray / local
    batches = counts[0]
    identical = all(files == found[0] for files in found) and bool(found[0]) and len(states) == 1
    return {
        "n": n,
        "latency_s": latency,
        "ray_cpus": cluster.cpus,
        "load": load,
        "state": local_state,
        "walls_s": {"local": local, "ray": ray},
        "all_walls_s": walls,
        "repeats": repeats,
        "ray_startup_s": startup,
        "ratio": ratio,
        "goal_ratio": GOAL_RATIO,
        "batches": batches,
        "overhead_per_batch_s": (ray - local) / batches if batches else None,
        "identical": identical,
        "files": sorted(found[0]),
        "met": identical and ratio <= GOAL_RATIO,
    }


def report(result: dict[str, Any]) -> str:
    """The figures of :func:`measure_recipe` as lines of text."""
    walls = result["walls_s"]
    per_batch = result["overhead_per_batch_s"]
    lines = [
        f"recipe (dry mCSQA, n={result['n']}, loopback latency {result['latency_s']:g} s; "
        f"ray {result['ray_cpus']:g} CPUs, load {result['load']:.1f}):",
        f"  ray start-up with its HTTP actor (apart): {result['ray_startup_s']:.2f} s",
        f"  local: {walls['local']:.2f} s; ray: {walls['ray']:.2f} s (medians of {result['repeats']}: "
        + ", ".join(f"{name} {' '.join(f'{w:.2f}' for w in runs)}" for name, runs in result["all_walls_s"].items())
        + f"); ray / local: {result['ratio']:.3f} (goal ≤ {result['goal_ratio']})",
        f"  batches sent to Ray: {result['batches']}; overhead per batch: "
        + ("n/a" if per_batch is None else f"{per_batch * 1000:.1f} ms"),
        f"  identical outputs ({len(result['files'])} files): {result['identical']}",
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=30, help="items the recipe is asked for")
    parser.add_argument("--latency", type=float, default=0.05, help="seconds per loopback answer")
    parser.add_argument("--num-cpus", type=int, default=2, help="the local Ray's CPUs")
    parser.add_argument("--workdir", type=Path, help="keep the runs here (default: a temp dir)")
    parser.add_argument("--json", type=Path, help="also write the numbers here")
    parser.add_argument("--repeats", type=int, default=3, help="builds per executor, taking turns (medians count)")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "src"))
    try:
        result = measure_recipe(
            n=args.n, latency=args.latency, num_cpus=args.num_cpus, workdir=args.workdir, repeats=args.repeats
        )
    finally:
        from senseforge.cluster.runtime import shutdown

        shutdown()
    print(report(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0 if result["met"] else 1


if __name__ == "__main__":
    sys.exit(main())
