"""The scripted backend replays scripts from code and from files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from senseforge.errors import ConfigError
from senseforge.llm.base import GenerateRequest, LoglikelihoodRequest
from senseforge.llm.mock import ScriptedLLM
from senseforge.llm.registry import get_llm


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
