"""The store: one SQLAlchemy Core layer for the LM cache, the call ledger and (later) runs.

A SQLite file by default (``$SENSEFORGE_HOME/senseforge.db``); any SQLAlchemy URL, such
as ``postgresql+psycopg://…``, via ``SENSEFORGE_STORE_URL`` or the ``url`` argument.

Opening a store creates missing tables and adds columns that later versions introduced
to tables an older version created (see ``_ADDED_COLUMNS``), so old files keep working.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, TypedDict

import sqlalchemy as sa
from pydantic import BaseModel, ConfigDict
from sqlalchemy.dialects import postgresql, sqlite
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
    sa.Column("retry_errors", sa.Text, nullable=True),  # JSON list of strings; NULL when none
    sa.Column("concurrency", sa.Integer, nullable=True),
    sa.Column("service_s", sa.Float, nullable=True),  # NULL in rows an older version wrote
    sa.Column("queue_s", sa.Float, nullable=True),
    sa.Column("batched", sa.Boolean, nullable=True),  # NULL (older rows): read as not batched
)

file_digests = sa.Table(
    "file_digests",
    metadata,
    sa.Column("path", sa.Text, primary_key=True),
    sa.Column("size", sa.BigInteger, nullable=False),
    sa.Column("mtime_ns", sa.BigInteger, nullable=False),
    sa.Column("sha256", sa.String(64), nullable=False),
)

llm_batches = sa.Table(
    "llm_batches",
    metadata,
    sa.Column("batch_id", sa.Text, primary_key=True),
    sa.Column("endpoint", sa.Text, nullable=False),  # the base URL and served model the batch went to
    sa.Column("submission", sa.String(64), nullable=False),  # digest of its requests' cache keys
    sa.Column("requests", sa.Text, nullable=False),  # JSON object: cache key -> the request's JSON
    sa.Column("status", sa.String(16), nullable=False),  # submitted, collected, failed
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("run", sa.Text, nullable=True),  # the ledger's name for the run that submitted it
    sa.Column("stage", sa.Text, nullable=True),  # the stage(s) whose requests it holds
    sa.Column("n_requests", sa.Integer, nullable=True),
    sa.Column("api_status", sa.String(32), nullable=True),  # as the API last reported it
    sa.Column("polled_at", sa.Float, nullable=True),
)

_ADDED_COLUMNS: tuple[tuple[sa.Table, str], ...] = (
    (llm_ledger, "retry_errors"),
    (llm_ledger, "concurrency"),
    (llm_ledger, "service_s"),
    (llm_ledger, "queue_s"),
    (llm_ledger, "batched"),
)
"""Columns added after their table first shipped; opening a store adds them where missing."""

_ADDED_BATCH_COLUMNS: tuple[tuple[sa.Table, str], ...] = tuple(
    (llm_batches, name) for name in ("run", "stage", "n_requests", "api_status", "polled_at")
)
"""What a batch's row says of it for ``senseforge runs show``, added after the table first shipped."""

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
    """Wall time from the caller asking to its answer: the server's time, retries and their backoff, and any wait
    in this client for a concurrency slot or a rate budget (0 for a cache hit)."""
    attempts: int = 1
    cost_usd: float | None = None
    """The cost with the price table in force when the call was made, kept as a record: what senseforge shows and
    writes is priced again from the tokens with the table as of then (see :meth:`Store.ledger_summary`)."""
    failure_kind: str | None = None
    failure_message: str | None = None
    retry_errors: tuple[str, ...] = ()
    """One line per failed backend attempt (``429 rate_limit: …``); empty for a cache hit."""
    concurrency: int | None = None
    """The endpoint's concurrency level when the call's last attempt was sent (see :mod:`senseforge.llm.limits`);
    ``None`` for a cache hit and for providers with no such level."""
    service_s: float | None = None
    """Seconds the server had the call: from each attempt's sending to its answer, summed over attempts (no wait in
    the client, no backoff). ``None`` where it was not measured apart (a cache hit, older rows, providers that do
    their own work: their ``latency_s`` is their time)."""
    queue_s: float | None = None
    """Seconds the call waited in this client before its attempts were sent: for a concurrency slot, a rate or
    token budget, an endpoint's ``Retry-After`` (``None`` where not measured)."""
    batched: bool = False
    """Answered through an API's batch endpoint (priced at its share of the listed price)."""


