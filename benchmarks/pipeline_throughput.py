#!/usr/bin/env python3
"""How close the mCSQA recipe keeps an API to its concurrency bound, and what a rerun costs.

One run, all on loopback:

1. a :class:`~senseforge.llm.loopback.LoopbackOpenAI` server answers every request after a
   fixed latency, with the stand-in author of :mod:`senseforge.pipelines.mcsqa.dryrun`;
2. ``build mcsqa`` runs on the demo knowledge base (every question set, three questions
   each, an LM review panel) with the ``openai`` provider at ``max_concurrency`` C;
3. the bound is C ÷ latency calls per second (no client can do better with C requests in
   flight); it also measures the server's most requests in flight at once;
4. the same recipe runs again into a new run directory on the same cache: it should make
   no backend call at all;
5. the peer: the bare ``openai`` provider sends 8 × C calls to the same server, outside the
   recipe — what the HTTP round trip alone leaves of the bound on this machine.

It prints calls/s against the bound and against the bare provider's rate measured in the same run
(goal: the recipe at ≥ 95 % of the bare provider), and the rerun's backend calls (goal 0).

    .venv/bin/python benchmarks/pipeline_throughput.py
    .venv/bin/python benchmarks/pipeline_throughput.py --concurrency 32 --latency 0.1 --json out.json
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from senseforge.kb.conceptnet import import_dump
from senseforge.llm.base import GenerateRequest
from senseforge.llm.loopback import LoopbackOpenAI
from senseforge.llm.registry import get_llm
from senseforge.pipelines.mcsqa import MCSQA, McsqaConfig
from senseforge.pipelines.runner import build
from senseforge.store.db import Store

GOAL = 0.95
"""The recipe's rate as a share of the bare provider's, measured in the same run."""
RESPONDER = "senseforge.pipelines.mcsqa.dryrun:body_reply"


class ServerProcess:
    """The loopback server in a child process: the client keeps its interpreter to itself, as with a real API."""

    def __init__(self, latency: float) -> None:
        command = [sys.executable, "-m", "senseforge.llm.loopback", "--responder", RESPONDER, "--latency", str(latency)]
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        self.base_url = self.process.stdout.readline().strip()
        if not self.base_url.startswith("http://127.0.0.1:"):
            self.process.kill()
            raise RuntimeError(f"the loopback server did not start (said {self.base_url!r})")

    def stats(self) -> dict[str, Any]:
        """The server's statistics so far."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write("stats\n")
        self.process.stdin.flush()
        stats: dict[str, Any] = json.loads(self.process.stdout.readline())
        return stats

    def stop(self) -> dict[str, Any]:
        """Close the server; its statistics."""
        out, _ = self.process.communicate("", timeout=60)
        stats: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
        return stats


def bare_rate(base_url: str, concurrency: int, waves: int = 8) -> float:
    """The bare ``openai`` provider, no recipe: ``waves`` × C distinct calls; calls per second."""
    llm = get_llm("openai/loopback", {"base_url": base_url, "max_concurrency": concurrency, "timeout_s": 30.0})
    requests = [GenerateRequest.chat(f"transport probe {i}") for i in range(waves * concurrency)]
    started = time.perf_counter()
    llm.generate(requests)
    return len(requests) / (time.perf_counter() - started)


