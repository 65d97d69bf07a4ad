"""``senseforge report``: one self-contained HTML page over runs, evaluations and a transfer study."""

from __future__ import annotations

from pathlib import Path

import typer

from senseforge.cli._common import out


def report(
    runs: list[Path] = typer.Argument(None, help="Run directories (their funnel, cost, manifest and eval/ results)."),
    evals: list[Path] | None = typer.Option(None, "--eval", help="More eval result folders or results.json files."),
    transfer: Path | None = typer.Option(None, "--transfer", help="A senseforge transfer study folder."),
    out_file: Path | None = typer.Option(None, "--out", help="The page (default: <first run>/report.html)."),
) -> None:
    """Write one HTML page (figures embedded, no request) with the papers' figures and their numbers."""
    from senseforge.errors import ConfigError
    from senseforge.evaluate.html_report import write_report

    folders = list(runs or [])
    if not folders and not evals and transfer is None:
        raise ConfigError("give a run directory, --eval results or --transfer")
    target = out_file or ((folders[0] / "report.html") if folders else Path("report.html"))
    written = write_report(target, folders, evals=list(evals or []), transfer=transfer)
    out.print(f"wrote {written}")
