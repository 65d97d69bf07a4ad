"""Interrupted is not done: Ctrl-C (SIGINT) and SIGTERM end a command with 130 / 143 and say how to go on.

The model is a scripted responder that, while ``SF_TEST_BLOCK`` is set, marks a file and then
waits: the test sends the signal only once the mark is there, so it never depends on how fast
the machine is. Without ``SF_TEST_BLOCK`` the same responder (same file, same identity) answers at
once, which lets a build be resumed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from senseforge.kb.conceptnet import import_dump

RESPONDER = """
import os
import pathlib
import time


def respond(request):
    if os.environ.get("SF_TEST_BLOCK"):
        pathlib.Path(os.environ["SF_TEST_MARK"]).touch()
        while True:  # a slow model: the signal arrives while a call is in flight
            time.sleep(0.05)
    if hasattr(request, "continuation"):
        return -float(len(request.continuation))
    return "What do people keep in a box?"
"""

WAIT_FOR_MARK_S = 120.0
"""How long the model may take to be called at all (a bound, not a pace: the test goes on at the mark)."""


def _start(args: list[str], home: Path, mark: Path) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "SENSEFORGE_HOME": str(home),
        "HF_HUB_OFFLINE": "1",
        "COLUMNS": "200",
        "SF_TEST_BLOCK": "1",
        "SF_TEST_MARK": str(mark),
    }
    return subprocess.Popen(
        [sys.executable, "-m", "senseforge", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
        preexec_fn=_ctrl_c_as_in_a_terminal,
    )


def _ctrl_c_as_in_a_terminal() -> None:
    """The child takes SIGINT as a terminal's foreground command does, also when this test run inherited it ignored
    (a script's background job ignores SIGINT, and so would every process it starts)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _signal_at_mark(process: subprocess.Popen[str], mark: Path, signum: int) -> tuple[int, str]:
    deadline = time.monotonic() + WAIT_FOR_MARK_S
    while not mark.exists():
        if process.poll() is not None:
            _, stderr = process.communicate()
            pytest.fail(f"the command ended (rc {process.returncode}) before calling the model:\n{stderr}")
        if time.monotonic() > deadline:
            process.kill()
            pytest.fail("the model was never called")
        time.sleep(0.02)
    process.send_signal(signum)
    try:
        _, stderr = process.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        process.kill()
        pytest.fail("the command did not stop after the signal")
    return process.returncode, stderr


@pytest.fixture
def responder(tmp_path: Path) -> Path:
    path = tmp_path / "slow.py"
    path.write_text(RESPONDER, encoding="utf-8")
    return path


def test_ctrl_c_in_a_build_exits_130_and_resume_finishes_it(
    tmp_path: Path, senseforge_home: Path, responder: Path
) -> None:
    kb = tmp_path / "kb"
    import_dump("demo", kb)
    run = tmp_path / "run"
    args = ["build", "mcsqa", "--lang", "en", "--n", "2", "--kb", str(kb), "-m", f"scripted/{responder}:respond"]
    args += ["--out", str(run)]
    mark = tmp_path / "called"
    code, stderr = _signal_at_mark(_start(args, senseforge_home, mark), mark, signal.SIGINT)
    assert code == 130, stderr
    assert f"interrupted — continue with `senseforge build mcsqa --out {run} --resume`" in stderr
    assert "Traceback" not in stderr
    assert (run / "manifest.json").is_file() and not (run / "funnel.json").exists()
    env = {**os.environ, "SENSEFORGE_HOME": str(senseforge_home), "HF_HUB_OFFLINE": "1", "COLUMNS": "200"}
    env.pop("SF_TEST_BLOCK", None)
    resumed = subprocess.run(
        [sys.executable, "-m", "senseforge", *args, "--resume"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert resumed.returncode == 0, resumed.stderr
    assert (run / "funnel.json").is_file()


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_in_an_evaluation_exits_with_its_status_and_writes_nothing_half_done(
    tmp_path: Path, senseforge_home: Path, responder: Path, signum: int, code: int
) -> None:
    csqa = Path(__file__).parents[1] / "fixtures" / "csqa" / "dev_sample.jsonl"
    out = tmp_path / "out"
    args = ["eval", "run", "-d", str(csqa), "-m", f"scripted/{responder}:respond", "-f", "generate", "--out", str(out)]
    mark = tmp_path / "called"
    got, stderr = _signal_at_mark(_start(args, senseforge_home, mark), mark, signum)
    assert got == code, stderr
    assert "interrupted — nothing of the unfinished evaluation was written" in stderr
    assert not (out / "results.json").exists() and not (out / "samples.jsonl").exists()
