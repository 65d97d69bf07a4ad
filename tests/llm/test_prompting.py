"""The prompt follows the model: chat turns for a model with a template, completion prompts for a base model."""

from __future__ import annotations

from pathlib import Path

import pytest

from senseforge.llm.base import Completion, GenerateRequest, Message
from senseforge.llm.cache import CachedLLM
from senseforge.llm.mock import ScriptedLLM
from senseforge.llm.prompting import (
    TEMPLATE_MARKERS,
    chat_template,
    completion_text,
    diagnose,
    fit,
    fit_for,
    sent,
    template_marker,
)
from senseforge.llm.registry import chat_template_for, get_llm
from senseforge.store.db import Store


def test_a_chat_request_for_a_base_model_becomes_a_completion_prompt() -> None:
    request = GenerateRequest.chat("Question: where?\nAnswer:", system="Answer in one word.", max_tokens=7, seed=3)
    plain = fit(request, None, stop=("\n",))
    assert plain.messages is None
    assert plain.prompt == "Answer in one word.\n\nQuestion: where?\nAnswer:"
    assert plain.stop == ("\n",)
    assert (plain.max_tokens, plain.seed, plain.temperature) == (7, 3, 0.0)
    # the request's own stops come first, and nothing is repeated
    own = GenerateRequest.chat("x", stop=("END", "\n"))
    assert fit(own, None, stop=("\n", "\n\n")).stop == ("END", "\n", "\n\n")
    # a chat model, and a plain prompt, pass unchanged
    assert fit(request, "chatml") is request
    prompt = GenerateRequest(prompt="Q:")
    assert fit(prompt, None) is prompt


def test_a_cue_ends_a_prompt_that_asks_without_one() -> None:
    request = GenerateRequest.chat("Is it right?", system="Grade it.")
    assert fit(request, None, cue="\nVerdict:").prompt == "Grade it.\n\nIs it right?\nVerdict:"


def test_worked_examples_follow_their_question() -> None:
    turns = [
        Message(role="system", content="Name the colour."),
        Message(role="user", content="Sky:"),
        Message(role="assistant", content="blue"),
        Message(role="user", content="Grass:"),
    ]
    assert completion_text(turns) == "Name the colour.\n\nSky: blue\n\nGrass:"


def test_what_was_sent_is_recorded_exactly() -> None:
    chat = GenerateRequest.chat("Q?", system="S.")
    assert sent(chat, "chatml") == {
        "kind": "chat",
        "messages": [{"role": "system", "content": "S."}, {"role": "user", "content": "Q?"}],
        "template": "chatml",
    }
    plain = fit(chat, None)
    assert sent(plain, None) == {"kind": "completion", "text": "S.\n\nQ?", "stop": ["\n\n"]}


@pytest.mark.parametrize("family", sorted(TEMPLATE_MARKERS))
def test_every_template_family_is_recognised(family: str) -> None:
    for marker in TEMPLATE_MARKERS[family]:
        assert template_marker(f"some text {marker} more") == family
    assert template_marker("The answer is B.") is None


def test_diagnosis_names_an_echoed_template_and_cut_replies() -> None:
    echoed = [Completion(text="\nAnswer with the letter.\n<</SYS>> Question: …", finish_reason="length")] * 3
    line = diagnose([*echoed, Completion(text="B", finish_reason="stop")], model="openai/gemma", template="server")
    assert line is not None and "3 of 4 replies echo llama-2" in line and "-o api=completions" in line
    assert "\n" not in line
    cut = [Completion(text="A long ramble", finish_reason="length")] * 4
    chat_line = diagnose(cut, model="openai/gemma", max_tokens=32, template="server")
    assert chat_line is not None and chat_line.startswith("every reply (4 of 4) hit the token limit (32)")
    assert "-o api=completions" in chat_line
    base_line = diagnose(cut, model="llamacpp/x.gguf", max_tokens=32, template=None)
    assert base_line is not None and "stop sequences" in base_line and "api=completions" not in base_line
    # failures do not count; one cut reply among good ones is no pattern; too few to judge
    fine = [Completion(text="B", finish_reason="stop"), Completion(text="C", finish_reason="length")]
    assert diagnose(fine, model="m") is None
    assert diagnose([Completion(text="x", finish_reason="length")], model="m") is None
    assert diagnose([], model="m") is None


def test_the_capability_is_declared_by_each_provider_and_known_before_opening() -> None:
    assert chat_template_for("scripted/echo") == "scripted"
    assert chat_template_for("scripted/echo", {"chat": False}) is None
    assert chat_template(get_llm("scripted/echo", {"chat": False})) is None
    assert chat_template_for("openai/gemma", {"base_url": "http://127.0.0.1:9/v1"}) == "server"
    assert chat_template_for("openai/gemma", {"base_url": "http://127.0.0.1:9/v1", "api": "completions"}) is None
    # a scripted base model keeps the default identity apart from its chat stand-in's
    assert get_llm("scripted/echo", {"chat": False}).identity() != get_llm("scripted/echo").identity()
    assert get_llm("scripted/echo").identity() == {"scripted": "scripted/echo"}


def test_a_base_stand_in_refuses_chat_turns_and_the_cache_passes_the_capability_on(tmp_path: Path) -> None:
    base = ScriptedLLM(responder=lambda r: " B\nQuestion: next", chat=False, name="scripted/base")
    cached = CachedLLM(base, Store(f"sqlite:///{tmp_path / 's.db'}"))
    assert chat_template(cached) is None
    request = GenerateRequest.chat("Question?\nAnswer:", system="Answer with a letter.")
    refused, answered = cached.generate([request, fit_for(cached, request, stop=("\n",))])
    assert refused.failure is not None and refused.failure.kind == "unsupported"
    assert answered.ok and answered.text == " B"
    assert cached.diagnosis() is None


def test_the_cache_diagnoses_a_run_of_template_echoes(tmp_path: Path) -> None:
    echo = ScriptedLLM(responder=lambda r: "<start_of_turn>user\nQuestion: …", name="scripted/echoing")
    cached = CachedLLM(echo, Store(f"sqlite:///{tmp_path / 's.db'}"))
    cached.generate([GenerateRequest.chat(f"Q{i}?") for i in range(4)])
    found = cached.diagnosis()
    assert found is not None and "4 of 4 replies echo gemma" in found