class CallPricer(Protocol):
    """Prices calls of a model from their tokens, e.g. :meth:`senseforge.llm.prices.PriceTable.cost`."""

    def __call__(
        self, model: str, tokens_in: int | None, tokens_out: int | None, *, batched: bool = False
    ) -> float | None:
        """The cost in USD; ``None`` when the model has no price or a charged token count is unknown."""
        ...


class LedgerSummary(TypedDict):
    """Totals over ledger rows, from :meth:`Store.ledger_summary`.

    A *call* is one ledger row, that is one request a caller made. A cache hit (also a
    request repeated within one batch) made no backend call, so it adds nothing to the
    attempt, failure, token and latency totals.
    """

    calls: int
    """Requests made, hits included."""
    cache_hits: int
    """Requests answered without a backend call."""
    backend_attempts: int
    """HTTP or model attempts made, retries included (the sum of ``attempts``)."""
    retried_calls: int
    """Backend calls that took more than one attempt."""
    failed_calls: int
    """Backend calls that failed after all retries."""
    failures_by_kind: dict[str, int]
    """``failed_calls`` by failure kind (``rate_limit``, ``timeout`` …)."""
    retry_errors_by_kind: dict[str, int]
    """Failed attempts by the first word of their line: ``429``, ``500``, ``timeout``, ``truncated`` …"""
    tokens_in: int
    """Prompt tokens of backend calls (hits excluded; unknown counts add nothing)."""
    tokens_out: int
    """Generated tokens of backend calls."""
    cost_usd: float | None
    """Total cost; None when any backend call has an unknown cost. Priced from the recorded tokens with the price
    table given to :meth:`Store.ledger_summary` (the table as of now), else the costs recorded at call time."""
    priced: str
    """Which of the two ``cost_usd`` is: ``now`` or ``at call time``."""
    models: list[str]
    """Models of backend calls."""
    unpriced_models: list[str]
    """Models of backend calls whose cost is unknown (no price, or a charged token count not reported)."""
    latency_s: float
    """Wall time of backend calls from asking to answer, summed over calls (not elapsed time: calls overlap); it
    counts waits in this client for a slot (see ``queue_s``), so it says little about the server."""
    service_s: float
    """The server's time: backend calls' ``service_s`` summed (a row with none measured counts its ``latency_s``,
    except a batched call: its latency is its whole batch's turnaround, not time the server spent on it)."""
    queue_s: float
    """Time backend calls waited in this client before being sent, summed over calls."""


class FailureCause(BaseModel):
    """One cause of failed calls in the ledger, from :meth:`Store.failure_causes`."""

    model_config = ConfigDict(extra="forbid")

    kind: str
    """The failure kind (``connection``, ``timeout``, ``rate_limit`` …)."""
    message: str
    """The last error of those calls, in one line."""
    calls: int
    """Failed calls with this kind and message."""
    last_ts: float
    """When the newest of them was recorded (Unix time)."""

    def line(self) -> str:
        """``connection: Connection error. (ConnectError: …)``."""
        return f"{self.kind}: {self.message}" if self.message else self.kind


def _ledger_values(row: LedgerRow) -> dict[str, Any]:
    values = row.model_dump()
    values["retry_errors"] = json.dumps(list(row.retry_errors), ensure_ascii=False) if row.retry_errors else None
    return values


def _ledger_row(mapping: Mapping[Any, Any]) -> LedgerRow:
    values = {k: v for k, v in mapping.items() if k != "id"}
    values["batched"] = bool(values.get("batched"))
    values["retry_errors"] = tuple(json.loads(values["retry_errors"])) if values.get("retry_errors") else ()
    return LedgerRow.model_validate(values)


def retry_error_kind(line: str) -> str:
    """What a ``retry_errors`` line is counted under: its first word (``429``, ``timeout`` …)."""
    head = line.split(":", 1)[0].split()
    return head[0] if head else "?"


class BatchRow(BaseModel):
    """A batch submitted to an API's Batch API, as the store remembers it (:meth:`Store.batches`)."""

    model_config = ConfigDict(extra="forbid")

    batch_id: str
    endpoint: str
    """The base URL and served model it went to."""
    run: str | None = None
    """The ledger's name for the run that submitted it (``None``: submitted by an older version)."""
    stage: str | None = None
    """The stage whose requests it holds (several, comma-separated; ``None``: not known)."""
    requests: int
    submitted_at: float
    """When it was submitted (Unix time)."""
    status: str
    """``submitted`` (its answers not collected yet), ``collected`` or ``failed``."""
    api_status: str | None = None
    """Its status as the API last reported it (``validating``, ``in_progress``, ``finalizing`` …)."""
    polled_at: float | None = None
    """When the API last reported it (Unix time)."""


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


