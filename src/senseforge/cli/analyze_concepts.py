"""``senseforge analyze concepts``: the most frequent question concepts and how skewed they are (see
:mod:`senseforge.analyze.concepts`)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import typer
from rich import box
from rich.markup import escape
from rich.table import Table

from senseforge.analyze.concepts import SKEW_TOP, ConceptGroup, ConceptsResult, concepts_of_sides
from senseforge.analyze.inputs import read_side
from senseforge.analyze.output import percent, write_outputs
from senseforge.cli._common import err, out, out_option

FIGURE_BARS = 20
"""The figure shows at most this many concepts per group."""


def concepts(
    data: list[str] = typer.Argument(
        ...,
        metavar="DATA",
        help="One or more datasets, each a file, a folder, a run directory or a comma-separated list (pooled).",
    ),
    top: int = typer.Option(20, "--top", min=1, help="How many of the most frequent concepts to list per group."),
    out_dir: Path = out_option("concepts"),
) -> None:
    """The most frequent question concepts per dataset and language, how skewed they are, and the category mix.

    Skew: the share of items the most frequent concept, and the ten most frequent, cover; distinct concepts per item.

    Spellings that differ only in case, width or spacing (Komodo, komodo) count as one concept.

    Putri et al.'s Figure 2 (the adapted concepts): senseforge analyze concepts id-csqa/llm_adapt
    """
    result = concepts_of_sides([read_side(spec) for spec in data], top=top)
    out.print(_summary(result))
    for group in result.groups:
        if group.top:
            out.print(_top_table(group, result.top))
        if group.categories:
            out.print(_category_table(group))
    written = write_outputs(out_dir, "concepts", result.to_json(), result.rows(), _figure(result))
    err.print(f"wrote {', '.join(str(p) for p in written)}", markup=False)


def _share(value: float | None) -> str:
    return percent(value)


def _summary(result: ConceptsResult) -> Table:
    table = Table(
        title="question concepts: how skewed",
        caption=f"concepts = distinct ones; per item = concepts ÷ items with one; top-1 / top-{SKEW_TOP} = share of "
        f"the items with a concept that the most frequent / the {SKEW_TOP} most frequent cover",
        box=box.SIMPLE_HEAD,
    )
    for column in ("dataset", "lang", "items", "concepts", "per item", "top concept", "top-1", f"top-{SKEW_TOP}"):
        table.add_column(column, justify="left" if column in ("dataset", "lang", "top concept") else "right")
    for g in result.groups:
        per_item = "n/a" if g.distinct_per_item is None else f"{g.distinct_per_item:.2f}"
        items = str(g.items) if g.with_concept == g.items else f"{g.items} ({g.items - g.with_concept} without)"
        table.add_row(
            escape(g.dataset),
            g.lang,
            items,
            str(g.distinct),
            per_item,
            escape(g.top[0].name) if g.top else "n/a",
            _share(g.top1_share),
            _share(g.top10_share),
        )
    return table


def _top_table(group: ConceptGroup, top: int) -> Table:
    table = Table(title=f"top {min(top, len(group.top))} concepts: {escape(group.dataset)} ({group.lang})")
    for column in ("#", "concept", "items", "share"):
        table.add_column(column, justify="right" if column != "concept" else "left")
    for rank, c in enumerate(group.top, 1):
        name = c.name if not c.forms else f"{c.name} (also {', '.join(f for f in c.forms if f != c.name)})"
        table.add_row(str(rank), escape(name), str(c.count), _share(c.share))
    return table


def _category_table(group: ConceptGroup) -> Table:
    table = Table(title=f"categories: {escape(group.dataset)} ({group.lang})")
    for column in ("category", "items", "share"):
        table.add_column(column, justify="left" if column == "category" else "right")
    for c in group.categories:
        table.add_row(escape(c.name), str(c.count), _share(c.share))
    if group.with_category < group.items:
        table.add_row("(none)", str(group.items - group.with_category), _share(1 - group.with_category / group.items))
    return table


def _figure(result: ConceptsResult) -> Any:
    groups = [g for g in result.groups if g.top]

    def draw(fig: Any) -> None:
        if not groups:
            ax = fig.subplots()
            ax.axis("off")
            ax.text(0.5, 0.5, "no item has a question_concept", ha="center", va="center")
            return
        cols = min(len(groups), 3)
        rows = math.ceil(len(groups) / cols)
        bars = min(FIGURE_BARS, max(len(g.top) for g in groups))
        fig.set_size_inches(4.6 * cols, 0.9 + rows * (0.6 + 0.22 * bars))
        axes = fig.subplots(rows, cols, squeeze=False)
        for ax in axes.flat[len(groups) :]:
            ax.axis("off")
        for ax, g in zip(axes.flat, groups, strict=False):
            shown = g.top[:FIGURE_BARS]
            drawn = ax.barh(range(len(shown)), [100 * c.share for c in shown], color="tab:blue")
            ax.bar_label(drawn, labels=[str(c.count) for c in shown], fontsize=9, padding=2)
            ax.set_yticks(range(len(shown)), [c.name for c in shown], fontsize=9)
            ax.invert_yaxis()
            ax.set_xlabel("share of items with a concept (%)", fontsize=9)
            ax.tick_params(axis="x", labelsize=9)
            ax.set_title(f"{g.dataset} ({g.lang})\ntop-{SKEW_TOP}: {_share(g.top10_share)}", fontsize=10)
        fig.suptitle("Most frequent question concepts", fontsize=11)

    return draw
