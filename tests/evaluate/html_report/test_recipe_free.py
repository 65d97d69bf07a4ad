"""The report names no recipe: it draws a run by the groups and figures the run declared, so no source file of
``evaluate/html_report`` compares a run's recipe with a recipe's name, maps recipe names to anything, or matches on
one. (``crow`` is also the name of the CRoW evaluation task in evaluation results; comparing a *task* with it
stays allowed.)"""

from __future__ import annotations

import ast
from pathlib import Path

from senseforge.evaluate import html_report
from senseforge.pipelines.recipes import recipes

PACKAGE = Path(html_report.__file__).parent


def recipe_names_used(source: str, names: frozenset[str]) -> list[str]:
    """Every place in ``source`` that compares something about a recipe with a recipe name, keys a dict by one, or
    matches a recipe against one: ``line: code``."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            named = any(
                isinstance(part, ast.Constant) and part.value in names for side in sides for part in ast.walk(side)
            )
            if named and "recipe" in ast.unparse(node).lower():
                found.append(f"{node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.Dict):
            if any(isinstance(key, ast.Constant) and key.value in names for key in node.keys):
                found.append(f"{node.lineno}: {ast.unparse(node)[:80]}")
        elif isinstance(node, ast.Match):
            cases = [p for case in node.cases for p in ast.walk(case.pattern)]
            if any(
                isinstance(p, ast.MatchValue) and isinstance(p.value, ast.Constant) and p.value.value in names
                for p in cases
            ):
                found.append(f"{node.lineno}: match {ast.unparse(node.subject)}")
    return sorted(found, key=lambda hit: int(hit.split(":")[0]))


def test_no_module_of_the_report_names_a_recipe() -> None:
    names = frozenset(recipes())
    assert {"mcsqa", "crow", "human-gen", "culture-gen", "culture-adapt"} <= names
    found = {
        path.name: hits
        for path in sorted(PACKAGE.glob("*.py"))
        if (hits := recipe_names_used(path.read_text(encoding="utf-8"), names))
    }
    assert found == {}


def test_the_check_finds_what_the_report_used_to_do() -> None:
    names = frozenset(recipes())
    old = """
parts = {"mcsqa": mcsqa_parts, "crow": crow_parts}
caption = "Cost per step" if run.recipe == "mcsqa" else "Cost per stage"
if run.recipe in ("culture-gen", "culture-adapt"):
    pass
match run.recipe:
    case "human-gen":
        pass
"""
    assert [hit.split(":")[0] for hit in recipe_names_used(old, names)] == ["2", "3", "4", "6"]
    allowed = 'tasks = {t: m for t, m in results.items() if t != "crow"}\nkey = "f1" if task == "crow" else "acc"\n'
    assert recipe_names_used(allowed, names) == []
