#!/usr/bin/env python3
"""The floor of a cached rebuild: what a rerun cannot avoid writing, timed alone.

A rebuild on a warm cache sends no request, but it still writes every stage's records into its new run store and
one ledger row per cache hit. This script times exactly that on the folders ``paper_scale.py --workdir W`` leaves:

1. every row of ``W/first/run.db`` (stage results and judgements) written into a new run store, in the batches of
   100 records per transaction a build writes (:func:`senseforge.pipelines.runwrites.insert_rows` and
   :func:`~senseforge.pipelines.runwrites.put_judgements`);
2. the first run's ledger rows, as cache hits, appended to a copy of ``W/cache.db`` in batches of 100.

Compare the sum with ``paper_scale.py``'s rerun time on the same folder: the rest is reading, validating and
scheduling.

    .venv/bin/python benchmarks/paper_scale.py --sets 500 --workdir /tmp/ps
    .venv/bin/python benchmarks/rerun_floor.py /tmp/ps
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

from senseforge.data.schema import JUDGEMENT
from senseforge.pipelines.runstore import RunStore, sqlite_url
from senseforge.pipelines.runwrites import insert_rows, put_judgements
from senseforge.pipelines.tables import stage_results
from senseforge.store.db import Store

BATCH = 100
"""Records per transaction (a build's batches are of this order)."""


def measure(workdir: Path) -> dict[str, float | int]:
    """The floor of a rerun of the build ``paper_scale.py`` left in ``workdir`` (its ``first`` run and ``cache.db``)."""
    first = workdir / "first"
    source = sqlite3.connect(first / "run.db")
    columns = ["stage", "record_id", "status", "reason", "payload", "prompt", "response", "created_at"]
    rows = [
        dict(zip(columns, row, strict=True)) for row in source.execute(f"SELECT {','.join(columns)} FROM stage_results")
    ]
    judged = [
        (JUDGEMENT.validate_json(body), src)
        for body, src in source.execute("SELECT body, source FROM judgements ORDER BY id")
    ]
    source.close()
    run_name = json.loads((first / "manifest.json").read_text()).get("run_id")
    with tempfile.TemporaryDirectory(prefix="sf-rerun-floor-") as tmp:
        store = RunStore(sqlite_url(Path(tmp) / "run.db"))
        started = time.perf_counter()
        for start in range(0, max(len(rows), len(judged)), BATCH):
            with store.engine.begin() as conn:
                put_judgements(conn, judged[start : start + BATCH], time.time())
                insert_rows(conn, stage_results, rows[start : start + BATCH])
        run_store_s = time.perf_counter() - started
        store.close()
        shutil.copy(workdir / "cache.db", Path(tmp) / "cache.db")
        cache = Store(f"sqlite:///{Path(tmp) / 'cache.db'}")
        hits = [
            row.model_copy(update={"cache_hit": True, "latency_s": 0.0, "run": "floor"})
            for row in cache.ledger_rows(run=run_name)
        ] or [row.model_copy(update={"cache_hit": True, "run": "floor"}) for row in cache.ledger_rows()]
        started = time.perf_counter()
        for start in range(0, len(hits), BATCH):
            cache.ledger_add(hits[start : start + BATCH])
        ledger_s = time.perf_counter() - started
        cache.close()
    return {
        "records": len(rows),
        "judgements": len(judged),
        "ledger_hits": len(hits),
        "run_store_s": round(run_store_s, 3),
        "ledger_s": round(ledger_s, 3),
        "floor_s": round(run_store_s + ledger_s, 3),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("workdir", type=Path, help="a paper_scale.py --workdir folder after its run")
    parser.add_argument("--json", type=Path, help="also write the numbers here")
    args = parser.parse_args()
    result = measure(args.workdir)
    run_store_s, ledger_s = result["run_store_s"], result["ledger_s"]
    print(f"floor: {result['records']:,} records + {result['judgements']:,} judgements ", end="")
    print(f"into a new run store in {run_store_s:.2f} s;")
    print(f"       {result['ledger_hits']:,} ledger hit rows in {ledger_s:.2f} s; together {result['floor_s']:.2f} s")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
