"""``senseforge analyze lexical``: two datasets' unique tokens and their overlap (:mod:`senseforge.analyze.lexical`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from senseforge.analyze.inputs import read_side
from senseforge.analyze.lexical import PAPER_SOURCE, LexicalResult, lexical_sides
from senseforge.analyze.output import percent, write_outputs
from senseforge.analyze.tokens import DEFAULT_FIELDS, FIELDS, parse_fields
from senseforge.cli._common import err, out, out_option

SIDE_HELP = "A dataset file, a folder, a run directory, or a comma-separated list of them (pooled)."


def lexical(
    a: str = typer.Argument(..., metavar="A", help=f"The first side. {SIDE_HELP}"),
    b: str = typer.Argument(..., metavar="B", help=f"The second side. {SIDE_HELP}"),
    fields: str = typer.Option(
        ",".join(DEFAULT_FIELDS),
        "--fields",
        help=f"The texts that count, comma-separated, from: {', '.join(FIELDS)} (concept = question_concept).",
    ),
    paper: str = typer.Option(
        "auto",
        "--paper",
        help="Putri et al.'s §5.2 figures beside ours: auto (when one side's ids are all orig_h_ — their Human_Gen — "
        "and the other's all orig_m_ — LLM_Gen), putri (always), none.",
    ),
    out_dir: Path = out_option("lexical"),
) -> None:
    """Unique unigrams and bigrams of A and B, and how much of each side's own vocabulary the other also uses.

    Overlap(A) = shared unique ÷ A's unique, overlap(B) = shared unique ÷ B's unique.

    Tokens: NFKC, case-folded runs of letters, digits and marks (anak-anak stays one token), no punctuation.

    Japanese is split by fugashi and Chinese by jieba (both in the kb extra).

    Bigrams never span two texts: the question and each choice are separate texts.

    Putri et al.'s Human_Gen vs LLM_Gen (each side a comma list of its ind and sun test files):

    senseforge analyze lexical HG/ind/filtered_test.json,HG/sun/filtered_test.json LG/ind/…,LG/sun/…
    """
    chosen = parse_fields(fields)
    result = lexical_sides(read_side(a), read_side(b), fields=chosen, paper=paper)
    out.print(f"A: {result.a.name} ({result.a.items} items, {'+'.join(result.a.langs)})", markup=False)
    out.print(f"B: {result.b.name} ({result.b.items} items, {'+'.join(result.b.langs)})", markup=False)
    out.print(_table(result))
    if result.paper:
        out.print(f"paper: {PAPER_SOURCE}; their tokenizer is not stated", markup=False)
    for side, only in (("A", result.only_a), ("B", result.only_b)):
        if only:
            words = ", ".join(f"{token} ({n})" for token, n in only[:10])
            out.print(f"only in {side}, most frequent: {words}", markup=False)
    written = write_outputs(out_dir, "lexical", result.to_json(), result.rows(), _figure(result))
    err.print(f"wrote {', '.join(str(p) for p in written)}", markup=False)


def _cell(value: Any, unit: str) -> str:
    if value is None:
        return "" if unit == "count" else "n/a"
    return percent(value) if unit == "share" else f"{value:,}"


def _table(result: LexicalResult) -> Table:
    table = Table(
        title=f"lexical overlap of {', '.join(result.fields)}",
        caption="overlap = shared unique ÷ own unique",
    )
    table.add_column("measure")
    table.add_column("A", justify="right")
    table.add_column("B", justify="right")
    if result.paper:
        table.add_column(f"paper: {result.paper[0].label}", justify="right", style="dim")
        table.add_column(f"paper: {result.paper[1].label}", justify="right", style="dim")
    for row in result.rows():
        unit = row["unit"]
        cells = [row["measure"], _cell(row["a"], unit), _cell(row["b"], unit)]
        if result.paper:
            cells += [_blank(row["paper_a"], unit), _blank(row["paper_b"], unit)]
        table.add_row(*cells)
    return table


def _blank(value: Any, unit: str) -> str:
    return "" if value is None else _cell(value, unit)


def _figure(result: LexicalResult) -> Any:
    def draw(fig: Any) -> None:
        ax = fig.subplots()
        groups = ("unigram", "bigram")
        overlaps = (result.unigram, result.bigram)
        # (label, values, colour, paper?): the paper's bars take their side's colour, hatched
        bars: list[tuple[str, list[float], str, bool]] = [
            (f"A: {result.a.name}", [100 * (o.share_a or 0) for o in overlaps], "tab:blue", False),
            (f"B: {result.b.name}", [100 * (o.share_b or 0) for o in overlaps], "tab:orange", False),
        ]
        if result.paper:
            for side, colour in zip(result.paper, ("tab:blue", "tab:orange"), strict=True):
                values = [100 * side.unigram_overlap, 100 * side.bigram_overlap]
                bars.append((f"paper: {side.label}", values, colour, True))
        width = 0.8 / len(bars)
        for i, (label, values, colour, is_paper) in enumerate(bars):
            xs = [g + (i - (len(bars) - 1) / 2) * width for g in range(len(groups))]
            drawn = ax.bar(
                xs,
                values,
                width,
                label=label,
                color=colour,
                alpha=0.45 if is_paper else 1.0,
                hatch="//" if is_paper else None,
                edgecolor=colour,
            )
            ax.bar_label(drawn, fmt="%.1f", fontsize=9)
        top = max((v for _, values, _, _ in bars for v in values), default=0.0)
        ax.set_ylim(0, max(10.0, top * 1.35))
        ax.set_xticks(range(len(groups)), [f"{g} overlap" for g in groups])
        ax.set_ylabel("shared unique ÷ own unique (%)")
        ax.set_title("Lexical overlap: the share of each side's unique n-grams the other uses")
        fig.legend(*ax.get_legend_handles_labels(), loc="outside lower center", ncols=2, fontsize=9, frameon=False)

    return draw
