"""``senseforge analyze language``: texts in another language than declared (see :mod:`senseforge.analyze.language`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from senseforge.analyze.inputs import read_side
from senseforge.analyze.language import DEFAULT_MIN_CHARS, LanguageResult, parse_fields, wrong_language
from senseforge.analyze.output import percent, write_outputs
from senseforge.cli._common import err, out, out_option

SHOWN = 20
"""Flagged texts printed (all are in the JSON)."""


def language(
    data: str = typer.Argument(..., help="A dataset file, a folder, a run directory, or a comma list of them."),
    fields: str = typer.Option("question,choices", "--fields", help="Fields to judge: question, choices or both."),
    min_chars: int = typer.Option(
        DEFAULT_MIN_CHARS,
        "--min-chars",
        help="Texts shorter than this are not judged (CLD3 is unreliable on one or two words); 0 judges all.",
    ),
    strict: bool = typer.Option(
        False, "--strict", help="Count CLD3's 'ms' (Malay) as another language for Indonesian items too."
    ),
    out_dir: Path = out_option("language"),
) -> None:
    """Share of questions and choices that CLD3 identifies as another language than the item declares."""
    chosen = parse_fields(fields)
    side = read_side(data)
    result = wrong_language(side.items, fields=chosen, min_chars=min_chars, strict=strict, spec=data)
    print_language(result)
    written = write_outputs(out_dir, "language", result.to_json(), result.rows(), _figure(result))
    err.print(f"wrote {', '.join(str(p) for p in written)}", markup=False)


def print_language(result: LanguageResult) -> None:
    """The tallies, then the first flagged texts."""
    table = Table(title=f"texts in another language than declared, in {result.spec} (≥{result.min_chars} chars)")
    for column in ("lang", "field", "texts", "too short", "undetermined", "judged", "other", "items", "other langs"):
        table.add_column(column, justify="left" if column in ("lang", "field", "other langs") else "right")
    for tally in result.tallies:
        others = result.others(tally)
        table.add_row(
            tally.lang,
            tally.field,
            str(tally.texts),
            str(tally.too_short),
            str(tally.undetermined),
            str(tally.judged),
            f"{tally.other} ({percent(tally.share)})",
            f"{tally.items_other}/{tally.items_judged} ({percent(tally.items_share)})",
            " ".join(f"{tag}:{n}" for tag, n in others[:5]),
        )
    out.print(table)
    if not result.flagged:
        return
    listing = Table(title=f"flagged texts (first {min(SHOWN, len(result.flagged))} of {len(result.flagged)})")
    for column in ("id", "field", "declared", "detected", "text"):
        listing.add_column(column)
    for flag in result.flagged[:SHOWN]:
        where = flag.field if flag.label is None else f"{flag.field}:{flag.label}"
        listing.add_row(flag.id, where, flag.declared, flag.detected, flag.text)
    out.print(listing)


def _figure(result: LanguageResult) -> Any:
    def draw(fig: Any) -> None:
        ax = fig.subplots()
        names = [f"{t.lang} {t.field}" for t in result.tallies]
        ax.bar(names, [100 * (t.share or 0.0) for t in result.tallies])
        for index, tally in enumerate(result.tallies):
            ax.annotate(f"n={tally.judged}", (index, 100 * (tally.share or 0.0)), ha="center", va="bottom")
        ax.set_ylabel("% of judged texts in another language")
        ax.set_title(f"Wrong language (CLD3, texts of ≥{result.min_chars} characters)")

    return draw
