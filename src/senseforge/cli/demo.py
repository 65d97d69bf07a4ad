"""``senseforge demo``: the whole loop offline, on embedded defaults (see :mod:`senseforge.pipelines.demo`)."""

from __future__ import annotations

from pathlib import Path

import typer

from senseforge.cli._common import StoreOption, err, out, progress_bar


def demo(
    out_dir: Path = typer.Option(Path("senseforge-demo"), "--out", help="Where the demo writes its runs."),
    model: str = typer.Option("llamacpp/gemma-3-270m", "--model", "-m", help="provider/model of every stage."),
    n: int | None = typer.Option(None, "--n", min=1, help="Question sets per language (default: en 12, ja 16)."),
    store: str | None = StoreOption,
) -> None:
    """Build small English and Japanese mCSQA benchmarks offline with the bundled model, then evaluate it."""
    from senseforge.cli.build import print_summary
    from senseforge.cli.eval import print_results
    from senseforge.pipelines.demo import DemoEvents, run_demo
    from senseforge.store.db import Store

    events = DemoEvents(
        note=err.print,
        building=lambda lang: out.rule(f"mCSQA recipe · {lang}"),
        built=print_summary,
        evaluating=lambda summary: out.rule(f"evaluation · {summary.run_dir.name} (all splits)"),
        evaluated=print_results,
    )
    finished = run_demo(out_dir, model=model, n=n, store=Store(store), progress=progress_bar, events=events)
    out.print(
        "Easy items are the ones this model already answered during verification, so it scores them "
        "right again; Hard ones it got wrong. Judge a real benchmark with other models."
    )
    out.rule("where everything is")
    for summary in finished:
        where = summary.run_dir
        out.print(f"{where}: dataset/ (mCSQA schema), items/ (with provenance), funnel.json, cost.json, eval/")
