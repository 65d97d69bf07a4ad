"""The CLI end to end: real processes, the embedded model, the cache, and one-line errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from senseforge.store.db import Store


def run_cli(*args: str, home: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SENSEFORGE_HOME": str(home), "HF_HUB_OFFLINE": "1", "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "senseforge", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        check=False,
    )


def assert_one_line_error(result: subprocess.CompletedProcess[str], needle: str) -> None:
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ") and needle in lines[0]


@pytest.mark.slow
def test_generate_twice_second_is_a_cache_hit_without_backend_call(senseforge_home: Path) -> None:
    args = ("llm", "generate", "The three primary colours are", "--max-tokens", "8")
    first = run_cli(*args, home=senseforge_home)
    second = run_cli(*args, home=senseforge_home)
    assert first.returncode == 0, first.stderr
    assert second.returncode == 0, second.stderr
    assert first.stdout == second.stdout and first.stdout.strip()
    assert "0 hits, 1 miss" in first.stderr
    assert "1 hit, 0 misses" in second.stderr and "no backend call" in second.stderr
    rows = Store(f"sqlite:///{senseforge_home / 'senseforge.db'}").ledger_rows()
    assert [(r.cache_hit, r.attempts) for r in rows] == [(False, 1), (True, 0)]
    assert rows[0].model == "llamacpp/gemma-3-270m" and rows[0].cost_usd == 0.0 and rows[0].tokens_out


@pytest.mark.slow
def test_score_json_equals_direct_llama(senseforge_home: Path, models_dir: Path) -> None:
    from llama_cpp import Llama

    from senseforge.llm.providers.llamacpp import _weight_repacking

    context = "Question: What do people use to cut paper?\nAnswer:"
    choices = ["scissors", "a spoon", "a cloud"]
    args = ["llm", "score", "--context", context, "--json"]
    for choice in choices:
        args += ["--choice", choice]
    result = run_cli(*args, home=senseforge_home)
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    assert payload["best"] == "scissors"

    # llama.cpp's own one-sequence pass on the weights the scorer loads (not repacked)
    with _weight_repacking(False):
        model = Llama(
            model_path=str(models_dir / "gemma-3-270m-q4_k_m.gguf"), n_ctx=256, logits_all=True, verbose=False
        )
    import numpy as np

    for row in payload["scores"]:
        whole = model.tokenize((context + " " + row["choice"]).encode(), add_bos=True)
        n_context = len(model.tokenize(context.encode(), add_bos=True))
        model.reset()
        model.eval(whole)
        logits = model.scores[: len(whole)].astype(np.float64)
        log_probs = logits - logits.max(axis=1, keepdims=True)
        log_probs -= np.log(np.exp(log_probs).sum(axis=1, keepdims=True))
        expected = sum(log_probs[i - 1, whole[i]] for i in range(n_context, len(whole)))
        assert row["logprob"] == pytest.approx(expected, abs=1e-3)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("llm", "generate", "-m", "nope/x", "hi"), "unknown provider 'nope'"),
        (("llm", "generate", "-m", "llamacpp/does/not/exist.gguf", "hi"), "model file not found"),
        (("llm", "generate", "--bogus", "hi"), "No such option: --bogus"),
        (("llm", "score", "--context", "x"), "Missing option '--choice'"),
        (("llm", "generate", "--temperature", "9", "hi"), "--temperature"),
        (("llm", "generate", "-m", "scripted/echo", "-o", "nokey", "hi"), "key=value"),
        (("llm", "generate", "-m", "openai/gpt-4o-mini", "hi"), "OPENAI_API_KEY"),
    ],
)
def test_bad_input_is_one_clear_line(senseforge_home: Path, args: tuple[str, ...], needle: str) -> None:
    assert_one_line_error(run_cli(*args, home=senseforge_home), needle)


def test_debug_shows_the_traceback(senseforge_home: Path) -> None:
    result = run_cli("--debug", "llm", "generate", "-m", "nope/x", "hi", home=senseforge_home)
    assert result.returncode != 0 and "Traceback" in result.stderr and "ConfigError" in result.stderr


def test_help_and_models(senseforge_home: Path) -> None:
    top = run_cli("--help", home=senseforge_home)
    assert top.returncode == 0 and "llm" in top.stdout and "demo" in top.stdout
    models = run_cli("llm", "models", home=senseforge_home)
    assert models.returncode == 0
    for provider in ("llamacpp", "openai", "hf", "scripted"):
        assert provider in models.stdout


def test_scripted_generate_with_json_and_failures(senseforge_home: Path, tmp_path: Path) -> None:
    script = tmp_path / "s.jsonl"
    script.write_text(json.dumps({"text": 'Sure: {"answer": "B"}'}) + "\n")
    ok = run_cli("llm", "generate", "-m", f"scripted/{script}", "--json", "q1", home=senseforge_home)
    assert ok.returncode == 0 and json.loads(ok.stdout) == {"answer": "B"}
    failing = tmp_path / "f.jsonl"
    failing.write_text(json.dumps({"failure": {"kind": "timeout", "message": "slow"}}) + "\n")
    failed = run_cli("llm", "generate", "-m", f"scripted/{failing}", "q2", home=senseforge_home)
    assert failed.returncode != 0 and "timeout" in failed.stderr and "Traceback" not in failed.stderr


def test_ledger_lists_calls_newest_first_and_the_failed_ones(senseforge_home: Path, tmp_path: Path) -> None:
    script = tmp_path / "s.jsonl"
    script.write_text(json.dumps({"text": "fine"}) + "\n")
    failing = tmp_path / "f.jsonl"
    failing.write_text(json.dumps({"failure": {"kind": "timeout", "message": "slow"}}) + "\n")
    assert run_cli("llm", "generate", "-m", f"scripted/{script}", "q1", home=senseforge_home).returncode == 0
    assert run_cli("llm", "generate", "-m", f"scripted/{failing}", "q2", home=senseforge_home).returncode != 0
    every = run_cli("llm", "ledger", "--json", home=senseforge_home)
    assert every.returncode == 0, every.stderr
    rows = json.loads(every.stdout)
    assert [row["failure_kind"] for row in rows] == ["timeout", None]  # newest first
    failed = json.loads(run_cli("llm", "ledger", "--failed", "--json", home=senseforge_home).stdout)
    assert [(row["failure_kind"], row["failure_message"]) for row in failed] == [("timeout", "slow")]
    assert len(json.loads(run_cli("llm", "ledger", "-n", "1", "--json", home=senseforge_home).stdout)) == 1
    table = run_cli("llm", "ledger", home=senseforge_home)
    assert table.returncode == 0 and "newest first" in table.stdout and "timeout: slow" in table.stdout
    missing = run_cli("llm", "ledger", "--run", str(tmp_path), home=senseforge_home)
    assert_one_line_error(missing, "no run manifest")


def test_generate_holds_replies_to_a_schema_file(senseforge_home: Path, tmp_path: Path) -> None:
    """``--schema``: the endpoint gets the schema (strict ``json_schema`` here), the printed value fits it, and the
    ledger says the reply was constrained; a file that is not a schema is one clear line."""
    from senseforge.llm.loopback import LoopbackOpenAI
    from senseforge.llm.loopback_handler import request_text

    schema = tmp_path / "answer.json"
    properties = {"answer": {"enum": ["A", "B"]}, "why": {"type": "string"}}
    schema.write_text(json.dumps({"type": "object", "properties": properties, "required": ["answer"]}))
    sent: list[dict[str, object]] = []

    def reply(body: dict[str, object]) -> str:
        sent.append(body)
        return request_text(body)

    with LoopbackOpenAI(reply) as server:
        model = ["-m", "openai/m", "--base-url", server.base_url]
        result = run_cli("llm", "generate", *model, "--schema", str(schema), "Pick one.", home=senseforge_home)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"answer": "A", "why": ""}
    assert sent[0]["response_format"] == {
        "type": "json_schema",
        "json_schema": {
            "name": "answer",
            "schema": {**json.loads(schema.read_text()), "required": ["answer", "why"], "additionalProperties": False},
            "strict": True,
        },
    }
    rows = json.loads(run_cli("llm", "ledger", "--json", home=senseforge_home).stdout)
    assert [row["constrained"] for row in rows] == [True]
    schema.write_text("[1, 2]")
    assert_one_line_error(
        run_cli("llm", "generate", "--schema", str(schema), "hi", home=senseforge_home), "JSON object"
    )
