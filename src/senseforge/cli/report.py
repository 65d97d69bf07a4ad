"""``senseforge report``: one page over runs, evaluations, a transfer study and analyses, with its figures as SVG
and PDF beside it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from senseforge.cli._common import out

if TYPE_CHECKING:
    from senseforge.data.schema import Judgement


def run_judgements(run_dir: Path) -> list[tuple[Judgement, str]] | None:
    """The judgements of a run's store with their source, or ``None`` when the store cannot be opened here (a run
    whose store is on a server not given, or a folder without one)."""
    from senseforge.errors import ConfigError
    from senseforge.pipelines.rundir import DEFAULT_RUN_STORE, store_url_of
    from senseforge.pipelines.runstore import RunStore

    try:
        url = store_url_of(run_dir, None)
    except ConfigError:
        return None
    if url.startswith("sqlite") and not (run_dir / DEFAULT_RUN_STORE).is_file():
        return None
    store = RunStore(url)
    try:
        return [(stored.judgement, stored.source) for stored in store.every_judgement()]
    finally:
        store.close()


def write_page(
    page: Path,
    runs: Sequence[Path],
    *,
    evals: Sequence[Path] = (),
    transfer: Path | None = None,
    analyses: Sequence[Path] = (),
) -> Path:
    """The report over ``runs`` (with their stores' judgements) and the rest, written to ``page``."""
    from senseforge.evaluate.html_report import write_report

    judgements = {run: found for run in runs if (found := run_judgements(run)) is not None}
    return write_report(page, runs, evals=evals, transfer=transfer, analyses=analyses, judgements=judgements)


def report(
    folders: list[Path] = typer.Argument(
        None, help="Run directories (build's --out); an evaluation folder given here is read as --eval."
    ),
    evals: list[Path] | None = typer.Option(
        None,
        "--eval",
        help="Evaluation results (results.json or a folder of them), each filed under the run it evaluated.",
    ),
    transfer: Path | None = typer.Option(None, "--transfer", help="A senseforge transfer study folder."),
    analyses: list[Path] | None = typer.Option(None, "--analysis", help="A senseforge analyze output folder."),
    out_file: Path | None = typer.Option(
        None, "--out", help="The page (default: <first run>/report.html); its figures go to <page>_figures/."
    ),
) -> None:
    """Write one HTML page with the papers' figures (each also as SVG and PDF) and their numbers."""
    from senseforge.errors import ConfigError
    from senseforge.evaluate.html_report import sort_inputs

    runs, more_evals, notes = sort_inputs(list(folders or []))
    for line in notes:
        out.print(line)
    evals = [*more_evals, *(evals or [])]
    missing = [str(path) for path in [*evals, *(analyses or [])] if not path.exists()]
    if missing:
        raise ConfigError(f"no such file or folder: {', '.join(missing)}")
    if not runs and not evals and transfer is None and not analyses:
        raise ConfigError("give a run directory, --eval results, --transfer or --analysis")
    target = out_file or ((runs[0] / "report.html") if runs else Path("report.html"))
    written = write_page(target, runs, evals=evals, transfer=transfer, analyses=list(analyses or []))
    out.print(f"wrote {written} (figures in {written.with_name(written.stem + '_figures')})")
