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
line numbers; ``strict=True`` makes the first one fatal.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from senseforge.errors import ConfigError, DataValidationError, MissingDependencyError, StoreError
from senseforge.store.db import senseforge_home

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
    rows_kept: int = 0
    by_language: dict[str, int] = field(default_factory=dict)
    malformed: int = 0
    examples: list[Malformed] = field(default_factory=list)
    langs: list[str] | None = None
    relations: list[str] | None = None
    seconds: float = 0.0
    imported_at: float = 0.0

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


def _concept_fields(column: str, prefix: str) -> str:
    """SQL selecting lang, text, pos and sense from a concept URI column."""
    return (
        f"split_part({column}, '/', 3) AS {prefix}_lang, "
        f"replace(split_part({column}, '/', 4), '_', ' ') AS {prefix}_text, "
        f"nullif(split_part({column}, '/', 5), '') AS {prefix}_pos, "
        f"nullif(array_to_string(string_split({column}, '/')[6:], '/'), '') AS {prefix}_sense"
    )


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
    memory_limit: str = "3GB",
    progress: Callable[[float], None] | None = None,
) -> ImportReport:
    """Scan a ConceptNet dump once into the store.

    The store folder holds ``edges-<id>.parquet`` and ``kb.json``, which names the current
    edges file and carries the import report. ``kb.json`` is replaced last and
    atomically, so an interrupted import leaves the previous store as it was.

    Args:
        dump: a ``conceptnet-assertions`` CSV (optionally gzipped), or ``demo`` / ``sample``.
        store: the store folder (default :func:`default_kb_dir`).
        langs: ConceptNet language codes to keep (default: all).
        relations: relation names to keep, e.g. ``AtLocation`` (default: all).
        strict: stop at the first malformed line instead of skipping it.
        memory_limit: DuckDB's memory cap.
        progress: called now and then with the share of the dump scanned (0–100).

    Raises:
        DataValidationError: with ``strict``, at the first malformed line (``file:line: reason``).
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
    keep = [
        "starts_with(start, '/c/')",
        "starts_with(\"end\", '/c/')",
        "split_part(start, '/', 3) = split_part(\"end\", '/', 3)",
    ]
    if langs:
        keep.append(f"list_contains({_sql_list(list(langs))}, split_part(start, '/', 3))")
    if relations:
        keep.append(f"list_contains({_sql_list(list(relations))}, split_part(rel, '/', 3))")
    # One pass: the kept edges, split into fields, plus (rare) lines whose info is not JSON,
    # kept as flagged rows so that they are counted without a second scan.
    query = (
        "SELECT uri, ok, "
        "CASE WHEN ok THEN split_part(rel, '/', 3) END AS relation, "
        f"{_concept_fields('start', 'start')}, {_concept_fields(chr(34) + 'end' + chr(34), 'end')}, "
        "CASE WHEN ok THEN TRY_CAST(json_extract_string(info, '$.weight') AS DOUBLE) END AS weight, "
        "CASE WHEN ok THEN json_extract_string(info, '$.dataset') END AS dataset "
        f"FROM (SELECT *, coalesce(json_valid(info), false) AS ok FROM {_read_csv(source)}) "
        f"WHERE NOT ok OR ({' AND '.join(keep)})"
    )
    con = connect(memory_limit, store / ".duckdb-tmp")
    try:
        _run_with_progress(
            con, f"COPY ({query}) TO '{_sql_str(str(tmp))}' (FORMAT parquet, COMPRESSION zstd)", progress
        )
        kept, bad_json, bad_uris = _one(
            con,
            "SELECT count(*) FILTER (WHERE ok), count(*) FILTER (WHERE NOT ok), "
            f"(list(uri ORDER BY uri) FILTER (WHERE NOT ok))[1:{_MAX_REPORTED}] "
            f"FROM read_parquet('{_sql_str(str(tmp))}')",
        )
        report.by_language = {
            str(lang): int(count)
            for lang, count in con.execute(
                f"SELECT start_lang, count(*) FROM read_parquet('{_sql_str(str(tmp))}') WHERE ok "
                "GROUP BY 1 ORDER BY 2 DESC, 1"
            ).fetchall()
        }
        rejects = con.execute(
            "SELECT line, string_agg(DISTINCT error_type, ', ') FROM reject_errors GROUP BY line ORDER BY line"
        ).fetchall()
        report.rows_kept = int(kept)
        report.malformed = len(rejects) + int(bad_json)
        examples = [Malformed(int(line), f"rejected: {str(kind).lower()}") for line, kind in rejects[:_MAX_REPORTED]]
        if bad_uris:
            examples.extend(_locate_bad_json(source, list(bad_uris)))
        report.examples = sorted(examples, key=lambda m: m.line)[:_MAX_REPORTED]
        if strict and report.malformed:
            first = report.examples[0]
            raise DataValidationError(f"{source}:{first.line}: {first.reason} (a strict import stops at a bad line)")
        os.replace(tmp, target)
        report.seconds = time.perf_counter() - started
        report.imported_at = time.time()
        _write_pointer(store, target.name, report)
    except BaseException as exc:
        for leftover in (tmp, target):
            with contextlib.suppress(FileNotFoundError):
                leftover.unlink()
        if isinstance(exc, Exception) and exc.__class__.__module__.startswith("duckdb"):
            raise StoreError(f"importing {source} failed: {' '.join(str(exc).split())}") from exc
        raise
    finally:
        con.close()
    for old in store.glob("edges-*.parquet"):
        if old.name != target.name:
            with contextlib.suppress(FileNotFoundError):
                old.unlink()
    return report


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
    while worker.is_alive():
        worker.join(0.25)
        with contextlib.suppress(Exception):
            share = con.query_progress()
            if share >= 0:
                progress(float(share))
    if failure:
        raise failure[0]
    progress(100.0)


def _write_pointer(store: Path, edges_file: str, report: ImportReport) -> None:
    payload = {"edges": edges_file, "report": json.loads(report.to_json())}
    tmp = store / f".{POINTER_FILE}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(payload, ensure_ascii=False, indent=1), encoding="utf-8")
    os.replace(tmp, store / POINTER_FILE)


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
