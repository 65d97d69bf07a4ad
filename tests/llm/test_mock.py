"""The scripted backend replays scripts from code and from files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from senseforge.errors import ConfigError
from senseforge.llm.base import LLM, GenerateRequest, LoglikelihoodRequest
from senseforge.llm.cache import CachedLLM
from senseforge.llm.mock import Options, ScriptedLLM
from senseforge.llm.prices import PriceTable
from senseforge.llm.registry import get_llm
from senseforge.store.db import Store


def test_queue_then_responder_then_out_of_responses() -> None:
    llm = ScriptedLLM(["first"])
    results = llm.generate([GenerateRequest(prompt="a"), GenerateRequest(prompt="b")])
    assert results[0].text == "first"
    assert results[1].failure is not None and "ran out" in results[1].failure.message


def test_file_script_with_failures(tmp_path: Path) -> None:
    script = tmp_path / "script.jsonl"
    rows = [{"text": '{"q": "Where?"}'}, {"failure": {"kind": "rate_limit", "message": "slow down"}}]
    script.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    llm = get_llm(f"scripted/{script}")
    first, second = llm.generate([GenerateRequest(prompt="x"), GenerateRequest(prompt="y")])
    assert first.json() == {"q": "Where?"}
    assert second.failure is not None and second.failure.kind == "rate_limit"


def test_bad_script_line_is_located(tmp_path: Path) -> None:
    script = tmp_path / "bad.jsonl"
    script.write_text('{"text": "ok"}\n{"nope": 1}\n')
    with pytest.raises(ConfigError, match=r"bad.jsonl:2"):
        get_llm(f"scripted/{script}")


def test_scores_are_deterministic() -> None:
    llm = ScriptedLLM()
    requests = [
        LoglikelihoodRequest(context="c", continuation=" short"),
        LoglikelihoodRequest(context="c", continuation=" longer one"),
    ]
    first = [r.logprob for r in llm.loglikelihood(requests)]
    assert first == [r.logprob for r in llm.loglikelihood(requests)]
    assert first[0] is not None and first[1] is not None and first[0] > first[1]


def test_a_python_responder_answers_both_kinds_and_its_hash_is_its_identity(tmp_path: Path) -> None:
    responder = tmp_path / "respond.py"
    responder.write_text(
        "from senseforge.llm.base import LoglikelihoodRequest\n"
        "def respond(request):\n"
        "    if isinstance(request, LoglikelihoodRequest):\n"
        "        return -len(request.continuation) / 10\n"
        "    return request.as_messages()[-1].content.upper()\n"
    )
    llm = get_llm(f"scripted/{responder}:respond")
    assert llm.generate([GenerateRequest(prompt="hi")])[0].text == "HI"
    assert llm.loglikelihood([LoglikelihoodRequest(context="c", continuation="abcd")])[0].logprob == -0.4
    before = llm.identity()["responder_sha256"]
    responder.write_text("def respond(request):\n    return 'other'\n")
    after = get_llm(f"scripted/{responder}:respond")
    assert after.identity()["responder_sha256"] != before  # an edited responder is a new model for the cache
    # a reply of the wrong kind is a recorded failure of that request, not a crash
    scored = after.loglikelihood([LoglikelihoodRequest(context="c", continuation="x")])[0]
    assert scored.failure is not None and "log-likelihood request got 'other'" in scored.failure.message


def test_python_responder_errors_are_clear(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such responder file"):
        get_llm(f"scripted/{tmp_path / 'missing.py'}:respond")
    broken = tmp_path / "broken.py"
    broken.write_text("def respond(:\n")
    with pytest.raises(ConfigError, match="failed to load"):
        get_llm(f"scripted/{broken}:respond")
    plain = tmp_path / "plain.py"
    plain.write_text("x = 1\n")
    with pytest.raises(ConfigError, match="no function 'respond'"):
        get_llm(f"scripted/{plain}:respond")
    with pytest.raises(ConfigError, match="name the function"):
        get_llm(f"scripted/{plain}")


def test_named_responders_come_from_the_caller() -> None:
    with pytest.raises(ConfigError, match="scripted/echo"):
        get_llm("scripted/mcsqa-author")  # the LM layer knows no recipe's author by itself
    llm = get_llm("scripted/shout", responders={"shout": lambda request: "HEY"})
    assert llm.generate([GenerateRequest(prompt="x")])[0].text == "HEY"
    assert llm.name == "scripted/shout"


# -- options and the cache ---------------------------------------------------------------------

OPTION_VALUES: dict[str, Any] = {"chat": False}
"""A value other than the default for every option (a new one must get one here)."""


def test_every_option_has_a_test_value() -> None:
    assert set(OPTION_VALUES) == set(Options.model_fields)
    for name, value in OPTION_VALUES.items():
        assert value != Options.model_fields[name].default, name


def test_without_options_the_identity_stays_bare(tmp_path: Path) -> None:
    script = tmp_path / "script.jsonl"
    script.write_text('{"text": "ok"}\n')
    assert get_llm("scripted/echo", {}).identity() == {"scripted": "scripted/echo"}
    assert get_llm(f"scripted/{script}").identity() == {"scripted": f"scripted/{script}"}
    assert get_llm("scripted/named", responders={"named": lambda r: "x"}).identity() == {"scripted": "scripted/named"}


def _answers(llm: LLM) -> list[dict[str, Any]]:
    call = {"cached", "latency_s", "attempts", "retry_errors"}
    results = [
        *llm.generate([GenerateRequest(prompt="hello"), GenerateRequest.chat("hi there")]),
        *llm.loglikelihood([LoglikelihoodRequest(context="c", continuation=" x")]),
    ]
    return [result.model_dump(exclude=call) for result in results]


def test_a_shared_cache_answers_as_a_fresh_run(tmp_path: Path) -> None:
    """For every option: a changed value misses the cache unless output-neutral, and answers as a fresh run."""
    for name in sorted(Options.model_fields):
        if name not in OPTION_VALUES:
            pytest.fail(f"option {name!r} has no test value in OPTION_VALUES")
        shared = Store(f"sqlite:///{tmp_path / f'shared-{name}.db'}")
        _answers(CachedLLM(get_llm("scripted/echo"), shared, prices=PriceTable({})))
        on_shared = CachedLLM(get_llm("scripted/echo", {name: OPTION_VALUES[name]}), shared, prices=PriceTable({}))
        from_shared = _answers(on_shared)
        empty = Store(f"sqlite:///{tmp_path / f'empty-{name}.db'}")
        fresh = _answers(CachedLLM(get_llm("scripted/echo", {name: OPTION_VALUES[name]}), empty, prices=PriceTable({})))
        assert (on_shared.stats.hits == 3) is (name in Options.OUTPUT_NEUTRAL), name
        assert from_shared == fresh, name


def test_a_python_responder_scripts_top_logprobs(tmp_path: Path) -> None:
    responder = tmp_path / "panel.py"
    responder.write_text(
        "from senseforge.llm.base import Completion\n"
        "def respond(request):\n"
        "    top = [[[' B', -0.1], [' A', -2.5], [' C', -4.0]], [['.', -0.01]]]\n"
        "    if request.prompt == 'dict':\n"
        "        return {'text': ' B. Because', 'top_logprobs': top}\n"
        "    if request.prompt == 'bad':\n"
        "        return {'text': 'B', 'top_logprobs': [['B', 'likely']]}\n"
        "    return Completion(text=' B', top_logprobs=top)\n"
    )
    llm = get_llm(f"scripted/{responder}:respond")
    asked, made, plain, bad = llm.generate(
        [
            GenerateRequest(prompt="dict", top_logprobs=2, stop=(" Because",)),
            GenerateRequest(prompt="completion", top_logprobs=5),
            GenerateRequest(prompt="dict"),
            GenerateRequest(prompt="bad", top_logprobs=2),
        ]
    )
    assert asked.text == " B." and asked.finish_reason == "stop" and asked.tokens_out == 1  # cut at the stop
    assert asked.top_logprobs == (((" B", -0.1), (" A", -2.5)), ((".", -0.01),))  # at most the two asked for
    assert made.top_logprobs == (((" B", -0.1), (" A", -2.5), (" C", -4.0)), ((".", -0.01),))
    assert plain.text == " B. Because" and plain.top_logprobs is None  # not asked: none, as from an endpoint
    assert bad.failure is not None and "top_logprobs" in bad.failure.message  # a recorded failure, not a crash


def test_a_script_line_may_carry_top_logprobs(tmp_path: Path) -> None:
    script = tmp_path / "answers.jsonl"
    script.write_text(
        json.dumps({"text": "A", "top_logprobs": [[["A", -0.3], ["B", -1.5]]]}) + "\n" + json.dumps({"text": "C"})
    )
    llm = get_llm(f"scripted/{script}")
    first, second = llm.generate([GenerateRequest(prompt="q", top_logprobs=5)] * 2)
    assert first.text == "A" and first.top_logprobs == ((("A", -0.3), ("B", -1.5)),)
    assert second.text == "C" and second.top_logprobs is None
    script.write_text(json.dumps({"text": "A", "top_logprobs": "likely"}) + "\n")
    with pytest.raises(ConfigError, match=r"answers.jsonl:1: .*top_logprobs"):
        get_llm(f"scripted/{script}")
