"""``senseforge registry``: the public benchmarks new items are checked against, kept as fingerprints only
(see :mod:`senseforge.registry.store`)."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.table import Table

from senseforge.cli._common import err, out

app = typer.Typer(
    help="Public benchmarks that new items are checked against (hashes, MinHash, embeddings; never the text).",
    no_args_is_help=True,
)

RegistryOption = typer.Option(
    None, "--registry", help="Registry folder (default: $SENSEFORGE_REGISTRY, else $SENSEFORGE_HOME/registry)."
)


@app.command("add")
def add(
    data: Path = typer.Argument(..., help="A dataset file `eval run` reads, or a folder of them (read recursively)."),
    name: str = typer.Option(..., "--name", help="The entry's name, e.g. commonsenseqa-dev."),
    lang: str | None = typer.Option(None, "--lang", help="BCP-47 tag of the items, when the format does not say."),
    fmt: str | None = typer.Option(None, "--format", help="The dataset format (default: detected per file)."),
    licence: str | None = typer.Option(None, "--licence", "--license", help="Its licence, e.g. 'CC BY 4.0'."),
    embeddings: bool = typer.Option(
        True, "--embeddings/--no-embeddings", help="Also keep e5 embeddings (for the cross-lingual check)."
    ),
    replace: bool = typer.Option(False, "--replace", help="Replace an entry of the same name."),
    registry: Path | None = RegistryOption,
) -> None:
    """Register a benchmark: its items' fingerprints and source ids are kept, its text is not."""
    from senseforge.registry.store import Registry

    store = Registry.open(registry)
    with err.status(f"fingerprinting {data} …", spinner="dots"):
        entry = store.add(data, name, fmt=fmt, lang=lang, licence=licence, embed=embeddings, replace=replace)
    err.print(
        f"registered {entry.name}: {entry.items:,} items ({', '.join(entry.langs) or 'language unknown'}; "
        f"{', '.join(entry.formats)}) in {store.folder}",
        markup=False,
    )
    said = store.last_languages
    if said is not None:
        parts = [f"{lang} {', '.join(f'{n:,} {how}' for how, n in per.items())}" for lang, per in said.counts.items()]
        err.print(f"item languages (and where they came from): {'; '.join(parts)}", markup=False)
        if said.note:
            err.print(f"note: {said.note}", markup=False)


@app.command("list")
def list_(
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    registry: Path | None = RegistryOption,
) -> None:
    """The registered benchmarks: name, items, languages, licence, source."""
    from senseforge.registry.store import Registry, describe

    store = Registry.open(registry)
    if as_json:
        payload = {
            "folder": str(store.folder),
            "hash": store.content_hash(),
            "entries": [describe(e) for e in store.entries],
        }
        out.print_json(json.dumps(payload))
        return
    if not store.entries:
        err.print(f"no benchmark registered in {store.folder}: add one with `senseforge registry add FILE --name NAME`")
        return
    table = Table(title=f"registry {store.folder}")
    for column in ("name", "items", "langs", "licence", "embeddings", "source"):
        table.add_column(column, justify="right" if column == "items" else "left")
    for e in store.entries:
        table.add_row(
            e.name, f"{e.items:,}", ",".join(e.langs), e.licence or "not given", e.embedding or "no", e.source
        )
    out.print(table)


@app.command("remove")
def remove(
    name: str = typer.Argument(..., help="The entry to remove."),
    registry: Path | None = RegistryOption,
) -> None:
    """Remove a registered benchmark and its fingerprints."""
    from senseforge.registry.store import Registry

    store = Registry.open(registry)
    entry = store.remove(name)
    err.print(f"removed {entry.name} ({entry.items:,} items) from {store.folder}", markup=False)
