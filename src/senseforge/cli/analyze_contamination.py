"""``senseforge analyze contamination``: a dataset checked against the contamination registry (see
:mod:`senseforge.analyze.contamination`)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from senseforge.analyze.output import percent, write_outputs
from senseforge.cli._common import err, out
from senseforge.cli.analyze import app, out_option
from senseforge.cli.registry import RegistryOption


@app.command("contamination")
def contamination(
    data: str = typer.Argument(..., help="A run directory, a dataset file or folder, or a comma list."),
    registry: Path | None = RegistryOption,
    cross_lingual: bool = typer.Option(
        True, "--cross-lingual/--no-cross-lingual", help="Also look for translations (embeds every item)."
    ),
    out_dir: Path = out_option("contamination"),
) -> None:
    """Copies of registered benchmarks (exact, re-cased, near, translated), repeats and cross-split leaks."""
    from senseforge.analyze.contamination import check_dataset
    from senseforge.registry.check import KINDS
    from senseforge.registry.store import Registry

    store = Registry.open(registry)
    with err.status(f"checking {data} against {len(store.entries)} registered benchmark(s) …", spinner="dots"):
        report = check_dataset(data, store, cross=cross_lingual)
    total = len(report.items)
    table = Table(title=f"{data} against the registry ({total:,} items)")
    table.add_column("entry")
    table.add_column("licence")
    for kind in KINDS:
        table.add_column(kind.replace("_", "-"), justify="right")
    licences = {e["name"]: e["licence"] for e in report.checked_against}
    for entry, counts in report.summary().items():
        table.add_row(entry, licences.get(entry) or "not given", *(str(counts[kind]) for kind in KINDS))
    out.print(table)
    lines = [
        f"copies (a gate rejects): {report.copies:,} ({percent(report.copies / total) if total else 'n/a'})",
        f"cross-lingual flags only: {report.flagged:,}"
        + ("" if report.cross_lingual_checked else " (not checked: an entry has no embeddings, or --no-cross-lingual)"),
        f"repeated within the dataset: {report.repeats:,}, of which across splits: {report.leaks:,}",
    ]
    for line in lines:
        out.print(line)
    written = write_outputs(out_dir, "contamination", report.to_json(), report.rows())
    err.print(f"wrote {', '.join(str(p) for p in written)}", markup=False)
