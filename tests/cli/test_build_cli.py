"""``senseforge build mcsqa`` and ``senseforge demo`` from the command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from senseforge.kb.conceptnet import import_dump

from .test_llm_cli import assert_one_line_error, run_cli

AUTHOR = "scripted/mcsqa-author"


@pytest.fixture
def kb(tmp_path: Path) -> Path:
    folder = tmp_path / "kb"
    import_dump("demo", folder)
    return folder


def test_build_prints_the_funnel_and_writes_the_run(kb: Path, tmp_path: Path, senseforge_home: Path) -> None:
    run = tmp_path / "run"
    args = ["build", "mcsqa", "--lang", "ja", "--n", "6", "--kb", str(kb), "-m", AUTHOR, "--out", str(run)]
    result = run_cli(*args, "--reviewers", AUTHOR, "--lm-review-as-hard", home=senseforge_home)
    assert result.returncode == 0, result.stderr
    assert "mCSQA funnel (ja)" in result.stdout and "kept" in result.stdout
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["config"]["lang"] == "ja" and len(manifest["config_hash"]) == 64
    assert set(manifest["templates"]) == {"generate/ja/chat", "refine/ja/chat", "distractors/ja/chat"}
    assert AUTHOR in manifest["models"]
    assert manifest["run_store_url"] == "run.db"
    rows = [json.loads(line) for line in (run / "dataset" / "train.jsonl").read_text(encoding="utf-8").splitlines()]
    assert rows and all(row["question"].endswith("？") for row in rows)


def test_build_pauses_for_review_and_says_how_to_go_on(kb: Path, tmp_path: Path, senseforge_home: Path) -> None:
    run = tmp_path / "run"
    result = run_cli(
        "build",
        "mcsqa",
        "--lang",
        "en",
        "--n",
        "4",
        "--kb",
        str(kb),
        "-m",
        AUTHOR,
        "--out",
        str(run),
        home=senseforge_home,
    )
    assert result.returncode == 0, result.stderr
    assert "await human review" in result.stderr and "senseforge annotate serve" in result.stderr
    assert "--resume" in result.stderr
    assert (run / "review" / "queue.jsonl").is_file()


def test_build_errors_are_one_line(kb: Path, tmp_path: Path, senseforge_home: Path) -> None:
    assert_one_line_error(run_cli("build", "mcsqa", home=senseforge_home), "--lang")
    bad_stage = run_cli(
        "build", "mcsqa", "--lang", "en", "--kb", str(kb), "--stage-model", "judge=scripted/echo", home=senseforge_home
    )
    assert_one_line_error(bad_stage, "unknown stage 'judge'")
    nothing = run_cli("build", "mcsqa", "--out", str(tmp_path / "none"), "--resume", home=senseforge_home)
    assert_one_line_error(nothing, "no run to resume")


@pytest.mark.slow
def test_demo_builds_both_languages_offline(tmp_path: Path, senseforge_home: Path) -> None:
    out = tmp_path / "demo"
    result = run_cli("demo", "--out", str(out), home=senseforge_home, timeout=1200)  # ~2 min on an idle 2-core machine
    assert result.returncode == 0, result.stderr
    for lang in ("en", "ja"):
        run = out / "runs" / f"mcsqa-{lang}"
        funnel = json.loads((run / "funnel.json").read_text())
        assert funnel["kept"] >= 10
        assert funnel["splits"]["validation"]["easy"] + funnel["splits"]["validation"]["hard"] > 0
        assert funnel["splits"]["test"]["easy"] + funnel["splits"]["test"]["hard"] > 0
        for row in funnel["stages"]:
            assert row["in"] == row["out"] + sum(row["rejected"].values())
        cost = json.loads((run / "cost.json").read_text())
        assert cost["total_usd"] == 0.0  # a local model: no money, and known to be none
        items = [
            json.loads(line) for s in ("train", "validation", "test") for line in (run / "items" / f"{s}.jsonl").open()
        ]
        assert {item["provenance"]["review"] for item in items if item["difficulty"] == "hard"} <= {"lm"}
        assert (run / "eval" / "results.json").is_file()
    assert "where everything is" in result.stdout
