"""``senseforge build mcsqa`` and ``senseforge demo`` from the command line."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from senseforge.pipelines.culture_adapt.config import CultureAdaptConfig
from senseforge.pipelines.culture_adapt.recipe import CULTURE_ADAPT
from senseforge.pipelines.culture_gen.recipe import CULTURE_GEN, CultureGenConfig
from senseforge.pipelines.demo import CULTURE_ADAPT_DEMO, CULTURE_GEN_DEMO
from senseforge.pipelines.runner import build
from senseforge.store.db import Store

from ..pipelines.conftest import kill_when_stored
from ..pipelines.golden import compare_with_golden
from .test_llm_cli import assert_one_line_error, run_cli

AUTHOR = "scripted/mcsqa-author"


def test_build_prints_the_funnel_and_writes_the_run(kb: Path, tmp_path: Path, senseforge_home: Path) -> None:
    run = tmp_path / "run"
    args = ["build", "mcsqa", "--lang", "ja", "--n", "6", "--kb", str(kb), "-m", AUTHOR, "--out", str(run)]
    result = run_cli(*args, "--reviewers", AUTHOR, "--lm-review-as-hard", home=senseforge_home)
    assert result.returncode == 0, result.stderr
    assert "mcsqa funnel (ja)" in result.stdout and "kept" in result.stdout
    assert "Easy and Hard per split:" in result.stdout  # the figures the recipe marks for the summary
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
    assert "wait for people (tasks queued: verify" in result.stderr and "senseforge annotate serve" in result.stderr
    # the review's records that wait for people are told as queued for them, not as done
    review = [line for line in result.stderr.splitlines() if line.startswith("review: ")][-1]
    queued = int(review.split(" · ")[1].split()[0])
    assert f"{queued} queued for people" in review and queued > 0
    done, total = (int(n) for n in review.split()[1].split("/"))
    assert done + queued == total
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


MCSQA_FLAGS_BEFORE_THE_ENGINE = (
    "--lang", "-l", "--n", "--all", "--answers-per-set", "--seed", "--kb", "--model", "-m", "--stage-model",
    "--option", "-o", "--base-url", "--style", "--verify-by", "--reviewers", "--lm-review-as-hard",
    "--no-lm-review-as-hard", "--review-k", "--decisions", "--human-rate", "--batch-size", "--out", "--resume",
    "--store", "--run-store",
)  # fmt: skip
"""Every flag ``build mcsqa`` took before it was generated from the config."""


def test_build_mcsqa_keeps_every_flag_and_adds_the_common_ones() -> None:
    import typer

    from senseforge.cli.main import app

    group = typer.main.get_command(app)
    command = group.commands["build"].commands["mcsqa"]  # type: ignore[attr-defined]
    names = {name for param in command.params for name in (*param.opts, *param.secondary_opts)}
    assert set(MCSQA_FLAGS_BEFORE_THE_ENGINE) <= names, set(MCSQA_FLAGS_BEFORE_THE_ENGINE) - names
    assert {"--config", "--set", "--lm-review-policy", "--review-policy", "--call-rounds", "--ratios"} <= names


def test_config_file_and_set_pairs_feed_the_run(kb: Path, tmp_path: Path, senseforge_home: Path) -> None:
    run = tmp_path / "run"
    settings = tmp_path / "run.toml"
    settings.write_text(
        f'lang = "en"\nn = 3\nkb = "{kb}"\nmodel = "{AUTHOR}"\nreviewers = ["{AUTHOR}"]\nlm_review_final = true\n'
    )
    args = ["build", "mcsqa", "--config", str(settings), "--set", "answers_per_set=1", "--set", "seed=2"]
    result = run_cli(*args, "--out", str(run), home=senseforge_home)
    assert result.returncode == 0, result.stderr
    config = json.loads((run / "manifest.json").read_text())["config"]
    assert (config["lang"], config["n"], config["answers_per_set"], config["seed"]) == ("en", 3, 1, 2)
    funnel = json.loads((run / "funnel.json").read_text())
    assert funnel["stages"][0]["in"] == 3
    # a resume with another setting is refused, naming it; the same settings finish from the store
    changed = run_cli("build", "mcsqa", "--out", str(run), "--resume", "--set", "seed=3", home=senseforge_home)
    assert changed.returncode == 1 and "Traceback" not in changed.stderr
    assert "error:" in changed.stderr and "seed: 2 → 3" in changed.stderr.splitlines()[-1]
    again = run_cli("build", "mcsqa", "--out", str(run), "--resume", home=senseforge_home)
    assert again.returncode == 0, again.stderr
    bad = run_cli("build", "mcsqa", "--config", str(settings), "--set", "colour=red", home=senseforge_home)
    assert_one_line_error(bad, "no setting 'colour'")


GOLDEN_DEMO = Path(__file__).resolve().parents[1] / "fixtures" / "golden" / "demo"


@pytest.mark.slow
def test_demo_builds_every_recipe_offline(tmp_path: Path, senseforge_home: Path) -> None:
    """The whole demo, killed with SIGKILL twice (while culture-gen generates, then while culture-adapt localizes)
    and run again each time: every run's outputs are the golden bytes of an uninterrupted demo. The kills and
    resumes of culture-gen and culture-adapt on the real model are proved here, on the demo's own builds, rather
    than by builds of their own; a rerun of each on the same cache makes no backend call."""
    out = tmp_path / "demo"
    env = {**os.environ, "SENSEFORGE_HOME": str(senseforge_home), "HF_HUB_OFFLINE": "1"}
    for recipe, stage, n in (("culture-gen", "generate", 3), ("culture-adapt", "localize", 1)):
        args = [sys.executable, "-m", "senseforge", "demo", "--out", str(out)]
        child = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        kill_when_stored(child, out / "runs" / recipe, stage, n, hung_after_s=2400)
        assert not (out / "runs" / recipe / "funnel.json").exists(), "the build finished before the kill"
    result = run_cli("demo", "--out", str(out), home=senseforge_home, timeout=2400)  # ~6.5 min, 2 idle cores
    assert result.returncode == 0, result.stderr
    for lang in ("en", "ja"):
        run = out / "runs" / f"mcsqa-{lang}"
        funnel = json.loads((run / "funnel.json").read_text())
        # the bundled 270M model repeats and copies questions, which the copy checks reject (en keeps 9, ja 12)
        assert funnel["kept"] >= 5
        assert funnel["splits"]["validation"] > 0 and funnel["splits"]["test"] > 0
        for row in funnel["stages"]:
            assert row["in"] == row["out"] + sum(row["rejected"].values())
        cost = json.loads((run / "cost.json").read_text())
        assert cost["total_usd"] == 0.0  # a local model: no money, and known to be none
        items = [
            json.loads(line) for s in ("train", "validation", "test") for line in (run / "items" / f"{s}.jsonl").open()
        ]
        assert {item["provenance"]["review"] for item in items if item["difficulty"] == "hard"} <= {"lm"}
        assert (run / "eval" / "results.json").is_file()
        compare_with_golden(run, GOLDEN_DEMO / f"mcsqa-{lang}")  # the bytes the demo wrote before the engine
    culture = out / "runs" / "culture-gen"
    funnel = json.loads((culture / "funnel.json").read_text())
    assert next(row for row in funnel["stages"] if row["stage"] == "check")["in"] > 0
    assert [group["name"] for group in funnel["groups"]] == ["id", "su"]
    assert (culture / "id" / "dataset" / "test.jsonl").is_file() and (culture / "rejects.jsonl").is_file()
    assert "culture-gen funnel" in result.stdout
    adapt = out / "runs" / "culture-adapt"
    funnel = json.loads((adapt / "funnel.json").read_text())
    assert funnel["stages"][0]["in"] == 8 and next(r for r in funnel["stages"] if r["stage"] == "keep")["in"] > 0
    assert (adapt / "su" / "funnel.json").is_file() and (adapt / "rejects.jsonl").is_file()
    assert "culture-adapt funnel" in result.stdout
    crow = out / "runs" / "crow"
    funnel = json.loads((crow / "funnel.json").read_text())
    assert {g["name"] for g in funnel["groups"]} == {"safety", "intent", "dialogue", "stance", "mt-zh-en"}
    assert next(r for r in funnel["stages"] if r["stage"] == "wsg")["in"] > 0
    assert (crow / "release" / "public.jsonl").is_file() and (crow / "rejects.jsonl").is_file()
    assert "crow funnel" in result.stdout and "Per task:" in result.stdout
    assert "where everything is" in result.stdout
    for name in ("culture-gen", "culture-adapt", "crow"):  # the bytes the demo wrote before typed records
        compare_with_golden(out / "runs" / name, GOLDEN_DEMO / name)
    # each killed recipe built again, uninterrupted, into a new run directory on the same cache: every call is
    # answered from it and the bytes are the same (so the resumes stored what an uninterrupted build stores)
    configs = {
        "culture-gen": (CULTURE_GEN, CultureGenConfig(**CULTURE_GEN_DEMO)),
        "culture-adapt": (CULTURE_ADAPT, CultureAdaptConfig(**CULTURE_ADAPT_DEMO)),
    }
    for name, (recipe, config) in configs.items():
        again = build(recipe, config, tmp_path / "again" / name, store=Store())
        assert again.ledger["calls"] == again.ledger["cache_hits"] > 0, name
        compare_with_golden(again.run_dir, GOLDEN_DEMO / name)
    page = (out / "report.html").read_text(encoding="utf-8")  # the report over every run the demo built
    assert all(f"<h2>{name}</h2>" in page for name in ("mcsqa-en", "mcsqa-ja", "culture-gen", "crow"))
    # the demo's model verified the items it is evaluated on: the page says what its Easy 1.0 / Hard 0.0 means
    assert "also verified these items" in page and any((out / "report_figures").glob("*.pdf"))


def test_build_human_gen_waits_for_people_and_names_the_tasks(tmp_path: Path, senseforge_home: Path) -> None:
    table = tmp_path / "concepts.csv"
    table.write_text("category,concept\nculinary,rendang\nplace,pasar\n", encoding="utf-8")
    run = tmp_path / "run"
    args = ("build", "human-gen", "--concepts", str(table), "--pool", "ana,bo,cy,dian", "--out", str(run))
    result = run_cli(*args, home=senseforge_home)
    assert result.returncode == 0, result.stderr
    assert "model:" not in result.stderr  # it calls no model
    assert "4 item(s) wait for people (tasks queued: create 4" in result.stderr  # two pairs, one concept each
    assert "senseforge annotate invite NAME" in result.stderr and "--resume" in result.stderr
    queued = [json.loads(line) for line in (run / "review" / "queue.jsonl").read_text().splitlines()]
    assert {(row["type"], tuple(row["eligible"])) for row in queued} == {
        ("create", (name,)) for name in ("ana", "bo", "cy", "dian")
    }
    again = run_cli(
        "build", "human-gen", "--out", str(run), "--resume", "--human-rate", "create=x", home=senseforge_home
    )
    assert again.returncode != 0 and "create: 'x' is not a number of dollars" in again.stderr
    odd = run_cli("build", "human-gen", "--pool", "ana,bo,cy", "--out", str(tmp_path / "odd"), home=senseforge_home)
    assert_one_line_error(odd, "even pool")
    assert "--assignment one" in odd.stderr and "--assignment each" in odd.stderr  # the way out, named


def test_a_resume_reads_the_run_manifest_once(
    tmp_path: Path, senseforge_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``build --resume`` reads ``manifest.json`` once and hands it on: to the config, the resume check, the build."""
    from typer.testing import CliRunner

    from senseforge.cli.main import app

    table = tmp_path / "concepts.csv"
    table.write_text("category,concept\nculinary,rendang\n", encoding="utf-8")
    run = tmp_path / "run"
    args = ["build", "human-gen", "--concepts", str(table), "--pool", "ana,bo", "--out", str(run)]
    assert CliRunner().invoke(app, args).exit_code == 0
    reads: list[Path] = []
    read_text = Path.read_text

    def counted(path: Path, *args: Any, **kwargs: Any) -> str:
        if path.name == "manifest.json":
            reads.append(path)
        return read_text(path, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", counted)
    resumed = CliRunner().invoke(app, ["build", "human-gen", "--out", str(run), "--resume"])
    assert resumed.exit_code == 0, resumed.output
    assert "wait for people" in resumed.output
    assert reads == [run / "manifest.json"]


def test_human_rate_is_one_rate_or_one_per_task_type() -> None:
    import typer

    from senseforge.cli.build import human_rate

    assert human_rate(None) is None and human_rate("0.05") == 0.05
    assert human_rate("create=0.4, answer=0.05") == {"create": 0.4, "answer": 0.05}
    for bad in ("-1", "create=", "=0.1", "answer=nan"):
        with pytest.raises(typer.BadParameter):
            human_rate(bad)


def test_build_crow_from_the_command_line_and_its_one_line_errors(tmp_path: Path, senseforge_home: Path) -> None:
    shots = Path(__file__).resolve().parents[1] / "fixtures" / "crow" / "shot_samples.json"
    run = tmp_path / "crow"
    args = ("build", "crow", "--source", str(shots), "--task", "safety,mt_zh_en", "-m", "scripted/crow-author")
    result = run_cli(*args, "--validators", "scripted/crow-author", "--out", str(run), home=senseforge_home)
    assert result.returncode == 0, result.stderr
    assert "crow funnel" in result.stdout and "Per task:" in result.stdout
    assert sorted(p.name for p in (run / "dataset").glob("*.jsonl")) <= ["mt-zh-en.jsonl", "safety.jsonl"]
    assert [g["name"] for g in json.loads((run / "funnel.json").read_text())["groups"]] == ["safety", "mt-zh-en"]
    nope = str(tmp_path / "nope.jsonl")
    missing = run_cli("build", "crow", "--source", nope, "--out", str(tmp_path / "a"), home=senseforge_home)
    assert_one_line_error(missing, f"--source: no such file or folder: {nope}")
    assert not (tmp_path / "a").exists()  # refused before the run directory is made
    unused = run_cli("build", "crow", "--set", "review_k=3", "--out", str(tmp_path / "b"), home=senseforge_home)
    assert_one_line_error(unused, "crow does not use review_k: its panels are given by --validators")
    votes = run_cli("build", "crow", "--k", "1", "--out", str(tmp_path / "c"), home=senseforge_home)
    assert_one_line_error(votes, "ckv_min 2 is more than the k = 1 votes")


def test_a_failed_start_leaves_nothing_and_the_corrected_command_proceeds(
    kb: Path, tmp_path: Path, senseforge_home: Path
) -> None:
    """A build whose input is wrong fails before its folder exists; the corrected command (same --out) simply
    runs."""
    run = tmp_path / "run"
    base = ["build", "mcsqa", "--n", "4", "--kb", str(kb), "-m", AUTHOR, "--out", str(run)]
    failed = run_cli(*base, "--lang", "id", home=senseforge_home)
    _assert_error_line(failed, "pass --source-lang ms")
    assert not run.exists()
    fixed = run_cli(*base, "--lang", "ja", home=senseforge_home)
    assert fixed.returncode == 0, fixed.stderr
    assert json.loads((run / "manifest.json").read_text())["config"]["lang"] == "ja"


def test_a_folder_with_a_manifest_but_nothing_stored_is_not_yet_a_run(
    kb: Path, tmp_path: Path, senseforge_home: Path
) -> None:
    """What an older senseforge left after a failed start (a manifest, an empty store) no longer wedges the folder."""
    from senseforge.pipelines.runstore import RunStore, sqlite_url

    run = tmp_path / "run"
    run.mkdir()
    (run / "manifest.json").write_text(json.dumps({"recipe": "mcsqa", "config": {"lang": "id"}}), encoding="utf-8")
    RunStore(sqlite_url(run / "run.db")).close()
    args = ["build", "mcsqa", "--lang", "ja", "--n", "4", "--kb", str(kb), "-m", AUTHOR, "--out", str(run)]
    result = run_cli(*args, "--resume", home=senseforge_home)  # --resume of a run that never started: a fresh one
    assert result.returncode == 0, result.stderr
    assert json.loads((run / "manifest.json").read_text())["config"]["lang"] == "ja"
    taken = run_cli(*args, home=senseforge_home)
    _assert_error_line(taken, "a run already lives here")
    assert f"rm -r {run}" in taken.stderr and "--resume" in taken.stderr


def _assert_error_line(result: subprocess.CompletedProcess[str], needle: str) -> None:
    """One error line, after the build's header line when the error comes from the run (a refused folder is
    refused before the header, which would name the new settings)."""
    assert result.returncode == 1 and "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip() and not line.startswith("run: ")]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ") and needle in lines[0]


