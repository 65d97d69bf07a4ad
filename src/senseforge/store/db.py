"""The store: one SQLAlchemy Core layer for the LM cache, the call ledger and (later) runs.

A SQLite file by default (``$SENSEFORGE_HOME/senseforge.db``); any SQLAlchemy URL, such
as ``postgresql+psycopg://…``, via ``SENSEFORGE_STORE_URL`` or the ``url`` argument.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from pydantic import BaseModel, ConfigDict
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from senseforge.errors import StoreError

metadata = sa.MetaData()

llm_cache = sa.Table(
    "llm_cache",
    metadata,
    sa.Column("key", sa.String(64), primary_key=True),
    sa.Column("provider", sa.String(64), nullable=False),
    sa.Column("model", sa.Text, nullable=False),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("request", sa.Text, nullable=False),
    sa.Column("response", sa.Text, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
)

llm_ledger = sa.Table(
    "llm_ledger",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("ts", sa.Float, nullable=False),
    sa.Column("run", sa.Text, nullable=True),
    sa.Column("provider", sa.String(64), nullable=False),
    sa.Column("model", sa.Text, nullable=False),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("cache_key", sa.String(64), nullable=False),
    sa.Column("cache_hit", sa.Boolean, nullable=False),
    sa.Column("tokens_in", sa.Integer, nullable=True),
    sa.Column("tokens_out", sa.Integer, nullable=True),
    sa.Column("latency_s", sa.Float, nullable=False),
    sa.Column("attempts", sa.Integer, nullable=False),
    sa.Column("cost_usd", sa.Float, nullable=True),
    sa.Column("failure_kind", sa.String(32), nullable=True),
    sa.Column("failure_message", sa.Text, nullable=True),
)

file_digests = sa.Table(
    "file_digests",
    metadata,
    sa.Column("path", sa.Text, primary_key=True),
    sa.Column("size", sa.BigInteger, nullable=False),
    sa.Column("mtime_ns", sa.BigInteger, nullable=False),
    sa.Column("sha256", sa.String(64), nullable=False),
)

_CHUNK = 500


class LedgerRow(BaseModel):
    """One call, as the ledger records it."""

    model_config = ConfigDict(extra="forbid")

    ts: float
    run: str | None = None
    provider: str
    model: str
    kind: str
    cache_key: str
    cache_hit: bool
    tokens_in: int | None = None
    tokens_out: int | None = None
    latency_s: float = 0.0
    attempts: int = 1
    cost_usd: float | None = None
    failure_kind: str | None = None
    failure_message: str | None = None


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


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.close()


def _chunks(items: Sequence[Any], size: int = _CHUNK) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


class Store:
    """Tables for the cache and the ledger over one SQLAlchemy engine."""

    def __init__(self, url: str | None = None) -> None:
        self.url = url or default_store_url()
        try:
            self.engine: Engine = self._connect(self.url)
            metadata.create_all(self.engine)
        except (SQLAlchemyError, OSError) as exc:
            raise StoreError(f"cannot open the store at {self.url}: {exc.__class__.__name__}: {exc}") from exc

    @staticmethod
    def _connect(url: str) -> Engine:
        parsed = sa.engine.make_url(url)
        if parsed.get_backend_name() == "sqlite":
            if parsed.database and parsed.database != ":memory:":
                Path(parsed.database).expanduser().parent.mkdir(parents=True, exist_ok=True)
            engine = sa.create_engine(url, connect_args={"timeout": 30})
            sa.event.listen(engine, "connect", _sqlite_pragmas)
            return engine
        return sa.create_engine(url, pool_pre_ping=True)

    def close(self) -> None:
        """Dispose of the connection pool."""
        self.engine.dispose()

    # --- cache -----------------------------------------------------------------
    def cache_get(self, keys: Sequence[str]) -> dict[str, str]:
        """Cached responses (JSON text) for those of ``keys`` that are present."""
        found: dict[str, str] = {}
        with self.engine.connect() as conn:
            for chunk in _chunks(list(dict.fromkeys(keys))):
                query = sa.select(llm_cache.c.key, llm_cache.c.response).where(llm_cache.c.key.in_(chunk))
                found.update({row.key: row.response for row in conn.execute(query)})
        return found

    def cache_put(self, rows: Iterable[CacheRow]) -> None:
        """Store responses; a key already present keeps its first response."""
        now = time.time()
        values = [{**row.model_dump(), "created_at": now} for row in rows]
        if not values:
            return
        with self.engine.begin() as conn:
            existing: set[str] = set()
            for chunk in _chunks([v["key"] for v in values]):
                existing.update(conn.scalars(sa.select(llm_cache.c.key).where(llm_cache.c.key.in_(chunk))))
            first: dict[str, dict[str, Any]] = {}
            for value in values:
                if value["key"] not in existing:
                    first.setdefault(value["key"], value)
            fresh = list(first.values())
            if fresh:
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

    # --- ledger ----------------------------------------------------------------
    def ledger_add(self, rows: Iterable[LedgerRow]) -> None:
        """Append calls to the ledger."""
        values = [row.model_dump() for row in rows]
        if values:
            with self.engine.begin() as conn:
                conn.execute(sa.insert(llm_ledger), values)

    def ledger_rows(self, *, run: str | None = None, since_id: int = 0) -> list[LedgerRow]:
        """Ledger rows after ``since_id``, optionally for one run, oldest first."""
        query = sa.select(llm_ledger).where(llm_ledger.c.id > since_id).order_by(llm_ledger.c.id)
        if run is not None:
            query = query.where(llm_ledger.c.run == run)
        with self.engine.connect() as conn:
            return [
                LedgerRow.model_validate({k: v for k, v in row._mapping.items() if k != "id"})
                for row in conn.execute(query)
            ]

    def ledger_last_id(self) -> int:
        """Id of the newest ledger row (0 when empty)."""
        with self.engine.connect() as conn:
            return int(conn.scalar(sa.select(sa.func.max(llm_ledger.c.id))) or 0)

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
