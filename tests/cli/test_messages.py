"""What a first user reads: configuration errors named at their source, refusals that say what to do, plain money."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .test_llm_cli import run_cli

AUTHOR = "scripted/mcsqa-author"


def _error(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


def test_an_unknown_key_in_a_config_file_names_the_file_and_the_closest_setting(
    tmp_path: Path, senseforge_home: Path
) -> None:
    config = tmp_path / "run.toml"
    config.write_text('lang = "ja"\nnn = 4\n', encoding="utf-8")
    result = run_cli("build", "mcsqa", "--config", str(config), "--out", str(tmp_path / "r"), home=senseforge_home)
    line = _error(result.stderr)
    assert f"{config}: nn" in line and "mcsqa has no setting 'nn'" in line and "did you mean n?" in line
    assert "Extra inputs" not in line
    bad_set = run_cli("build", "mcsqa", "--lang", "ja", "--set", "sed=1", home=senseforge_home)
    assert "has no setting 'sed'" in _error(bad_set.stderr)


def test_resuming_names_the_run_and_its_recipe(kb: Path, tmp_path: Path, senseforge_home: Path) -> None:
    run = tmp_path / "mcsqa-run"
    built = run_cli(
        "build", "mcsqa", "--lang", "ja", "--n", "2", "--kb", str(kb), "-m", AUTHOR, "--out", str(run),
        home=senseforge_home,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr
    crow = run_cli("build", "crow", "--resume", "--out", str(run), home=senseforge_home)
    line = _error(crow.stderr)
    assert "this is a mcsqa run, not crow" in line and f"senseforge build mcsqa --out {run} --resume" in line
    no_out = run_cli("build", "mcsqa", "--resume", home=senseforge_home)
    assert "--resume needs the run's folder: give --out RUN_DIR" in _error(no_out.stderr)
    # a refused resume says why before any header naming the new settings
    changed = run_cli("build", "mcsqa", "--resume", "--out", str(run), "-m", "scripted/echo", home=senseforge_home)
    assert "the config differs" in _error(changed.stderr) and "scripted/echo" not in changed.stderr.split("error:")[0]


def test_a_people_only_recipe_offers_no_model_options(senseforge_home: Path) -> None:
    shown = run_cli("build", "human-gen", "--help", home=senseforge_home).stdout
    for flag in ("--model ", "--style ", "--reviewers ", "--base-url ", "--stage-model ", "--option "):
        assert flag not in shown, flag
    refused = run_cli("build", "human-gen", "--set", "model=openai/gpt-4o-mini", home=senseforge_home)
    assert "human-gen does not use model" in _error(refused.stderr)


def test_llm_models_names_no_flag_that_does_not_exist(senseforge_home: Path) -> None:
    listed = run_cli("llm", "models", home=senseforge_home)
    assert listed.returncode == 0 and "--dry-run" not in listed.stdout


def test_an_unpriced_model_is_warned_about_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Two wrappers of one unpriced model (a model that is also its own judge) warn once, not twice."""
    import logging

    from senseforge.llm.base import GenerateRequest
    from senseforge.llm.cache import _WARNED_UNPRICED, CachedLLM
    from senseforge.llm.mock import ScriptedLLM
    from senseforge.llm.prices import PriceTable
    from senseforge.store.db import Store

    _WARNED_UNPRICED.discard("openai/a-model-nobody-priced")
    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    with caplog.at_level(logging.WARNING, logger="senseforge.llm.cache"):
        for seed in (1, 2):
            llm = ScriptedLLM(responder=lambda r: "x", name="openai/a-model-nobody-priced")
            CachedLLM(llm, store, prices=PriceTable({})).generate([GenerateRequest(prompt="p", seed=seed)])
    assert [r.getMessage() for r in caplog.records].count(
        "no price for openai/a-model-nobody-priced: its cost is recorded as unknown; add it to the price table "
        "($SENSEFORGE_HOME/prices.toml)"
    ) == 1


