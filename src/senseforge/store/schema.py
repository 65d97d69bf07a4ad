"""The store's tables, on one SQLAlchemy ``MetaData``: the LM cache, the call ledger, file digests and the
batches submitted to an API.

A table that shipped keeps its columns; one added later is listed in :data:`ADDED_COLUMNS`, which opening a store
(:class:`senseforge.store.db.Store`) adds to a table an older version created.
"""

from __future__ import annotations

import sqlalchemy as sa

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
    sa.Column("constrained", sa.Boolean, nullable=True),  # NULL: no reply shape asked (or an older row)
)
llm_ledger_by_run = sa.Index("ix_llm_ledger_run", llm_ledger.c.run)
"""A run's rows without reading every run's: a store keeps the ledger of every build it served."""

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

stage_replays = sa.Table(
    "stage_replays",
    metadata,
    sa.Column("key", sa.String(64), primary_key=True),  # digest of the code, the stage and one input record
    sa.Column("outcome", sa.Text, nullable=False),  # JSON: what the stage made of that record (see pipelines.replay)
    sa.Column("created_at", sa.Float, nullable=False),
)

stage_replay_prefixes = sa.Table(
    "stage_replay_prefixes",
    metadata,
    sa.Column("prefix", sa.String(64), primary_key=True),  # a stage of whose outcomes some were kept
    sa.Column("created_at", sa.Float, nullable=False),
)


ADDED_INDEXES: tuple[sa.Index, ...] = (llm_ledger_by_run,)
"""Indexes a later version added to a table an older one created (made when a store opens)."""

ADDED_COLUMNS: tuple[tuple[sa.Table, str], ...] = (
    (llm_ledger, "retry_errors"),
    (llm_ledger, "concurrency"),
    (llm_ledger, "service_s"),
    (llm_ledger, "queue_s"),
    (llm_ledger, "batched"),
    (llm_ledger, "constrained"),
    # what a batch's row says of it for ``senseforge runs show``
    *((llm_batches, name) for name in ("run", "stage", "n_requests", "api_status", "polled_at")),
)
"""Columns added after their table first shipped; opening a store adds them where missing."""
