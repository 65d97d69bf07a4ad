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

from senseforge.kb.conceptnet import import_dump

KillBuild = Callable[[str, Sequence[str], Path, Path, str, int], None]


KillWhenStored = Callable[["subprocess.Popen[bytes]", Path, "str | None", int], None]


def _locked_at(run_dir: Path, stage: str | None, n: int) -> sqlite3.Connection | None:
    """The run store held locked for writing once ``stage`` (any stage: ``None``) has ``n`` stored results; else
    ``None``, and the lock released. The store is never created here (a build makes it)."""
    try:
        conn = sqlite3.connect(f"file:{run_dir / 'run.db'}?mode=rw", uri=True, timeout=30, isolation_level=None)
    except sqlite3.Error:
        return None
    try:
        conn.execute("begin exclusive")
        where, args = ("where stage = ?", (stage,)) if stage is not None else ("", ())
        count = int(conn.execute(f"select count(*) from stage_results {where}", args).fetchone()[0])
    except sqlite3.Error:
        conn.close()
        return None
    if count >= n:
        return conn
    conn.execute("rollback")
    conn.close()
    return None


def kill_when_stored(
    child: subprocess.Popen[bytes], run_dir: Path, stage: str | None, n: int, *, hung_after_s: float = 1800
) -> None:
    """SIGKILL ``child`` (a build of ``run_dir``) once ``stage`` has ``n`` stored results, however fast it runs.

    The count is read under an exclusive lock on the run store, and the lock is held through the kill: the
    build cannot store another result, so it cannot finish, between the count and the kill. ``hung_after_s``
    bounds a hung build only: a slow one ends by itself.
    """
    deadline = time.monotonic() + hung_after_s
    held = None
    while held is None and child.poll() is None and time.monotonic() < deadline:
        held = _locked_at(run_dir, stage, n)
        if held is None:
            time.sleep(0.02)
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=60)
    if held is not None:
        held.close()
    assert held is not None, f"the build ended (exit {child.returncode}) before {stage or 'its stages'} stored {n}"


@pytest.fixture
def kill_when() -> KillWhenStored:
    """``kill_when(child, run_dir, stage, n)``: :func:`kill_when_stored`."""
    return kill_when_stored


@pytest.fixture
def kill_build() -> KillBuild:
    """``kill_build(recipe, flags, run_dir, home, stage, n)``: ``senseforge build`` in a child process with its own
    ``SENSEFORGE_HOME``, killed with SIGKILL once ``stage`` has ``n`` stored results (:func:`kill_when_stored`)."""

    def run(recipe: str, flags: Sequence[str], run_dir: Path, home: Path, stage: str, n: int) -> None:
        env = {**os.environ, "SENSEFORGE_HOME": str(home), "HF_HUB_OFFLINE": "1"}
        args = [sys.executable, "-m", "senseforge", "build", recipe, *flags, "--out", str(run_dir)]
        child = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        kill_when_stored(child, run_dir, stage, n)
        assert not (run_dir / "funnel.json").exists(), "the build finished before the kill"

    return run


@pytest.fixture(scope="session")
def demo_kb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Our demo knowledge base (bundled, ConceptNet dump format) as a knowledge store."""
    folder = tmp_path_factory.mktemp("kb") / "demo"
    import_dump("demo", folder)
    return folder
