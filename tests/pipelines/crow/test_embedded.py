"""``build crow`` offline with the bundled Gemma 3 270M on CRoW's shot samples and ten CommonMT rows: every stage
runs on a real model, a kill -9 mid-run resumes, and the same build uninterrupted on that cache makes no backend call
and writes the same bytes (the kill: ``kill_build``, ``tests/pipelines/conftest.py``; the demo's rows run in the
whole-demo test, ``tests/cli/test_build_cli.py``, against their golden).

The model builds once: the uninterrupted run to compare with is the rerun on the resumed run's cache. Every call of
that run answered from the cache shows it asked exactly what the killed and resumed runs asked (a request's seed
and settings are in its cache key), and its bytes are what an uninterrupted run writes from those answers; that
the model gives the same answer to the same request in another process is the provider's own test
(``tests/llm/providers/test_llamacpp.py``) and the demo's goldens."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from senseforge.pipelines.crow.config import CrowConfig
from senseforge.pipelines.crow.recipe import CROW
from senseforge.pipelines.demo import CROW_DEMO
from senseforge.pipelines.runner import build
from senseforge.store.db import Store

from ..golden import outputs

FIXTURES = Path(__file__).parents[2] / "fixtures"
SOURCES = (str(FIXTURES / "crow" / "shot_samples.json"), str(FIXTURES / "commonmt" / "head100"))
FLAGS = ["--max-tokens", "96", "--cka-temperature", "0.7", "--wsg-temperature", "1.0", "--n", "10"]
FLAGS += [part for source in SOURCES for part in ("--source", source)]
MT = {"mt-en-de", "mt-en-fr", "mt-en-ru", "mt-zh-en"}


@pytest.mark.slow
def test_embedded_model_end_to_end_kill_9_and_rerun(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kill_build: Callable[..., None]
) -> None:
    assert FLAGS[1:6:2] == [str(CROW_DEMO[k]) for k in ("max_tokens", "cka_temperature", "wsg_temperature")]
    config = CrowConfig.model_validate({**CROW_DEMO, "n": 10, "source": SOURCES})
    killed = tmp_path / "killed"
    home = tmp_path / "home-killed"
    kill_build("crow", FLAGS, killed, home, "cka", 8)  # after its first batch of contexts
    monkeypatch.setenv("SENSEFORGE_HOME", str(home))
    assert build(CROW, config, killed, resume=True, store=Store()).state == "done"

    again = build(CROW, config, tmp_path / "again", store=Store())
    assert again.ledger["calls"] == again.ledger["cache_hits"] > 0
    written = outputs(killed)  # every file a run writes but its working state (the run store, the manifest)
    assert {"funnel.json", "cost.json", "cost_by_task.json", "rejects.jsonl", "release/private.jsonl"} <= set(written)
    assert any(name.startswith("dataset/") for name in written) and outputs(again.run_dir) == written
    for name in written:
        assert (killed / name).read_bytes() == (again.run_dir / name).read_bytes(), name

    funnel = json.loads((killed / "funnel.json").read_text())
    rows = {row["stage"]: row for row in funnel["stages"]}
    assert rows["cka"]["in"] > 0 and rows["ckv"]["in"] > 0 and rows["wsg"]["in"] > 0  # the model's replies parse
    for row in funnel["stages"]:
        assert row["in"] == row["out"] + sum(row["rejected"].values())
    contexts = next(g for g in funnel["groups"] if g["name"] == "mt-zh-en")["figures"][1]
    assert contexts["name"] == "contexts" and contexts["values"]["in"] == 10  # one shot context, nine CommonMT rows
    assert {g["name"] for g in funnel["groups"]} == {"dialogue", "summarization", "intent", "safety", "stance", *MT}
    validators = next(f for f in funnel["figures"] if f["name"] == "validators")
    votes = next(rated for rated in validators["groups"] if rated["label"] == "safety · ckv")
    assert votes["raters"] == 3  # three validators by log-likelihood, each its own annotator
