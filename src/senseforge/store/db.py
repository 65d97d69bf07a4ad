"""The store: one SQLAlchemy Core layer for the LM cache, the call ledger and (later) runs.

A SQLite file by default (``$SENSEFORGE_HOME/senseforge.db``); any SQLAlchemy URL, such
as ``postgresql+psycopg://…``, via ``SENSEFORGE_STORE_URL`` or the ``url`` argument.

Opening a store creates missing tables and adds columns that later versions introduced
to tables an older version created (see :data:`senseforge.store.schema.ADDED_COLUMNS`), so old files keep working.
:class:`Store` keeps the cache and file digests itself; the ledger's rows and sums live in
:mod:`senseforge.store.ledger`, the batches at an API in :mod:`senseforge.store.batches`.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from pydantic import BaseModel, ConfigDict
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from senseforge.errors import StoreError
from senseforge.store.batches import BatchRow, batch_add, batch_polled, batch_rows, batches_open, close_batch
from senseforge.store.ledger import (
    CallPricer,
    FailureCause,
    LedgerRow,
    LedgerSummary,
    append_ledger,
    append_ledger_values,
    failure_causes,
    ledger_last_id,
    ledger_recent,
    ledger_rows,
    ledger_summary,
)
from senseforge.store.schema import (
    ADDED_COLUMNS,
    ADDED_INDEXES,
    file_digests,
    llm_cache,
    metadata,
    stage_replay_prefixes,
    stage_replays,
)

_CHUNK = 500


class CacheRow(BaseModel):
    """One cached response."""

    model_config = ConfigDict(extra="forbid")

    key: str
    provider: str
    model: str
    kind: str
    request: str
    response: str


def senseforge_home() -> Path:
    """Where senseforge keeps its default store and price table (``SENSEFORGE_HOME``)."""
    env = os.environ.get("SENSEFORGE_HOME")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "senseforge"


def default_store_url() -> str:
    """``SENSEFORGE_STORE_URL``, else a SQLite file under :func:`senseforge_home`."""
    env = os.environ.get("SENSEFORGE_STORE_URL")
    if env:
        return env
    return f"sqlite:///{senseforge_home() / 'senseforge.db'}"


def _sqlite_pragmas(page_size: int | None, cache_kib: int | None) -> Callable[[Any, Any], None]:
    def pragmas(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        if page_size is not None:  # before WAL: it sizes the pages of a database not written yet, and only that
            cursor.execute(f"PRAGMA page_size={int(page_size)}")
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA busy_timeout=30000")
        if cache_kib is not None:
            cursor.execute(f"PRAGMA cache_size={-int(cache_kib)}")
        cursor.close()

    return pragmas


def create_tables(engine: Engine, tables: sa.MetaData, tries: int = 5) -> None:
    """``tables.create_all`` on ``engine``, safe against other processes opening the same new database at once: each
    checks for a table and then creates it, so two can both find it missing and the later one's ``CREATE`` fails
    (SQLite: "already exists"; PostgreSQL: that, or a duplicate key of its catalogue). That one checks again and
    finds the table made, rather than failing (several evaluation replicas opened a new store together so)."""
    for attempt in range(tries):
        try:
            tables.create_all(engine)
            return
        except SQLAlchemyError as exc:
            said = str(exc).lower()
            if attempt + 1 == tries or not ("already exists" in said or "duplicate key" in said):
                raise


def connect(url: str, *, page_size: int | None = None, cache_kib: int | None = None) -> Engine:
    """An engine for ``url``; SQLite gets its folder created, WAL, and a 30 s busy timeout, and for a new file pages of
    ``page_size`` bytes, a page cache of ``cache_kib`` KiB per connection (default: SQLite's, 4 KiB and 2 MiB)."""
    parsed = sa.engine.make_url(url)
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            Path(parsed.database).expanduser().parent.mkdir(parents=True, exist_ok=True)
        engine = sa.create_engine(url, connect_args={"timeout": 30})
        sa.event.listen(engine, "connect", _sqlite_pragmas(page_size, cache_kib))
        return engine
    return sa.create_engine(url, pool_pre_ping=True)


_CACHE_GET = sa.select(llm_cache.c.key, llm_cache.c.response).where(
    llm_cache.c.key.in_(sa.bindparam("keys", expanding=True))
)
"""The cache lookup, built once (SQLAlchemy compiles it once too; the keys expand into it per call): a cached
rebuild looks up every request of every batch."""
_CACHE_ROWS = sa.select(llm_cache.c.key, llm_cache.c.kind, llm_cache.c.response).where(
    llm_cache.c.key.in_(sa.bindparam("keys", expanding=True))
)
_SQLITE_KEEP = "INSERT OR IGNORE INTO stage_replays (key, outcome, created_at) VALUES (?, ?, ?)"
_REPLAYS_GET = sa.select(stage_replays.c.key, stage_replays.c.outcome).where(
    stage_replays.c.key.in_(sa.bindparam("keys", expanding=True))
)


def _insert_new(conn: sa.Connection, table: sa.Table, key: sa.Column[Any], values: list[dict[str, Any]]) -> None:
    """Insert those of ``values`` whose ``key`` ``table`` does not hold yet, on ``conn``'s open transaction."""
    dialect = conn.dialect.name
    if dialect in ("sqlite", "postgresql"):
        insert = sqlite.insert if dialect == "sqlite" else postgresql.insert
        statement = insert(table).on_conflict_do_nothing(index_elements=[key])
        for chunk in _chunks(values):
            conn.execute(statement, list(chunk))
        return
    existing: set[Any] = set()
    for chunk in _chunks([value[key.name] for value in values]):
        existing.update(conn.scalars(sa.select(key).where(key.in_(chunk))))
    fresh = [value for value in values if value[key.name] not in existing]
    if fresh:
        conn.execute(sa.insert(table), fresh)


def _chunks(items: Sequence[Any], size: int = _CHUNK) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


class Store:
    """Tables for the cache and the ledger over one SQLAlchemy engine."""

    def __init__(self, url: str | None = None) -> None:
        self.url = url or default_store_url()
        try:
            self.engine: Engine = connect(self.url)
            create_tables(self.engine, metadata)
            self._add_missing_columns()
            self._add_missing_indexes()
        except (SQLAlchemyError, OSError) as exc:
            raise StoreError(f"cannot open the store at {self.url}: {exc.__class__.__name__}: {exc}") from exc

    def _add_missing_columns(self) -> None:
        """Bring tables that an older version created up to date (``ALTER TABLE … ADD COLUMN``)."""
        for table, name in ADDED_COLUMNS:
            if self._has_column(table, name):
                continue
            column = table.c[name]
            ddl = f"ALTER TABLE {table.name} ADD COLUMN {name} {column.type.compile(dialect=self.engine.dialect)}"
            try:
                with self.engine.begin() as conn:
                    conn.execute(sa.text(ddl))
            except SQLAlchemyError:
                if not self._has_column(table, name):  # not merely another process that got there first
                    raise

    def _add_missing_indexes(self) -> None:
        """Make the indexes a later version added to tables an older one created (once, when first opened so)."""
        for index in ADDED_INDEXES:
            assert index.table is not None
            if self._has_index(index):
                continue
            try:
                index.create(self.engine)
            except SQLAlchemyError:
                if not self._has_index(index):  # not merely another process that got there first
                    raise

    def _has_index(self, index: sa.Index) -> bool:
        assert index.table is not None
        return index.name in {found["name"] for found in sa.inspect(self.engine).get_indexes(index.table.name)}

    def _has_column(self, table: sa.Table, name: str) -> bool:
        return name in {column["name"] for column in sa.inspect(self.engine).get_columns(table.name)}

    def close(self) -> None:
        """Dispose of the connection pool."""
        self.engine.dispose()

    # --- batches at an API (senseforge.store.batches) ---------------------------
    def batch_add(
        self,
        batch_id: str,
        endpoint: str,
        submission: str,
        requests: Mapping[str, str],
        *,
        run: str | None = None,
        stage: str | None = None,
    ) -> None:
        """Remember a batch submitted to ``endpoint`` (see :func:`senseforge.store.batches.batch_add`)."""
        batch_add(self.engine, batch_id, endpoint, submission, requests, run=run, stage=stage)

    def batches_open(self, endpoint: str) -> dict[str, dict[str, str]]:
        """The batches submitted to ``endpoint`` and not yet collected, oldest first: id -> requests by key."""
        return batches_open(self.engine, endpoint)

    def batch_polled(self, batch_id: str, api_status: str) -> None:
        """Note a batch's status as the API just reported it."""
        batch_polled(self.engine, batch_id, api_status)

    def batches(self, *, run: str | None = None, ids: Iterable[str] = (), open_only: bool = True) -> list[BatchRow]:
        """The batches ``run`` submitted and those of ``ids``, oldest first; ``open_only``: only those whose answers
        are not collected yet."""
        return batch_rows(self.engine, run=run, ids=ids, open_only=open_only)

    def batch_close(
        self, batch_id: str, status: str, *, cache: Iterable[CacheRow] = (), ledger: Iterable[LedgerRow] = ()
    ) -> None:
        """Mark a batch ``collected`` (its answers stored with it, in one transaction) or ``failed``."""
        values = [{**row.model_dump(), "created_at": time.time()} for row in cache]
        with self.engine.begin() as conn:
            if values:
                self._cache_insert(conn, values)
            append_ledger(conn, ledger)
            close_batch(conn, batch_id, status)

    # --- cache -----------------------------------------------------------------
    def cache_get(self, keys: Sequence[str]) -> dict[str, str]:
        """Cached responses (JSON text) for those of ``keys`` that are present."""
        found: dict[str, str] = {}
        with self.engine.connect() as conn:
            for chunk in _chunks(list(dict.fromkeys(keys))):
                found.update(conn.execute(_CACHE_GET, {"keys": chunk}).all())
        return found

    def cache_rows(self, keys: Sequence[str]) -> dict[str, tuple[str, str]]:
        """``{key: (kind, response JSON)}`` of those of ``keys`` that are cached."""
        found: dict[str, tuple[str, str]] = {}
        for key, kind, response in self._by_keys(_CACHE_ROWS, "llm_cache", "key, kind, response", keys):
            found[key] = (kind, response)
        return found

    def replays_get(self, keys: Sequence[str]) -> dict[str, str]:
        """The stage outcomes kept under those of ``keys`` that are present (text; see
        :mod:`senseforge.pipelines.replay`)."""
        return dict(self._by_keys(_REPLAYS_GET, "stage_replays", "key, outcome", keys))

    def _by_keys(self, query: sa.Select[Any], table: str, columns: str, keys: Sequence[str]) -> list[tuple[Any, ...]]:
        """The rows of ``query`` for ``keys`` (its table's key column), chunked; on SQLite through the driver: a
        rebuild that replays looks up every record of every stage, and SQLAlchemy's rows cost more than the read."""
        rows: list[tuple[Any, ...]] = []
        with self.engine.connect() as conn:
            sqlite_driver = conn.dialect.name == "sqlite"
            for chunk in _chunks(list(dict.fromkeys(keys))):
                if sqlite_driver:
                    marks = ",".join("?" * len(chunk))
                    statement = f"SELECT {columns} FROM {table} WHERE key IN ({marks})"
                    rows += conn.exec_driver_sql(statement, tuple(chunk)).all()
                else:
                    rows += conn.execute(query, {"keys": chunk}).all()
        return rows

    def replays_known(self, prefix: str) -> bool:
        """Whether outcomes of the stage ``prefix`` names were kept (:meth:`replays_put`) before."""
        with self.engine.connect() as conn:
            found = conn.execute(
                sa.select(stage_replay_prefixes.c.prefix).where(stage_replay_prefixes.c.prefix == prefix)
            )
            return found.first() is not None

    def replays_put(self, outcomes: Mapping[str, str], prefix: str | None = None) -> None:
        """Keep stage outcomes by key (of the stage ``prefix`` names, noted once for :meth:`replays_known`); a key
        already present keeps its first outcome."""
        if not outcomes:
            return
        now = time.time()
        values = [{"key": key, "outcome": outcome, "created_at": now} for key, outcome in outcomes.items()]
        with self.engine.begin() as conn:
            if prefix is not None:
                noted = [{"prefix": prefix, "created_at": now}]
                _insert_new(conn, stage_replay_prefixes, stage_replay_prefixes.c.prefix, noted)
            if conn.dialect.name == "sqlite":  # through the driver: a build keeps an outcome per record of a stage
                conn.exec_driver_sql(_SQLITE_KEEP, [(value["key"], value["outcome"], now) for value in values])
                return
            _insert_new(conn, stage_replays, stage_replays.c.key, values)

    def cache_put(self, rows: Iterable[CacheRow]) -> None:
        """Store responses; a key already present keeps its first response."""
        self.record(cache=rows)

    def record(self, *, cache: Iterable[CacheRow] = (), ledger: Iterable[LedgerRow] = ()) -> None:
        """Store responses and append ledger rows in one transaction.

        Either both land or neither does, so a process killed mid-write never leaves a
        cached response without its ledger row (or a ledger row whose response is lost).
        As in :meth:`cache_put`, a key already present keeps its first response.
        """
        now = time.time()
        values = [{**row.model_dump(), "created_at": now} for row in cache]
        calls = list(ledger)
        if not values and not calls:
            return
        with self.engine.begin() as conn:
            if values:
                self._cache_insert(conn, values)
            append_ledger(conn, calls)

    @staticmethod
    def _cache_insert(conn: sa.Connection, values: list[dict[str, Any]]) -> None:
        """Insert cache rows whose key is new, on ``conn``'s open transaction."""
        first: dict[str, dict[str, Any]] = {}
        for value in values:
            first.setdefault(value["key"], value)
        fresh = list(first.values())
        dialect = conn.dialect.name
        if dialect in ("sqlite", "postgresql"):
            # one plain statement: no savepoint, which the sqlite driver would commit on its own
            insert = sqlite.insert if dialect == "sqlite" else postgresql.insert
            statement = insert(llm_cache).on_conflict_do_nothing(index_elements=[llm_cache.c.key])
            for chunk in _chunks(fresh):
                conn.execute(statement, list(chunk))
            return
        existing: set[str] = set()
        for chunk in _chunks(list(first)):
            existing.update(conn.scalars(sa.select(llm_cache.c.key).where(llm_cache.c.key.in_(chunk))))
        fresh = [value for value in fresh if value["key"] not in existing]
        if not fresh:
            return
        try:
            with conn.begin_nested():
                conn.execute(sa.insert(llm_cache), fresh)
        except IntegrityError:  # another process wrote the same keys meanwhile
            for value in fresh:
                try:
                    with conn.begin_nested():
                        conn.execute(sa.insert(llm_cache), [value])
                except IntegrityError:
                    continue

    # --- ledger (senseforge.store.ledger) -------------------------------------
    def ledger_add(self, rows: Iterable[LedgerRow]) -> None:
        """Append calls to the ledger."""
        self.record(ledger=rows)

    def ledger_add_values(self, rows: Sequence[tuple[Any, ...]]) -> None:
        """Append calls given as plain values (see :func:`senseforge.store.ledger.append_ledger_values`), in one
        transaction."""
        if rows:
            with self.engine.begin() as conn:
                append_ledger_values(conn, rows)

    def ledger_rows(self, *, run: str | None = None, since_id: int = 0) -> list[LedgerRow]:
        """Ledger rows after ``since_id``, optionally for one run, oldest first."""
        return ledger_rows(self.engine, run=run, since_id=since_id)

    def ledger_recent(self, *, run: str | None = None, failed: bool = False, limit: int | None = 20) -> list[LedgerRow]:
        """The newest ledger rows first, optionally of one run and only failed calls; ``limit=None``: all."""
        return ledger_recent(self.engine, run=run, failed=failed, limit=limit)

    def failure_causes(self, run: str | None = None, *, since_id: int = 0, limit: int = 5) -> list[FailureCause]:
        """The commonest causes of failed calls (see :func:`senseforge.store.ledger.failure_causes`)."""
        return failure_causes(self.engine, run, since_id=since_id, limit=limit)

    def ledger_summary(self, run: str | None = None, *, price: CallPricer | None = None) -> LedgerSummary:
        """Totals over the ledger rows of one run label, or over all rows when ``run`` is None (see
        :func:`senseforge.store.ledger.ledger_summary`)."""
        return ledger_summary(self.engine, run, price=price)

    def ledger_last_id(self) -> int:
        """Id of the newest ledger row (0 when empty)."""
        return ledger_last_id(self.engine)

    # --- file digests ------------------------------------------------------------
    def file_digest(self, path: str | os.PathLike[str]) -> str:
        """SHA-256 of a file, remembered by (path, size, mtime) so big weights are hashed once."""
        resolved = Path(path).resolve()
        stat = resolved.stat()
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(file_digests).where(file_digests.c.path == str(resolved))).first()
        if row is not None and row.size == stat.st_size and row.mtime_ns == stat.st_mtime_ns:
            return str(row.sha256)
        digest = sha256_file(resolved)
        with self.engine.begin() as conn:
            conn.execute(sa.delete(file_digests).where(file_digests.c.path == str(resolved)))
            conn.execute(
                sa.insert(file_digests),
                [{"path": str(resolved), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256": digest}],
            )
        return digest


def sha256_file(path: str | os.PathLike[str]) -> str:
    """SHA-256 hex digest of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
