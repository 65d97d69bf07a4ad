"""mCSQA through the Batch API (``-o batch=true``) on loopback: a batch per stage, the run waiting as
``awaiting_batch`` until it is answered, never a second submission, and the online run's outputs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from senseforge.data.splits import SPLIT_NAMES
from senseforge.llm.loopback import LoopbackOpenAI
from senseforge.llm.prices import Price, PriceTable
from senseforge.pipelines.mcsqa import MCSQA, McsqaConfig
from senseforge.pipelines.mcsqa.dryrun import body_reply
from senseforge.pipelines.progress import StageProgress
from senseforge.pipelines.runner import build
from senseforge.pipelines.status import run_status
from senseforge.store.db import Store

pytest.importorskip("openai")

SPEC = "openai/loopback"
OUTPUTS = ("funnel.json", "rejects.jsonl", *(f"dataset/{s}.jsonl" for s in SPLIT_NAMES))
LM_STAGES = 5  # generate, refine, distractors, verify, review
PRICES = PriceTable({SPEC: Price(input=2.0, output=8.0)})


def _config(kb: Path, base_url: str, **options: object) -> McsqaConfig:
    return McsqaConfig(
        lang="en",
        n=6,
        kb=str(kb),
        model=SPEC,
        model_options={SPEC: {"base_url": base_url, "timeout_s": 10.0, **options}},
        reviewers=(SPEC,),
        lm_review_as_hard=True,
    )


def test_a_batched_build_waits_for_each_stage_batch_and_ends_as_the_online_one(
    demo_kb: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    with LoopbackOpenAI(body_reply) as online:
        online_store = Store(f"sqlite:///{tmp_path / 'a.db'}")
        build(MCSQA, _config(demo_kb, online.base_url), tmp_path / "online", store=online_store, prices=PRICES)

    store = Store(f"sqlite:///{tmp_path / 'b.db'}")
    run_dir = tmp_path / "batched"
    events: list[StageProgress] = []
    bar = events.append

    with LoopbackOpenAI(body_reply, batch_latency_s=None) as server:
        config = _config(demo_kb, server.base_url, batch=True)
        summary = build(MCSQA, config, run_dir, store=store, prices=PRICES, progress=bar)
        assert summary.state == "awaiting_batch" and len(summary.batches) == 1
        (submitted,) = summary.open_batches
        assert (submitted.batch_id, submitted.stage, submitted.api_status) == (
            summary.batches[0],
            "generate",
            "in_progress",
        )
        status = run_status(run_dir, store=store.url)
        assert status.state == "awaiting_batch" and status.batches == [submitted]
        # a resume before the API has answered polls the batch and waits again: no second submission
        assert build(MCSQA, config, run_dir, store=store, resume=True, progress=bar).state == "awaiting_batch"
        assert server.batches_created == 1
        resumes = 0
        stages = []
        while summary.state == "awaiting_batch":
            stages += [batch.stage for batch in summary.open_batches]
            server.finish_batches()
            summary = build(MCSQA, config, run_dir, store=store, resume=True, prices=PRICES, progress=bar)
            resumes += 1
            assert resumes <= LM_STAGES
        assert summary.state == "done"
        assert stages == ["generate", "refine", "distractors", "verify", "review"]
        assert run_status(run_dir, store=store.url).batches == []  # every one collected
        # a stage whose batch is running waits for the resume: no retry rounds, which would only poll it again
        assert events and not [e.label for e in events if "retry" in e.label or e.retry]
        assert any(e.batch for e in events)  # said as waiting for the batch instead
        assert server.batches_created == LM_STAGES and server.requests == 1  # one format probe online
    for name in OUTPUTS:
        assert (run_dir / name).read_bytes() == (tmp_path / "online" / name).read_bytes(), name
    # the same calls, at half the price
    online_cost = json.loads((tmp_path / "online" / "cost.json").read_text())
    batched_cost = json.loads((run_dir / "cost.json").read_text())
    assert online_cost["total_usd"] > 0
    assert batched_cost["total_usd"] == pytest.approx(online_cost["total_usd"] / 2)
    for stage, spent in batched_cost["stages"].items():  # cost.json says which calls were batch calls
        assert spent["batched_calls"] == spent["calls"] > 0, stage
        assert "batched_calls" not in online_cost["stages"][stage]
