"""What ``build`` prints when a run finishes: the funnel's stage table, then its summary lines (what was kept and
every figure the recipe marked for the summary), the cost and where the files are."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from senseforge.cli.build import print_summary
from senseforge.runfolder.folder import RunFolder

GOLDEN = Path(__file__).parents[1] / "fixtures" / "golden"


def test_the_summary_prints_the_stage_table_the_figures_marked_for_it_and_the_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "mcsqa-ja"
    shutil.copytree(GOLDEN / "demo" / "mcsqa-ja", run)
    folder = RunFolder.open(run)
    assert folder.funnel is not None and folder.cost is not None
    summary = SimpleNamespace(
        state="done", recipe="mcsqa", run_dir=run, funnel=folder.funnel, cost=folder.cost, ledger={}, diagnoses=[]
    )
    print_summary(summary)
    said = capsys.readouterr().out
    assert "mcsqa funnel (ja)" in said
    for row in folder.funnel.stages:
        assert row.stage in said
    assert "kept 7 questions" in said and "Refinement: 9 of 42 questions changed (21.4%)" in said
    assert "train: Easy 0 · Hard 5" in said
    assert "per kept question: " in said and f"dataset: {run / 'dataset'} · reports: {run / 'funnel.json'}" in said
