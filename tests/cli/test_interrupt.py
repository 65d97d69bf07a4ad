"""Interrupted is not done: Ctrl-C (SIGINT) and SIGTERM end a command with 130 / 143 and say how to go on.

The model is a scripted responder that, while ``SF_TEST_BLOCK`` is set, marks a file and then
waits: the test sends the signal only once the mark is there, so it never depends on how fast
the machine is. Without ``SF_TEST_BLOCK`` the same responder (same file, same identity) answers at
once, which lets a build be resumed.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from senseforge.kb.conceptnet import import_dump
from senseforge.llm.cache import FLUSH_EVERY

from ..pipelines.golden import outputs

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


def _start(args: list[str], home: Path, mark: Path, **extra: str) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "SENSEFORGE_HOME": str(home),
        "HF_HUB_OFFLINE": "1",
        "COLUMNS": "200",
        "SF_TEST_BLOCK": "1",
        "SF_TEST_MARK": str(mark),
        **extra,
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


LOGGING_RESPONDER = """
import os
import pathlib
import time

from senseforge.pipelines.mcsqa.recipe import mcsqa_author


def respond(request):
    log = pathlib.Path(os.environ["SF_TEST_LOG"])
    with log.open("a", encoding="utf-8") as handle:  # every request the model is sent, as the cache keeps it
        handle.write(request.model_dump_json() + "\\n")
    block_at = os.environ.get("SF_TEST_BLOCK_AT")
    if block_at and len(log.read_text(encoding="utf-8").splitlines()) >= int(block_at):
        pathlib.Path(os.environ["SF_TEST_MARK"]).touch()
        while True:  # a slow model: the signal arrives while this call is in flight
            time.sleep(0.05)
    return mcsqa_author(request)
"""

BLOCK_AT = 66
"""The call the model stops answering at: the last of the 66 questions written for 22 sets in one batch, of which
the cache layer stored the first 64 answers (:data:`senseforge.llm.cache.FLUSH_EVERY`) though the batch was never
stored in the run store: what a resume must take from the cache, not ask the model again."""


def _rows(db: Path, query: str) -> list[tuple[object, ...]]:
    with sqlite3.connect(db) as conn:
        return conn.execute(query).fetchall()


def test_a_build_with_its_own_store_resumed_as_printed_keeps_the_store_and_sends_no_answered_call_again(
    tmp_path: Path, kb: Path
) -> None:
    """Issue 44: ``--store``, Ctrl-C, and the printed command: one ledger in the given store (none in the default
    one), the outputs of an uninterrupted run, and no request whose answer was stored sent to the model again."""
    model = tmp_path / "model.py"
    model.write_text(LOGGING_RESPONDER, encoding="utf-8")
    spec = f"scripted/{model}:respond"
    base = ["build", "mcsqa", "--lang", "en", "--n", "22", "--kb", str(kb), "-m", spec, "--reviewers", spec]
    base += ["--lm-review-as-hard", "--set", "batch_size=100"]

    whole_log = tmp_path / "whole.log"
    env = {**os.environ, "SENSEFORGE_HOME": str(tmp_path / "home-whole"), "HF_HUB_OFFLINE": "1", "COLUMNS": "200"}
    env.update(SF_TEST_LOG=str(whole_log))
    env.pop("SF_TEST_BLOCK_AT", None)
    whole = subprocess.run(
        [sys.executable, "-m", "senseforge", *base, "--out", str(tmp_path / "whole")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert whole.returncode == 0, whole.stderr
    assert len(whole_log.read_text(encoding="utf-8").splitlines()) > BLOCK_AT
    whole_misses = _rows(tmp_path / "home-whole" / "senseforge.db", "select id from llm_ledger where not cache_hit")

    home, store_db, run = tmp_path / "home", tmp_path / "given" / "calls.db", tmp_path / "run"
    first_log, mark = tmp_path / "first.log", tmp_path / "called"
    args = [*base, "--out", str(run), "--store", f"sqlite:///{store_db}"]
    process = _start(args, home, mark, SF_TEST_LOG=str(first_log), SF_TEST_BLOCK_AT=str(BLOCK_AT))
    code, stderr = _signal_at_mark(process, mark, signal.SIGINT)
    assert code == 130, stderr
    printed = f"senseforge build mcsqa --out {run} --resume"
    assert f"interrupted — continue with `{printed}`" in stderr
    answered = {row[0] for row in _rows(store_db, "select request from llm_cache")}
    assert len(answered) == FLUSH_EVERY  # answered and stored in the cache, their batch not in the run store
    assert not _rows(run / "run.db", "select record_id from stage_results where stage = 'generate'")

    resumed_log = tmp_path / "resumed.log"
    env = {**os.environ, "SENSEFORGE_HOME": str(home), "HF_HUB_OFFLINE": "1", "COLUMNS": "200"}
    env.update(SF_TEST_LOG=str(resumed_log))
    env.pop("SF_TEST_BLOCK_AT", None)
    resumed = subprocess.run(
        [sys.executable, "-m", *shlex.split(printed)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert resumed.returncode == 0, resumed.stderr

    sent_again = set(resumed_log.read_text(encoding="utf-8").splitlines()) & answered
    assert not sent_again, f"{len(sent_again)} answered request(s) sent again"
    assert (run / "funnel.json").is_file() and outputs(run) == outputs(tmp_path / "whole")
    for name in outputs(run):
        assert (run / name).read_bytes() == (tmp_path / "whole" / name).read_bytes(), name
    misses = _rows(store_db, "select cache_key from llm_ledger where not cache_hit")
    assert len(misses) == len({key for (key,) in misses}) == len(whole_misses)  # each request answered once
    label = json.loads((run / "manifest.json").read_text(encoding="utf-8"))["run_id"]
    assert json.loads((run / "ledger.json").read_text(encoding="utf-8"))["calls"] == len(
        _rows(store_db, f"select id from llm_ledger where run = '{label}'")
    )
    default = home / "senseforge.db"
    assert not default.exists() or not _rows(default, "select id from llm_ledger")
