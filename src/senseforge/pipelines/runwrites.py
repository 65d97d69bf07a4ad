"""The run store's writes that several writers share: judgements by the one rule every writer follows, and rows
inserted a chunk at a time (see :mod:`senseforge.pipelines.runstore`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from senseforge.data.schema import Judgement
from senseforge.pipelines.tables import judgements

__all__ = ["CHUNK", "JudgementSource", "insert_rows", "put_judgement", "put_judgements"]

JudgementSource = Literal["human", "lm"]

CHUNK = 100
"""Rows per INSERT statement: one statement of many rows, not one step per row, since each step lets go of the
GIL and a busy process's other threads can hold it for a switch interval each time; 100 rows of 8 columns keep
under the 999 parameters of older SQLite builds."""


def insert_rows(conn: Connection, table: sa.Table, rows: Sequence[Mapping[str, Any]]) -> None:
    """Insert ``rows`` (dicts with the same keys) :data:`CHUNK` at a time, each chunk one multi-row statement
    whose SQL is written once per chunk size: SQLAlchemy's ``insert().values([...])`` compiles anew for every
    call, which cost most of a cached rebuild's writing."""
    if not rows:
        return
    marks = {"qmark": "?", "format": "%s", "pyformat": "%s"}
    if conn.dialect.paramstyle not in marks:  # a driver of another style: SQLAlchemy writes the SQL
        for start in range(0, len(rows), CHUNK):
            conn.execute(table.insert().values(list(rows[start : start + CHUNK])))
        return
    columns = list(rows[0])
    mark = marks[conn.dialect.paramstyle]
    one = "(" + ",".join([mark] * len(columns)) + ")"
    head = f"INSERT INTO {table.name} ({','.join(columns)}) VALUES "
    for start in range(0, len(rows), CHUNK):
        chunk = rows[start : start + CHUNK]
        params = tuple(row[column] for row in chunk for column in columns)
        conn.exec_driver_sql(head + ",".join([one] * len(chunk)), params)


def put_judgement(conn: Connection, judgement: Judgement, source: JudgementSource, now: float) -> int:
    """Store one judgement in ``conn``'s transaction, by the one rule every writer follows (a build's LM judges
    and imported decisions, the annotation app's submissions and rulings): one judgement per (item, annotator,
    task); a repeat that differs (body or source) replaces the earlier one, an identical repeat changes nothing.

    Returns:
        1 when the row is new or changed, 0 when it was stored already.
    """
    return put_judgements(conn, [(judgement, source)], now)


def put_judgements(conn: Connection, items: Sequence[tuple[Judgement, JudgementSource]], now: float) -> int:
    """Store judgements in ``conn``'s transaction by :func:`put_judgement`'s rule, in order (a later repeat in
    ``items`` replaces an earlier one), with one read of the rows already stored for their items and one insert
    of the new rows: a batch's judgements cost a few statements, not two per judgement.

    Returns:
        How many rows were new or changed.
    """
    if not items:
        return 0
    item_ids = sorted({judgement.item_id for judgement, _ in items})
    stored: dict[tuple[str, str, str], tuple[str, str]] = {}
    for start in range(0, len(item_ids), CHUNK):
        query = sa.select(
            judgements.c.item_id, judgements.c.annotator, judgements.c.task, judgements.c.body, judgements.c.source
        ).where(judgements.c.item_id.in_(item_ids[start : start + CHUNK]))
        for item_id, annotator, task, body, source in conn.execute(query):
            stored[(item_id, annotator, task)] = (body, source)
    new: dict[tuple[str, str, str], dict[str, Any]] = {}
    changed = 0
    for judgement, source in items:
        key = (judgement.item_id, judgement.annotator, judgement.task)
        body = judgement.model_dump_json()
        if key in new:  # a repeat within the batch: the later one is the one stored
            changed += new[key]["body"] != body or new[key]["source"] != source
            new[key].update(body=body, source=source)
            continue
        existing = stored.get(key)
        if existing is None:
            new[key] = {"item_id": key[0], "annotator": key[1], "task": key[2], "source": source, "body": body}
            new[key]["created_at"] = now
            changed += 1
        elif existing != (body, source):
            where = sa.and_(
                judgements.c.item_id == key[0], judgements.c.annotator == key[1], judgements.c.task == key[2]
            )
            conn.execute(judgements.update().where(where).values(body=body, source=source, created_at=now))
            stored[key] = (body, source)
            changed += 1
    if new:
        conn.execute(judgements.insert(), list(new.values()))
    return changed
