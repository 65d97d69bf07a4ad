"""Settings left to the model: small reply budgets for a local base model, the paper's for chat models; resolved
into the manifest, old runs still resume; and every stage of a build reports progress off a terminal."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from senseforge.cli import _common
from senseforge.pipelines.config import resolve_config, runs_locally
from senseforge.pipelines.crow.config import CrowConfig
from senseforge.pipelines.culture_adapt.config import CultureAdaptConfig
from senseforge.pipelines.culture_gen.recipe import CULTURE_GEN, CultureGenConfig
from senseforge.pipelines.demo import CROW_DEMO, CULTURE_ADAPT_DEMO, CULTURE_GEN_DEMO
from senseforge.pipelines.rundir import read_manifest
from senseforge.pipelines.runner import build
from senseforge.store.db import Store

LOCAL = ("llamacpp/gemma-3-270m", "hf/path/to/folder")
CHAT = ("openai/gpt-4o-mini", "scripted/echo")


def test_local_base_models_are_told_from_chat_models() -> None:
    assert all(runs_locally(spec) for spec in LOCAL)
    assert not any(runs_locally(spec) for spec in CHAT)


@pytest.mark.parametrize("spec", LOCAL)
def test_a_local_base_model_gets_the_demos_settings(spec: str) -> None:
    culture_gen = CultureGenConfig(model=spec)
    assert (culture_gen.batch_concepts, culture_gen.max_tokens) == (
        CULTURE_GEN_DEMO["batch_concepts"],
        CULTURE_GEN_DEMO["max_tokens"],
    )
    assert CultureAdaptConfig(model=spec).max_tokens == CULTURE_ADAPT_DEMO["max_tokens"]
    assert CrowConfig(model=spec).max_tokens == CROW_DEMO["max_tokens"]


@pytest.mark.parametrize("spec", CHAT)
def test_a_chat_model_keeps_the_papers_settings(spec: str) -> None:
    culture_gen = CultureGenConfig(model=spec)
    assert (culture_gen.batch_concepts, culture_gen.max_tokens) == (5, 2048)
    assert CultureAdaptConfig(model=spec).max_tokens == 512
    assert CrowConfig(model=spec).max_tokens == 384


def test_the_stage_model_decides_and_a_given_value_wins() -> None:
    assert CultureGenConfig(model="scripted/echo", stage_models={"generate": LOCAL[0]}).max_tokens == 192
    assert CultureGenConfig(model=LOCAL[0], stage_models={"generate": "openai/gpt-4o"}).max_tokens == 2048
    assert CrowConfig(model="openai/gpt-4o", stage_models={"wsg": LOCAL[0]}).max_tokens == 96
    assert CultureAdaptConfig(model="openai/gpt-4o", name_only_model=LOCAL[0]).max_tokens == 192
    given = CultureGenConfig(model=LOCAL[0], max_tokens=1024, batch_concepts=5)
    assert (given.max_tokens, given.batch_concepts) == (1024, 5)


def test_resolved_values_are_in_the_dump_and_an_old_runs_settings_keep_its_hash() -> None:
    config = CultureGenConfig(model=LOCAL[0])
    dumped = config.model_dump(mode="json")
    assert dumped["max_tokens"] == 192 and dumped["batch_concepts"] == 2
    # a run started before the default went by model recorded 2048 and 5 for the same local model
    old = {**dumped, "max_tokens": 2048, "batch_concepts": 5}
    resumed = resolve_config(CultureGenConfig, recorded=old)
    assert (resumed.max_tokens, resumed.batch_concepts) == (2048, 5)
    assert resumed.hash() == CultureGenConfig.model_validate(old).hash() != config.hash()
    # a chat model's config hashes as it did when 2048 and 5 were the field defaults
    chat = CultureGenConfig(model="scripted/culture-gen-author")
    assert (
        chat.hash() == CultureGenConfig(model="scripted/culture-gen-author", max_tokens=2048, batch_concepts=5).hash()
    )


def test_every_stage_reports_progress_per_batch_off_a_terminal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stderr = io.StringIO()
    monkeypatch.setattr(_common, "err", Console(file=stderr, force_terminal=False, width=200))
    monkeypatch.setattr(_common, "PLAIN_PROGRESS_EVERY_S", 0.0)  # a line for every batch
    config = CultureGenConfig(langs=("id",), model="scripted/culture-gen-author", batch_size=2)
    run_dir = tmp_path / "run"
    summary = build(
        CULTURE_GEN, config, run_dir, store=Store(f"sqlite:///{tmp_path / 's.db'}"), progress=_common.stage_progress
    )
    assert summary.state == "done"
    lines = stderr.getvalue().splitlines()
    manifest = read_manifest(run_dir)
    assert manifest is not None and manifest["config"]["batch_concepts"] == 5
    for stage in ("generate", "check", "dedup", "language", "moderate"):
        shown = [line for line in lines if line.startswith(f"{stage}: ")]
        assert shown, f"stage {stage} showed no progress:\n{stderr.getvalue()}"
    generate = [line for line in lines if line.startswith("generate: ")]
    assert len(generate) >= 2  # per batch, not only at the end
