"""``senseforge build … --wait``: a Batch API build (``-o batch=true``) on the loopback server goes on through
every stage's batch by itself, says what it waits for, names the open batch in ``runs show``, stops at Ctrl-C
as a resumable run, and ends as the online build does.

The server completes a batch only when the test says so (``batch_latency_s=None``), and the command's wait
between checks is replaced by that: nothing here depends on how fast the machine is.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from senseforge.cli import build as build_cli
from senseforge.cli.main import main
from senseforge.cli.runs import when
from senseforge.data.splits import SPLIT_NAMES
from senseforge.kb.conceptnet import import_dump
from senseforge.llm.loopback import LoopbackOpenAI
from senseforge.pipelines.mcsqa import MCSQA, McsqaConfig
from senseforge.pipelines.mcsqa.dryrun import body_reply
from senseforge.pipelines.runner import build
from senseforge.pipelines.status import run_status
from senseforge.store.db import Store

pytest.importorskip("openai")

SPEC = "openai/loopback"
LM_STAGES = ["generate", "refine", "distractors", "verify", "review"]
"""mCSQA's stages that call the model here, in order: one batch each."""
OUTPUTS = ("funnel.json", "rejects.jsonl", *(f"dataset/{s}.jsonl" for s in SPLIT_NAMES))


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch, senseforge_home: Path) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("kb") / "demo"
    import_dump("demo", folder)
    return folder


@pytest.fixture(scope="module")
def online(kb: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same build answered online: what a batched one must end as."""
    where = tmp_path_factory.mktemp("online")
    with pytest.MonkeyPatch.context() as patch:
        for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
            patch.delenv(name, raising=False)
        with LoopbackOpenAI(body_reply) as server:
            options = {SPEC: {"base_url": server.base_url, "timeout_s": 10.0}}
            config = McsqaConfig(
                lang="en", n=6, kb=str(kb), model=SPEC, model_options=options, reviewers=(SPEC,), lm_review_as_hard=True
            )
            summary = build(MCSQA, config, where / "run", store=Store(f"sqlite:///{where / 'store.db'}"))
    assert summary.state == "done"
    return where / "run"


def _build(kb: Path, base_url: str, run_dir: Path, store: str, *more: str) -> list[str]:
    return [
        "build", "mcsqa", "--lang", "en", "--n", "6", "--kb", str(kb), "-m", SPEC, "-o", f"base_url={base_url}",
        "-o", "timeout_s=10", "-o", "batch=true", "--reviewers", SPEC, "--lm-review-as-hard",
        "--out", str(run_dir), "--store", store, *more,
    ]  # fmt: skip


def _senseforge(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    """Run the command in this process (so the test's stand-in for the wait applies); its exit status and output."""
    try:
        main(list(args))
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def _same_outputs(run_dir: Path, online: Path) -> None:
    for name in OUTPUTS:
        assert (run_dir / name).read_bytes() == (online / name).read_bytes(), name


def test_resume_with_wait_goes_through_every_batch_by_itself(
    kb: Path, online: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    run_dir, store = tmp_path / "run", f"sqlite:///{tmp_path / 'store.db'}"
    with LoopbackOpenAI(body_reply, batch_latency_s=None) as server:
        code, said = _senseforge(capsys, *_build(kb, server.base_url, run_dir, store))
        assert code == 0, said
        assert "the run waits for 1 batch(es) at the API" in said and "--wait" in said
        assert "(retry" not in said  # nothing failed: the batch is submitted once and polled once
        assert server.batches_created == 1

        # runs show names the open batch: id, stage, requests, when submitted, status as last polled
        (batch,) = run_status(run_dir, store=store).batches
        assert batch.stage == "generate" and batch.requests > 0 and batch.api_status == "in_progress"
        code, shown = _senseforge(capsys, "runs", "show", str(run_dir), "--store", store)
        assert code == 0, shown
        assert "open batches at the API" in shown and "--resume --wait" in shown
        row = next(line for line in shown.splitlines() if batch.batch_id in line)
        for cell in ("generate", f" {batch.requests} ", when(batch.submitted_at), "in_progress (polled "):
            assert cell in row, (cell, row)
        code, text = _senseforge(capsys, "runs", "show", str(run_dir), "--store", store, "--json")
        (listed,) = json.loads(text)["batches"]
        assert listed["batch_id"] == batch.batch_id and listed["submitted_at"] == batch.submitted_at

        waits: list[float] = []
        awaited: list[str | None] = []

        def answered(seconds: float) -> None:  # while it waits, runs show names the batch it waits for
            waits.append(seconds)
            (waiting,) = run_status(run_dir, store=store).batches
            awaited.append(waiting.stage)
            server.finish_batches()

        monkeypatch.setattr(build_cli, "_sleep", answered)
        resume = ("build", "mcsqa", "--out", str(run_dir), "--store", store, "--resume", "--wait", "--poll", "0.01")
        code, said = _senseforge(capsys, *resume)
        assert code == 0, said
        assert awaited == LM_STAGES and waits == [0.01] * len(LM_STAGES)  # a new batch each time: the first wait
        assert server.batches_created == len(LM_STAGES) and server.requests == 1  # only the format probe online
    assert "(retry" not in said
    for stage in LM_STAGES:
        assert f"waiting for batch batch_{LM_STAGES.index(stage) + 1} (stage {stage}, " in said, stage
    assert "checking every 0.01 s" in said and "kept 17 questions" in said
    status = run_status(run_dir, store=store)
    assert status.state == "done" and status.batches == []
    _same_outputs(run_dir, online)
    cost = json.loads((run_dir / "cost.json").read_text())
    assert all(stage["batched_calls"] == stage["calls"] for stage in cost["stages"].values())


def test_wait_on_a_fresh_build_stops_at_ctrl_c_and_the_printed_resume_goes_on(
    kb: Path, online: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    run_dir, store = tmp_path / "run", f"sqlite:///{tmp_path / 'store.db'}"

    def ctrl_c(seconds: float) -> None:
        raise KeyboardInterrupt  # as from the terminal, while it waits

    with LoopbackOpenAI(body_reply, batch_latency_s=None) as server:
        monkeypatch.setattr(build_cli, "_sleep", ctrl_c)
        code, said = _senseforge(capsys, *_build(kb, server.base_url, run_dir, store, "--wait", "--poll", "0.01"))
        assert code == 130, said
        assert "waiting for batch batch_1 (stage generate, " in said and "(retry" not in said
        interrupted = said.split("interrupted — ", 1)[1]
        assert f"--out {run_dir} --resume" in interrupted and "--wait" in interrupted
        assert run_status(run_dir, store=store).state == "awaiting_batch"

        finish: Callable[[float], object] = lambda seconds: server.finish_batches()  # noqa: E731
        monkeypatch.setattr(build_cli, "_sleep", finish)
        resume = ("build", "mcsqa", "--out", str(run_dir), "--store", store, "--resume", "--wait", "--poll", "0.01")
        code, said = _senseforge(capsys, *resume)
        assert code == 0, said
        assert server.batches_created == len(LM_STAGES)
    assert run_status(run_dir, store=store).state == "done"
    _same_outputs(run_dir, online)
