"""What a first user reads: configuration errors named at their source, refusals that say what to do, plain money."""

from __future__ import annotations

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
