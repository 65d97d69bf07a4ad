"""The site's generated stage tables (``tools/docs_hooks.py``): one row per stage, in the recipe's order."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from senseforge.pipelines.recipes import recipes

ROOT = Path(__file__).resolve().parents[1]


def _hooks() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "tools" / "docs_hooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


HOOKS = _hooks()


@pytest.mark.parametrize("name", sorted(recipes()))
def test_the_stage_table_lists_the_source_and_every_stage_in_order(name: str) -> None:
    table = HOOKS.stages_table(name)
    rows = [line for line in table.splitlines()[2:] if line.startswith("|")]
    names = [row.split("|")[2].strip().strip("`") for row in rows]
    assert rows[0].split("|")[3].strip() == "source" and all(row.count("|") == 6 for row in rows)
    assert len(names) == len(set(names)) and set(names) <= set(HOOKS.PAPER_STEPS[name])
    assert "contamination" in names  # the hook's config turns the optional gate on


def test_the_mcsqa_table_follows_the_papers_steps() -> None:
    rows = HOOKS.stages_table("mcsqa").splitlines()[2:]
    assert [row.split("|")[2].strip().strip("`") for row in rows] == [
        "select", "generate", "filter", "refine", "filter_refined", "contamination",
        "distractors", "shuffle", "verify", "review", "moderate", "split",
    ]  # fmt: skip
    assert "| `verify` | model |" in rows[8] and "6. LM verification" in rows[8]


def test_a_stage_without_a_paper_step_fails_the_build(monkeypatch: pytest.MonkeyPatch) -> None:
    steps = {**HOOKS.PAPER_STEPS, "mcsqa": {k: v for k, v in HOOKS.PAPER_STEPS["mcsqa"].items() if k != "refine"}}
    monkeypatch.setattr(HOOKS, "PAPER_STEPS", steps)
    with pytest.raises(ValueError, match="no paper step for stage 'refine'"):
        HOOKS.stages_table("mcsqa")


def test_the_marker_is_replaced_on_the_page() -> None:
    page = HOOKS.on_page_markdown("before\n<!-- generated: stages crow -->\nafter")
    assert "| `wsv` | people |" in page and "<!-- generated" not in page
