"""The annotation task queue: tables beside the run store's, and the one write a recipe makes to it.

The queue lives in the run store's database (same SQLAlchemy URL), so what people
decide in the annotation app are the very rows ``build --resume`` reads. Its tables are
declared with the run store's (:mod:`senseforge.pipelines.tables`) and created with them:
nothing is registered as a side effect of importing a higher layer.

* ``annotators`` — a name, a role (``admin`` or ``annotator``) and the SHA-256 of their
  invite token (the token itself is shown once, never stored);
* ``tasks`` — one per (task type, item): the item to show, ``k`` (distinct annotators
  wanted), who created the item (they never judge it) and a group (``mcsqa-review``,
  ``baseline`` …);
* ``assignments`` — one per (task, annotator): a lease that expires (its slot goes back
  to the pool) or is closed by the annotator's judgement.

The leasing and judging logic is the annotation app's (:mod:`senseforge.annotate.store`);
a recipe only queues items (:func:`add_tasks`).
"""

from __future__ import annotations

import time
from collections.abc import Iterable

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from senseforge.data.schema import MCItem
from senseforge.errors import ConfigError
from senseforge.pipelines.tables import tasks


def creator_of(item: MCItem) -> str | None:
    """Who wrote the item (``metadata.creator``), if anyone did: they never judge it."""
    creator = item.metadata.get("creator")
    return str(creator) if isinstance(creator, str) and creator else None


def add_tasks(
    engine: Engine,
    task_type: str,
    items: Iterable[MCItem],
    *,
    k: int,
    group: str,
    creator: str | None = None,
    now: float | None = None,
) -> int:
    """Queue items for a task type (an item already queued for it is left as it is); how many were new.

    Raises:
        ConfigError: ``k`` below 1.
    """
    if k < 1:
        raise ConfigError("k (annotators per item) must be at least 1")
    stamp = time.time() if now is None else now
    with engine.begin() as conn:
        existing = {r[0] for r in conn.execute(sa.select(tasks.c.item_id).where(tasks.c.type == task_type))}
        rows = []
        for item in items:
            if item.id in existing:
                continue
            existing.add(item.id)
            rows.append(
                {
                    "type": task_type,
                    "item_id": item.id,
                    "item": item.model_dump_json(),
                    "k": k,
                    "creator": creator or creator_of(item),
                    "grp": group,
                    "created_at": stamp,
                }
            )
        if rows:
            conn.execute(tasks.insert(), rows)
    return len(rows)
