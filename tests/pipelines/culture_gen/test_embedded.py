"""``build culture-gen --langs id,su`` with the bundled Gemma 3 270M: items reach the checks, a kill -9 at any
moment resumes to the same bytes, and a rerun on the same cache makes no backend call."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from senseforge.pipelines.culture_gen.recipe import CULTURE_GEN, CultureGenConfig
from senseforge.pipelines.demo import CULTURE_GEN_DEMO
from senseforge.pipelines.runner import build
from senseforge.store.db import Store

PER_LANG = ("dataset/test.jsonl", "items/test.jsonl", "funnel.json", "cost.json")
OUTPUTS = (
    *(f"{lang}/{name}" for lang in ("id", "su") for name in PER_LANG),
    "funnel.json",
    "cost.json",
    "rejects.jsonl",
)
FLAGS = ["--langs", "id,su", "--batch-concepts", "2", "--max-tokens", str(CULTURE_GEN_DEMO["max_tokens"])]


def _generated(run_dir: Path) -> int:
    try:
        with sqlite3.connect(run_dir / "run.db", timeout=5) as conn:
            return int(conn.execute("select count(*) from stage_results where stage = 'generate'").fetchone()[0])
    except sqlite3.Error:
        return 0


@pytest.mark.slow
def test_embedded_model_end_to_end_kill_9_and_rerun(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = CultureGenConfig(langs=("id", "su"), **CULTURE_GEN_DEMO)
    clean = tmp_path / "clean"
    summary = build(CULTURE_GEN, config, clean, store=Store())
    assert summary.state == "done"
    funnel = json.loads((clean / "funnel.json").read_text())
    check = next(row for row in funnel["stages"] if row["stage"] == "check")
    assert check["in"] > 0, funnel  # the base model's replies do reach the checks
    for row in funnel["stages"]:
        assert row["in"] == row["out"] + sum(row["rejected"].values())

    # the same build in its own process and cache, killed mid-generation, then resumed
    killed = tmp_path / "killed"
    env = {**os.environ, "SENSEFORGE_HOME": str(tmp_path / "home-killed"), "HF_HUB_OFFLINE": "1"}
    args = [sys.executable, "-m", "senseforge", "build", "culture-gen", *FLAGS, "--out", str(killed)]
    child = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 600
    while _generated(killed) < 3 and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=60)
    assert not (killed / "funnel.json").exists(), "the build finished before the kill"
    monkeypatch.setenv("SENSEFORGE_HOME", env["SENSEFORGE_HOME"])
    resumed = build(CULTURE_GEN, config, killed, resume=True, store=Store())
    assert resumed.state == "done"
    for name in OUTPUTS:
        assert (killed / name).read_bytes() == (clean / name).read_bytes(), name

    # a rerun into a new run directory on the resumed run's cache: every call answered from it
    again = build(CULTURE_GEN, config, tmp_path / "again", store=Store())
    assert again.ledger["calls"] == again.ledger["cache_hits"] > 0
