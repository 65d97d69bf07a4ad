"""run_eval end to end: results.json and samples.jsonl agree, CIs bracket, real data, real model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from senseforge.errors import DataValidationError
from senseforge.evaluate.harness import read_results, run_eval
from senseforge.evaluate.records import BinaryMetrics, CrowSummary, EvalResults, MCMetrics, MCSample, read_samples
from senseforge.evaluate.run import PUTRI_VARIANTS, EvalConfig
from senseforge.llm.base import GenerateRequest
from senseforge.llm.mock import ScriptedLLM

CSQA = Path(__file__).parents[1] / "fixtures" / "csqa" / "dev_sample.jsonl"


def _check_agreement(out: Path, task: str) -> EvalResults:
    results = read_results(out)
    samples = [json.loads(line) for line in (out / "samples.jsonl").read_text(encoding="utf-8").splitlines()]
    typed = read_samples(out)
    assert [s.to_json() for s in typed] == samples  # the typed records read back exactly what was written
    metrics = results.results[task]
    assert isinstance(metrics, MCMetrics)
    acc = sum(bool(s["correct"]) for s in samples) / len(samples)
    assert metrics.acc == pytest.approx(acc)
    assert metrics.acc_ci95 is not None
    low, high = metrics.acc_ci95
    assert low <= acc <= high
    assert metrics.n == len(samples)
    assert all({"prompt", "choices", "scores", "prediction", "gold", "correct"} <= set(s) for s in samples)
    return results


def test_scripted_run_on_real_commonsenseqa_items(tmp_path: Path) -> None:
    llm = ScriptedLLM(scorer=lambda r: -float(len(r.continuation)), name="scripted/shortest")
    results = run_eval(CSQA, llm, EvalConfig(), tmp_path / "out")
    checked = _check_agreement(tmp_path / "out", results.data.name)
    assert checked.model.name == "scripted/shortest" and checked.model.identity["scripted"] == "scripted/shortest"
    assert checked.config["formulation"] == "loglik" and checked.prompt_hashes
    assert "lang" in checked.breakdowns and "en" in checked.breakdowns["lang"]


def test_garbage_generation_shows_a_high_unparsed_rate(tmp_path: Path) -> None:
    llm = ScriptedLLM(responder=lambda r: "Blue skies and no idea.", name="scripted/garbage")
    results = run_eval(CSQA, llm, EvalConfig(formulation="generate"), tmp_path / "out")
    metrics = results.results[results.data.name]
    assert isinstance(metrics, MCMetrics)
    assert metrics.unparsed_rate == 1.0


@pytest.mark.slow
def test_embedded_model_on_real_items(tmp_path: Path, models_dir: Path) -> None:
    from senseforge.llm.cache import open_llm

    llm = open_llm("llamacpp/gemma-3-270m")
    try:
        results = run_eval(CSQA, llm, EvalConfig(limit=6), tmp_path / "out")
    finally:
        llm.close()
    checked = _check_agreement(tmp_path / "out", results.data.name)
    assert checked.model.identity["weights_sha256"]


def test_shots_need_a_source(tmp_path: Path) -> None:
    from senseforge.errors import ConfigError

    with pytest.raises(ConfigError, match="--shots-from"):
        run_eval(CSQA, ScriptedLLM(), EvalConfig(shots=2), tmp_path / "out")
    results = run_eval(CSQA, ScriptedLLM(), EvalConfig(shots=2, limit=3), tmp_path / "out", shots_from=CSQA)
    assert results.results[results.data.name].n == 3


def test_binary_run_on_commonmt_with_baselines(tmp_path: Path) -> None:
    data = next((Path(__file__).parents[1] / "fixtures" / "commonmt").glob("*.csv"))
    llm = ScriptedLLM(scorer=lambda r: 0.0 if r.continuation.strip() == "yes" else -1.0, name="scripted/yes")
    results = run_eval(data, llm, EvalConfig(), tmp_path / "out")
    task = results.results["mt-zh-en"]
    assert isinstance(task, BinaryMetrics)
    assert task.situational_acc == 0.0  # always "yes": every context has one wrong target
    assert task.macro_f1 == pytest.approx(1 / 3)
    majority = results.breakdowns["baselines"]["majority"]["summary"]
    assert majority["crow_score_macro_f1,none"] == pytest.approx(1 / 3)
    assert majority["crow_score_situational_acc,none"] == 0.0
    samples = (tmp_path / "out" / "samples.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(samples) == task.n == 2 * task.n_contexts


HUMAN_GEN = Path(__file__).parents[1] / "fixtures" / "id-csqa" / "human_gen" / "ind" / "filtered_test.json"


def _putri_responder(request: GenerateRequest) -> str:
    """Right on putri1, right on every other item under putri2, unparseable under putri3."""
    from senseforge.data.loaders import load_dataset

    prompt = request.messages[-1].content if request.messages else request.prompt or ""
    answers = {item.question: (i, item.answer) for i, item in enumerate(load_dataset(HUMAN_GEN).items)}
    (index, answer) = next(v for q, v in answers.items() if q in prompt)
    if "Options:" in prompt:  # putri2 lists the choices under a header
        return f"The answer is {answer}." if index % 2 == 0 else "A" if answer != "A" else "B"
    if "Question:" in prompt:  # putri3: header and question cue
        return "Saya tidak tahu."
    return str(answer)  # putri1


def test_putri_all_reports_each_prompt_and_their_mean(tmp_path: Path) -> None:
    llm = ScriptedLLM(responder=_putri_responder, name="scripted/putri")
    results = run_eval(HUMAN_GEN, llm, EvalConfig(formulation="generate", variant="putri-all"), tmp_path / "out")
    name = results.data.name
    assert list(results.results) == [f"{name}/putri1", f"{name}/putri2", f"{name}/putri3", f"{name}/putri-mean"]
    first, second, third, mean = (m for m in results.results.values() if isinstance(m, MCMetrics))
    assert (first.acc, second.acc, third.acc) == (1.0, 0.5, 0.0)
    # unparsed answers count as wrong in acc, and their rate stays beside it
    assert third.unparsed_rate == 1.0 and first.unparsed_rate == 0.0
    assert mean.acc == pytest.approx(0.5) and mean.variants == 3 and mean.unparsed_rate == pytest.approx(1 / 3)
    assert mean.acc_ci95 is not None and mean.acc_ci95[0] <= 0.5 <= mean.acc_ci95[1]
    samples = read_samples(tmp_path / "out")
    assert len(samples) == 3 * 6 and {s.variant for s in samples if isinstance(s, MCSample)} == set(PUTRI_VARIANTS)
    # per-category and per-variant breakdowns
    assert set(results.breakdowns["category"]) == {"culinary"}
    assert results.breakdowns["variant"]["putri3"]["acc,none"] == 0.0
    assert len(results.prompt_hashes) == 3


def test_putri_variants_need_a_prompt_that_lists_the_choices(tmp_path: Path) -> None:
    from senseforge.errors import ConfigError

    with pytest.raises(ConfigError, match="--formulation generate"):
        run_eval(HUMAN_GEN, ScriptedLLM(), EvalConfig(variant="putri-all"), tmp_path / "out")
    assert not (tmp_path / "out").exists()


CROW = Path(__file__).parents[1] / "fixtures" / "crow" / "released_handwritten.jsonl"


def test_crow_parity_counts_triples_and_the_leaderboard_zeros(tmp_path: Path) -> None:
    from senseforge.data.loaders import load_dataset

    examples = load_dataset(CROW).examples
    llm = ScriptedLLM(scorer=lambda r: 0.0 if r.continuation.strip() == "yes" else -1.0, name="scripted/yes")
    ours = run_eval(CROW, llm, EvalConfig(), tmp_path / "ours")
    parity = run_eval(CROW, llm, EvalConfig(crow_parity=True), tmp_path / "parity")
    summary, summary_parity = ours.results["crow"], parity.results["crow"]
    assert isinstance(summary, CrowSummary) and isinstance(summary_parity, CrowSummary)
    assert summary.convention == "senseforge" and summary_parity.convention == "crow-parity"
    assert summary.per_dimension_macro_f1_leaderboard is None
    assert summary_parity.per_dimension_macro_f1_leaderboard is not None
    # the leaderboard lists CRoW's seven dimensions, averaged over every task (a missing one counts 0)
    tasks = {ex.task for ex in examples}
    assert all(m.tasks == len(tasks) for m in summary_parity.per_dimension_macro_f1_leaderboard.values())
    # per task, parity has one entry per triple: n is the number of triples of that dimension
    for task in tasks:
        metrics_ = parity.results[task]
        assert isinstance(metrics_, BinaryMetrics) and metrics_.per_dimension is not None
        triples = sum(len(ex.knowledge) for ex in examples if ex.task == task)
        assert sum(cell.n for cell in metrics_.per_dimension.values()) == triples
        default = ours.results[task]
        assert isinstance(default, BinaryMetrics) and default.per_dimension is not None
        # the default counts each example once per distinct dimension, examples without triples in "other"
        assert sum(cell.n for cell in default.per_dimension.values()) >= sum(1 for ex in examples if ex.task == task)


HUMAN_GEN = Path(__file__).parents[1] / "fixtures" / "id-csqa" / "human_gen" / "ind" / "filtered_test.json"


def test_the_gold_key_picks_the_creators_or_the_majoritys_answer(tmp_path: Path) -> None:
    """Putri et al.'s Human_Gen items carry both answers; one of the six fixture items has them differ."""
    llm = ScriptedLLM(scorer=lambda r: -float(len(r.continuation)), name="scripted/shortest")
    rows = {row["id"]: row for row in json.loads(HUMAN_GEN.read_text(encoding="utf-8"))}
    by_key = {}
    for key in ("answer_creator", "answer_majority"):
        run_eval(HUMAN_GEN, llm, EvalConfig(gold_key=key), tmp_path / key)
        samples = [s for s in read_samples(tmp_path / key) if isinstance(s, MCSample)]
        assert {s.id: s.gold for s in samples} == {i: row[key] for i, row in rows.items()}
        by_key[key] = {s.id: s.correct for s in samples}
    differ = [i for i, row in rows.items() if row["answer_creator"] != row["answer_majority"]]
    assert len(differ) == 1
    assert [i for i in rows if by_key["answer_creator"][i] != by_key["answer_majority"][i]] == differ


