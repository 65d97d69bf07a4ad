"""Scoring items with scripted models: formulations, shots, unparsed answers, binary tasks."""

from __future__ import annotations

import json
import math

import pytest

from senseforge.data.schema import BinaryExample, Choice, MCItem, Triple
from senseforge.errors import ConfigError
from senseforge.evaluate.formulations import mc_prompt
from senseforge.evaluate.records import write_samples_lines
from senseforge.evaluate.report import binary_report, mc_metrics
from senseforge.evaluate.run import EvalConfig, pick_shots, score_binary, score_mc
from senseforge.llm.base import Completion, GenerateRequest, Loglikelihood, LoglikelihoodRequest, ReplyShape
from senseforge.llm.mock import ScriptedLLM


def _item(i: int, answer: str = "B", lang: str = "en") -> MCItem:
    texts = ["stone", "water", "a very long answer indeed", "cloud", "fire"]
    return MCItem(
        id=f"q{i}",
        lang=lang,
        question=f"What is thing {i}?",
        question_concept="thing",
        choices=[Choice(label=label, text=text) for label, text in zip("ABCDE", texts, strict=True)],
        answer=answer,
        difficulty="easy" if i % 2 else "hard",
    )


def _prefers(text: str) -> ScriptedLLM:
    return ScriptedLLM(scorer=lambda r: 0.0 if r.continuation.strip() == text else -5.0, name="scripted/pref")


def test_loglik_picks_the_highest_scoring_choice() -> None:
    items = [_item(i, answer="B" if i < 6 else "A") for i in range(10)]
    samples = score_mc(items, _prefers("water"), EvalConfig())
    assert [s.prediction for s in samples] == ["B"] * 10
    metrics = mc_metrics(samples, EvalConfig())
    assert metrics.acc == 0.6
    low, high = metrics.acc_ci95
    assert low <= 0.6 <= high
    assert samples[0].continuations[1] == " water" and len(samples[0].scores or []) == 5


def test_acc_norm_divides_by_characters() -> None:
    # every choice gets -len(chars): per character all tie at -1 except rounding, so use a scorer favouring long text
    llm = ScriptedLLM(scorer=lambda r: -2.0 * len(r.continuation) + (10.0 if "long" in r.continuation else 0.0))
    sample = score_mc([_item(0, answer="C")], llm, EvalConfig())[0]
    assert sample.prediction_norm == "C"


def test_letter_formulation_scores_letters() -> None:
    llm = ScriptedLLM(scorer=lambda r: 0.0 if r.continuation == " C" else -3.0)
    sample = score_mc([_item(0, answer="C")], llm, EvalConfig(formulation="letter"))[0]
    assert sample.continuations == [" A", " B", " C", " D", " E"]
    assert "A. stone" in sample.prompt and sample.correct is True


def test_generate_reports_unparsed_answers_separately() -> None:
    items = [_item(i) for i in range(8)]
    garbage = ScriptedLLM(responder=lambda r: "I like turtles and prefer not to choose.", name="scripted/garbage")
    samples = score_mc(items, garbage, EvalConfig(formulation="generate"))
    metrics = mc_metrics(samples, EvalConfig(formulation="generate"))
    assert metrics.unparsed_rate == 1.0 and metrics.acc == 0.0
    good = ScriptedLLM(responder=lambda r: "B", name="scripted/good")
    metrics = mc_metrics(score_mc(items, good, EvalConfig(formulation="generate")), EvalConfig(formulation="generate"))
    assert metrics.unparsed_rate == 0.0 and metrics.acc == 1.0


def test_shots_are_seeded_and_never_the_item_itself() -> None:
    pool = [_item(i) for i in range(6)]
    first = pick_shots(pool[0], pool, 3, seed=1)
    assert pool[0] not in first and len(first) == 3
    assert [s.id for s in first] == [s.id for s in pick_shots(pool[0], pool, 3, seed=1)]
    prompt = mc_prompt(pool[0], "loglik", shots=first)
    assert prompt.text.count("Question:") == 4 and prompt.text.endswith("Answer:")


def test_languages_without_spaces_get_no_leading_space() -> None:
    prompt = mc_prompt(_item(0, lang="ja"), "loglik")
    assert prompt.continuations[0] == "stone"


def test_failures_are_recorded_not_counted_as_answers() -> None:
    failing = ScriptedLLM(scorer=lambda r: Loglikelihood(failure={"kind": "timeout", "message": "slow"}))  # type: ignore[arg-type]
    samples = score_mc([_item(0)], failing, EvalConfig())
    assert (samples[0].error or "").startswith("timeout") and samples[0].correct is None
    assert mc_metrics(samples, EvalConfig()).failed_rate == 1.0


def _binary() -> list[BinaryExample]:
    examples = []
    for c in range(4):
        for t, label in enumerate([True, False, False]):
            examples.append(
                BinaryExample(
                    id=f"c{c}-t{t}",
                    context_id=f"c{c}",
                    context=f"context {c}",
                    target=f"{'good' if label else 'bad'} target {t}",
                    label=label,
                    task="dialogue" if c < 2 else "mt-zh-en",
                    knowledge=[Triple(head="a", relation="Causes", tail="b", dimension="causal")] if t else [],
                )
            )
    return examples


