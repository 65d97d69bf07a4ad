"""``senseforge analyze errors``: the error taxonomy and the adaptation check (see :mod:`senseforge.analyze.errors`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from senseforge.analyze.errors import CORRECT, TARGET_TITLES, TARGETS, Column, ErrorsResult, Source, error_tables
from senseforge.analyze.output import percent, write_outputs
from senseforge.cli._common import err, out, out_option


def errors(
    run: list[Path] | None = typer.Option(
        None, "--run", help="Run directory whose label-errors / adapt-check judgements to read; repeatable."
    ),
    labels: list[Path] | None = typer.Option(
        None,
        "--labels",
        help="CSV of item labels (dataset,lang,item_id,question_error,options_error) or of counts "
        "(dataset,lang,target,label,count); repeatable.",
    ),
    source: str = typer.Option("human", "--source", help="Whose judgements count: human (default), lm or any."),
    run_store: str | None = typer.Option(
        None, "--run-store", help="SQLAlchemy URL of the run store, when the one --run keeps it elsewhere."
    ),
    out_dir: Path = out_option("errors"),
) -> None:
    """Share of each error type of questions and options, and of each adaptation verdict (Putri et al.'s Tables 2–9).

    Several people's labels of one item: the most frequent label counts, a tie goes to whoever judged first.
    """
    chosen: Source = source  # type: ignore[assignment]  # checked by error_tables
    result = error_tables(run or [], labels or [], source=chosen, store_url=run_store)
    print_errors(result)
    written = write_outputs(out_dir, "errors", result.to_json(), result.rows(), _figure(result))
    err.print(f"wrote {', '.join(str(p) for p in written)}", markup=False)


def print_errors(result: ErrorsResult) -> None:
    """One table per target: a row per label, a column per (dataset, lang)."""
    for target in TARGETS:
        columns = [c for c in result.columns if c.target == target]
        if not columns:
            continue
        table = Table(title=TARGET_TITLES[target])
        table.add_column("label", no_wrap=True)
        for column in columns:
            table.add_column(f"{column.dataset} {column.lang} (n={column.total})", justify="right")
        labels = _labels_of(target, columns)
        for label in labels:
            cells = [f"{c.counts[label]} ({percent(c.share(label))})" if label in c.counts else "" for c in columns]
            table.add_row(label, *cells)
        if target == "adapt":
            table.add_row("(correct)", *[percent(c.correct_share) for c in columns])
        out.print(table)


def _labels_of(target: str, columns: list[Column]) -> list[str]:
    order = (CORRECT, *TARGETS[target])
    found = {label for column in columns for label in column.counts}
    return [label for label in order if label in found]


def _figure(result: ErrorsResult) -> Any:
    targets = [t for t in TARGETS if any(c.target == t for c in result.columns)]

    def draw(fig: Any) -> None:
        fig.set_size_inches(8, 1.2 + 2.2 * len(targets))
        axes = fig.subplots(len(targets), 1, squeeze=False)[:, 0]
        for ax, target in zip(axes, targets, strict=True):
            columns = [c for c in result.columns if c.target == target]
            names = [f"{c.dataset} {c.lang}" for c in columns]
            labels = _labels_of(target, columns)
            left = [0.0] * len(columns)
            for label in labels:
                widths = [100 * (c.share(label) or 0.0) if label in c.counts else 0.0 for c in columns]
                ax.barh(names, widths, left=left, label=label)
                left = [a + b for a, b in zip(left, widths, strict=True)]
            ax.set_xlim(0, 100)
            ax.set_title(TARGET_TITLES[target], fontsize=10)
            ax.legend(fontsize=9, loc="upper left", bbox_to_anchor=(1.01, 1.0))
        axes[-1].set_xlabel("% of items")

    return draw