def test_the_majority_gold_key_needs_a_majority(tmp_path: Path) -> None:
    with pytest.raises(DataValidationError, match="answer_majority"):
        run_eval(CSQA, ScriptedLLM(), EvalConfig(gold_key="answer_majority"), tmp_path / "out")


def test_results_carry_an_identity_and_default_folders_differ_by_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """loglik then letter with the default --out: two folders, each naming its setting; neither replaces the other."""
    from senseforge.evaluate.harness import default_out, setting_slug

    monkeypatch.chdir(tmp_path)
    llm = ScriptedLLM(scorer=lambda r: -float(len(r.continuation)), name="scripted/shortest")
    first = run_eval(CSQA, llm, EvalConfig())
    second = run_eval(CSQA, llm, EvalConfig(formulation="letter", limit=4))
    a = default_out(CSQA, llm.name, EvalConfig(), "mc")
    b = default_out(CSQA, llm.name, EvalConfig(formulation="letter", limit=4), "mc")
    assert a != b and a.name.endswith("-loglik") and b.name.endswith("-letter")
    assert read_results(tmp_path / a).identity_hash == first.identity_hash
    assert read_results(tmp_path / b).identity_hash == second.identity_hash
    assert first.identity is not None and second.identity is not None
    assert first.identity["data_sha256"] != second.identity["data_sha256"]  # 10 items against the first 4
    assert first.label() == "scripted/shortest · loglik · n=10"
    assert second.label() == "scripted/shortest · letter · n=4"
    assert setting_slug(EvalConfig(variant="putri-all", formulation="generate", shots=3), "mc") == (
        "generate-putri-all-3shot"
    )