def test_binary_oracle_and_constant_predictors() -> None:
    def oracle(r: LoglikelihoodRequest) -> float:
        good = "good target" in r.context
        return 0.0 if (r.continuation.strip() == "yes") == good else -4.0

    samples = score_binary(_binary(), ScriptedLLM(scorer=oracle), EvalConfig())
    tasks, summary = binary_report(samples, EvalConfig())
    assert summary.crow_score_macro_f1 == 1.0
    assert tasks["dialogue"].situational_acc == 1.0
    always_yes = ScriptedLLM(scorer=lambda r: 0.0 if r.continuation.strip() == "yes" else -1.0)
    tasks, summary = binary_report(score_binary(_binary(), always_yes, EvalConfig()), EvalConfig())
    dialogue = tasks["dialogue"]
    assert dialogue.situational_acc == 0.0
    assert abs(dialogue.macro_f1 - (1 / 3) / (1 + 1 / 3)) < 1e-9  # constant predictor: p / (1 + p), p = 1/3
    assert dialogue.per_dimension_macro_f1 is not None
    assert "causal" in dialogue.per_dimension_macro_f1 and "other" in dialogue.per_dimension_macro_f1


def test_binary_chain_of_thought_extracts_tagged_answers() -> None:
    llm = ScriptedLLM(responder=lambda r: "The target contradicts the context. <Answer>no</Answer>")
    samples = score_binary(_binary()[:3], llm, EvalConfig(chain_of_thought=True))
    assert [s.prediction for s in samples] == [False, False, False]
    assert "<Answer>" in samples[0].prompt


def test_copa_items_are_scored_as_cloze_with_the_connector() -> None:
    item = MCItem(
        id="copa-1",
        lang="id",
        question="Gelasnya pecah.",
        choices=[Choice(label="A", text="Aku menjatuhkannya."), Choice(label="B", text="Aku mencucinya.")],
        answer="A",
        metadata={"copa_question": "cause"},
    )
    english = mc_prompt(item, "loglik")
    assert english.text == "Gelasnya pecah because" and english.continuations[0] == " aku menjatuhkannya."
    native = mc_prompt(item, "loglik", prompt_language="item")
    assert native.text == "Gelasnya pecah karena"


def test_progress_counts_items_not_the_requests_sent_for_them() -> None:
    """Five continuations an item, or a yes and a no an example, are one item of progress; an item is counted once
    its share of the requests is answered, so the count ends at the number of items and never passes it."""
    ticks: list[int] = []
    score_mc([_item(i) for i in range(4)], _prefers("water"), EvalConfig(), progress=ticks.append)
    assert ticks == [1, 1, 1, 1]
    ticks.clear()
    letters = EvalConfig(formulation="letter", variant="putri-all")
    score_mc([_item(i) for i in range(4)], _prefers("B"), letters, progress=ticks.append)
    assert ticks == [1] * 4 * 3  # each item once per variant
    ticks.clear()
    score_binary(_binary(), ScriptedLLM(scorer=lambda r: -1.0), EvalConfig(), progress=ticks.append)
    assert ticks == [1] * len(_binary())


def test_generate_with_top_logprobs_records_each_labels_probability() -> None:
    def confident(request: GenerateRequest) -> Completion:
        assert request.top_logprobs == 3
        top = ((("\n", -0.01),), ((" C", math.log(0.7)), ("C", math.log(0.1)), (" A", math.log(0.15))))
        return Completion(text="\n C", finish_reason="stop", top_logprobs=top)

    # labels that are not the prompt's letters: the probabilities are keyed by label, as the predictions are
    item = MCItem(
        id="q0",
        lang="en",
        question="What is it?",
        question_concept="thing",
        choices=[Choice(label=label, text=text) for label, text in zip("vwxyz", "stuvw", strict=True)],
        answer="x",
    )
    llm = ScriptedLLM(responder=confident, name="scripted/confident")
    config = EvalConfig(formulation="generate", top_logprobs=3)
    [sample] = score_mc([item], llm, config)
    assert sample.prediction == "x" and sample.correct is True
    assert sample.label_probs == pytest.approx({"v": 0.15, "w": 0.0, "x": 0.8, "y": 0.0, "z": 0.0})
    assert config.model_dump()["top_logprobs"] == config.model_dump(mode="json")["top_logprobs"] == 3

    # by default nothing is asked, and samples and the config are written as they always were
    plain_llm = ScriptedLLM(responder=lambda r: "C", name="scripted/plain")
    [plain] = score_mc([item], plain_llm, EvalConfig(formulation="generate"))
    assert plain_llm.generate_calls[0].top_logprobs == 0 and plain.label_probs is None
    assert "label_probs" not in json.loads(next(write_samples_lines([plain])))
    assert "label_probs" in json.loads(next(write_samples_lines([sample])))
    assert "top_logprobs" not in EvalConfig().model_dump() and "top_logprobs" not in EvalConfig().model_dump(
        mode="json"
    )

    with pytest.raises(ConfigError, match="--top-logprobs is used by --formulation generate only"):
        score_mc([item], llm, EvalConfig(formulation="letter", top_logprobs=3))


def test_generate_asks_for_a_letter_s_shape_only_when_told() -> None:
    items = [_item(0), _item(1)]
    for shaped in (False, True):
        llm = ScriptedLLM(responder=lambda r: "B", name="scripted/letters")
        samples = score_mc(items, llm, EvalConfig(formulation="generate"), letter_shape=shaped)
        assert [s.prediction for s in samples] == ["B", "B"]
        shapes = [request.reply_shape for request in llm.generate_calls]
        assert shapes == ([ReplyShape.one_of("answer_letter", "ABCDE")] * 2 if shaped else [None, None])
