"""``build culture-gen --langs id,su`` with the bundled Gemma 3 270M: items reach the checks, a kill -9 at any
moment resumes to the same bytes, and a rerun on the same cache makes no backend call (the kill: ``kill_build``,
``tests/pipelines/conftest.py``)."""

from __future__ import annotations

import json
from collections.abc import Callable
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


@pytest.mark.slow
def test_embedded_model_end_to_end_kill_9_and_rerun(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kill_build: Callable[..., None]
) -> None:
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
    home = tmp_path / "home-killed"
    kill_build("culture-gen", FLAGS, killed, home, "generate", 3)
    monkeypatch.setenv("SENSEFORGE_HOME", str(home))
    resumed = build(CULTURE_GEN, config, killed, resume=True, store=Store())
    assert resumed.state == "done"
    for name in OUTPUTS:
        assert (killed / name).read_bytes() == (clean / name).read_bytes(), name

    # a rerun into a new run directory on the resumed run's cache: every call answered from it
    again = build(CULTURE_GEN, config, tmp_path / "again", store=Store())
    assert again.ledger["calls"] == again.ledger["cache_hits"] > 0
