"""``senseforge kb``: import ConceptNet, look at the store, extract question sets."""

from __future__ import annotations

import time
from pathlib import Path

import typer
from rich.table import Table

from senseforge.cli._common import err, on_interrupt, out

app = typer.Typer(help="Knowledge layer: ConceptNet dumps and mCSQA question sets.", no_args_is_help=True)

KbStoreOption = typer.Option(
    None, "--store", envvar="SENSEFORGE_KB", help="Knowledge store folder (default: $SENSEFORGE_HOME/kb)."
)


@app.command("import")
def import_(
    dump: str = typer.Argument(
        ..., help="conceptnet-assertions-5.x.csv[.gz], or 'demo' (our demo KB) or 'sample' (real ConceptNet sample)."
    ),
    langs: list[str] | None = typer.Option(
        None,
        "--lang",
        "--langs",
        "-l",
        help="ConceptNet language codes to keep, e.g. -l en -l ja or -l en,ja (default: all).",
    ),
    relations: list[str] | None = typer.Option(None, "--relation", "-r", help="Relations to keep (default: all)."),
    store: Path | None = KbStoreOption,
    strict: bool = typer.Option(False, "--strict", help="Stop at the first malformed line instead of skipping it."),
    allow_empty: bool = typer.Option(
        False, "--allow-empty", help="Replace the store even when no edge is kept (refused by default)."
    ),
) -> None:
    """Scan a dump once into the knowledge store (replacing what was there, unless no edge is kept)."""
    from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn

    from senseforge.kb.conceptnet import import_dump

    on_interrupt("the store was left as it was")
    started = time.perf_counter()
    with Progress(
        TextColumn(f"importing {dump}"),
        BarColumn(),
        TaskProgressColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=not err.is_terminal,
    ) as bar:
        task = bar.add_task("import", total=100)
        report = import_dump(
            dump,
            store,
            langs=_split(langs),
            relations=_split(relations),
            strict=strict,
            allow_empty=allow_empty,
            progress=lambda share: bar.update(task, completed=share),
        )
    err.print(
        f"{report.summary()} · {time.perf_counter() - started:.1f}s → {report.store}", markup=False, soft_wrap=True
    )
    for bad in report.examples:
        err.print(f"  {report.source}:{bad.line}: {bad.reason}", markup=False)
    if report.malformed > len(report.examples):
        err.print(f"  … and {report.malformed - len(report.examples):,} more")
    for lang in report.missing_languages():
        hint = " (ConceptNet 5.7 files Indonesian under 'ms': import -l ms)" if lang == "id" else ""
        err.print(f"[yellow]warning[/]: no edges for language '{lang}' in this dump{hint}")


@app.command("stats")
def stats_(
    store: Path | None = KbStoreOption,
    top: int = typer.Option(15, "--top", help="How many languages and relations to list."),
) -> None:
    """Edges per language and per relation in the store, and what the import skipped."""
    from senseforge.kb.conceptnet import stats

    info = stats(store)
    report = info["report"]
    out.print(f"store: {report.store}\nsource: {report.source}")
    if report.lines_read:
        out.print(report.summary(), markup=False)
    else:  # a store imported before the counts by reason
        out.print(f"edges: {report.rows_kept:,} · malformed lines skipped: {report.malformed:,}")
    for title, rows in (("language", info["languages"]), ("relation", info["relations"])):
        table = Table(title=f"edges by {title}")
        table.add_column(title)
        table.add_column("edges", justify="right")
        for name, count in rows[:top]:
            table.add_row(name, f"{count:,}")
        if len(rows) > top:
            table.add_row(f"… {len(rows) - top} more", "")
        out.print(table)


@app.command("question-sets")
def question_sets(
    lang: str = typer.Option(
        ..., "--lang", help="BCP-47 tag of the question sets, e.g. en, ja, id; several (en,ja,zh) in one pass."
    ),
    n: int | None = typer.Option(None, "--n", min=1, help="How many to sample (paper: 6000; default: all)."),
    seed: int = typer.Option(0, "--seed", help="Seed for shuffling targets and sampling."),
    out_file: Path = typer.Option(
        ...,
        "--out",
        help="JSONL file to write (atomically); for several languages a folder (one LANG.jsonl each) or a name "
        "with {lang} in it.",
    ),
    source_lang: str | None = typer.Option(
        None,
        "--source-lang",
        help="Store language code to read, e.g. ms for Indonesian in ConceptNet 5.7; for several languages "
        "TAG=CODE pairs, e.g. id=ms.",
    ),
    relations: list[str] | None = typer.Option(
        None, "--relation", "-r", help="Relations that count (default: the 22 documented in kb.question_sets)."
    ),
    store: Path | None = KbStoreOption,
) -> None:
    """Extract mCSQA question sets for one language or several (one scan of the store), with a per-rule funnel."""
    from senseforge.data.io import write_jsonl
    from senseforge.kb.question_sets import DEFAULT_RELATIONS, extract_many

    langs = _split([lang]) or []
    codes = _source_langs(source_lang, langs)
    relations_used = _split(relations) or DEFAULT_RELATIONS
    with err.status(f"extracting question sets for {', '.join(langs)} …", spinner="dots"):
        found = extract_many(store, langs, n, seed, relations=relations_used, source_langs=codes)
    for tag, (sets, funnel) in found.items():
        path = _out_for(out_file, tag, several=len(langs) > 1)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_jsonl(path, sets)
        table = Table(title=f"question sets for {funnel.lang} (store code {funnel.source_lang})")
        table.add_column("step")
        table.add_column("count", justify="right")
        for step, count in funnel.rows():
            table.add_row(step.replace("_", " "), f"{count:,}")
        err.print(table)
        if n is not None and len(sets) < n:
            err.print(
                f"asked for {n:,} question sets; the store holds only {funnel.question_sets:,} for {funnel.lang}",
                soft_wrap=True,
            )
        err.print(f"wrote {len(sets):,} question sets to {path}")


def _source_langs(text: str | None, langs: list[str]) -> dict[str, str]:
    """``--source-lang``: one code for one language, or TAG=CODE pairs."""
    if not text:
        return {}
    pairs: dict[str, str] = {}
    for part in _split([text]) or []:
        tag, sep, code = part.partition("=")
        if not sep:
            if len(langs) != 1:
                raise typer.BadParameter(f"{part!r}: with several languages write TAG=CODE", param_hint="--source-lang")
            tag, code = langs[0], part
        if not tag.strip() or not code.strip():
            raise typer.BadParameter(f"{part!r}: write TAG=CODE", param_hint="--source-lang")
        pairs[tag.strip()] = code.strip()
    return pairs


def _out_for(out: Path, tag: str, *, several: bool) -> Path:
    """Where a language's question sets go: ``--out`` itself for one language; for several, ``--out`` with its
    ``{lang}`` filled in, or ``LANG.jsonl`` in the folder ``--out``."""
    if not several:
        return out
    if "{lang}" in str(out):
        return Path(str(out).replace("{lang}", tag))
    return out / f"{tag}.jsonl"


def _split(values: list[str] | None) -> list[str] | None:
    """Accept both ``-l en -l ja`` and ``-l en,ja``."""
    if not values:
        return None
    return [part.strip() for value in values for part in value.split(",") if part.strip()]
