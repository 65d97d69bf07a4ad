"""The annotation task queue: tables beside the run store's, and the one write a recipe makes to it.

The queue lives in the run store's database (same SQLAlchemy URL), so what people
decide in the annotation app are the very rows ``build --resume`` reads. Its tables are
declared with the run store's (:mod:`senseforge.pipelines.tables`) and created with them:
nothing is registered as a side effect of importing a higher layer.

* ``annotators`` — a name, a role (``admin`` or ``annotator``) and the SHA-256 of their
  invite token (the token itself is shown once, never stored);
* ``tasks`` — one per (task type, input): the input to show (an item, a concept slot, a
  draft: the task type's input model, as JSON), ``k`` (distinct annotators wanted), who
  created the item (they never judge it) and a group (``mcsqa-review``, ``baseline`` …);
* ``task_eligible`` — who may take a task when only some may (a concept slot is its
  creator's, answers are the pool's); a task with nobody listed is anyone's;
* ``assignments`` — one per (task, annotator): a lease that expires (its slot goes back
  to the pool) or is closed by the annotator's judgement.

The leasing and judging logic is the annotation app's (:mod:`senseforge.annotate.store`);
a recipe only queues work (:func:`add_tasks` for items, :func:`queue_tasks` for any input).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import sqlalchemy as sa
from pydantic import BaseModel
from sqlalchemy.engine import Engine

from senseforge.errors import ConfigError
from senseforge.pipelines.tables import task_eligible, tasks


@dataclass(frozen=True)
class QueuedTask:
    """One task a stage wants people to do: its type, its input (with an ``id``), and who may do it."""

    type: str
    input: BaseModel
    k: int = 1
    group: str = ""
    creator: str | None = None
    """Who wrote what the task is about: never offered the task."""
    eligible: tuple[str, ...] = ()
    """Only these may take it; empty: anyone (but the creator)."""

    @property
    def id(self) -> str:
        return str(getattr(self.input, "id"))  # noqa: B009 — every task input model has an id


PEOPLE_STAGES = "people_stages"
"""The run fact (JSON) naming, per task type people do, the stages that read its judgements; a build records it, and
the annotation app reads it to refuse an undo once one of them has decided the judgement's record."""


def people_stages(stages: Iterable[Any]) -> dict[str, list[str]]:
    """Per task type, the names of the stages (objects with ``name`` and ``people_tasks``) that read it."""
    out: dict[str, list[str]] = {}
    for stage in stages:
        for task in stage.people_tasks:
            out.setdefault(str(task), []).append(str(stage.name))
    return dict(sorted(out.items()))


def record_of(item_id: str) -> str:
    """The record a task's item belongs to: the id itself, or for a round of it (``<id>@<round>``) the part before."""
    return item_id.split("@", 1)[0]


def queue_tasks(engine: Engine, queued: Sequence[QueuedTask], *, now: float | None = None) -> int:
    """Queue tasks (one already queued with the same type and id is left as it is); how many were new.

    Raises:
        ConfigError: a ``k`` below 1.
    """
    if not queued:
        return 0
    stamp = time.time() if now is None else now
    with engine.begin() as conn:
        existing = {
            (str(t), str(i))
            for t, i in conn.execute(
                sa.select(tasks.c.type, tasks.c.item_id).where(tasks.c.type.in_(sorted({q.type for q in queued})))
            )
        }
        new = 0
        for task in queued:
            if task.k < 1:
                raise ConfigError(f"{task.type} {task.id}: k (annotators per task) must be at least 1")
            if (task.type, task.id) in existing:
                continue
            existing.add((task.type, task.id))
            inserted = conn.execute(
                tasks.insert().values(
                    type=task.type,
                    item_id=task.id,
                    item=task.input.model_dump_json(),
                    k=task.k,
                    creator=task.creator,
                    grp=task.group,
                    created_at=stamp,
                )
            ).inserted_primary_key
            assert inserted is not None
            task_id = inserted[0]
            if task.eligible:
                conn.execute(task_eligible.insert(), [{"task_id": task_id, "annotator": a} for a in task.eligible])
            new += 1
    return new


class Identified(Protocol):
    """An input people are given (an item, a slot, a triple to check): it has an id and a JSON form."""

    @property
    def id(self) -> str: ...

    def model_dump_json(self) -> str: ...

    def model_dump(self, *, mode: str) -> dict[str, Any]: ...


def creator_of(item: object) -> str | None:
    """Who wrote the item (an item's ``metadata.creator``), if anyone did: they never judge it."""
    metadata = getattr(item, "metadata", None)
    creator = metadata.get("creator") if isinstance(metadata, dict) else None
    return str(creator) if isinstance(creator, str) and creator else None


def add_tasks(
    engine: Engine,
    task_type: str,
    items: Iterable[Identified],
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
            item_id = item.id
            if item_id in existing:
                continue
            existing.add(item_id)
            rows.append(
                {
                    "type": task_type,
                    "item_id": item_id,
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