def test_build_for_several_languages_makes_one_run_each_as_built_alone(
    kb: Path, tmp_path: Path, senseforge_home: Path
) -> None:
    common = ["--n", "5", "--seed", "4", "--kb", str(kb), "-m", AUTHOR, "--reviewers", AUTHOR, "--lm-review-as-hard"]
    for lang in ("en", "ja"):
        alone = run_cli(
            "build", "mcsqa", "--lang", lang, *common, "--out", str(tmp_path / f"alone-{lang}"), home=senseforge_home
        )
        assert alone.returncode == 0, alone.stderr
    runs = tmp_path / "runs"
    together = run_cli("build", "mcsqa", "--lang", "en,ja", *common, "--out", str(runs), home=senseforge_home)
    assert together.returncode == 0, together.stderr
    assert "mcsqa funnel (en)" in together.stdout and "mcsqa funnel (ja)" in together.stdout
    assert sorted(path.name for path in runs.iterdir()) == ["mcsqa-en", "mcsqa-ja"]
    for lang in ("en", "ja"):
        for name in ("dataset/train.jsonl", "dataset/test.jsonl", "funnel.json"):
            assert (runs / f"mcsqa-{lang}" / name).read_bytes() == (tmp_path / f"alone-{lang}" / name).read_bytes()
    again = run_cli("build", "mcsqa", "--lang", "en,ja", *common, "--out", str(runs), "--resume", home=senseforge_home)
    assert again.returncode == 0, again.stderr
    named = run_cli(
        "build", "mcsqa", "--lang", "ja,en", *common, "--out", str(tmp_path / "b-{lang}"), home=senseforge_home
    )
    assert named.returncode == 0, named.stderr
    assert (tmp_path / "b-ja" / "dataset" / "train.jsonl").read_bytes() == (
        tmp_path / "alone-ja" / "dataset" / "train.jsonl"
    ).read_bytes()
    partly = tmp_path / "partly"  # a command of several languages stopped before it began ja
    shutil.copytree(tmp_path / "alone-en", partly / "mcsqa-en")
    went_on = run_cli(
        "build", "mcsqa", "--lang", "en,ja", *common, "--out", str(partly), "--resume", home=senseforge_home
    )
    assert went_on.returncode == 0, went_on.stderr  # --resume continues en and begins ja
    assert (partly / "mcsqa-ja" / "dataset" / "train.jsonl").read_bytes() == (
        tmp_path / "alone-ja" / "dataset" / "train.jsonl"
    ).read_bytes()
    bare = run_cli("build", "mcsqa", "--lang", "en,ja", "--source-lang", "ms", *common, home=senseforge_home)
    assert_one_line_error(bare, "TAG=CODE")
    missing = run_cli("build", "mcsqa", "--lang", "en,xx", *common, "--out", str(tmp_path / "c"), home=senseforge_home)
    assert_one_line_error(missing, "xx")
    assert not (tmp_path / "c").exists()  # refused before any run started


