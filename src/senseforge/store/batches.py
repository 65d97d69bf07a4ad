"""The batches submitted to an API's Batch API, as the store remembers them (the ``llm_batches`` table).

A batch is remembered when submitted, with its requests by cache key, so that a later run collects its answers
instead of asking again; it stays open until collected or failed. :class:`BatchRow` is what a batch's row says of
it for ``senseforge runs show`` and a build's ``--wait``. :class:`senseforge.store.db.Store` calls the functions
here, and closes a batch in the same transaction as the answers it collected (:func:`close_batch`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping

import sqlalchemy as sa
from pydantic import BaseModel, ConfigDict
from sqlalchemy.engine import Engine

from senseforge.store.schema import llm_batches


class BatchRow(BaseModel):
    """A batch submitted to an API's Batch API, as the store remembers it (:func:`batch_rows`)."""

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


def batch_add(
    engine: Engine,
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
    with engine.begin() as conn:
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


def batches_open(engine: Engine, endpoint: str) -> dict[str, dict[str, str]]:
    """The batches submitted to ``endpoint`` and not yet collected, oldest first: id -> requests by key."""
    query = (
        sa.select(llm_batches.c.batch_id, llm_batches.c.requests)
        .where(llm_batches.c.endpoint == endpoint, llm_batches.c.status == "submitted")
        .order_by(llm_batches.c.created_at, llm_batches.c.batch_id)
    )
    with engine.connect() as conn:
        return {row.batch_id: json.loads(row.requests) for row in conn.execute(query)}


def batch_polled(engine: Engine, batch_id: str, api_status: str) -> None:
    """Note a batch's status as the API just reported it."""
    values = {"api_status": api_status[:32], "polled_at": time.time()}
    with engine.begin() as conn:
        conn.execute(sa.update(llm_batches).where(llm_batches.c.batch_id == batch_id).values(**values))


def batch_rows(
    engine: Engine, *, run: str | None = None, ids: Iterable[str] = (), open_only: bool = True
) -> list[BatchRow]:
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
    with engine.connect() as conn:
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


def close_batch(conn: sa.Connection, batch_id: str, status: str) -> None:
    """Mark a batch ``collected`` or ``failed``, on ``conn``'s open transaction."""
    conn.execute(sa.update(llm_batches).where(llm_batches.c.batch_id == batch_id).values(status=status))
