"""What the recipe tests share: a build started in its own process and killed with SIGKILL mid-run."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

KillBuild = Callable[[str, Sequence[str], Path, Path, str, int], None]


def stored(run_dir: Path, stage: str) -> int:
    """How many results of ``stage`` the run store holds (0 while it does not exist yet)."""
    try:
        with sqlite3.connect(run_dir / "run.db", timeout=5) as conn:
            query = "select count(*) from stage_results where stage = ?"
            return int(conn.execute(query, (stage,)).fetchone()[0])
    except sqlite3.Error:
        return 0


@pytest.fixture
def kill_build() -> KillBuild:
    """``kill_build(recipe, flags, run_dir, home, stage, n)``: ``senseforge build`` in a child process with its own
    ``SENSEFORGE_HOME``, killed with SIGKILL once ``stage`` has ``n`` stored results; it must not have finished."""

    def run(recipe: str, flags: Sequence[str], run_dir: Path, home: Path, stage: str, n: int) -> None:
        env = {**os.environ, "SENSEFORGE_HOME": str(home), "HF_HUB_OFFLINE": "1"}
        args = [sys.executable, "-m", "senseforge", "build", recipe, *flags, "--out", str(run_dir)]
        child = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 600
        while stored(run_dir, stage) < n and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=60)
        assert not (run_dir / "funnel.json").exists(), "the build finished before the kill"

    return run
