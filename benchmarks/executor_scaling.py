#!/usr/bin/env python3
"""Evaluation on Ray against plain processes: the bundled model, one thread each, the same work.

In one run, the bundled ``llamacpp/gemma-3-270m`` scores (loglik) two shards of CommonsenseQA items (the dev set's
from ``../shared/data``, else the dev sample's, under new ids, ``--items`` per shard), four ways:

1. **1 actor**: ``eval run --executor ray``'s runner (``senseforge.cluster.evaluation``) with one replica,
   which evaluates both shards one after the other;
2. **2 actors**: the same with two replicas, a shard each;
3. **1 process**: one plain ``senseforge eval run`` process over both shards;
4. **2 processes**: two plain processes at once, a shard each.

Every way loads the model itself (inside the timing) with ``n_threads=1`` and ``SENSEFORGE_THREADS=1``, with no
cache (a fresh store each). Prints the wall times, items/s and the ratios, and checks that every way wrote the
same ``samples.jsonl`` bytes for each shard. Goals: 2 actors ≥ 0.9× two plain processes and ≥ 1.6× one actor,
identical outputs, and the recipe's; exits 1 when one is missed.

Then the recipe on the loopback server, local against ray (``benchmarks/executor_recipe.py``; goal: ray within 5%
of local, identical outputs), in :func:`recipe_on_loopback`.

Examples::

    .venv/bin/python benchmarks/executor_scaling.py
    .venv/bin/python benchmarks/executor_scaling.py --items 40 --json /tmp/scaling.json

It needs two free cores: on a loaded machine the figures say more about the load than about Ray.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "tests" / "fixtures" / "csqa" / "dev_sample.jsonl"
DEV = ROOT.parent / "shared" / "data" / "csqa" / "dev_rand_split.jsonl"
"""CommonsenseQA's dev set (1,221 items), where the shared data sits beside the checkout: every item its own work."""
MODEL = "llamacpp/gemma-3-270m"
GOAL_TO_PROCESSES = 0.9
GOAL_TO_ONE_ACTOR = 1.6


def write_shards(work: Path, items: int) -> list[Path]:
    """Two shards of ``items`` items each: CommonsenseQA's dev items (else the 10-item dev sample's, which the model
    scores once each and then repeats from its own memory), under new ids, cycled."""
    source = DEV if DEV.exists() else SAMPLE
    if source is SAMPLE:
        print(f"{DEV} is missing: the shards repeat the 10 items of {SAMPLE.name} (little work per item)")
    rows = [json.loads(line) for line in source.read_text(encoding="utf-8").splitlines() if line.strip()]
    shards = []
    for shard in range(2):
        path = work / f"shard{shard}.jsonl"
        lines = []
        for n in range(items):
            row = dict(rows[(shard * items + n) % len(rows)])
            row["id"] = f"{row['id']}-{shard}-{n}"
            lines.append(json.dumps(row))
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        shards.append(path)
    return shards


def plain(work: Path, name: str, groups: list[list[Path]]) -> float:
    """Plain ``eval run`` processes at once, one per group of shards; returns the wall time."""
    env = {**os.environ, "SENSEFORGE_THREADS": "1", "PYTHONPATH": str(ROOT / "src")}
    started = time.perf_counter()
    running = []
    for index, group in enumerate(groups):
        # one shard: --out is its folder (named after it); several: a folder per shard under it
        out = work / name / (group[0].stem if len(group) == 1 else str(index))
        args = [sys.executable, "-m", "senseforge", "eval", "run", "-m", MODEL, "-o", "n_threads=1", "--no-cache"]
        args += ["--store", f"sqlite:///{work / name}-{index}.db", "--bootstrap", "100", "--out", str(out)]
        for shard in group:
            args += ["-d", str(shard)]
        (work / name).mkdir(parents=True, exist_ok=True)
        log = (work / name / f"{index}.log").open("w", encoding="utf-8")
        running.append((subprocess.Popen(args, env=env, stdout=log, stderr=subprocess.STDOUT), log))
    for process, log in running:
        process.wait()
        log.close()
        if process.returncode != 0:
            raise SystemExit(f"a plain process failed (exit {process.returncode}): see {log.name}")
    return time.perf_counter() - started


