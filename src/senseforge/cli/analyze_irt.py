"""``senseforge analyze irt``: item difficulty and discrimination, suspicious keys, a small subset
(see :mod:`senseforge.analyze.irt`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from senseforge.analyze.irt.fit import Model
from senseforge.analyze.irt.result import IrtResult, analyze_irt
from senseforge.analyze.output import write_outputs
from senseforge.cli._common import err, out, out_option
from senseforge.errors import ConfigError


def irt(
    inputs: list[Path] = typer.Argument(
        ..., help="eval run output folders, a run's panel.jsonl, or JSONL rows {respondent, item, correct[, choice]}."
    ),
    model: str = typer.Option("2pl", "--model", help="2pl (difficulty and discrimination) or 1pl (one shared slope)."),
    select: int | None = typer.Option(
        None, "--select", min=1, help="Choose this many items that rank like the whole, checked leaving one out."
    ),
    seed: int = typer.Option(0, "--seed", help="Seed of the random subsets the chosen one is compared with."),
    out_dir: Path = out_option("irt"),
    queue: Path | None = typer.Option(
        None,
        "--queue",
        help="A run directory: queue each suspicious item there as a verify re-check (<item>@recheck) for people "
        "(a CRoW run's items are its examples' example_id).",
    ),
    run_store: str | None = typer.Option(
        None, "--run-store", help="With --queue: the run's store URL, when it is not the run folder's run.db."
    ),
) -> None:
    """Fit P(right) = sigmoid(a (theta - b)) per item and respondent; list items that look wrongly keyed."""
    if model not in ("1pl", "2pl"):
        raise ConfigError(f"--model: 1pl or 2pl, got {model!r}")
    chosen: Model = model  # type: ignore[assignment]  # checked above
    result = analyze_irt(inputs, chosen, select, seed)
    for warning in result.warnings:
        err.print(f"warning: {warning}", markup=False)
    print_irt(result)
    written = write_outputs(out_dir, "irt", result.to_json(), result.item_rows(), _figure(result))
    err.print(f"wrote {', '.join(str(p) for p in written)}", markup=False)
    if queue is not None:
        from senseforge.pipelines.recheck import queue_rechecks

        flagged = [item for item in result.responses.items if item in result.reasons]
        new = queue_rechecks(queue, flagged, store_url=run_store)
        err.print(f"queued {new} re-check(s) in {queue} ({len(flagged) - new} already queued)", markup=False)


def print_irt(result: IrtResult) -> None:
    """The suspicious items, then the subset's check."""
    rows = [r for r in result.item_rows() if r["suspicious"]]
    table = Table(title=f"suspicious items ({len(rows)} of {len(result.responses.items)})")
    for column in ("item", "difficulty", "discrimination", "reasons"):
        table.add_column(column)
    for row in rows:
        table.add_row(row["id"], f"{row['difficulty']}", f"{row['discrimination']}", "; ".join(row["reasons"]))
    out.print(table)
    if result.subset is not None:
        s = result.subset
        out.print(
            f"subset of {len(s.ids)}: leave-one-out accuracy error {s.loo_error:.4f}, rank correlation "
            f"{s.loo_rank_correlation:.3f}; random subsets (median): {s.random_loo_error:.4f} / "
            f"{s.random_rank_correlation:.3f} by accuracy, {s.random_loo_error_estimator:.4f} / "
            f"{s.random_rank_correlation_estimator:.3f} by the same estimator"
        )


def _figure(result: IrtResult) -> Any:
    f = result.fit

    def draw(fig: Any) -> None:
        ax_top, ax = fig.subplots(2, 1, sharex=True, height_ratios=[1, 2])
        ax_top.hist(f.ability, bins=20, color="tab:blue")
        ax_top.set_ylabel("respondents")
        ax_top.set_title("item map: abilities (top) and item difficulties (bottom)")
        ok = f.estimable & ~_flags(result)
        ax.scatter(f.difficulty[ok], f.discrimination[ok], s=12, label="items")
        bad = f.estimable & _flags(result)
        if bad.any():
            ax.scatter(f.difficulty[bad], f.discrimination[bad], s=24, marker="x", color="tab:red", label="suspicious")
        ax.axhline(0, color="grey", linewidth=0.8)
        ax.set_xlabel("ability / difficulty (logits)")
        ax.set_ylabel("discrimination")
        ax.legend(loc="best", fontsize=9)

    return draw


def _flags(result: IrtResult) -> Any:
    import numpy as np

    return np.array([item in result.reasons for item in result.responses.items])
