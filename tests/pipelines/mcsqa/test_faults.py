"""Fault tolerance on loopback: 30% failing calls, and kill -9 at random moments, change nothing in the output."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from senseforge.data.splits import SPLIT_NAMES
from senseforge.llm.loopback import LoopbackOpenAI
from senseforge.pipelines.mcsqa import MCSQA, McsqaConfig
from senseforge.pipelines.mcsqa.dryrun import body_reply
from senseforge.pipelines.runner import build
from senseforge.store.db import Store

SPEC = "openai/loopback"
OUTPUTS = (
    "funnel.json",
    "cost.json",
    "rejects.jsonl",
    *(f"{d}/{s}.jsonl" for d in ("dataset", "items") for s in SPLIT_NAMES),
)
FAST_RETRIES = {"timeout_s": 0.3, "backoff_base_s": 0.01, "backoff_max_s": 0.05, "max_retries": 4, "max_concurrency": 8}


def _config(kb: Path, base_url: str, n: int = 10) -> McsqaConfig:
    options = {"base_url": base_url, **FAST_RETRIES}
    return McsqaConfig(
        lang="en",
        n=n,
        kb=str(kb),
        model=SPEC,
        model_options={SPEC: options},
        reviewers=(SPEC,),
        lm_review_as_hard=True,
    )


def _same_outputs(a: Path, b: Path) -> None:
    for name in OUTPUTS:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


def test_thirty_percent_failures_give_the_fault_free_dataset(demo_kb: Path, tmp_path: Path) -> None:
    with LoopbackOpenAI(body_reply) as clean:
        build(
            MCSQA, _config(demo_kb, clean.base_url), tmp_path / "clean", store=Store(f"sqlite:///{tmp_path / 'a.db'}")
        )
    store = Store(f"sqlite:///{tmp_path / 'b.db'}")
    with LoopbackOpenAI(body_reply, fault_rate=0.3, hang_s=0.6, seed=3, max_consecutive_faults=3) as faulty:
        summary = build(MCSQA, _config(demo_kb, faulty.base_url), tmp_path / "faulty", store=store)
        attempts_seen_by_server = faulty.requests
        faults = faulty.faults_by_kind
    assert summary.state == "done"
    _same_outputs(tmp_path / "clean", tmp_path / "faulty")
    assert set(faults) == {"429", "500", "timeout", "truncated"}
    ledger = summary.ledger
    assert ledger["retried_calls"] > 0
    assert set(ledger["retry_errors_by_kind"]) >= {"429", "500", "timeout", "truncated"}
    # every attempt the server saw is in the ledger, the failed ones as retry errors; on a busy machine the client may
    # also give up on a request before the server has read it (a timeout the server never sees): the ledger holds
    # those too, and they are exactly the timeouts beyond the injected ones that the server did not log
    errors = ledger["retry_errors_by_kind"]
    for kind, injected in faults.items():  # a slow but good answer on a busy machine may time out too
        assert errors[kind] >= injected if kind == "timeout" else errors[kind] == injected, kind
    unseen = ledger["backend_attempts"] - attempts_seen_by_server
    assert 0 <= unseen <= errors["timeout"] - faults["timeout"], (unseen, errors["timeout"], faults["timeout"])


def _cli(args: list[str]) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    command = [sys.executable, "-m", "senseforge.cli.main", "build", "mcsqa", *args]
    return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


@pytest.mark.slow
def test_kill_9_at_random_moments_then_resume_is_byte_identical(demo_kb: Path, tmp_path: Path) -> None:
    rng = random.Random(20261129)
    with LoopbackOpenAI(body_reply, latency_s=0.15) as server:
        reference = tmp_path / "reference"
        build(MCSQA, _config(demo_kb, server.base_url), reference, store=Store(f"sqlite:///{tmp_path / 'ref.db'}"))

        store_url = f"sqlite:///{tmp_path / 'killed.db'}"
        run = tmp_path / "killed"
        common = ["--lang", "en", "--n", "10", "--kb", str(demo_kb), "--model", SPEC, "--reviewers", SPEC]
        common += ["--lm-review-as-hard", "--base-url", server.base_url, "--store", store_url, "--out", str(run)]
        common += [f"-o{key}={value}" for key, value in FAST_RETRIES.items()]
        kills = 0
        for _ in range(12):
            started = (run / "manifest.json").is_file()  # a kill before the manifest leaves nothing to resume
            process = _cli(common + (["--resume"] if started else []))
            if kills < 4:
                deadline = time.monotonic() + rng.uniform(1.0, 3.5)
                while time.monotonic() < deadline and process.poll() is None:
                    time.sleep(0.02)
                if process.poll() is None:
                    process.send_signal(signal.SIGKILL)
                    process.wait()
                    kills += 1
                    continue
            _, stderr = process.communicate(timeout=120)
            assert process.returncode == 0, stderr.decode()
            break
        assert kills >= 2
        _same_outputs(reference, run)

    # the ledger shows no completed call made twice: each key has at most one successful backend row
    engine = sa.create_engine(store_url)
    with engine.connect() as conn:
        repeated = conn.execute(
            sa.text(
                "SELECT cache_key, COUNT(*) FROM llm_ledger WHERE cache_hit = 0 AND failure_kind IS NULL "
                "GROUP BY cache_key HAVING COUNT(*) > 1"
            )
        ).all()
    assert repeated == []


def test_resume_with_a_changed_setting_is_refused_on_the_command_line(demo_kb: Path, tmp_path: Path) -> None:
    args = [
        "--lang",
        "en",
        "--n",
        "3",
        "--kb",
        str(demo_kb),
        "--model",
        "scripted/mcsqa-author",
        "--out",
        str(tmp_path / "r"),
    ]
    first = subprocess.run([sys.executable, "-m", "senseforge.cli.main", "build", "mcsqa", *args], capture_output=True)
    assert first.returncode == 0, first.stderr.decode()
    changed = subprocess.run(
        [sys.executable, "-m", "senseforge.cli.main", "build", "mcsqa", *args, "--seed", "7", "--resume"],
        capture_output=True,
    )
    assert changed.returncode == 1
    assert "config differs" in changed.stderr.decode() and "seed: 0 → 7" in changed.stderr.decode()


def test_a_build_against_an_account_refusing_above_twelve_at_once_finishes_and_settles_near_twelve(
    demo_kb: Path, tmp_path: Path
) -> None:
    """`senseforge build` at -o max_concurrency=64 on a server with a hidden limit of 12 requests at once: no record
    fails, the dataset is the unrefused one, the server never holds more than 12, and the level the ledger records
    settles near 12."""
    # answers slow enough that any machine keeps the level's worth in flight (a client that cannot is not refused)
    with LoopbackOpenAI(body_reply, latency_s=0.2, capacity=12) as server:
        reference = tmp_path / "reference"
        build(MCSQA, _config(demo_kb, server.base_url), reference, store=Store(f"sqlite:///{tmp_path / 'ref.db'}"))
        refused_before = server.over_capacity
        store_url = f"sqlite:///{tmp_path / 'limited.db'}"
        run = tmp_path / "limited"
        args = ["--lang", "en", "--n", "10", "--kb", str(demo_kb), "--model", SPEC, "--reviewers", SPEC]
        args += ["--lm-review-as-hard", "--base-url", server.base_url, "--store", store_url, "--out", str(run)]
        args += ["-omax_concurrency=64", "-omax_retries=50", "-obackoff_base_s=0.01", "-obackoff_max_s=0.05"]
        _, stderr = (process := _cli(args)).communicate(timeout=300)
        assert process.returncode == 0, stderr.decode()
        assert server.over_capacity > refused_before and server.max_in_flight <= 12
    _same_outputs(reference, run)
    engine = sa.create_engine(store_url)
    with engine.connect() as conn:
        levels = [
            row[0]
            for row in conn.execute(sa.text("SELECT concurrency FROM llm_ledger WHERE cache_hit = 0 ORDER BY id")).all()
        ]
        failed = conn.execute(sa.text("SELECT COUNT(*) FROM llm_ledger WHERE failure_kind IS NOT NULL")).scalar_one()
    assert failed == 0 and max(levels) == 64  # the first requests went at the ceiling
    settled = sorted(levels[-100:])
    assert 8 <= settled[len(settled) // 2] <= 14, settled