def test_a_json_syntax_error_says_where_and_what_in_our_words(tmp_path: Path, senseforge_home: Path) -> None:
    """Not the parser's "Invalid control character at at column 32": the file, line and column, and the fix."""
    lines = tmp_path / "items.jsonl"
    choices = [{"label": "A", "text": "yes"}, {"label": "B", "text": "no"}]
    first = {"id": "q1", "lang": "en", "question": "Fine?", "choices": choices, "answer": "A"}
    lines.write_text(json.dumps(first) + '\n{"id": "q2", "question": "a\ttab"}\n', encoding="utf-8")
    evaluate = ("eval", "run", "-m", "scripted/echo", "--format", "senseforge", "-d")
    line = _error(run_cli(*evaluate, str(lines), home=senseforge_home).stderr)
    assert (
        line == f"error: {lines}:2: invalid JSON at column 28: a tab (U+0009) inside a string: write it escaped, as \\t"
    )


def test_a_language_the_knowledge_store_lacks_names_the_import_that_adds_it(
    kb: Path, tmp_path: Path, senseforge_home: Path
) -> None:
    built = run_cli(
        "build", "mcsqa", "--lang", "zh", "--n", "2", "--kb", str(kb), "-m", AUTHOR, "--out", str(tmp_path / "r"),
        home=senseforge_home,
    )  # fmt: skip
    line = _error(built.stderr)
    assert f"no ConceptNet edges for 'zh' in the knowledge store {kb} (it has: en, ja)" in line
    assert f"'senseforge kb import conceptnet-assertions-5.7.0.csv.gz --lang en,ja,zh --store {kb}'" in line
    assert "or choose a language the store has" in line


def test_a_queued_task_anyone_may_take_lists_no_empty_eligible(kb: Path, tmp_path: Path, senseforge_home: Path) -> None:
    """``"eligible": []`` read as "no one may take it": the key is only there when some people only may."""
    run = tmp_path / "run"
    built = run_cli(
        "build", "mcsqa", "--lang", "en", "--n", "2", "--kb", str(kb), "-m", AUTHOR, "--out", str(run),
        home=senseforge_home,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr
    queued = [json.loads(line) for line in (run / "review" / "queue.jsonl").read_text(encoding="utf-8").splitlines()]
    assert queued and all(row["type"] == "verify" and row["needed"] == 2 for row in queued)
    assert all("eligible" not in row for row in queued)


def test_the_ledger_piped_keeps_each_call_on_one_line(tmp_path: Path, senseforge_home: Path) -> None:
    """Rich draws a table as wide as the terminal, 80 columns when there is none: piped, a row is never wrapped."""
    import os
    import subprocess
    import sys

    message = "the endpoint took longer than the client would wait for it, " * 3
    failing = tmp_path / "a-script-whose-name-alone-is-wider-than-half-of-an-eighty-column-line.jsonl"
    failing.write_text(json.dumps({"failure": {"kind": "timeout", "message": message}}) + "\n", encoding="utf-8")
    from senseforge.llm.base import GenerateRequest
    from senseforge.llm.cache import open_llm

    llm = open_llm(f"scripted/{failing}")  # the test's own default store, which the command reads
    assert llm.generate([GenerateRequest(prompt="q")])[0].failure is not None
    llm.close()
    env = {**os.environ, "SENSEFORGE_HOME": str(senseforge_home), "HF_HUB_OFFLINE": "1", "COLUMNS": "80"}
    piped = subprocess.run(
        [sys.executable, "-m", "senseforge", "llm", "ledger"], capture_output=True, text=True, env=env, timeout=120
    )
    assert piped.returncode == 0, piped.stderr
    rows = [line for line in piped.stdout.splitlines() if failing.name in line]
    assert len(rows) == 1, piped.stdout
    assert f"timeout: {message.strip()}" in rows[0] and f"scripted/{failing}" in rows[0]
    assert max(len(line) for line in piped.stdout.splitlines()) > 80