def on_ray(work: Path, name: str, shards: list[Path], replicas: int) -> float:
    """The Ray runner of ``eval run`` with ``replicas`` actors over the shards; returns the wall time."""
    from senseforge.cluster.evaluation import ray_pair_runner
    from senseforge.evaluate.pairs import ModelSpec, Pair, PairSettings
    from senseforge.evaluate.run import EvalConfig

    spec = ModelSpec(MODEL, {"n_threads": 1}, f"sqlite:///{work / name}.db", read_cache=False)
    pairs = [Pair(MODEL, shard, work / name / shard.stem) for shard in shards]
    started = time.perf_counter()
    ray_pair_runner({MODEL: spec}, replicas=replicas)(pairs, PairSettings(config=EvalConfig(n_bootstrap=100)))
    return time.perf_counter() - started


def samples(folder: Path) -> dict[str, bytes]:
    """Each shard's samples.jsonl under ``folder``, by shard name."""
    found = {}
    for path in folder.rglob("samples.jsonl"):
        shard = next(part for part in path.relative_to(folder).parts if part.startswith("shard"))
        found[shard.split("-")[0]] = path.read_bytes()
    return found


def recipe_on_loopback(args: argparse.Namespace) -> dict[str, Any] | None:
    """``benchmarks/executor_recipe.py``'s :func:`measure_recipe`: the dry mCSQA recipe against the loopback server
    at a fixed latency, local against ray (goal: ray within 5% of local, identical outputs). Prints and returns its
    figures (with a ``met`` flag)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from executor_recipe import measure_recipe, report

    from senseforge.cluster.runtime import shutdown

    try:
        recipe = measure_recipe(n=args.recipe_n, latency=args.recipe_latency, num_cpus=2)
    finally:
        shutdown()
    print(report(recipe))
    return recipe


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=100, help="items per shard (two shards)")
    parser.add_argument("--workdir", type=Path, help="keep the shards, stores and outputs here (default: a temp dir)")
    parser.add_argument("--json", type=Path, help="also write the numbers here")
    parser.add_argument("--recipe-n", type=int, default=30, help="items of the recipe on the loopback server")
    parser.add_argument("--recipe-latency", type=float, default=0.05, help="seconds per loopback answer")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "src"))
    os.environ["SENSEFORGE_THREADS"] = "1"
    from senseforge.cluster.runtime import connect, shutdown

    with tempfile.TemporaryDirectory() as temp:
        work = args.workdir or Path(temp)
        work.mkdir(parents=True, exist_ok=True)
        shards = write_shards(work, args.items)
        cluster = connect(num_cpus=2)  # started before the timings: a Ray's start-up is not per evaluation
        print(f"ray: {cluster.cpus:g} CPUs; {len(os.sched_getaffinity(0))} cores here; load {os.getloadavg()[0]:.1f}")
        try:
            walls = {
                "1 actor": on_ray(work, "ray1", shards, 1),
                "2 actors": on_ray(work, "ray2", shards, 2),
            }
        finally:
            shutdown()
        walls["1 process"] = plain(work, "plain1", [shards])
        walls["2 processes"] = plain(work, "plain2", [[shards[0]], [shards[1]]])
        folders = ("ray1", "ray2", "plain1", "plain2")
        outputs = {name: samples(work / folder) for name, folder in zip(walls, folders, strict=True)}
        same = all(found == outputs["1 process"] and len(found) == 2 for found in outputs.values())
    total = 2 * args.items
    for name, wall in walls.items():
        print(f"{name:>12}: {wall:7.1f} s, {total / wall:6.2f} items/s")
    to_processes = walls["2 processes"] / walls["2 actors"]
    to_one_actor = walls["1 actor"] / walls["2 actors"]
    print(f"2 actors / 2 processes: {to_processes:.2f}x (goal ≥ {GOAL_TO_PROCESSES})")
    print(f"2 actors / 1 actor:     {to_one_actor:.2f}x (goal ≥ {GOAL_TO_ONE_ACTOR})")
    print(f"1 actor / 1 process:    {walls['1 process'] / walls['1 actor']:.2f}x (one worker: Ray against a process)")
    print(f"identical samples.jsonl for every shard, all four ways: {same}")
    recipe = recipe_on_loopback(args)
    result = {
        "items": total,
        "walls_s": walls,
        "to_processes": to_processes,
        "to_one_actor": to_one_actor,
        "identical": same,
        "recipe": recipe,
    }
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    met = to_processes >= GOAL_TO_PROCESSES and to_one_actor >= GOAL_TO_ONE_ACTOR and same
    return 0 if met and (recipe is None or recipe.get("met", False)) else 1


if __name__ == "__main__":
    sys.exit(main())