def _run(config: McsqaConfig, run_dir: Path, store: Store) -> tuple[Any, float, float]:
    """The build's summary, its seconds, and when it started (monotonic clock, as the server's log)."""
    started = time.perf_counter()
    summary = build(MCSQA, config, run_dir, store=store)
    return summary, time.perf_counter() - started, started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--concurrency", type=int, default=16, help="the provider's max_concurrency (C)")
    parser.add_argument("--latency", type=float, default=2.0, help="seconds the server waits before each answer")
    parser.add_argument("--lang", default="en", help="language of the demo knowledge base to build from")
    parser.add_argument("--batch-size", type=int, help="records per stored batch (default: the recipe's own)")
    parser.add_argument("--json", type=Path, help="also write the numbers here")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="sf-throughput-") as tmp:
        work = Path(tmp)
        kb = work / "kb"
        import_dump("demo", kb)
        spec = "openai/loopback"
        store = Store(f"sqlite:///{work / 'cache.db'}")

        server = ServerProcess(args.latency)
        options = {"base_url": server.base_url, "max_concurrency": args.concurrency, "timeout_s": 30.0}
        config = McsqaConfig(
            lang=args.lang,
            n=None,
            kb=str(kb),
            model=spec,
            model_options={spec: options},
            reviewers=(spec,),
            lm_review_as_hard=True,
            batch_size=args.batch_size,
        )
        # the process warms up first, as the bare provider below is timed warm: one call (the provider's modules
        # and the HTTP client's lazy imports) and one read of the question sets (duckdb imports pandas on its
        # first query with parameters) load once per process; the recipe's figure is its rate, not the start
        warming = time.perf_counter()
        with LoopbackOpenAI(lambda _: "ok") as warm:  # its own server: the recipe's counts and first arrival
            get_llm(spec, {**options, "base_url": warm.base_url}).generate([GenerateRequest.chat("warm-up")])
        MCSQA.source(config).records(config)
        warm_up_s = time.perf_counter() - warming
        try:
            first, elapsed, started = _run(config, work / "first", store)
            stats = server.stats()
            # the rerun: a new run directory on the same cache and the same endpoint
            second, rerun_s, _ = _run(config, work / "second", store)
            bare = bare_rate(server.base_url, args.concurrency)
        finally:
            final = server.stop()
        calls, peak = stats["requests"], stats["max_in_flight"]
        rerun_calls = final["requests"] - calls - 8 * args.concurrency
        cost_text = (work / "first" / "cost.json").read_text()
        same = all(
            (work / "first" / name).read_bytes() == (work / "second" / name).read_bytes()
            for name in ("dataset/train.jsonl", "dataset/validation.jsonl", "dataset/test.jsonl", "funnel.json")
        )

    # a staged recipe cannot beat its waves: each stage's distinct calls, C at a time
    stages = json.loads(cost_text)["stages"]
    waves = sum(math.ceil(stage["calls"] / args.concurrency) for stage in stages.values())
    staged_floor_s = waves * args.latency
    rate = calls / elapsed
    bound = args.concurrency / args.latency
    ratio = rate / bound
    transport = bare / bound
    to_bare = rate / bare
    # where the time went: before the first call, while calls arrived, after the last answer came
    before_s = stats["first_arrival_monotonic"] - started
    arriving_s = stats["last_arrival_monotonic"] - stats["first_arrival_monotonic"]
    after_s = elapsed - before_s - arriving_s - args.latency
    result = {
        "concurrency": args.concurrency,
        "latency_s": args.latency,
        "backend_calls": calls,
        "seconds": round(elapsed, 3),
        "calls_per_s": round(rate, 2),
        "bound_calls_per_s": round(bound, 2),
        "ratio": round(ratio, 4),
        "max_in_flight": peak,
        "staged_floor_s": round(staged_floor_s, 3),
        "ratio_to_staged_floor": round(staged_floor_s / elapsed, 4),
        "bare_provider_ratio": round(transport, 4),
        "bare_calls_per_s": round(bare, 2),
        "ratio_to_bare": round(to_bare, 4),
        "kept": first.funnel.kept if first.funnel else 0,
        "process_warm_up_s": round(warm_up_s, 3),
        "before_first_call_s": round(before_s, 3),
        "calls_arriving_s": round(arriving_s, 3),
        "after_last_answer_s": round(after_s, 3),
        "rerun_backend_calls": rerun_calls,
        "rerun_seconds": round(rerun_s, 3),
        "rerun_identical": same and second.state == "done",
    }
    print(f"recipe: {calls} backend calls in {elapsed:.2f} s, {result['kept']} items kept")
    print(f"throughput: {rate:.1f} calls/s vs bound {bound:.1f} (C={args.concurrency} / {args.latency} s)")
    print(f"  ratio {ratio:.1%} of the bound · most in flight at once: {peak}")
    print(
        f"  {before_s:.2f} s before the first call, {arriving_s:.2f} s from the first call to the last, "
        f"{after_s:.2f} s after the last answer (the process warmed up first, untimed: {warm_up_s:.2f} s)"
    )
    print(
        f"  stage by stage the recipe needs at least {waves} waves of C calls ({staged_floor_s:.1f} s): "
        f"{staged_floor_s / elapsed:.1%} of that floor"
    )
    print(f"  peer: the bare openai provider on the same server: {bare:.1f} calls/s, {transport:.1%} of the bound")
    print(f"  the recipe reaches {to_bare:.1%} of the bare provider's rate (goal ≥ {GOAL:.0%})")
    identical = result["rerun_identical"]
    print(f"rerun: {rerun_calls} backend calls (goal 0) in {rerun_s:.2f} s · outputs identical: {identical}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0 if to_bare >= GOAL and rerun_calls == 0 and result["rerun_identical"] else 1


if __name__ == "__main__":
    sys.exit(main())