def connect(url: str) -> Engine:
    """An engine for ``url``; SQLite gets its folder created, WAL, and a 30 s busy timeout."""
    parsed = sa.engine.make_url(url)
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            Path(parsed.database).expanduser().parent.mkdir(parents=True, exist_ok=True)
        engine = sa.create_engine(url, connect_args={"timeout": 30})
        sa.event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    return sa.create_engine(url, pool_pre_ping=True)


def _chunks(items: Sequence[Any], size: int = _CHUNK) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


class Store:
    """Tables for the cache and the ledger over one SQLAlchemy engine."""

    def __init__(self, url: str | None = None) -> None:
        self.url = url or default_store_url()
        try:
            self.engine: Engine = connect(self.url)
            metadata.create_all(self.engine)
            self._add_missing_columns()
        except (SQLAlchemyError, OSError) as exc:
            raise StoreError(f"cannot open the store at {self.url}: {exc.__class__.__name__}: {exc}") from exc

    def _add_missing_columns(self) -> None:
        """Bring tables that an older version created up to date (``ALTER TABLE … ADD COLUMN``)."""
        for table, name in (*_ADDED_COLUMNS, *_ADDED_BATCH_COLUMNS):
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

    def _has_column(self, table: sa.Table, name: str) -> bool:
        return name in {column["name"] for column in sa.inspect(self.engine).get_columns(table.name)}

    def close(self) -> None:
        """Dispose of the connection pool."""
        self.engine.dispose()

    # --- batches at an API ---------------------------------------------------------
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
        """Remember a batch submitted to ``endpoint``: its id, and its requests (JSON text) by cache key, for the
        run and stage that asked. A batch already remembered is left as it is."""
        with self.engine.begin() as conn:
            known = conn.execute(sa.select(llm_batches.c.batch_id).where(llm_batches.c.batch_id == batch_id)).first()
            if known is None:
                row = {
                    "batch_id": batch_id,
                    "endpoint": endpoint,
                    "submission": submission,
                    "requests": json.dumps(dict(requests), sort_keys=True),
                    "status": "submitted",
                    "created_at": time.time(),
                    "run": run,
                    "stage": stage,
                    "n_requests": len(requests),
                }
                conn.execute(sa.insert(llm_batches), [row])

    def batches_open(self, endpoint: str) -> dict[str, dict[str, str]]:
        """The batches submitted to ``endpoint`` and not yet collected, oldest first: id -> requests by key."""
        query = (
            sa.select(llm_batches.c.batch_id, llm_batches.c.requests)
            .where(llm_batches.c.endpoint == endpoint, llm_batches.c.status == "submitted")
            .order_by(llm_batches.c.created_at, llm_batches.c.batch_id)
        )
        with self.engine.connect() as conn:
            return {row.batch_id: json.loads(row.requests) for row in conn.execute(query)}

    def batch_polled(self, batch_id: str, api_status: str) -> None:
        """Note a batch's status as the API just reported it."""
        values = {"api_status": api_status[:32], "polled_at": time.time()}
        with self.engine.begin() as conn:
            conn.execute(sa.update(llm_batches).where(llm_batches.c.batch_id == batch_id).values(**values))

    def batches(self, *, run: str | None = None, ids: Iterable[str] = (), open_only: bool = True) -> list[BatchRow]:
        """The batches ``run`` submitted and those of ``ids``, oldest first; ``open_only``: only those whose answers
        are not collected yet."""
        wanted = sorted(set(ids))
        if run is None and not wanted:
            return []
        column = llm_batches.c
        chosen = sa.or_(column.run == run if run is not None else sa.false(), column.batch_id.in_(wanted))
        query = sa.select(llm_batches).where(chosen).order_by(column.created_at, column.batch_id)
        if open_only:
            query = query.where(column.status == "submitted")
        with self.engine.connect() as conn:
            rows = conn.execute(query).mappings().all()
        return [
            BatchRow(
                batch_id=row["batch_id"],
                endpoint=row["endpoint"],
                run=row["run"],
                stage=row["stage"],
                requests=row["n_requests"] if row["n_requests"] is not None else len(json.loads(row["requests"])),
                submitted_at=row["created_at"],
                status=row["status"],
                api_status=row["api_status"],
                polled_at=row["polled_at"],
            )
            for row in rows
        ]

    def batch_close(
        self, batch_id: str, status: str, *, cache: Iterable[CacheRow] = (), ledger: Iterable[LedgerRow] = ()
    ) -> None:
        """Mark a batch ``collected`` (its answers stored with it, in one transaction) or ``failed``."""
        values = [{**row.model_dump(), "created_at": time.time()} for row in cache]
        with self.engine.begin() as conn:
            if values:
                self._cache_insert(conn, values)
            ledger_values = [_ledger_values(row) for row in ledger]
            if ledger_values:
                conn.execute(sa.insert(llm_ledger), ledger_values)
            conn.execute(sa.update(llm_batches).where(llm_batches.c.batch_id == batch_id).values(status=status))

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
        self.record(cache=rows)

    def record(self, *, cache: Iterable[CacheRow] = (), ledger: Iterable[LedgerRow] = ()) -> None:
        """Store responses and append ledger rows in one transaction.

        Either both land or neither does, so a process killed mid-write never leaves a
        cached response without its ledger row (or a ledger row whose response is lost).
        As in :meth:`cache_put`, a key already present keeps its first response.
        """
        now = time.time()
        values = [{**row.model_dump(), "created_at": now} for row in cache]
        ledger_values = [_ledger_values(row) for row in ledger]
        if not values and not ledger_values:
            return
        with self.engine.begin() as conn:
            if values:
                self._cache_insert(conn, values)
            if ledger_values:
                conn.execute(sa.insert(llm_ledger), ledger_values)

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

    # --- ledger ----------------------------------------------------------------
    def ledger_add(self, rows: Iterable[LedgerRow]) -> None:
        """Append calls to the ledger."""
        self.record(ledger=rows)

    def ledger_rows(self, *, run: str | None = None, since_id: int = 0) -> list[LedgerRow]:
        """Ledger rows after ``since_id``, optionally for one run, oldest first."""
        query = sa.select(llm_ledger).where(llm_ledger.c.id > since_id).order_by(llm_ledger.c.id)
        if run is not None:
            query = query.where(llm_ledger.c.run == run)
        with self.engine.connect() as conn:
            return [_ledger_row(row._mapping) for row in conn.execute(query)]

    def ledger_recent(self, *, run: str | None = None, failed: bool = False, limit: int | None = 20) -> list[LedgerRow]:
        """The newest ledger rows first, optionally of one run and only failed calls; ``limit=None``: all."""
        query = sa.select(llm_ledger).order_by(llm_ledger.c.id.desc())
        if run is not None:
            query = query.where(llm_ledger.c.run == run)
        if failed:
            query = query.where(llm_ledger.c.failure_kind.is_not(None))
        if limit is not None:
            query = query.limit(limit)
        with self.engine.connect() as conn:
            return [_ledger_row(row._mapping) for row in conn.execute(query)]

    def failure_causes(self, run: str | None = None, *, since_id: int = 0, limit: int = 5) -> list[FailureCause]:
        """The commonest causes of failed calls (kind and last error), most frequent first, then newest.

        Args:
            run: one run label; ``None``: every run.
            since_id: only rows after this ledger id (the failures of one pass, see :meth:`ledger_last_id`).
            limit: how many causes at most.
        """
        t = llm_ledger
        calls = sa.func.count().label("calls")
        query = (
            sa.select(t.c.failure_kind, t.c.failure_message, calls, sa.func.max(t.c.ts).label("last"))
            .where(t.c.id > since_id, t.c.failure_kind.is_not(None))
            .group_by(t.c.failure_kind, t.c.failure_message)
            .order_by(calls.desc(), sa.desc("last"))
            .limit(limit)
        )
        if run is not None:
            query = query.where(t.c.run == run)
        with self.engine.connect() as conn:
            return [
                FailureCause(kind=str(kind), message=str(message or ""), calls=int(n), last_ts=float(last))
                for kind, message, n, last in conn.execute(query)
            ]

    def ledger_summary(self, run: str | None = None, *, price: CallPricer | None = None) -> LedgerSummary:
        """Totals over the ledger rows of one run label, or over all rows when ``run`` is None.

        Shows what a run cost and how healthy the backend was: how many requests the
        cache answered, how many attempts the backend needed, which errors were retried
        and which calls failed for good. See :class:`LedgerSummary` for each number.

        Args:
            run: one run label; ``None``: every row.
            price: prices the calls again from their recorded tokens (and whether each was batched), e.g. the
                price table as of now; ``None``: the costs recorded at call time are summed.
        """
        t = llm_ledger
        where = [] if run is None else [t.c.run == run]
        fresh = sa.not_(t.c.cache_hit)

        def count(condition: sa.ColumnElement[bool]) -> sa.ColumnElement[Any]:
            return sa.func.coalesce(sa.func.sum(sa.case((condition, 1), else_=0)), 0)

        def total(column: sa.ColumnElement[Any]) -> sa.ColumnElement[Any]:
            return sa.func.coalesce(sa.func.sum(sa.case((fresh, column), else_=None)), 0)

        totals = sa.select(
            sa.func.count().label("calls"),
            count(t.c.cache_hit).label("cache_hits"),
            total(t.c.attempts).label("backend_attempts"),
            count(sa.and_(fresh, t.c.attempts > 1)).label("retried_calls"),
            count(sa.and_(fresh, t.c.failure_kind.is_not(None))).label("failed_calls"),
            total(t.c.tokens_in).label("tokens_in"),
            total(t.c.tokens_out).label("tokens_out"),
            sa.func.coalesce(sa.func.sum(t.c.cost_usd), 0.0).label("cost_usd"),
            total(t.c.latency_s).label("latency_s"),
            total(sa.func.coalesce(t.c.service_s, sa.case((t.c.batched, 0.0), else_=t.c.latency_s))).label("service_s"),
            total(sa.func.coalesce(t.c.queue_s, 0.0)).label("queue_s"),
        ).where(*where)
        failures = (
            sa.select(t.c.failure_kind, sa.func.count())
            .where(*where, fresh, t.c.failure_kind.is_not(None))
            .group_by(t.c.failure_kind)
        )
        retried = sa.select(t.c.retry_errors).where(*where, t.c.retry_errors.is_not(None))
        # per model and batching, the backend calls' tokens and how many of them left a count unreported: a price
        # is linear in tokens, so each group prices as its calls one by one would
        groups = (
            sa.select(
                t.c.model,
                t.c.batched,
                sa.func.coalesce(sa.func.sum(t.c.tokens_in), 0),
                sa.func.coalesce(sa.func.sum(t.c.tokens_out), 0),
                count(t.c.tokens_in.is_(None)),
                count(t.c.tokens_out.is_(None)),
                count(t.c.cost_usd.is_(None)),
            )
            .where(*where, fresh)
            .group_by(t.c.model, t.c.batched)
        )
        retry_kinds: Counter[str] = Counter()
        with self.engine.connect() as conn:
            row = conn.execute(totals).one()
            by_kind = {str(kind): int(n) for kind, n in conn.execute(failures)}
            for (text,) in conn.execute(retried):
                retry_kinds.update(retry_error_kind(line) for line in json.loads(text))
            grouped = list(conn.execute(groups))
        unpriced: set[str] = set()
        cost: float = float(row.cost_usd)
        if price is not None:
            cost = 0.0
            for model, batched, tokens_in, tokens_out, no_in, no_out, _ in grouped:
                priced = price(
                    str(model),
                    None if no_in else int(tokens_in),
                    None if no_out else int(tokens_out),
                    batched=bool(batched),
                )
                if priced is None:
                    unpriced.add(str(model))
                else:
                    cost += priced
        else:
            unpriced = {str(model) for model, *_, unknown in grouped if unknown}
        return LedgerSummary(
            calls=int(row.calls),
            cache_hits=int(row.cache_hits),
            backend_attempts=int(row.backend_attempts),
            retried_calls=int(row.retried_calls),
            failed_calls=int(row.failed_calls),
            failures_by_kind=dict(sorted(by_kind.items())),
            retry_errors_by_kind=dict(sorted(retry_kinds.items())),
            tokens_in=int(row.tokens_in),
            tokens_out=int(row.tokens_out),
            cost_usd=None if unpriced else cost,
            priced="now" if price is not None else "at call time",
            models=sorted({str(model) for model, *_ in grouped}),
            unpriced_models=sorted(unpriced),
            latency_s=float(row.latency_s),
            service_s=float(row.service_s),
            queue_s=float(row.queue_s),
        )

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
