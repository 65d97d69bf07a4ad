#!/usr/bin/env python3
"""How the annotation app holds up under a crowd: 50 annotators at once on one SQLite run store.

One run, all on loopback:

1. a run store in a temporary folder gets 400 verify items × k=5 (2,000 judgements wanted)
   and 50 invited annotators;
2. ``senseforge annotate serve`` runs in a child process (uvicorn, access log off), so the
   simulated annotators keep their interpreter to themselves, as real browsers would;
3. a peer: every annotator sends 20 requests, at the same pace, that the app answers
   without touching the store (an unauthenticated ``POST /api/verify/next``, answered 401):
   what HTTP alone costs at this concurrency on this machine;
4. 50 threads, one keep-alive ``httpx`` client and one annotator each, loop
   ``POST /api/verify/next`` → (``--think``: a pause, exponential with that mean) →
   ``POST /api/verify/{id}`` until the server answers 204; every submit is timed;
5. the run store is read back: judgements stored, duplicates per (item, annotator, task),
   items with other than k judgements.

It prints the judgements stored (goal: exactly items × k, none twice), p50/p95/p99 submit
latency (goal: p95 ≤ 50 ms), the same percentiles of the peer and the submit/peer ratio,
throughput, and the server's CPU per judgement. Exit status 1 when a goal is missed.

Without think time the clients form a closed loop that saturates the server, so latency
is queueing: by Little's law, about annotators ÷ throughput. Real people read before they
answer; ``--think 1`` (a verification a second per person, faster than anyone reads) shows
the latency they would see.

    .venv/bin/python benchmarks/annotate_load.py
    .venv/bin/python benchmarks/annotate_load.py --think 1
    .venv/bin/python benchmarks/annotate_load.py --items 2000 --k 1 --annotators 50 --json load.json
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import sqlalchemy as sa

from senseforge.annotate.store import AnnotationStore
from senseforge.data.schema import MCItem
from senseforge.pipelines.runstore import sqlite_url

GOAL_P95_S = 0.050
PEER_REQUESTS = 20


def items(n: int) -> list[MCItem]:
    return [
        MCItem(
            id=f"load-{i:05d}",
            lang="en",
            question=f"Where would you most likely keep spare key number {i}?",
            choices=[{"label": label, "text": f"option {label} for {i}"} for label in "ABCDE"],
            answer="A",
        )
        for i in range(n)
    ]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Server:
    """``senseforge annotate serve`` in a child process."""

    def __init__(self, run_dir: Path) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        command = [sys.executable, "-m", "senseforge", "annotate", "serve", str(run_dir)]
        command += ["--port", str(self.port), "--no-access-log"]
        self.log = (run_dir / "server.log").open("w")
        self.process = subprocess.Popen(command, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"{self.base}/", timeout=1).status_code == 401:
                    return
            except httpx.TransportError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the server did not start; see {run_dir / 'server.log'}")
            time.sleep(0.05)

    def cpu_s(self) -> float | None:
        """CPU seconds the server has used so far (Linux; ``None`` elsewhere)."""
        try:
            fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return None
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()


def percentiles(samples: list[float]) -> dict[str, float]:
    """p50, p95, p99 and max, in milliseconds."""
    if len(samples) < 2:
        return dict.fromkeys(("p50", "p95", "p99", "max"), math.nan)
    cuts = statistics.quantiles(samples, n=100, method="inclusive")
    return {"p50": cuts[49] * 1e3, "p95": cuts[94] * 1e3, "p99": cuts[98] * 1e3, "max": max(samples) * 1e3}


def crowd(base: str, tokens: list[str], work: Any) -> tuple[list[Any], float]:
    """Run ``work(client, token, index)`` in one thread per annotator, all released at once."""
    results: list[Any] = [None] * len(tokens)
    gate = threading.Barrier(len(tokens) + 1)

    def run(index: int, token: str) -> None:
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=base, headers=headers, timeout=60) as client:
            gate.wait()
            try:
                results[index] = work(client, token, index)
            except BaseException as exc:  # reported by the caller
                results[index] = exc

    threads = [threading.Thread(target=run, args=(i, t)) for i, t in enumerate(tokens)]
    for thread in threads:
        thread.start()
    gate.wait()
    started = time.perf_counter()
    for thread in threads:
        thread.join()
    return results, time.perf_counter() - started


def peer(client: httpx.Client, _token: str, index: int, think: float = 0.0) -> list[float]:
    """The same crowd and pace, on requests the app answers without the store."""
    rng = random.Random(-1 - index)
    samples = []
    with httpx.Client(base_url=client.base_url, timeout=60) as anonymous:
        for _ in range(PEER_REQUESTS):
            if think:
                time.sleep(rng.expovariate(1 / think))
            started = time.perf_counter()
            status = anonymous.post("/api/verify/next").status_code
            samples.append(time.perf_counter() - started)
            if status != 401:
                raise RuntimeError(f"the peer request got {status}, expected 401")
    return samples


def annotate(client: httpx.Client, _token: str, index: int, think: float = 0.0) -> dict[str, Any]:
    """One simulated annotator: next, (think), submit, until nothing is left."""
    rng = random.Random(index)
    submits: list[float] = []
    nexts: list[float] = []
    codes: dict[int, int] = {}
    while True:
        started = time.perf_counter()
        nxt = client.post("/api/verify/next")
        nexts.append(time.perf_counter() - started)
        if nxt.status_code == 204:
            return {"submits": submits, "nexts": nexts, "codes": codes}
        if nxt.status_code != 200:
            raise RuntimeError(f"next: {nxt.status_code} {nxt.text[:200]}")
        assignment = nxt.json()["assignment_id"]
        body = {"accept": rng.random() < 0.8}
        if think:
            time.sleep(rng.expovariate(1 / think))
        started = time.perf_counter()
        stored = client.post(f"/api/verify/{assignment}", json=body)
        submits.append(time.perf_counter() - started)
        codes[stored.status_code] = codes.get(stored.status_code, 0) + 1
        if stored.status_code not in (200, 201):
            raise RuntimeError(f"submit: {stored.status_code} {stored.text[:200]}")


def read_back(url: str) -> dict[str, Any]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            total = conn.execute(sa.text("SELECT count(*) FROM judgements WHERE task = 'verify'")).scalar_one()
            doubled = conn.execute(
                sa.text(
                    "SELECT count(*) FROM (SELECT 1 FROM judgements GROUP BY item_id, annotator, task "
                    "HAVING count(*) > 1) AS d"
                )
            ).scalar_one()
            per_item = conn.execute(
                sa.text("SELECT count(*) FROM judgements WHERE task = 'verify' GROUP BY item_id")
            ).all()
    finally:
        engine.dispose()
    return {"stored": int(total), "duplicates": int(doubled), "per_item": sorted({int(r[0]) for r in per_item})}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=400, help="verify items queued (default: 400)")
    parser.add_argument("--k", type=int, default=5, help="annotators per item (default: 5)")
    parser.add_argument("--annotators", type=int, default=50, help="simulated annotators at once (default: 50)")
    parser.add_argument(
        "--think",
        type=float,
        default=0.0,
        help="mean seconds an annotator reads before submitting, exponential (default: 0, flat out)",
    )
    parser.add_argument("--workdir", type=Path, default=None, help="keep the run here (default: a temporary folder)")
    parser.add_argument("--json", type=Path, default=None, help="also write the numbers to this file")
    args = parser.parse_args()
    if args.annotators < args.k:
        parser.error("--annotators must be at least --k (an item needs k different people)")

    with tempfile.TemporaryDirectory(prefix="sf-annotate-load-") as scratch:
        run_dir = args.workdir or Path(scratch) / "run"
        run_dir.mkdir(parents=True, exist_ok=True)
        url = sqlite_url(run_dir / "run.db")
        store = AnnotationStore(url)
        try:
            store.add_tasks("verify", items(args.items), k=args.k, group="load")
            tokens = [store.invite(f"annotator-{i:02d}") for i in range(args.annotators)]
        finally:
            store.close()
        wanted = args.items * args.k

        server = Server(run_dir)
        try:
            peer_before = server.cpu_s()
            peer_results, peer_wall = crowd(server.base, tokens, functools.partial(peer, think=args.think))
            peer_after = server.cpu_s()
            server_before, client_before = server.cpu_s(), time.process_time()
            results, wall = crowd(server.base, tokens, functools.partial(annotate, think=args.think))
            server_after, client_after = server.cpu_s(), time.process_time()
        finally:
            server.stop()
        failures = [r for r in [*peer_results, *results] if isinstance(r, BaseException)]
        if failures:
            print(f"FAILED: {len(failures)} annotator(s) stopped early: {failures[0]!r}", file=sys.stderr)
            return 1
        stored = read_back(url)

    submits = [s for r in results for s in r["submits"]]
    nexts = [s for r in results for s in r["nexts"]]
    codes: dict[int, int] = {}
    for r in results:
        for code, n in r["codes"].items():
            codes[code] = codes.get(code, 0) + n
    floor = percentiles([s for r in peer_results for s in r])
    submit = percentiles(submits)
    nxt = percentiles(nexts)
    exact = stored["stored"] == wanted and stored["duplicates"] == 0 and stored["per_item"] == [args.k]
    fast = submit["p95"] <= GOAL_P95_S * 1e3
    report = {
        "items": args.items,
        "k": args.k,
        "annotators": args.annotators,
        "think_s": args.think,
        "wanted": wanted,
        "stored": stored,
        "status_codes": codes,
        "submit_ms": submit,
        "next_ms": nxt,
        "peer_ms": floor,
        "submit_p95_over_peer_p95": submit["p95"] / floor["p95"],
        "wall_s": wall,
        "judgements_per_s": stored["stored"] / wall,
        "goals": {"exactly_once": exact, "p95_le_50ms": fast},
        "cpu_s": {
            "server": None if server_before is None or server_after is None else server_after - server_before,
            "server_peer": None if peer_before is None or peer_after is None else peer_after - peer_before,
            "peer_requests": PEER_REQUESTS * args.annotators,
            "peer_wall_s": peer_wall,
            "clients": client_after - client_before,
            "cores": os.cpu_count(),
        },
    }

    def row(name: str, p: dict[str, float]) -> str:
        cells = "   ".join(f"{key} {p[key]:7.2f} ms" for key in ("p50", "p95", "p99", "max"))
        return f"{name:<22} {cells}"

    pace = f"think {args.think:g} s" if args.think else "no think time"
    print(
        f"{args.annotators} annotators ({pace}) · {args.items} verify items × k={args.k} · SQLite run store · "
        "uvicorn, 1 process"
    )
    print(
        f"judgements stored      {stored['stored']} of {wanted} · duplicates {stored['duplicates']} · "
        f"per item {stored['per_item']} · submit answers {dict(sorted(codes.items()))}"
    )
    print(row("submit", submit))
    print(row("next", nxt))
    print(row("peer (401, no store)", floor))
    print(f"submit p95 / peer p95  {report['submit_p95_over_peer_p95']:.2f}")
    print(f"throughput             {report['judgements_per_s']:.0f} judgements/s ({wall:.2f} s wall)")
    cpu = report["cpu_s"]
    if cpu["server"] is not None:
        print(
            f"cpu                    server {cpu['server']:.1f} s ({cpu['server'] / wall:.0%} of one core, "
            f"{cpu['server'] / max(stored['stored'], 1) * 1e3:.1f} ms per judgement) · "
            f"clients {cpu['clients']:.1f} s · {cpu['cores']} cores"
        )
        print(
            f"cpu of the peer         server {cpu['server_peer'] / cpu['peer_requests'] * 1e3:.2f} ms per request "
            f"({cpu['peer_requests'] / peer_wall:.0f} requests/s)"
        )
    print(f"goals: exactly once {'met' if exact else 'MISSED'} · p95 ≤ 50 ms {'met' if fast else 'MISSED'}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0 if exact and fast else 1


if __name__ == "__main__":
    sys.exit(main())
