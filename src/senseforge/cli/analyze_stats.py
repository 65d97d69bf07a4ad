"""``senseforge analyze stats``: mCSQA's statistics of a built dataset (see :mod:`senseforge.analyze.stats`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from senseforge.analyze.output import percent, write_outputs
from senseforge.analyze.stats import Stats, dataset_stats, read_split_items
from senseforge.cli._common import err, out, out_option


def stats(
    data: str = typer.Argument(..., help="A run directory (its items/), a dataset file or folder, or a comma list."),
    out_dir: Path = out_option("stats"),
) -> None:
    """Items, Easy/Hard, refined share, lengths and answer positions per language and split (mCSQA §3.4)."""
    result = dataset_stats(read_split_items(data))
    table = Table(title=f"statistics of {data}")
    for column in ("lang", "split", "items", "easy", "hard", "easy/hard", "refined", "question chars", "answers"):
        table.add_column(column, justify="left" if column in ("lang", "split", "answers") else "right")
    for g in result.groups:
        ratio = "n/a" if g.easy_hard_ratio is None else f"{g.easy_hard_ratio:.2f}"
        refined = "n/a" if g.refined is None else f"{g.refined} ({percent(g.refined / g.items)})"
        length = (
            "n/a" if g.question_chars is None else f"{g.question_chars.mean:.1f} (median {g.question_chars.median:g})"
        )
        spread = " ".join(f"{k}:{v}" for k, v in g.answer_positions.items())
        if g.p_value is not None:
            spread += f" (χ² p={g.p_value:.3f})"
        table.add_row(g.lang, g.split, str(g.items), str(g.easy), str(g.hard), ratio, refined, length, spread)
    out.print(table)
    written = write_outputs(out_dir, "stats", result.to_json(), result.rows(), _figure(result))
    err.print(f"wrote {', '.join(str(p) for p in written)}", markup=False)


def _figure(result: Stats) -> Any:
    def draw(fig: Any) -> None:
        ax = fig.subplots()
        names = [f"{g.lang}/{g.split}" for g in result.groups]
        easy = [g.easy for g in result.groups]
        hard = [g.hard for g in result.groups]
        ax.bar(names, easy, label="Easy")
        ax.bar(names, hard, bottom=easy, label="Hard")
        ax.set_ylabel("items")
        ax.set_title("Easy and Hard items per language and split")
        fig.legend(*ax.get_legend_handles_labels(), loc="outside lower center", ncols=2, frameon=False)

    return draw