def test_the_interrupt_hint_of_several_languages_is_the_command_again_with_resume() -> None:
    """The runs of the languages not yet begun need the command's settings: the hint is the command itself, with
    any password in it left for the user to fill in."""
    from senseforge.cli._common import record_command_line
    from senseforge.cli.build import _again_with_resume

    args = ["build", "mcsqa", "--lang", "en,ja", "--store", "postgresql+psycopg://ana:s3cret@db/sf", "--out", "my runs"]
    record_command_line(args)
    try:
        assert _again_with_resume() == (
            "`senseforge build mcsqa --lang en,ja --store postgresql+psycopg://ana:PASSWORD@db/sf --out 'my runs' "
            "--resume` (with the store's password where PASSWORD stands)"
        )
        record_command_line([*args[:4], "--resume", "--out", "runs"])
        assert _again_with_resume() == "`senseforge build mcsqa --lang en,ja --resume --out runs`"
    finally:
        record_command_line([])


@pytest.mark.parametrize(
    ("flags", "needle"),
    [(["--ray-address", "auto"], "--ray-address needs --executor ray"), (["--executor", "dask"], "unknown executor")],
)
def test_build_refuses_a_bad_executor_in_one_line(
    flags: list[str], needle: str, kb: Path, tmp_path: Path, senseforge_home: Path
) -> None:
    args = ["build", "mcsqa", "--lang", "en", "--n", "2", "--kb", str(kb), "-m", AUTHOR, "--out", str(tmp_path / "r")]
    result = run_cli(*args, *flags, home=senseforge_home)
    assert_one_line_error(result, needle)
    assert not (tmp_path / "r").exists()
