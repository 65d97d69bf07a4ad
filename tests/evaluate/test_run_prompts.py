"""Every path that asks a model for text sends what the model can read, and samples.jsonl records it exactly.

A base model (no chat template) gets completion prompts with the instruction written in and a
stop sequence; a chat model gets the chat turns. Scripted stand-ins for both kinds record the
requests they receive, so the tests compare the record with what really went out.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from senseforge.data.schema import BinaryExample
from senseforge.evaluate.harness import run_eval
from senseforge.evaluate.records import BinarySample, MCSample, read_samples
from senseforge.evaluate.run import (
    GENERATE_INSTRUCTION,
    JUDGE_CUE,
    OPEN_INSTRUCTION,
    EvalConfig,
    score_binary,
)
from senseforge.llm.base import GenerateRequest
from senseforge.llm.mock import ScriptedLLM
from senseforge.llm.prompting import TEMPLATE_MARKERS, sent

from .open_items import answer as open_answer
from .open_items import items_file

CSQA = Path(__file__).parents[1] / "fixtures" / "csqa" / "dev_sample.jsonl"


def _stand_in(chat: bool, reply: str = " B\n\nQuestion: and the next one?") -> ScriptedLLM:
    return ScriptedLLM(responder=lambda request: reply, chat=chat, name=f"scripted/{'chat' if chat else 'base'}")


@pytest.mark.parametrize("chat", [False, True])
def test_generate_sends_each_kind_of_model_what_it_can_read(tmp_path: Path, chat: bool) -> None:
    llm = _stand_in(chat)
    run_eval(CSQA, llm, EvalConfig(formulation="generate"), tmp_path / "out")
    samples = read_samples(tmp_path / "out")
    assert len(samples) == len(llm.generate_calls) == 10
    for sample, request in zip(samples, llm.generate_calls, strict=True):
        assert isinstance(sample, MCSample) and sample.sent is not None
        assert sample.sent == sent(request, "scripted" if chat else None)  # the record is what went out
        if chat:
            assert sample.sent["kind"] == "chat" and sample.sent["template"] == "scripted"
            assert sample.sent["messages"][0] == {"role": "system", "content": GENERATE_INSTRUCTION}
        else:
            assert request.messages is None and request.prompt is not None
            assert sample.sent == {"kind": "completion", "text": request.prompt, "stop": ["\n"]}
            # the instruction is written into the prompt, which ends on the item's own answer cue
            assert request.prompt.startswith(GENERATE_INSTRUCTION + "\n\n" + sample.prompt.split("\n")[0])
            assert request.prompt.endswith(sample.prompt)
        assert sample.finish_reason == "stop"
    # the base model's invented next question is cut off by the stop sequence, so its letter is its answer
    base_or_chat = {s.response for s in samples if isinstance(s, MCSample)}
    assert base_or_chat == ({" B\n\nQuestion: and the next one?"} if chat else {" B"})


def test_open_and_its_judge_follow_their_own_models(tmp_path: Path) -> None:
    """A base model answers, a base judge grades: both get completion prompts; the judge's ends on a verdict cue."""
    model = ScriptedLLM(responder=open_answer, chat=False, name="scripted/open-base")
    judge = ScriptedLLM(responder=lambda request: " correct", chat=False, name="scripted/judge-base")
    config = EvalConfig(formulation="open", judge="scripted/judge-base")
    run_eval(items_file(tmp_path), model, config, tmp_path / "out", judge=judge)
    samples = [s for s in read_samples(tmp_path / "out") if isinstance(s, MCSample)]
    assert all(request.messages is None for request in model.generate_calls + judge.generate_calls)
    for sample, request, graded in zip(samples, model.generate_calls, judge.generate_calls, strict=True):
        assert sample.sent == {"kind": "completion", "text": request.prompt, "stop": ["\n"]}
        assert request.prompt is not None and request.prompt.startswith(OPEN_INSTRUCTION + "\n\n")
        assert sample.judge_sent is not None and sample.judge_sent["kind"] == "completion"
        assert graded.prompt is not None and graded.prompt.endswith(JUDGE_CUE)
        assert sample.judge_sent["text"] == graded.prompt
        assert sample.correct is True and sample.judge_verdict == "correct"


@pytest.mark.parametrize("cot", [False, True])
def test_binary_generation_and_its_reasoning_variant_follow_the_model(cot: bool) -> None:
    examples = [
        BinaryExample(id=f"e{i}", context_id=f"c{i}", task="t", context="It rains.", target="Take a hat.", label=True)
        for i in range(2)
    ]
    base = _stand_in(False, "<Answer>yes</Answer>\nContext: …" if cot else " yes\nContext: …")
    config = EvalConfig(binary_mode="generate", chain_of_thought=cot)
    samples = score_binary(examples, base, config)
    for sample, request in zip(samples, base.generate_calls, strict=True):
        assert isinstance(sample, BinarySample)
        assert request.messages is None and sample.sent == sent(request, None)
        assert sample.prediction is True and sample.parsed
        assert request.stop == (("\n\n",) if cot else ("\n",))


def test_the_model_is_asked_as_its_capability_says_under_a_cache(tmp_path: Path) -> None:
    """Through the cache wrapper (as every CLI run goes), a base stand-in still gets completion prompts."""
    from senseforge.llm.cache import open_llm
    from senseforge.store.db import Store

    llm = open_llm("scripted/echo", {"chat": False}, store=Store(f"sqlite:///{tmp_path / 's.db'}"))
    run_eval(CSQA, llm, EvalConfig(formulation="generate", limit=3), tmp_path / "out")
    samples = read_samples(tmp_path / "out")
    assert [s.sent["kind"] for s in samples if s.sent] == ["completion"] * 3
    assert all(not any(m in (s.response or "") for ms in TEMPLATE_MARKERS.values() for m in ms) for s in samples)


def test_a_generate_request_for_a_chat_model_is_unchanged() -> None:
    """A chat model's requests are what they always were, so cached answers stay valid."""
    chat = _stand_in(True)
    from senseforge.evaluate.run import ask

    request, record = ask(chat, "Question: q\nAnswer:", system=GENERATE_INSTRUCTION, max_tokens=32, temperature=0.0)
    assert request == GenerateRequest.chat(
        "Question: q\nAnswer:", system=GENERATE_INSTRUCTION, max_tokens=32, temperature=0.0
    )
    assert record["kind"] == "chat"
