"""run_eval end to end: results.json and samples.jsonl agree, CIs bracket, real data, real model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from senseforge.evaluate.harness import read_results, run_eval
from senseforge.evaluate.run import EvalConfig
from senseforge.llm.mock import ScriptedLLM

CSQA = Path(__file__).parents[1] / "fixtures" / "csqa" / "dev_sample.jsonl"


def _check_agreement(out: Path, task: str) -> dict[str, object]:
    results = read_results(out)
    samples = [json.loads(line) for line in (out / "samples.jsonl").read_text(encoding="utf-8").splitlines()]
    metrics = results["results"][task]
    acc = sum(bool(s["correct"]) for s in samples) / len(samples)
    assert metrics["acc,none"] == pytest.approx(acc)
    low, high = metrics["acc_ci95,none"]
    assert low <= acc <= high
    assert metrics["n"] == len(samples)
    assert all({"prompt", "choices", "scores", "prediction", "gold", "correct"} <= set(s) for s in samples)
    return results


def test_scripted_run_on_real_commonsenseqa_items(tmp_path: Path) -> None:
    llm = ScriptedLLM(scorer=lambda r: -float(len(r.continuation)), name="scripted/shortest")
    results = run_eval(CSQA, llm, EvalConfig(), tmp_path / "out")
    checked = _check_agreement(tmp_path / "out", results["data"]["name"])
    assert checked["model"] == {"name": "scripted/shortest", "identity": {"scripted": "scripted/shortest"}}
    assert checked["config"]["formulation"] == "loglik" and checked["prompt_hashes"]
    assert "lang" in checked["breakdowns"] and "en" in checked["breakdowns"]["lang"]


def test_garbage_generation_shows_a_high_unparsed_rate(tmp_path: Path) -> None:
    llm = ScriptedLLM(responder=lambda r: "Blue skies and no idea.", name="scripted/garbage")
    results = run_eval(CSQA, llm, EvalConfig(formulation="generate"), tmp_path / "out")
    metrics = results["results"][results["data"]["name"]]
    assert metrics["unparsed_rate,none"] == 1.0


@pytest.mark.slow
def test_embedded_model_on_real_items(tmp_path: Path, models_dir: Path) -> None:
    from senseforge.llm.cache import open_llm

    llm = open_llm("llamacpp/gemma-3-270m")
    try:
        results = run_eval(CSQA, llm, EvalConfig(limit=6), tmp_path / "out")
    finally:
        llm.close()
    checked = _check_agreement(tmp_path / "out", results["data"]["name"])
    assert checked["model"]["identity"]["weights_sha256"]


def test_shots_need_a_source(tmp_path: Path) -> None:
    from senseforge.errors import ConfigError

    with pytest.raises(ConfigError, match="--shots-from"):
        run_eval(CSQA, ScriptedLLM(), EvalConfig(shots=2), tmp_path / "out")
    results = run_eval(CSQA, ScriptedLLM(), EvalConfig(shots=2, limit=3), tmp_path / "out", shots_from=CSQA)
    assert results["results"][results["data"]["name"]]["n"] == 3


def test_binary_run_on_commonmt_with_baselines(tmp_path: Path) -> None:
    data = next((Path(__file__).parents[1] / "fixtures" / "commonmt").glob("*.csv"))
    llm = ScriptedLLM(scorer=lambda r: 0.0 if r.continuation.strip() == "yes" else -1.0, name="scripted/yes")
    results = run_eval(data, llm, EvalConfig(), tmp_path / "out")
    task = results["results"]["mt-zh-en"]
    assert task["situational_acc,none"] == 0.0  # always "yes": every context has one wrong target
    assert task["macro_f1,none"] == pytest.approx(1 / 3)
    majority = results["breakdowns"]["baselines"]["majority"]["summary"]
    assert majority["crow_score_macro_f1,none"] == pytest.approx(1 / 3)
    assert majority["crow_score_situational_acc,none"] == 0.0
    samples = (tmp_path / "out" / "samples.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(samples) == task["n"] == 2 * task["n_contexts"]
