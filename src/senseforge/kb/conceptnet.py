"""ConceptNet assertion dumps → a local columnar store, with DuckDB.

The official dumps (``conceptnet-assertions-5.x.csv.gz``) have five tab-separated
columns: assertion URI, relation URI, start URI, end URI and a JSON object (``weight``,
``dataset``, ``sources`` …). Concept URIs look like ``/c/en/revolving_door/n/wn/artifact``:
a language code, the text with underscores for spaces, then optionally a part of speech
and a sense. :func:`import_dump` scans a dump once and keeps the edges whose two ends are
concepts of the same language (question sets are monolingual), split into fields, in one
Parquet file; an interrupted import leaves the previous store untouched.

Language codes here are ConceptNet's (``en``, ``ja``, ``ms`` …). Note that ConceptNet 5.7
files Indonesian and Malay together under ``ms``; ``id`` exists only from 5.8.

Malformed lines — a wrong number of columns, bytes that are not UTF-8, an info column
that is not JSON — are skipped and counted, and the first few are reported with their
line numbers; ``strict=True`` makes the first one fatal. The lines left out on purpose are
counted too, each by its reason (:data:`LEFT_OUT`). An import that keeps no edge refuses to
replace the store unless asked to (``allow_empty``): a file in the wrong format never
empties a good store.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from senseforge.errors import ConfigError, DataValidationError, MissingDependencyError, StoreError
from senseforge.store.db import senseforge_home, sha256_file

if TYPE_CHECKING:
    import duckdb

POINTER_FILE = "kb.json"
BUNDLED_DUMPS = {
    "demo": "demo_kb.csv",
    "sample": "conceptnet_sample.csv",
}
"""Dumps shipped with the package: ``demo`` (written by us, not ConceptNet) and
``sample`` (764 real ConceptNet assertions, CC BY-SA 4.0)."""

_MAX_REPORTED = 5
_KEPT = "kept"
_MALFORMED = "malformed"
_TALLY = "left_out_"
LEFT_OUT: dict[str, str] = {
    "non_concept": "non-concept nodes",
    "cross_lingual": "cross-lingual",
    "other_language": "other languages",
    "other_relation": "other relations",
}
"""Why a well-formed line is left out, in the order the reasons are checked, with how a person reads them."""


@dataclass
class Malformed:
    """One skipped line."""

    line: int
    reason: str


@dataclass
class ImportReport:
    """What an import read, kept and skipped."""

    source: str
    store: str
    lines_read: int = 0
    """Lines of the dump read (kept, left out and malformed)."""
    rows_kept: int = 0
    left_out: dict[str, int] = field(default_factory=dict)
    """Well-formed lines not kept, by reason (keys of :data:`LEFT_OUT`; reasons with none are absent)."""
    by_language: dict[str, int] = field(default_factory=dict)
    malformed: int = 0
    examples: list[Malformed] = field(default_factory=list)
    langs: list[str] | None = None
    relations: list[str] | None = None
    seconds: float = 0.0
    imported_at: float = 0.0

    def summary(self) -> str:
        """``read N lines · kept K edges · left out: cross-lingual X, … · malformed M``."""
        reasons = ", ".join(f"{LEFT_OUT[key]} {count:,}" for key, count in self.left_out.items()) or "none"
        return (
            f"read {self.lines_read:,} lines · kept {self.rows_kept:,} edges · left out: {reasons} "
            f"· malformed {self.malformed:,}"
        )

    def missing_languages(self) -> list[str]:
        """Languages asked for at import that have no edges in the dump."""
        return [lang for lang in self.langs or [] if not self.by_language.get(lang)]

    def to_json(self) -> str:
        """The report as JSON (stored in the store's ``kb.json``)."""
        return json.dumps(asdict(self), ensure_ascii=False, sort_keys=True)


def connect(memory_limit: str = "3GB", temp_dir: Path | None = None) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection with bounded memory (spilling to ``temp_dir``)."""
    try:
        import duckdb
    except ImportError as exc:
        raise MissingDependencyError("the knowledge layer needs duckdb: pip install 'senseforge[kb]'") from exc
    con = duckdb.connect()
    con.execute(f"SET memory_limit='{memory_limit}'")
    con.execute("SET preserve_insertion_order=false")
    if temp_dir is not None:
        temp_dir.mkdir(parents=True, exist_ok=True)
        con.execute(f"SET temp_directory='{_sql_str(str(temp_dir))}'")
    return con


def default_kb_dir() -> Path:
    """Where the knowledge store lives by default: ``$SENSEFORGE_HOME/kb``."""
    return senseforge_home() / "kb"


def bundled_dump(name: str) -> Path:
    """Path of a dump shipped with senseforge (``demo`` or ``sample``)."""
    return Path(str(resources.files("senseforge.kb").joinpath("data", BUNDLED_DUMPS[name])))


def resolve_dump(dump: str | os.PathLike[str]) -> Path:
    """A dump path, or the name of a bundled dump."""
    if str(dump) in BUNDLED_DUMPS:
        return bundled_dump(str(dump))
    path = Path(dump).expanduser()
    if not path.is_file():
        names = " or ".join(BUNDLED_DUMPS)
        raise ConfigError(f"dump not found: {dump} (give a conceptnet-assertions CSV[.gz] file, or {names})")
    return path


def _sql_str(text: str) -> str:
    return text.replace("'", "''")


def _sql_list(values: Sequence[str]) -> str:
    return "[" + ", ".join(f"'{_sql_str(v)}'" for v in values) + "]"


def _read_csv(path: Path) -> str:
    return (
        f"read_csv('{_sql_str(str(path))}', delim='\\t', header=false, quote='', escape='', comment='', "
        "columns={'uri': 'VARCHAR', 'rel': 'VARCHAR', 'start': 'VARCHAR', 'end': 'VARCHAR', 'info': 'VARCHAR'}, "
        "auto_detect=false, strict_mode=true, null_padding=false, store_rejects=true, "
        "max_line_size=8388608, compression='auto', parallel=true)"
    )


def _concept_fields(column: str, prefix: str) -> list[tuple[str, str]]:
    """SQL expressions and names of lang, text, pos and sense from a concept URI column."""
    return [
        (f"split_part({column}, '/', 3)", f"{prefix}_lang"),
        (f"replace(split_part({column}, '/', 4), '_', ' ')", f"{prefix}_text"),
        (f"nullif(split_part({column}, '/', 5), '')", f"{prefix}_pos"),
        (f"nullif(array_to_string(string_split({column}, '/')[6:], '/'), '')", f"{prefix}_sense"),
    ]


def _locate_bad_json(path: Path, uris: list[str]) -> list[Malformed]:
    """Line numbers of the first few lines whose info column is not JSON (a second pass, rare)."""
    wanted = set(uris)
    found: list[Malformed] = []
    opener: Any = open
    if path.suffix == ".gz":
        import gzip

        opener = gzip.open
    with opener(path, "rb") as handle:
        for number, raw in enumerate(handle, start=1):
            uri = raw.split(b"\t", 1)[0].decode("utf-8", errors="replace")
            if uri in wanted:
                found.append(Malformed(number, "info column is not valid JSON"))
                wanted.discard(uri)
                if not wanted:
                    break
    return found


def import_dump(
    dump: str | os.PathLike[str],
    store: Path | None = None,
    *,
    langs: Sequence[str] | None = None,
    relations: Sequence[str] | None = None,
    strict: bool = False,
    allow_empty: bool = False,
    memory_limit: str = "3GB",
    progress: Callable[[float], None] | None = None,
) -> ImportReport:
    """Scan a ConceptNet dump once into the store.

    The store folder holds ``edges-<id>.parquet`` and ``kb.json``, which names the current
    edges file, its size and SHA-256, and carries the import report. ``kb.json`` is replaced
    last and atomically, so an interrupted or refused import leaves the previous store as it was.

    Args:
        dump: a ``conceptnet-assertions`` CSV (optionally gzipped), or ``demo`` / ``sample``.
        store: the store folder (default :func:`default_kb_dir`).
        langs: ConceptNet language codes to keep (default: all).
        relations: relation names to keep, e.g. ``AtLocation`` (default: all).
        strict: stop at the first malformed line instead of skipping it.
        allow_empty: replace the store even when no edge is kept.
        memory_limit: DuckDB's memory cap.
        progress: called now and then with the share of the dump scanned (0–100).

    Raises:
        DataValidationError: with ``strict``, at the first malformed line (``file:line: reason``);
            and when no edge is kept (unless ``allow_empty``), with the counts by reason.
    """
    source = resolve_dump(dump)
    store = (store or default_kb_dir()).expanduser()
    store.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    report = ImportReport(
        source=str(source),
        store=str(store),
        langs=sorted(set(langs)) if langs else None,
        relations=sorted(set(relations)) if relations else None,
    )
    import_id = f"{int(time.time() * 1000):x}-{os.getpid()}"
    target = store / f"edges-{import_id}.parquet"
    tmp = store / f".edges-{import_id}.parquet.tmp"
    scanned = store / f".scan-{import_id}.tmp"
    # One scan of the dump: each parsed line gets the reason it is left out (or kept); the kept and the
    # malformed lines are written as one folder of Parquet files per reason (the kept lines' file is
    # already the edges file), and the lines left out on purpose are only counted, by _tallied.
    scan_query = _scan_query(source, langs, relations)
    con = connect(memory_limit, store / ".duckdb-tmp")
    try:
        for reason in LEFT_OUT:
            con.execute(f"CREATE TEMP SEQUENCE {_TALLY}{reason}")
        _run_with_progress(
            con,
            f"COPY ({_tallied(scan_query)}) TO '{_sql_str(str(scanned))}' "
            "(FORMAT parquet, COMPRESSION zstd, PARTITION_BY (reason))",
            progress,
        )
        parts = _partitions(scanned)
        counts = {**_row_counts(con, parts), **_tallies(con)}
        if parts.get(_MALFORMED):
            first_bad = f"(list(uri ORDER BY uri))[1:{_MAX_REPORTED}]"
            bad_uris = _one(con, f"SELECT {first_bad} FROM {_parquet(parts[_MALFORMED])}")[0]
        else:
            bad_uris = None
        if parts.get(_KEPT):
            report.by_language = {
                str(lang): int(count)
                for lang, count in con.execute(
                    f"SELECT start_lang, count(*) FROM {_parquet(parts[_KEPT])} GROUP BY 1 ORDER BY 2 DESC, 1"
                ).fetchall()
            }
        rejects = con.execute(
            "SELECT line, string_agg(DISTINCT error_type, ', ') FROM reject_errors GROUP BY line ORDER BY line"
        ).fetchall()
        report.rows_kept = counts.get(_KEPT, 0)
        report.left_out = {reason: counts[reason] for reason in LEFT_OUT if counts.get(reason)}
        report.malformed = len(rejects) + counts.get(_MALFORMED, 0)
        report.lines_read = sum(counts.values()) + len(rejects)
        examples = [Malformed(int(line), f"rejected: {str(kind).lower()}") for line, kind in rejects[:_MAX_REPORTED]]
        if bad_uris:
            examples.extend(_locate_bad_json(source, list(bad_uris)))
        report.examples = sorted(examples, key=lambda m: m.line)[:_MAX_REPORTED]
        if strict and report.malformed:
            first = report.examples[0]
            raise DataValidationError(f"{source}:{first.line}: {first.reason} (a strict import stops at a bad line)")
        if not report.rows_kept and not allow_empty:
            raise DataValidationError(_nothing_kept(report))
        kept = parts.get(_KEPT, [])
        if len(kept) == 1:
            os.replace(kept[0], target)  # the kept lines' file is the edges file: uri, the fields, ok
        else:  # no kept line (an empty store, with the same columns) or, should DuckDB split them, several files
            rows = _parquet(kept) if kept else f"(SELECT * EXCLUDE (reason) FROM ({scan_query}) LIMIT 0)"
            con.execute(f"COPY (SELECT * FROM {rows}) TO '{_sql_str(str(tmp))}' (FORMAT parquet, COMPRESSION zstd)")
            os.replace(tmp, target)
        report.seconds = time.perf_counter() - started
        report.imported_at = time.time()
        _write_pointer(store, target, report)
    except BaseException as exc:
        for leftover in (tmp, target):
            if leftover == target and _current_edges(store) == target.name:
                continue  # interrupted just after kb.json named it: the import is done
            with contextlib.suppress(FileNotFoundError):
                leftover.unlink()
        if isinstance(exc, Exception) and exc.__class__.__module__.startswith("duckdb"):
            raise StoreError(f"importing {source} failed: {' '.join(str(exc).split())}") from exc
        raise
    finally:
        con.close()
        shutil.rmtree(scanned, ignore_errors=True)
    for old in store.glob("edges-*.parquet"):
        if old.name != target.name:
            with contextlib.suppress(FileNotFoundError):
                old.unlink()
    return report


def _tallied(scan: str) -> str:
    """SQL keeping a scan's kept and malformed lines and counting each other line in its reason's sequence.

    A line left out on purpose only needs counting: it takes one value of the sequence
    ``<_TALLY><reason>`` (``nextval`` is volatile, so it runs once for each line that reaches it)
    instead of a row of nulls in the scan's files, which is cheaper to do than to write.
    """
    tally = "CASE reason " + " ".join(f"WHEN '{r}' THEN nextval('{_TALLY}{r}')" for r in LEFT_OUT) + " END"
    return f"SELECT * FROM ({scan}) WHERE reason IN ('{_KEPT}', '{_MALFORMED}') OR {tally} < 0"


def _tallies(con: duckdb.DuckDBPyConnection) -> dict[str, int]:
    """Lines left out on purpose, by reason, from the sequences of :func:`_tallied` (reasons with none are absent)."""
    rows = con.execute(
        "SELECT sequence_name, last_value FROM duckdb_sequences() WHERE starts_with(sequence_name, $1)", [_TALLY]
    ).fetchall()
    return {str(name).removeprefix(_TALLY): int(last) for name, last in rows if last}


def _partitions(folder: Path) -> dict[str, list[Path]]:
    """The Parquet files of a scan written with ``PARTITION_BY (reason)``, by reason (none for a reason no line has)."""
    parts: dict[str, list[Path]] = {}
    for path in sorted(folder.glob("reason=*/*.parquet")):
        parts.setdefault(path.parent.name.removeprefix("reason="), []).append(path)
    return parts


def _parquet(files: Sequence[Path]) -> str:
    """SQL reading Parquet files as they are (the folder names add no column)."""
    return f"read_parquet({_sql_list([str(f) for f in files])}, hive_partitioning=false)"


def _row_counts(con: duckdb.DuckDBPyConnection, parts: dict[str, list[Path]]) -> dict[str, int]:
    """Lines by reason, from the row counts in the Parquet files' footers (no data is read)."""
    files = [f for paths in parts.values() for f in paths]
    if not files:
        return {}
    reason_of = {str(f): reason for reason, paths in parts.items() for f in paths}
    counts: dict[str, int] = {}
    for name, rows in con.execute(
        f"SELECT file_name, num_rows FROM parquet_file_metadata({_sql_list([str(f) for f in files])})"
    ).fetchall():
        reason = reason_of[str(name)]
        counts[reason] = counts.get(reason, 0) + int(rows)
    return counts


def _scan_query(source: Path, langs: Sequence[str] | None, relations: Sequence[str] | None) -> str:
    """SQL reading the dump with each line's ``reason``: ``kept``, ``malformed`` or a key of :data:`LEFT_OUT`."""
    start_lang, end_lang = "split_part(start, '/', 3)", "split_part(\"end\", '/', 3)"
    checks = [
        (_MALFORMED, "NOT coalesce(json_valid(info), false)"),
        ("non_concept", "NOT coalesce(starts_with(start, '/c/') AND starts_with(\"end\", '/c/'), false)"),
        ("cross_lingual", f"{start_lang} <> {end_lang}"),
    ]
    if langs:
        checks.append(("other_language", f"NOT coalesce(list_contains({_sql_list(list(langs))}, {start_lang}), false)"))
    if relations:
        checks.append(
            (
                "other_relation",
                f"NOT coalesce(list_contains({_sql_list(list(relations))}, split_part(rel, '/', 3)), false)",
            )
        )
    reason = "CASE " + " ".join(f"WHEN {test} THEN '{name}'" for name, test in checks) + f" ELSE '{_KEPT}' END"
    kept = f"reason = '{_KEPT}'"
    fields = [
        ("split_part(rel, '/', 3)", "relation"),
        *_concept_fields("start", "start"),
        *_concept_fields('"end"', "end"),
        ("TRY_CAST(json_extract_string(info, '$.weight') AS DOUBLE)", "weight"),
        ("json_extract_string(info, '$.dataset')", "dataset"),
    ]
    columns = ", ".join(f"CASE WHEN {kept} THEN {expr} END AS {name}" for expr, name in fields)
    return (
        f"SELECT CASE WHEN {kept} OR reason = '{_MALFORMED}' THEN uri END AS uri, reason, {columns}, {kept} AS ok "
        f"FROM (SELECT *, {reason} AS reason FROM {_read_csv(source)})"
    )


def _nothing_kept(report: ImportReport) -> str:
    """One line saying why an import kept no edge and what to do next."""
    if report.lines_read and report.malformed == report.lines_read:
        hint = "ConceptNet dumps are tab-separated, 5 columns (uri, relation, start, end, JSON info)"
    elif report.left_out.get("other_language") or report.left_out.get("other_relation"):
        asked = [
            f"--lang {','.join(report.langs)}" if report.langs else "",
            f"--relation {','.join(report.relations)}" if report.relations else "",
        ]
        hint = f"check {' and '.join(a for a in asked if a)} against the dump"
    else:
        hint = "check that it is a conceptnet-assertions dump"
    return (
        f"{report.source}: no edge kept ({report.summary()}); the store at {report.store} was left as it was — "
        f"{hint}; --allow-empty replaces it anyway"
    )


def _run_with_progress(con: duckdb.DuckDBPyConnection, sql: str, progress: Callable[[float], None] | None) -> None:
    """Run one statement; with ``progress``, poll DuckDB's query progress from this thread."""
    if progress is None:
        con.execute(sql)
        return
    con.execute("SET enable_progress_bar = true")  # track progress …
    con.execute("SET enable_progress_bar_print = false")  # … without DuckDB drawing its own bar
    failure: list[BaseException] = []

    def work() -> None:
        try:
            con.execute(sql)
        except BaseException as exc:  # handed to the calling thread
            failure.append(exc)

    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    try:
        while worker.is_alive():
            worker.join(0.25)
            with contextlib.suppress(Exception):
                share = con.query_progress()
                if share >= 0:
                    progress(float(share))
    except BaseException:  # Ctrl-C here: stop the query before the connection closes
        con.interrupt()
        worker.join()
        raise
    if failure:
        raise failure[0]
    progress(100.0)


def _write_pointer(store: Path, edges: Path, report: ImportReport) -> None:
    payload = {
        "edges": edges.name,
        "size": edges.stat().st_size,
        "sha256": sha256_file(edges),
        "report": json.loads(report.to_json()),
    }
    tmp = store / f".{POINTER_FILE}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(payload, ensure_ascii=False, indent=1), encoding="utf-8")
    os.replace(tmp, store / POINTER_FILE)


def _current_edges(store: Path) -> str | None:
    """The edges file ``kb.json`` names now, if it can be read."""
    try:
        return str(json.loads((store / POINTER_FILE).read_text(encoding="utf-8"))["edges"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _one(con: duckdb.DuckDBPyConnection, sql: str) -> tuple[Any, ...]:
    row = con.execute(sql).fetchone()
    assert row is not None
    return tuple(row)


def _pointer(store: Path | None) -> tuple[Path, dict[str, Any]]:
    folder = (store or default_kb_dir()).expanduser()
    pointer = folder / POINTER_FILE
    if not pointer.is_file():
        raise ConfigError(f"no knowledge store at {folder}: run 'senseforge kb import DUMP' first")
    try:
        payload = json.loads(pointer.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise StoreError(f"{pointer} is unreadable ({exc}); import the dump again") from exc
    return folder, payload


def edges_path(store: Path | None = None) -> Path:
    """The current edges file of a store."""
    folder, payload = _pointer(store)
    path = folder / str(payload["edges"])
    if not path.is_file():
        raise StoreError(f"{path} is missing; import the dump again")
    return path


def identity(store: Path | None = None, digest: Callable[[Path], str] = sha256_file) -> dict[str, Any]:
    """What identifies a store's knowledge, for a run's manifest: the folder, the edges file's name, size and
    SHA-256, and where and when it was imported from (``source``, ``imported_at`` in UTC, ``langs``).

    The SHA-256 is the one recorded at import while the file's size still matches it; otherwise (a store
    from an older version) ``digest`` computes it.
    """
    folder, payload = _pointer(store)
    path = edges_path(store)
    size = path.stat().st_size
    sha = payload.get("sha256") if payload.get("size") == size else None
    report = read_report(store)
    when = datetime.fromtimestamp(report.imported_at, UTC).isoformat(timespec="seconds") if report.imported_at else None
    return {
        "store": str(folder.resolve()),
        "edges": path.name,
        "size": size,
        "sha256": sha or digest(path),
        "source": report.source,
        "imported_at": when,
        "langs": report.langs,
    }


def read_report(store: Path | None = None) -> ImportReport:
    """The import report stored with a knowledge store."""
    _, payload = _pointer(store)
    raw = dict(payload["report"])
    raw["examples"] = [Malformed(**m) for m in raw.get("examples", [])]
    return ImportReport(**raw)


@contextlib.contextmanager
def open_edges(store: Path | None = None) -> Iterator[duckdb.DuckDBPyConnection]:
    """A DuckDB connection with the store's edges as view ``edges``."""
    path = edges_path(store)
    con = connect()
    try:
        con.execute(f"CREATE VIEW edges AS SELECT * EXCLUDE (ok) FROM read_parquet('{_sql_str(str(path))}') WHERE ok")
        yield con
    finally:
        con.close()


def stats(store: Path | None = None) -> dict[str, Any]:
    """Counts per language and per relation, with the import record."""
    report = read_report(store)
    with open_edges(store) as con:
        by_lang = con.execute("SELECT start_lang, count(*) FROM edges GROUP BY 1 ORDER BY 2 DESC, 1").fetchall()
        by_relation = con.execute("SELECT relation, count(*) FROM edges GROUP BY 1 ORDER BY 2 DESC, 1").fetchall()
    return {
        "report": report,
        "languages": [(str(lang), int(n)) for lang, n in by_lang],
        "relations": [(str(rel), int(n)) for rel, n in by_relation],
    }
