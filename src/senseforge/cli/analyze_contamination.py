"""``senseforge analyze contamination``: a dataset checked against the contamination registry (see
:mod:`senseforge.analyze.contamination`)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from senseforge.analyze.output import percent, write_outputs
from senseforge.cli._common import err, out, out_option
from senseforge.cli.registry import RegistryOption


def contamination(
    data: str = typer.Argument(..., help="A run directory, a dataset file or folder, or a comma list."),
    registry: Path | None = RegistryOption,
    cross_lingual: bool = typer.Option(
        True, "--cross-lingual/--no-cross-lingual", help="Also look for translations (embeds every item)."
    ),
    lang: str | None = typer.Option(
        None,
        "--lang",
        help="BCP-47 tag of the items whose rows do not say theirs (else identified with the langid extra).",
    ),
    out_dir: Path = out_option("contamination"),
) -> None:
    """Copies of registered benchmarks (exact, re-cased, near, translated), repeats and cross-split leaks."""
    from senseforge.analyze.contamination import check_dataset
    from senseforge.registry.check import KINDS
    from senseforge.registry.store import Registry

    store = Registry.open(registry)
    with err.status(f"checking {data} against {len(store.entries)} registered benchmark(s) …", spinner="dots"):
        report = check_dataset(data, store, cross=cross_lingual, lang=lang)
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
        + (
            f" ({report.cross_lingual_compared:,} item(s) compared with registered items in another language)"
            if report.cross_lingual_checked
            else f" (not checked: {report.cross_lingual_reason})"
        ),
        f"repeated within the dataset: {report.repeats:,}, of which across splits: {report.leaks:,}",
    ]
    if report.languages is not None:
        said = "; ".join(
            f"{lang} {', '.join(f'{n:,} {how}' for how, n in per.items())}"
            for lang, per in report.languages.counts.items()
        )
        lines.insert(0, f"item languages (and where they came from): {said}")
    for line in lines:
        out.print(line, markup=False)
    if report.languages is not None and report.languages.note:
        err.print(f"note: {report.languages.note}", markup=False)
    written = write_outputs(out_dir, "contamination", report.to_json(), report.rows())
    err.print(f"wrote {', '.join(str(p) for p in written)}", markup=False)
