"""The run store: every stage result of one run, per record, on the SQLAlchemy layer.

A run directory holds ``run.db`` (SQLite) by default; any SQLAlchemy URL (PostgreSQL for
a team of annotators) works the same. Three tables:

``stage_results``
    One row per (stage, record): ``ok`` with the record's payload after the stage, or
    ``rejected`` with the reason. The raw prompt and response of an LM stage are kept
    beside it. A row is written once, in the transaction of its batch, so a run killed at
    any moment resumes from the rows that exist and repeats nothing else.
``judgements``
    Review decisions about items, by humans (a decisions file now, the annotation app
    later) or by LM reviewers, one per (item, annotator, task).
``run_meta``
    Small key/value facts about the run (its state, e.g. ``awaiting_review``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError

from senseforge.data.schema import Judgement
from senseforge.errors import StoreError
from senseforge.store.db import connect

Status = Literal["ok", "rejected"]
JudgementSource = Literal["human", "lm"]

metadata = sa.MetaData()

stage_results = sa.Table(
    "stage_results",
    metadata,
    sa.Column("stage", sa.String(32), primary_key=True),
    sa.Column("record_id", sa.String(255), primary_key=True),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("reason", sa.Text, nullable=True),
    sa.Column("payload", sa.Text, nullable=False),
    sa.Column("prompt", sa.Text, nullable=True),
    sa.Column("response", sa.Text, nullable=True),
    sa.Column("created_at", sa.Float, nullable=False),
)

judgements = sa.Table(
    "judgements",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("item_id", sa.String(255), nullable=False),
    sa.Column("annotator", sa.Text, nullable=False),
    sa.Column("task", sa.String(32), nullable=False),
    sa.Column("source", sa.String(16), nullable=False),
    sa.Column("body", sa.Text, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.UniqueConstraint("item_id", "annotator", "task", name="uq_judgement"),
)

run_meta = sa.Table(
    "run_meta",
    metadata,
    sa.Column("key", sa.String(64), primary_key=True),
    sa.Column("value", sa.Text, nullable=False),
)

_CHUNK = 500


@dataclass(frozen=True)
class StageResult:
    """What one stage made of one record."""

    record_id: str
    status: Status
    payload: dict[str, Any]
    reason: str | None = None
    prompt: str | None = None
    response: str | None = None


@dataclass(frozen=True)
class StoredJudgement:
    """A judgement as the run store holds it, with who made it."""

    judgement: Judgement
    source: JudgementSource


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def sqlite_url(path: Path) -> str:
    """The SQLAlchemy URL of a SQLite file."""
    return f"sqlite:///{path.resolve()}"


class RunStore:
    """The stage results and judgements of one run.

    Args:
        url: a SQLAlchemy URL (``sqlite:///…/run.db`` or ``postgresql+psycopg://…``).

    Raises:
        StoreError: the database cannot be opened or created.
    """

    def __init__(self, url: str) -> None:
        self.url = url
        try:
            self._engine: Engine = connect(url)
            metadata.create_all(self._engine)
        except (SQLAlchemyError, OSError) as exc:
            raise StoreError(f"cannot open the run store {url}: {exc}") from exc

    def close(self) -> None:
        """Release the connection pool."""
        self._engine.dispose()

    # -- stage results ---------------------------------------------------------------------

    def put(self, stage: str, results: Sequence[StageResult]) -> None:
        """Store results of one stage in one transaction (a record already stored is an error)."""
        if not results:
            return
        now = time.time()
        rows = [
            {
                "stage": stage,
                "record_id": r.record_id,
                "status": r.status,
                "reason": r.reason,
                "payload": _dumps(r.payload),
                "prompt": r.prompt,
                "response": r.response,
                "created_at": now,
            }
            for r in results
        ]
        with self._engine.begin() as conn:
            for start in range(0, len(rows), _CHUNK):
                conn.execute(stage_results.insert(), rows[start : start + _CHUNK])

    def done_ids(self, stage: str) -> set[str]:
        """Ids of the records that already have a result in ``stage``."""
        with self._engine.connect() as conn:
            rows = conn.execute(sa.select(stage_results.c.record_id).where(stage_results.c.stage == stage))
            return {row[0] for row in rows}

    def results(self, stage: str, status: Status | None = None) -> list[StageResult]:
        """Results of ``stage`` sorted by record id (only ``status`` ones when given)."""
        query = sa.select(stage_results).where(stage_results.c.stage == stage)
        if status is not None:
            query = query.where(stage_results.c.status == status)
        with self._engine.connect() as conn:
            rows = conn.execute(query.order_by(stage_results.c.record_id)).mappings().all()
        return [
            StageResult(
                record_id=row["record_id"],
                status=row["status"],
                payload=json.loads(row["payload"]),
                reason=row["reason"],
                prompt=row["prompt"],
                response=row["response"],
            )
            for row in rows
        ]

    def counts(self, stage: str) -> dict[str, int]:
        """``{"ok": n, "<reason>": n, …}`` for one stage."""
        key = sa.func.coalesce(stage_results.c.reason, stage_results.c.status)
        query = (
            sa.select(stage_results.c.status, key, sa.func.count())
            .where(stage_results.c.stage == stage)
            .group_by(stage_results.c.status, key)
        )
        with self._engine.connect() as conn:
            return {("ok" if status == "ok" else reason): n for status, reason, n in conn.execute(query)}

    # -- judgements --------------------------------------------------------------------------

    def add_judgements(self, items: Iterable[Judgement], source: JudgementSource) -> int:
        """Store judgements; one per (item, annotator, task): a repeat replaces the earlier one.

        Returns:
            How many rows were new or changed.
        """
        changed = 0
        now = time.time()
        with self._engine.begin() as conn:
            for judgement in items:
                body = judgement.model_dump_json()
                where = sa.and_(
                    judgements.c.item_id == judgement.item_id,
                    judgements.c.annotator == judgement.annotator,
                    judgements.c.task == judgement.task,
                )
                existing = conn.execute(sa.select(judgements.c.body, judgements.c.source).where(where)).first()
                if existing is None:
                    conn.execute(
                        judgements.insert().values(
                            item_id=judgement.item_id,
                            annotator=judgement.annotator,
                            task=judgement.task,
                            source=source,
                            body=body,
                            created_at=now,
                        )
                    )
                    changed += 1
                elif existing[0] != body or existing[1] != source:
                    conn.execute(judgements.update().where(where).values(body=body, source=source, created_at=now))
                    changed += 1
        return changed

    def judgements_for(self, task: str, item_ids: Iterable[str] | None = None) -> dict[str, list[StoredJudgement]]:
        """Judgements of ``task`` per item, in the order they were first stored."""
        query = sa.select(judgements.c.item_id, judgements.c.source, judgements.c.body).where(judgements.c.task == task)
        wanted = set(item_ids) if item_ids is not None else None
        out: dict[str, list[StoredJudgement]] = {}
        with self._engine.connect() as conn:
            for item_id, source, body in conn.execute(query.order_by(judgements.c.id)):
                if wanted is not None and item_id not in wanted:
                    continue
                out.setdefault(item_id, []).append(StoredJudgement(Judgement.model_validate_json(body), source))
        return out

    # -- run facts ---------------------------------------------------------------------------

    def set_meta(self, values: Mapping[str, str]) -> None:
        """Set run facts (upsert)."""
        with self._engine.begin() as conn:
            for key, value in values.items():
                updated = conn.execute(run_meta.update().where(run_meta.c.key == key).values(value=value))
                if updated.rowcount == 0:
                    conn.execute(run_meta.insert().values(key=key, value=value))

    def meta(self, key: str) -> str | None:
        """One run fact, or ``None``."""
        with self._engine.connect() as conn:
            return conn.execute(sa.select(run_meta.c.value).where(run_meta.c.key == key)).scalar_one_or_none()
