"""A report's inputs as a researcher has them: the demo's runs (the checked-in golden outputs of ``make demo``, with
a manifest each), a human-gen run, judgements from their run stores, evaluations in and out of the runs, a transfer
study and an analysis."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from senseforge.data.schema import Judgement, judgement
from senseforge.evaluate.harness import run_eval
from senseforge.evaluate.run import EvalConfig
from senseforge.evaluate.transfer_tables import ItemOutcome, accuracy_cells, write_tables
from senseforge.llm.cache import open_llm
from senseforge.store.db import Store

FIXTURES = Path(__file__).parents[2] / "fixtures"
GOLDEN = FIXTURES / "golden"
GEMMA = "llamacpp/gemma-3-270m"
ECHO = "scripted/echo"


def evaluate(data: Path, out: Path, split: str = "all") -> Path:
    """``eval run`` of the scripted echo model on ``data``; the results file."""
    llm = open_llm(ECHO, store=Store(), run="eval")
    try:
        run_eval(data, llm, EvalConfig(n_bootstrap=100), out, split=split)
    finally:
        llm.close()
    return out / "results.json"


def judgements_of(folder: Path) -> list[tuple[Judgement, str]]:
    """The judgements a golden run dumped from its store (``people.jsonl``, where other rows are its stage results)."""
    rows = [json.loads(line) for line in (folder / "people.jsonl").read_text(encoding="utf-8").splitlines()]
    return [(judgement(**row["body"]), row["source"]) for row in rows if "body" in row]


def _manifest(run: Path, recipe: str, model: str, **config: Any) -> None:
    manifest = {
        "recipe": recipe,
        "config": {"recipe": recipe, "model": model, **config},
        "models": {model: {"weights_sha256": "0" * 64}},
        "templates": {"generate": "ab" * 32},
        "seeds": {"seed": 0},
        "senseforge_version": "test",
    }
    (run / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")


@dataclass
class Inputs:
    runs: list[Path]
    evals: list[Path]
    judgements: dict[Path, list[tuple[Judgement, str]]]
    transfer: Path
    analyses: list[Path]
    results: dict[str, Path] = field(default_factory=dict)
    """Which results file is which: ``en`` (in its run), ``ja`` (outside it), ``moved`` (its run moved since),
    ``crow``, ``other`` (no run given)."""


def _transfer(folder: Path) -> Path:
    outcomes: dict[tuple[str, str], list[ItemOutcome]] = {}
    for setting in ("mono:en", "mono:ja", "multi"):
        for lang in ("en", "ja"):
            outcomes[(setting, lang)] = [
                ItemOutcome(
                    id=f"{lang}{i}", correct=(i + len(setting)) % 3 != 0, difficulty="hard" if i % 2 else "easy"
                )
                for i in range(6)
            ]
    write_tables(folder, accuracy_cells(outcomes, n_bootstrap=100), ["en", "ja"])
    return folder


def _analysis(folder: Path) -> Path:
    from senseforge.analyze.output import write_outputs

    def draw(figure: Any) -> None:
        axes = figure.subplots()
        axes.bar(["a", "b"], [0.4, 0.6])

    write_outputs(folder, "lexical", {"summary": "Two made-up shares."}, [{"measure": "x", "a": 0.4}], draw)
    return folder


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Inputs:
    """Built once per module: the tests only read them."""
    tmp_path = tmp_path_factory.mktemp("inputs")
    runs = tmp_path / "runs"
    for name in ("mcsqa-en", "mcsqa-ja", "culture-gen", "culture-adapt", "crow"):
        shutil.copytree(GOLDEN / "demo" / name, runs / name)
    shutil.copytree(GOLDEN / "human-gen-people", runs / "human-gen")
    # mcsqa-en was verified by the model it is evaluated with below (the demo's circularity); mcsqa-ja by another
    _manifest(runs / "mcsqa-en", "mcsqa", ECHO, lang="en")
    _manifest(runs / "mcsqa-ja", "mcsqa", GEMMA, lang="ja")
    _manifest(runs / "culture-gen", "culture-gen", GEMMA, langs=["id", "su"])
    _manifest(runs / "culture-adapt", "culture-adapt", GEMMA, langs=["id", "su"])
    _manifest(runs / "crow", "crow", GEMMA)
    _manifest(runs / "human-gen", "human-gen", "none", lang="id")
    baseline = {"splits": {"test": {"human_acc": 0.875, "human_acc_ci95": [0.75, 1.0], "scored": 8}}}
    (runs / "mcsqa-ja" / "human_baseline.json").write_text(json.dumps(baseline), encoding="utf-8")
    results = {
        "en": evaluate(runs / "mcsqa-en", runs / "mcsqa-en" / "eval" / "echo"),
        "ja": evaluate(runs / "mcsqa-ja", tmp_path / "evals" / "ja-echo"),
        "crow": evaluate(runs / "crow", tmp_path / "evals" / "crow-echo", split="test"),
        "other": evaluate(FIXTURES / "mcsqa" / "test_sample.jsonl", tmp_path / "evals" / "sample-echo"),
    }
    # a run evaluated where it was built, then moved: its results' path leads nowhere, its items are the same
    built = tmp_path / "elsewhere" / "mcsqa-en"
    shutil.copytree(runs / "mcsqa-en", built, ignore=shutil.ignore_patterns("eval"))
    results["moved"] = evaluate(built, tmp_path / "evals" / "moved-echo")
    shutil.rmtree(built)
    twin = tmp_path / "second" / "mcsqa-en"  # a second run of the same name
    shutil.copytree(runs / "mcsqa-ja", twin, ignore=shutil.ignore_patterns("eval"))
    folders = [runs / n for n in ("mcsqa-en", "mcsqa-ja", "culture-gen", "culture-adapt", "crow", "human-gen")]
    return Inputs(
        runs=[*folders, twin],
        evals=[tmp_path / "evals"],
        judgements={
            runs / "mcsqa-ja": judgements_of(GOLDEN / "demo" / "mcsqa-ja"),
            runs / "human-gen": judgements_of(GOLDEN / "human-gen-people"),
        },
        transfer=_transfer(tmp_path / "transfer"),
        analyses=[_analysis(tmp_path / "analysis")],
        results=results,
    )