def test_another_evaluation_is_never_silently_replaced(tmp_path: Path) -> None:
    from senseforge.errors import ConfigError

    llm = ScriptedLLM(scorer=lambda r: -float(len(r.continuation)), name="scripted/shortest")
    out = tmp_path / "out"
    run_eval(CSQA, llm, EvalConfig(), out)
    before = (out / "results.json").read_bytes()
    run_eval(CSQA, llm, EvalConfig(), out)  # the same evaluation again may replace its own results
    with pytest.raises(ConfigError, match=r"already holds another evaluation \(formulation 'loglik' → 'letter'\)"):
        run_eval(CSQA, llm, EvalConfig(formulation="letter"), out)
    other = ScriptedLLM(scorer=lambda r: float(len(r.continuation)), name="scripted/longest")
    with pytest.raises(ConfigError, match=r"model scripted/shortest → scripted/longest.*--overwrite"):
        run_eval(CSQA, other, EvalConfig(), out)
    assert json.loads((out / "results.json").read_bytes())["identity_hash"] == json.loads(before)["identity_hash"]
    replaced = run_eval(CSQA, llm, EvalConfig(formulation="letter"), out, overwrite=True)
    assert read_results(out).identity_hash == replaced.identity_hash


@pytest.mark.slow
def test_embedded_base_model_generates_from_a_completion_prompt(tmp_path: Path, models_dir: Path) -> None:
    """``eval run -m llamacpp/gemma-3-270m -f generate``: the base model is sent a completion prompt (recorded
    exactly), no reply holds a chat template's markup, and the parse rate is reported."""
    from senseforge.llm.cache import open_llm
    from senseforge.llm.prompting import template_marker

    llm = open_llm("llamacpp/gemma-3-270m")
    try:
        results = run_eval(CSQA, llm, EvalConfig(formulation="generate", limit=5), tmp_path / "out")
    finally:
        llm.close()
    samples = [s for s in read_samples(tmp_path / "out") if isinstance(s, MCSample)]
    assert len(samples) == 5
    for sample in samples:
        assert sample.sent is not None and sample.sent["kind"] == "completion"
        assert sample.sent["text"].endswith(sample.prompt) and sample.sent["stop"] == ["\n"]
        assert template_marker(sample.response or "") is None, sample.response
    metrics = results.results[results.data.name]
    assert isinstance(metrics, MCMetrics) and metrics.unparsed_rate is not None
