"""``--formulation open``: the bare question, a free answer, and a judge's verdict against the gold option."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from senseforge.cli.eval import app
from senseforge.data.schema import Choice, MCItem
from senseforge.errors import ConfigError
from senseforge.evaluate.harness import run_eval
from senseforge.evaluate.judge import JUDGE_SHAPE, VERDICT_SHAPE, JudgeReply, parse_verdict
from senseforge.evaluate.records import MCSample, read_results, read_samples
from senseforge.evaluate.run import EvalConfig, score_mc
from senseforge.llm.base import Completion, Failure, GenerateRequest
from senseforge.llm.mock import ScriptedLLM

from .open_items import ANSWERS, GOLD, OPTIONS
from .open_items import answer as _answer
from .open_items import items_file as _items_file


def _judge(request: GenerateRequest) -> str:
    prompt = request.as_messages()[-1].content
    if "a stream" in prompt:
        return '```json\n{"verdict": "correct", "reason": "a stream is a small river"}\n```'
    if "storm cloud" in prompt:
        return "Correct: a thunderstorm brings rain."
    if "iceberg" in prompt:
        return '{"verdict": "incorrect", "reason": "an iceberg is not a glacier"}'
    if "mountain of fire" in prompt:
        return "Hmm, hard to say."  # malformed: flagged, counted wrong
    return '{"verdict": "incorrect", "reason": "no answer given"}'


EXPECTED = {"q0": True, "q1": True, "q2": False, "q3": None, "q4": False}


def _models() -> tuple[ScriptedLLM, ScriptedLLM]:
    return ScriptedLLM(responder=_answer, name="scripted/answerer"), ScriptedLLM(
        responder=_judge, name="scripted/judge"
    )


def test_open_run_judges_free_answers_and_accuracy_is_the_mean_verdict(tmp_path: Path) -> None:
    llm, judge = _models()
    config = EvalConfig(formulation="open", judge="scripted/judge", n_bootstrap=200)
    results = run_eval(_items_file(tmp_path), llm, config, tmp_path / "out", judge=judge)
    # the evaluated model never sees an option
    for request in llm.generate_calls:
        text = " ".join(m.content for m in request.as_messages())
        assert not any(option in text for option in OPTIONS), text
        assert request.temperature == 0.0 and request.max_tokens == config.max_tokens
    # the judge sees the gold option and the answer
    assert len(judge.generate_calls) == 5
    assert "thunderstorm" in judge.generate_calls[0].as_messages()[-1].content
    samples = read_samples(tmp_path / "out")
    assert all(isinstance(s, MCSample) for s in samples)
    by_id = {s.id: s for s in samples if isinstance(s, MCSample)}
    for sample_id, verdict in EXPECTED.items():
        sample = by_id[sample_id]
        assert sample.judge == "scripted/judge" and sample.response == ANSWERS[list(ANSWERS)[int(sample_id[1:])]]
        assert sample.judge_verdict == (None if verdict is None else ("correct" if verdict else "incorrect"))
        assert sample.correct is bool(verdict)
        assert sample.parsed is (verdict is not None)
        assert sample.continuations == []
    assert by_id["q1"].judge_reason == "a stream is a small river"
    assert by_id["q0"].judge_reason == "a thunderstorm brings rain."
    # the malformed reply is kept as it came, flagged, and counted wrong
    assert by_id["q3"].judge_response == "Hmm, hard to say." and by_id["q3"].judge_reason is None
    line = json.loads((tmp_path / "out" / "samples.jsonl").read_text(encoding="utf-8").splitlines()[3])
    assert line["parsed"] is False and "judge_verdict" not in line
    metrics = next(iter(read_results(tmp_path / "out").results.values()))
    assert metrics.acc == pytest.approx(sum(bool(v) for v in EXPECTED.values()) / 5) == 0.4  # type: ignore[union-attr]
    low, high = metrics.acc_ci95  # type: ignore[union-attr,misc]
    assert low <= 0.4 <= high
    assert metrics.unparsed_rate == pytest.approx(1 / 5)  # type: ignore[union-attr]  # the judge's reply to q3
    parsed = [v for v in EXPECTED.values() if v is not None]
    assert metrics.acc_parsed == pytest.approx(sum(parsed) / len(parsed))  # type: ignore[union-attr]
    written = read_results(tmp_path / "out")
    assert written.config["judge"] == "scripted/judge" and "judge" in written.prompt_hashes
    assert results.to_json()["results"] == written.to_json()["results"]


def test_a_failed_answer_or_judge_call_is_a_sample_error(tmp_path: Path) -> None:
    from senseforge.data.loaders import load_dataset

    items = load_dataset(_items_file(tmp_path)).items[:2]
    failed = Completion(failure=Failure(kind="backend", message="down"))
    config = EvalConfig(formulation="open", judge="scripted/judge")
    samples = score_mc(items, ScriptedLLM([failed, "a stream"]), config, judge=ScriptedLLM([failed]))
    assert samples[0].error == "backend: down" and samples[0].correct is None and samples[0].judge is None
    assert samples[1].error == "judge backend: down" and samples[1].response == "a stream"


def test_open_without_a_judge_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--judge"):
        score_mc([], ScriptedLLM(), EvalConfig(formulation="open"))
    with pytest.raises(ConfigError, match="--judge"):
        run_eval(_items_file(tmp_path), ScriptedLLM(), EvalConfig(formulation="open"), tmp_path / "out")
    refused = CliRunner().invoke(app, ["run", "-d", str(_items_file(tmp_path)), "-m", "scripted/echo", "-f", "open"])
    assert isinstance(refused.exception, ConfigError) and "--judge" in str(refused.exception)
    with pytest.raises(ConfigError, match="lists none"):
        EvalConfig(formulation="open", judge="scripted/echo", variant="putri1").check_variant()


RESPONDERS = """
import json

