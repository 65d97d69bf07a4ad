"""The call ledger: one row per request an LM was asked, what was written and what is read back from it.

:class:`LedgerRow` is a row as written; the functions here read the ``llm_ledger`` table over an engine (the
newest rows, the commonest causes of failure, the totals of a run with :class:`LedgerSummary`).
:class:`senseforge.store.db.Store` calls them, and appends rows in the same transaction as the responses they
answered (:func:`append_ledger`).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol, TypedDict

import sqlalchemy as sa
from pydantic import BaseModel, ConfigDict
from sqlalchemy.engine import Engine

from senseforge.store.schema import llm_ledger


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
    writes is priced again from the tokens with the table as of then (see :func:`ledger_summary`)."""
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
    constrained: bool | None = None
    """Whether the backend constrained the reply to the request's shape (see
    :attr:`senseforge.llm.base.Completion.constrained`); ``None`` when no shape was asked, for a scoring call, and
    in older rows."""


class CallPricer(Protocol):
    """Prices calls of a model from their tokens, e.g. :meth:`senseforge.llm.prices.PriceTable.cost`."""

    def __call__(
        self, model: str, tokens_in: int | None, tokens_out: int | None, *, batched: bool = False
    ) -> float | None:
        """The cost in USD; ``None`` when the model has no price or a charged token count is unknown."""
        ...


class LedgerSummary(TypedDict):
    """Totals over ledger rows, from :func:`ledger_summary`.

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
    table given to :func:`ledger_summary` (the table as of now), else the costs recorded at call time."""
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
    """One cause of failed calls in the ledger, from :func:`failure_causes`."""

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


_COLUMNS = [column.name for column in llm_ledger.columns if column.name != "id"]
LEDGER_COLUMNS: tuple[str, ...] = tuple(_COLUMNS)
"""The ledger's columns as :func:`append_ledger_values` takes a row's values, in order."""
_SQLITE_APPEND = f"INSERT INTO llm_ledger ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))})"
"""The ledger's insert, written once for SQLite's driver: a cached rebuild appends a row per request of every stage,
and SQLAlchemy's executemany spends more per row than the insert itself."""


def append_ledger(conn: sa.Connection, rows: Iterable[LedgerRow]) -> None:
    """Append calls to the ledger on ``conn``'s open transaction."""
    if conn.dialect.name == "sqlite":
        tuples = [tuple(_driver_value(row, name) for name in _COLUMNS) for row in rows]
        if tuples:
            conn.exec_driver_sql(_SQLITE_APPEND, tuples)
        return
    values = [_ledger_values(row) for row in rows]
    if values:
        conn.execute(sa.insert(llm_ledger), values)


def append_ledger_values(conn: sa.Connection, rows: Sequence[tuple[Any, ...]]) -> None:
    """Append calls given as plain values, each row in the order of :data:`LEDGER_COLUMNS` and as the table holds
    them (``retry_errors``: JSON text or ``None``), on ``conn``'s open transaction: for rows built without a
    :class:`LedgerRow` each (a rebuild's hits, a row per request of every stage)."""
    if not rows:
        return
    if conn.dialect.name == "sqlite":
        conn.exec_driver_sql(_SQLITE_APPEND, list(rows))
        return
    conn.execute(sa.insert(llm_ledger), [dict(zip(_COLUMNS, row, strict=True)) for row in rows])


def _driver_value(row: LedgerRow, name: str) -> Any:
    """A row's column as :func:`_ledger_values` writes it (its fields are plain values but ``retry_errors``)."""
    value = getattr(row, name)
    if name == "retry_errors":
        return json.dumps(list(value), ensure_ascii=False) if value else None
    return value


def ledger_rows(engine: Engine, *, run: str | None = None, since_id: int = 0) -> list[LedgerRow]:
    """Ledger rows after ``since_id``, optionally for one run, oldest first."""
    query = sa.select(llm_ledger).where(llm_ledger.c.id > since_id).order_by(llm_ledger.c.id)
    if run is not None:
        query = query.where(llm_ledger.c.run == run)
    with engine.connect() as conn:
        return [_ledger_row(row._mapping) for row in conn.execute(query)]


def ledger_recent(
    engine: Engine, *, run: str | None = None, failed: bool = False, limit: int | None = 20
) -> list[LedgerRow]:
    """The newest ledger rows first, optionally of one run and only failed calls; ``limit=None``: all."""
    query = sa.select(llm_ledger).order_by(llm_ledger.c.id.desc())
    if run is not None:
        query = query.where(llm_ledger.c.run == run)
    if failed:
        query = query.where(llm_ledger.c.failure_kind.is_not(None))
    if limit is not None:
        query = query.limit(limit)
    with engine.connect() as conn:
        return [_ledger_row(row._mapping) for row in conn.execute(query)]


def failure_causes(engine: Engine, run: str | None = None, *, since_id: int = 0, limit: int = 5) -> list[FailureCause]:
    """The commonest causes of failed calls (kind and last error), most frequent first, then newest.

    Args:
        engine: the store's engine.
        run: one run label; ``None``: every run.
        since_id: only rows after this ledger id (the failures of one pass, see :func:`ledger_last_id`).
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
    with engine.connect() as conn:
        return [
            FailureCause(kind=str(kind), message=str(message or ""), calls=int(n), last_ts=float(last))
            for kind, message, n, last in conn.execute(query)
        ]


def ledger_summary(engine: Engine, run: str | None = None, *, price: CallPricer | None = None) -> LedgerSummary:
    """Totals over the ledger rows of one run label, or over all rows when ``run`` is None.

    Shows what a run cost and how healthy the backend was: how many requests the
    cache answered, how many attempts the backend needed, which errors were retried
    and which calls failed for good. See :class:`LedgerSummary` for each number.

    Args:
        engine: the store's engine.
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
    with engine.connect() as conn:
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


def ledger_last_id(engine: Engine) -> int:
    """Id of the newest ledger row (0 when empty)."""
    with engine.connect() as conn:
        return int(conn.scalar(sa.select(sa.func.max(llm_ledger.c.id))) or 0)
