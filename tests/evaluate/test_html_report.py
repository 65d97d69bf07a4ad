"""``senseforge report``: one self-contained page over a crow run, its evaluation, a multiple-choice evaluation and
a transfer study — its numbers are the files', its images load in Debian chromium, and it makes no request."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("matplotlib")

from senseforge.evaluate.harness import run_eval
from senseforge.evaluate.html_report import write_report
from senseforge.evaluate.run import EvalConfig
from senseforge.evaluate.transfer_tables import ItemOutcome, accuracy_cells, write_tables
from senseforge.llm.cache import open_llm
from senseforge.pipelines.crow.config import CrowConfig
from senseforge.pipelines.crow.recipe import CROW
from senseforge.pipelines.runner import build
from senseforge.store.db import Store

FIXTURES = Path(__file__).parents[1] / "fixtures"


def _evaluate(data: Path, out: Path) -> None:
    llm = open_llm("scripted/echo", store=Store(), run="eval")
    try:
        run_eval(data, llm, EvalConfig(n_bootstrap=100), out, split="test")
    finally:
        llm.close()


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


@pytest.fixture
def report(tmp_path: Path) -> tuple[Path, Path]:
    run = tmp_path / "crow"
    config = CrowConfig(model="scripted/crow-author", source=(str(FIXTURES / "crow" / "shot_samples.json"),))
    build(CROW, config, run, store=Store())
    _evaluate(run, run / "eval" / "echo")
    _evaluate(FIXTURES / "mcsqa" / "test_sample.jsonl", tmp_path / "mc-eval")
    baseline = {"splits": {"test": {"human_acc": 0.875, "human_acc_ci95": [0.75, 1.0], "scored": 8}}}
    (run / "human_baseline.json").write_text(json.dumps(baseline), encoding="utf-8")
    page = write_report(
        tmp_path / "report.html", [run], evals=[tmp_path / "mc-eval"], transfer=_transfer(tmp_path / "t")
    )
    return run, page


def test_the_page_holds_the_numbers_of_the_files(report: tuple[Path, Path]) -> None:
    run, page = report
    text = page.read_text(encoding="utf-8")
    funnel = json.loads((run / "funnel.json").read_text())
    for row in funnel["stages"]:
        assert f"<td>{row['stage']}</td><td>{row['in']}</td><td>{row['out']}</td>" in text, row
    cost = json.loads((run / "cost.json").read_text())
    assert f"total {cost['total_usd']:.6f} USD" in text
    tokens = sum(s["tokens_in"] + s["tokens_out"] for s in cost["stages"].values())
    assert tokens > 0 and all(s["cost_usd"] == 0 for s in cost["stages"].values())
    assert "The chart counts tokens: no stage has a known price above zero." in text  # a free model: tokens drawn
    results = json.loads((run / "eval" / "echo" / "results.json").read_text())["results"]
    assert f"Macro-F1 {results['crow']['crow_score_macro_f1,none']:.4f}" in text
    safety = results["safety"]
    assert f"<td>safety</td><td>{safety['macro_f1,none']:.4f}</td><td>{safety['situational_acc,none']:.4f}</td>" in text
    mc = json.loads((run.parent / "mc-eval" / "results.json").read_text())
    total = next(iter(mc["results"].values()))["acc,none"]
    assert f"{total:.4f}" in text and "<th>easy</th><th>hard</th>" in text
    transfer = json.loads((run.parent / "t" / "transfer.json").read_text())
    row = transfer["subsets"]["total"]["table7"][0]
    assert f"<td>{row['lang']}</td><td>{row['mono']:.4f}</td>" in text and "Table 7" in text
    assert "<td>test</td><td>0.8750</td><td>8</td><td>[0.750, 1.000]</td>" in text  # the human baseline
    assert "Leaderboard" in text and "Manifest" in text and "http" not in text.replace("http-equiv", "")


def test_a_fresh_run_gets_its_page_with_the_empty_sections_named(tmp_path: Path) -> None:
    run = tmp_path / "fresh"
    run.mkdir()
    (run / "manifest.json").write_text(json.dumps({"recipe": "mcsqa", "models": {}}), encoding="utf-8")
    text = write_report(run / "report.html", [run]).read_text(encoding="utf-8")
    assert "No funnel yet" in text and "No evaluations yet" in text and "No cost yet" in text


@pytest.mark.browser
def test_chromium_loads_every_image_and_the_page_asks_for_nothing(report: tuple[Path, Path], page: Any) -> None:
    _, written = report
    asked: list[str] = []
    page.on("request", lambda request: asked.append(request.url))
    page.goto(written.as_uri())
    page.wait_for_load_state("load")
    widths = page.evaluate("Array.from(document.images).map((img) => img.complete ? img.naturalWidth : 0)")
    assert len(widths) >= 5 and all(width > 0 for width in widths), widths
    assert all(url.startswith(("file:", "data:")) for url in asked), asked
    page.screenshot(path=str(written.with_suffix(".png")), full_page=True)
    assert written.with_suffix(".png").stat().st_size > 0


def test_the_report_command(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from senseforge.cli.main import app

    run = tmp_path / "run"
    run.mkdir()
    result = CliRunner().invoke(app, ["report", str(run)])
    assert result.exit_code == 0, result.output
    assert (run / "report.html").is_file() and "wrote" in result.output
    nothing = CliRunner().invoke(app, ["report"])
    assert nothing.exit_code != 0 and "give a run directory" in str(nothing.exception)
    missing = CliRunner().invoke(app, ["report", str(tmp_path / "nope")])
    assert missing.exit_code != 0 and "no such run folder" in str(missing.exception)