def answer(request):
    return "a stream" if "water" in request.as_messages()[-1].content else "no idea"

def judge(request):
    ok = "Answer to grade: a stream" in request.as_messages()[-1].content
    return json.dumps({"verdict": "correct" if ok else "incorrect", "reason": "compared with the reference"})
"""


def test_cli_open_with_a_judge(tmp_path: Path) -> None:
    script = tmp_path / "responders.py"
    script.write_text(RESPONDERS, encoding="utf-8")
    args = ["run", "-d", str(_items_file(tmp_path)), "-f", "open", "--bootstrap", "100", "--out", str(tmp_path / "o")]
    args += ["-m", f"scripted/{script}:answer", "--judge", f"scripted/{script}:judge", "--no-cache"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    samples = [s for s in read_samples(tmp_path / "o") if isinstance(s, MCSample)]
    assert [s.judge_verdict for s in samples] == ["incorrect", "correct", "incorrect", "incorrect", "incorrect"]
    assert all(s.judge_reason == "compared with the reference" for s in samples)
    assert next(iter(read_results(tmp_path / "o").results.values())).acc == 0.2  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("reply", "verdict", "reason"),
    [
        ('{"verdict": "Correct", "reason": "same thing"}', True, "same thing"),
        ('Sure. {"verdict": "incorrect", "reason": "other option",} Done.', False, "other option"),
        ("yes - it is a synonym", True, "it is a synonym"),
        ("**Incorrect.** Names something else.", False, "Names something else."),
        ("No", False, None),
        ('{"verdict": "maybe"}', None, None),
        ("", None, None),
        ("Not sure at all", None, None),
    ],
)
def test_parse_verdict_is_tolerant_and_never_raises(reply: str, verdict: bool | None, reason: str | None) -> None:
    parsed = parse_verdict(reply)
    assert parsed.correct is verdict and parsed.reason == reason and parsed.raw == reply


@pytest.mark.parametrize("chat", [True, False])
def test_the_judge_is_asked_for_its_reply_s_shape_json_in_chat_the_verdict_word_from_a_base_model(chat: bool) -> None:
    llm = ScriptedLLM(responder=_answer, name="scripted/answers")
    judge = ScriptedLLM(responder=_judge, name="scripted/judge", chat=chat)
    items = [
        MCItem(
            id=f"q{index}",
            lang="en",
            question=question,
            question_concept="nature",
            choices=[Choice(label=label, text=text) for label, text in zip("ABCDE", OPTIONS, strict=True)],
            answer=GOLD[question],
        )
        for index, question in enumerate(ANSWERS)
    ]
    score_mc(items, llm, EvalConfig(formulation="open", judge="scripted/judge"), judge=judge)
    shapes = {request.reply_shape for request in judge.generate_calls}
    assert shapes == {JUDGE_SHAPE if chat else VERDICT_SHAPE}
    assert all(request.reply_shape is None for request in llm.generate_calls)  # the free answer is not shaped


def test_a_judge_reply_in_its_shape_is_read_as_such_and_other_objects_as_before() -> None:
    asked = JudgeReply(verdict="incorrect", reason="names a lake").model_dump_json()
    assert (parse_verdict(asked).correct, parse_verdict(asked).reason) == (False, "names a lake")
    other = parse_verdict('{"Verdict": "Correct", "reason": "same thing", "confidence": 0.9}')
    assert (other.correct, other.reason) == (True, "same thing")
