"""``senseforge demo``: the whole loop offline, on embedded defaults (see :mod:`senseforge.pipelines.demo`)."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import typer

from senseforge.cli._common import StoreOption, err, out, stage_progress

_CULTURE_NOTES = {
    "culture-gen": (
        "A 270M base model copies the worked example and loses the JSON often: the rejects show each reason "
        "(rejects.jsonl keeps every raw reply). A capable chat model writes whole batches."
    ),
    "culture-adapt": (
        "A 270M base model adapts and translates poorly (it often copies the English item): the funnel shows "
        "where each item fell out, and rejects.jsonl keeps every reason and raw reply. A capable chat model "
        "adapts and translates most items."
    ),
    "crow": (
        "A 270M base model copies its worked examples and often rewrites too many words: funnel.json shows, per "
        "task and stage, what was kept and why the rest was left out (rejects.jsonl keeps every raw reply). "
        "Score a model on the result with: senseforge eval run --data <run>"
    ),
}


_NONE_KEPT = (
    "{name} kept 0 items: the 270M base model fails checks made for a capable chat model; run the recipe with one: "
    "senseforge build {name} -m openai/MODEL (docs/recipes/{name}.md)"
)
"""The closing summary's line for a recipe the demo model kept nothing of: where real items come from."""


def _recipe_rule(name: str, langs: str) -> None:
    out.rule(f"{name} recipe · {langs}")


_CULTURE_OUTPUTS = "<lang>/dataset/ (Putri et al.'s shape), <lang>/items/ (provenance), funnel.json, rejects.jsonl"
_CROW_OUTPUTS = "dataset/<task>.jsonl (binary, CRoW's form), release/ (public, private), funnel.json, rejects.jsonl"


def demo(
    out_dir: Path = typer.Option(Path("senseforge-demo"), "--out", help="Where the demo writes its runs."),
    model: str = typer.Option("llamacpp/gemma-3-270m", "--model", "-m", help="provider/model of every stage."),
    n: int | None = typer.Option(None, "--n", min=1, help="Question sets per language (default: en 12, ja 16)."),
    store: str | None = StoreOption,
    recipe: str | None = typer.Option(
        None,
        "--recipe",
        help="Run one recipe's demo: mcsqa | culture-gen | culture-adapt | crow (default: every recipe).",
    ),
    panel: bool = typer.Option(
        False,
        "--panel",
        help="Instead, English mCSQA verified by a two-member panel (the bundled model by log-likelihood of each "
        "choice and of each choice's letter: MODEL@loglik, MODEL@letter), in its own run, runs/mcsqa-en-panel.",
    ),
) -> None:
    """Build small benchmarks offline with the bundled model: mCSQA (en, ja; then evaluated), culture-gen (id, su),
    culture-adapt (CommonsenseQA → id, su), crow (five CRoW tasks)."""
    from senseforge.cli.build import print_summary
    from senseforge.cli.eval import print_results
    from senseforge.cli.report import write_page
    from senseforge.errors import ConfigError
    from senseforge.pipelines.demo import DEMO_RECIPES, DemoEvents, run_demo, run_panel_demo, run_recipe_demo
    from senseforge.store.db import Store

    if recipe is not None and recipe not in DEMO_RECIPES:
        raise ConfigError(f"--recipe {recipe!r}: the demo has {', '.join(DEMO_RECIPES)}")
    if panel and recipe not in (None, "mcsqa"):
        raise ConfigError(f"--panel is a demo of mCSQA's verification panel; --recipe {recipe} has none in the demo")
    store_ = Store(store)
    if panel:
        events = DemoEvents(
            note=err.print, building=lambda label: out.rule(f"mCSQA recipe · {label}"), built=print_summary
        )
        summary = run_panel_demo(out_dir, model=model, n=n, store=store_, progress=stage_progress, events=events)
        page = write_page(out_dir / "report-panel.html", [summary.run_dir])
        out.rule("where everything is")
        out.print(
            f"{summary.run_dir}: dataset/, items/ (Easy/Hard by the panel), panel.jsonl (each member's answer), "
            "funnel.json (the panel's figures), cost.json"
        )
        out.print(f"{page}: the report of this run")
        return
    where: list[str] = []
    built: list[Path] = []
    if recipe in (None, "mcsqa"):
        events = DemoEvents(
            note=err.print,
            building=lambda lang: out.rule(f"mCSQA recipe · {lang}"),
            built=print_summary,
            evaluating=lambda summary: out.rule(f"evaluation · {summary.run_dir.name} (all splits)"),
            evaluated=print_results,
        )
        finished = run_demo(out_dir, model=model, n=n, store=store_, progress=stage_progress, events=events)
        out.print(
            "Easy items are the ones this model already answered during verification, so it scores them "
            "right again; Hard ones it got wrong. Judge a real benchmark with other models."
        )
        where += [
            f"{s.run_dir}: dataset/ (mCSQA schema), items/ (with provenance), funnel.json, cost.json, eval/"
            for s in finished
        ]
        built += [s.run_dir for s in finished]
    for name in ("culture-gen", "culture-adapt", "crow"):
        if recipe not in (None, name):
            continue
        events = DemoEvents(building=partial(_recipe_rule, name), built=print_summary)
        summary = run_recipe_demo(name, out_dir, model=model, store=store_, progress=stage_progress, events=events)
        out.print(_CULTURE_NOTES[name])
        if summary.funnel is not None and summary.funnel.kept == 0:
            where.append(_NONE_KEPT.format(name=name))
        where.append(f"{summary.run_dir}: {_CROW_OUTPUTS if name == 'crow' else _CULTURE_OUTPUTS}")
        built.append(summary.run_dir)
    page = write_page(out_dir / "report.html", built)
    out.rule("where everything is")
    for line in where:
        out.print(line)
    out.print(f"{page}: the report over every run above (figures and their numbers, one page, no network)")
