#!/usr/bin/env python3
"""Whether the ledger measures the server: its time per call against the time calls wait in the client.

A loopback OpenAI-compatible server answers every request after a fixed latency L. The ``openai``
provider, through the cache and ledger, sends N requests at once with ``max_concurrency`` C, so
all but C of them wait in this client for a slot. The server's time per call is L (plus the HTTP
round trip); the ledger should say so whatever C and N are, and keep the waits apart.

It prints, over the N calls: the build's wall time, and the ledger's ``latency_s`` (asking to
answer), ``service_s`` (the server's time) and ``queue_s`` (the wait for a slot), summed and per
call, with the ratios that matter: mean ``service_s`` ÷ L (goal: close to 1, at most 1.5: the rest
is the HTTP round trip, more on a small, busy machine) and Σ ``latency_s`` ÷ wall time against
Σ ``service_s`` ÷ wall time (the server's slots in use: at most C; what sizing a server from the
latency alone would be off by is their ratio).

    .venv/bin/python benchmarks/ledger_times.py
    .venv/bin/python benchmarks/ledger_times.py --latency 0.5 --requests 12 --concurrency 1 --json out.json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from senseforge.llm.base import GenerateRequest
from senseforge.llm.cache import CachedLLM
from senseforge.llm.loopback import LoopbackOpenAI
from senseforge.llm.loopback_handler import request_text
from senseforge.llm.prices import Price, PriceTable
from senseforge.llm.providers.openai import OpenAILLM, Options
from senseforge.store.db import Store

GOAL = 1.5
"""The most the mean ``service_s`` may exceed the server's latency by, as a ratio."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--latency", type=float, default=0.5, help="seconds the server takes per request")
    parser.add_argument("--requests", type=int, default=12, help="requests sent at once")
    parser.add_argument("--concurrency", type=int, default=1, help="the provider's max_concurrency")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder, LoopbackOpenAI(request_text, latency_s=args.latency) as server:
        store = Store(f"sqlite:///{Path(folder) / 'store.db'}")
        options = Options(base_url=server.base_url, max_concurrency=args.concurrency, adaptive=False)
        free = PriceTable({"openai/*": Price(0.0, 0.0)})  # money is not measured here
        llm = CachedLLM(OpenAILLM("loopback", options), store, prices=free)
        started = time.perf_counter()
        done = llm.generate([GenerateRequest.chat(f"question {i}") for i in range(args.requests)])
        wall = time.perf_counter() - started
        if not all(result.ok for result in done):
            print("some requests failed: " + "; ".join(str(r.failure) for r in done if not r.ok), file=sys.stderr)
            return 1
        summary = store.ledger_summary()
        store.close()
    n = args.requests
    figures = {
        "latency_s_server": args.latency,
        "requests": n,
        "max_concurrency": args.concurrency,
        "wall_s": round(wall, 3),
        "latency_s_sum": round(summary["latency_s"], 3),
        "service_s_sum": round(summary["service_s"], 3),
        "queue_s_sum": round(summary["queue_s"], 3),
        "service_per_call_over_server_latency": round(summary["service_s"] / n / args.latency, 3),
        "latency_sum_over_wall": round(summary["latency_s"] / wall, 3),
        "service_sum_over_wall": round(summary["service_s"] / wall, 3),
    }
    print(f"{n} requests, max_concurrency {args.concurrency}, server latency {args.latency} s: wall {wall:.2f} s")
    for name in ("latency_s", "service_s", "queue_s"):
        print(f"  {name:<9}  sum {summary[name]:8.2f} s   per call {summary[name] / n:6.3f} s")  # type: ignore[literal-required]
    ratio = figures["service_per_call_over_server_latency"]
    print(f"mean service_s ÷ server latency: {ratio:.3f} (goal ≤ {GOAL})")
    print(
        f"Σ latency_s ÷ wall: {figures['latency_sum_over_wall']:.2f}; Σ service_s ÷ wall: "
        f"{figures['service_sum_over_wall']:.2f} (at max_concurrency 1, about 1: the server was busy throughout)"
    )
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    return 0 if ratio <= GOAL else 1


if __name__ == "__main__":
    raise SystemExit(main())
