"""``senseforge analyze conflicts``: answer conflicts per annotator (see :mod:`senseforge.analyze.conflicts`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from senseforge.analyze.conflicts import POOLED, ConflictsResult, LangSummary, read_conflicts
from senseforge.analyze.output import percent, write_outputs
from senseforge.cli._common import err, out, out_option


def conflicts(
    data: str = typer.Argument(
        ..., help="Human_Gen-shaped data: a released file, a folder, a human-gen run directory, or a comma list."
    ),
    out_dir: Path = out_option("conflicts"),
) -> None:
    """Per annotator: answers that differ from the creator's, and created items that drew a differing answer."""
    result = read_conflicts(data)
    print_conflicts(result)
    written = write_outputs(out_dir, "conflicts", result.to_json(), result.rows(), _figure(result))
    err.print(f"wrote {', '.join(str(p) for p in written)}", markup=False)


def print_conflicts(result: ConflictsResult) -> None:
    """The table, then each language's rows and anomalies."""
    table = Table(title=f"answer conflicts in {result.spec}")
    columns = ("lang", "annotator", "answers", "≠ creator", "created", "drew a ≠ answer", "≠ answers on theirs")
    for column in columns:
        table.add_column(column, justify="left" if column in ("lang", "annotator") else "right")
    for entry in result.annotators:
        table.add_row(
            entry.lang,
            entry.annotator,
            str(entry.answers),
            f"{entry.differing} ({percent(entry.differing_share)})",
            str(entry.created),
            f"{entry.conflicted_created} ({percent(entry.conflicted_share)})",
            f"{entry.differing_on_created}/{entry.answers_on_created}",
        )
    out.print(table)
    for summary in result.langs:
        out.print(_summary_line(summary), markup=False)


def _summary_line(summary: LangSummary) -> str:
    line = (
        f"{summary.lang}: {summary.counted}/{summary.rows} rows counted, "
        f"{summary.items_with_conflict} with a differing answer; "
    )
    anomalies = summary.anomalies
    if not anomalies.total:
        return line + "no anomalies"
    parts = []
    for kind, n in sorted(anomalies.counts.items()):
        values = anomalies.values.get(kind)
        shown = f" ({', '.join(f'{v!r} {c}' for v, c in values.most_common(4))})" if values else ""
        parts.append(f"{kind} {n}{shown}")
    return line + f"{anomalies.total} anomalies: " + "; ".join(parts)


def _figure(result: ConflictsResult) -> Any:
    langs = [summary.lang for summary in result.langs]

    def draw(fig: Any) -> None:
        axes = fig.subplots(1, len(langs), squeeze=False)[0]
        series = (
            ("differing", "answers ≠ creator's"),
            ("conflicted_created", "created items that drew a ≠ answer"),
            ("differing_on_created", "≠ answers on their items"),
        )
        width = 0.8 / len(series)
        for ax, lang in zip(axes, langs, strict=True):
            entries = [e for e in result.annotators if e.lang == lang]
            names = [e.annotator for e in entries]
            for offset, (attr, label) in enumerate(series):
                xs = [i + (offset - (len(series) - 1) / 2) * width for i in range(len(names))]
                ax.bar(xs, [getattr(e, attr) for e in entries], width=width, label=label)
            ax.set_xticks(range(len(names)), names)
            ax.set_title(lang if lang != POOLED else "all languages")
            ax.set_ylabel("count")
        handles, names = axes[0].get_legend_handles_labels()
        fig.legend(handles, names, loc="outside lower center", ncols=len(series), fontsize=9)
        fig.suptitle("Answer conflicts per annotator")

    return draw
