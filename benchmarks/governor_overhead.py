#!/usr/bin/env python3
"""What the rate-limit governor costs a request: one process's own limiter against the governed one.

Under ``--executor ray`` a provider takes its endpoint's slots from the job's governor actor
(``senseforge.cluster.limits``). Here one process sends ``--requests`` requests that each hold a slot for
``--work`` seconds and then free it (no network: the limiter's own cost is what is measured), from ``--threads``
threads, each with its own event loop and batches of ``--batch`` requests, as the job's HTTP actor does, at a limit
of ``--limit`` slots; three ways, in one run, taking turns ``--repeats`` times (their medians count):

1. **own**: the process's own :class:`~senseforge.llm.limits.EndpointLimiter` (the local executor's);
2. **governed**: the governor's client as it is: slots handed on in the process;
3. **round trip**: the same with the hand-off off (``HAND_ON = 0``): each request waits for the governor's answer
   before it is sent, as before the hand-off.

Prints each way's wall time, its overhead per request against **own**, and the governor's grants (round trips) per
request. Examples::

    .venv/bin/python benchmarks/governor_overhead.py
    .venv/bin/python benchmarks/governor_overhead.py --requests 2000 --work 0.002
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def _send(limiter: Any, requests: int, batch: int, threads: int, work: float) -> float:
    """Wall seconds to send ``requests`` through ``limiter`` from ``threads`` threads, in batches."""

    async def one() -> None:
        slot, _ = await limiter.slot()
        try:
            await asyncio.sleep(work)
            limiter.succeeded(slot)
        finally:
            limiter.release(slot)

    def run(share: int) -> None:
        async def batches() -> None:
            for start in range(0, share, batch):
                await asyncio.gather(*(one() for _ in range(min(batch, share - start))))

        asyncio.run(batches())

    workers = [threading.Thread(target=run, args=(requests // threads,)) for _ in range(threads)]
    started = time.perf_counter()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=1200, help="requests per way and turn")
    parser.add_argument("--work", type=float, default=0.005, help="seconds each request holds its slot")
    parser.add_argument("--limit", type=int, default=8, help="the endpoint's slots")
    parser.add_argument("--threads", type=int, default=4, help="threads sending (each its own event loop)")
    parser.add_argument("--batch", type=int, default=12, help="requests a thread sends at once")
    parser.add_argument("--repeats", type=int, default=3, help="turns (medians count)")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "src"))
    from senseforge.cluster import limits
    from senseforge.cluster.runtime import connect, import_ray, shutdown
    from senseforge.llm.limits import Ask, EndpointLimiter

    connect(num_cpus=2)
    ray = import_ray()
    try:
        registry = limits.start()
        walls: dict[str, list[float]] = {"own": [], "governed": [], "round trip": []}
        grants: dict[str, float] = {}
        for turn in range(args.repeats):
            for way in walls:
                governor = ray.get(registry.of.remote((f"bench://{turn}", way), Ask(limit=args.limit)))
                ray.get(governor.state.remote())  # the actor is up before the timing
                hand_on = limits.HAND_ON
                if way == "round trip":
                    limits.HAND_ON = 0
                try:
                    limiter = (
                        EndpointLimiter(args.limit)
                        if way == "own"
                        else limits.GovernedLimiter(governor, limit=args.limit)
                    )
                    walls[way].append(_send(limiter, args.requests, args.batch, args.threads, args.work))
                finally:
                    limits.HAND_ON = hand_on
                if way != "own":
                    time.sleep(2 * limits.IDLE_S)  # idle slots go back
                    grants[way] = ray.get(governor.state.remote())["grants"] / args.requests
    finally:
        shutdown()
    own = statistics.median(walls["own"])
    sent = args.requests // args.threads * args.threads
    print(
        f"{sent} requests of {args.work * 1000:g} ms at {args.limit} slots, {args.threads} threads in batches of "
        f"{args.batch} (medians of {args.repeats}; ideal {sent * args.work / args.limit:.2f} s):"
    )
    for way, runs in walls.items():
        wall = statistics.median(runs)
        line = f"  {way}: {wall:.2f} s ({' '.join(f'{w:.2f}' for w in runs)})"
        if way != "own":
            line += f"; +{(wall - own) / sent * 1000:.2f} ms per request; {grants[way]:.2f} round trips per request"
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
