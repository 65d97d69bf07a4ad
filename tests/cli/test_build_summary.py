"""What ``build`` prints when a run finishes: the funnel's stage table, then its summary lines (what was kept and
every figure the recipe marked for the summary), the cost and where the files are — the same from the typed funnel
the engine returns as from a recipe's funnel model of the earlier form, read as its ``funnel.json`` would be."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from senseforge.cli.build import print_summary, typed_funnel
from senseforge.pipelines.crow.recipe import CrowFunnel
from senseforge.pipelines.culture_adapt.recipe import CultureAdaptFunnel
from senseforge.pipelines.culture_gen.recipe import CultureGenFunnel
from senseforge.pipelines.human_gen.recipe import HumanGenFunnel
from senseforge.pipelines.mcsqa.report import McsqaFunnel
from senseforge.runfolder.folder import RunFolder

GOLDEN = Path(__file__).parents[1] / "fixtures" / "golden"
LEGACY = Path(__file__).parents[1] / "fixtures" / "runfolder" / "legacy"
OLD = {
    "mcsqa": (McsqaFunnel, "mcsqa-en"),
    "crow": (CrowFunnel, "crow"),
    "human-gen": (HumanGenFunnel, "human-gen"),
    "culture-gen": (CultureGenFunnel, "culture-gen"),
    "culture-adapt": (CultureAdaptFunnel, "culture-adapt"),
}


@pytest.mark.parametrize("recipe", sorted(OLD))
def test_a_recipe_s_funnel_of_the_earlier_form_becomes_the_typed_one_of_its_file(recipe: str) -> None:
    model, name = OLD[recipe]
    old = model.model_validate(json.loads((LEGACY / name / "funnel.json").read_text(encoding="utf-8")))
    typed = typed_funnel(old, recipe, LEGACY / name)
    assert typed == RunFolder.open(LEGACY / name).funnel
    assert typed_funnel(typed, recipe, LEGACY / name) is typed


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
    assert "kept 12 questions" in said and "Refinement: 9 of 42 questions changed (21.4%)" in said
    assert "train: Easy 3 · Hard 7" in said
    assert "per kept question: " in said and f"dataset: {run / 'dataset'} · reports: {run / 'funnel.json'}" in said
