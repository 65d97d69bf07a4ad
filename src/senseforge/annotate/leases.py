"""The task queue and its leases: what is queued, who may take it, and the next assignment of an annotator.

* ``tasks`` — one per (task type, input): the input (the task type's input model: an item,
  a concept slot, a draft), ``k`` (distinct annotators wanted), who created the item (they
  never judge it) and a group (``mcsqa-review``, ``baseline`` …);
* ``task_eligible`` — who may take a task, when only some may (none listed: anyone);
* ``assignments`` — one per (task, annotator): a lease that expires (its slot goes back to
  the pool) or is closed by the annotator's judgement (:mod:`~senseforge.annotate.submissions`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from pydantic import BaseModel
from sqlalchemy.engine import Connection

from senseforge.annotate.db import StoreDb, taken
from senseforge.annotate.tasktypes import task_type as task_type_of
from senseforge.data.schema import MCItem
from senseforge.pipelines.quality import excluded_annotators, qualification, quality_settings
from senseforge.pipelines.tables import assignments, gold, task_eligible, tasks
from senseforge.pipelines.taskqueue import QueuedTask, add_tasks, queue_tasks

DEFAULT_LEASE_S = 600.0
"""How long an assignment stays reserved for its annotator (10 minutes)."""


@dataclass(frozen=True)
class Assignment:
    """A leased task: what one annotator is asked to do now."""

    id: int
    task_id: int
    type: str
    input: BaseModel
    """The task's input, as its task type's input model."""
    annotator: str
    expires_at: float

    @property
    def item_id(self) -> str:
        return str(getattr(self.input, "id"))  # noqa: B009 — every task input model has an id


class Leases:
    """The task queue of one run and the leases on it.

    Args:
        db: the store's shared database handle.
        lease_s: how long an assignment is reserved.
    """

    def __init__(self, db: StoreDb, *, lease_s: float = DEFAULT_LEASE_S) -> None:
        self.db = db
        self.lease_s = lease_s

    def add_tasks(
        self, task_type: str, items: Iterable[MCItem], *, k: int, group: str, creator: str | None = None
    ) -> int:
        """Queue items for a task type (an item already queued for it is left as it is); how many were new."""
        return add_tasks(self.db.engine, task_type, items, k=k, group=group, creator=creator, now=self.db.clock())

    def queue(self, queued: Sequence[QueuedTask]) -> int:
        """Queue tasks of any type (one already queued is left as it is); how many were new."""
        return queue_tasks(self.db.engine, queued, now=self.db.clock())

    def next_assignment(self, annotator: str, task_type: str) -> Assignment | None:
        """The annotator's open assignment of this type, or a new lease on the next task that needs them.

        Gold tasks of the type come in at its configured rate (see :mod:`senseforge.pipelines.quality`),
        each at most once per annotator and only while real work is left; an annotator below
        the accuracy bar gets nothing more of the type, and the slots they held count for nobody.
        """
        runs = self.db.runs
        now = self.db.clock()
        bar = quality_settings(runs)
        below = excluded_annotators(runs, bar).get(task_type, frozenset())
        if annotator in below:
            return None
        rate = bar.rates.get(task_type, 0.0)
        conn = self.db.begin()
        try:
            mine = conn.execute(
                sa.select(assignments.c.id, assignments.c.task_id, assignments.c.expires_at)
                .join(tasks, tasks.c.id == assignments.c.task_id)
                .where(
                    assignments.c.annotator == annotator,
                    tasks.c.type == task_type,
                    assignments.c.done_at.is_(None),
                    assignments.c.expires_at > now,
                )
                .order_by(assignments.c.id)
            ).first()
            if mine is not None:
                conn.commit()
                return self.assignment(mine[0])
            slots = (
                sa.select(sa.func.count())
                .where(
                    assignments.c.task_id == tasks.c.id,
                    assignments.c.annotator.not_in(sorted(below)) if below else sa.true(),
                    sa.or_(assignments.c.done_at.is_not(None), assignments.c.expires_at > now),
                )
                .scalar_subquery()
            )
            is_gold = tasks.c.id.in_(sa.select(gold.c.task_id))
            seen = sa.select(assignments.c.task_id).where(
                assignments.c.annotator == annotator,
                sa.or_(assignments.c.done_at.is_not(None), assignments.c.expires_at > now),
            )
            open_to_me = (
                tasks.c.type == task_type,
                sa.or_(tasks.c.creator.is_(None), tasks.c.creator != annotator),
                eligible(annotator),
                tasks.c.id.not_in(seen),
            )
            task_id: int | None = None
            testing = False
            if task_type in bar.qualify:  # the qualification first, all of it; then only those who passed
                test = conn.execute(
                    sa.select(tasks.c.id).where(*open_to_me, is_gold).order_by(tasks.c.id).limit(1)
                ).first()
                if test is not None:
                    task_id, testing = int(test[0]), True
                elif qualification(runs, annotator, task_type, bar) != "passed":
                    conn.commit()
                    return None
            full: set[int] = set()
            while task_id is None:
                candidate = conn.execute(
                    sa.select(tasks.c.id)
                    .where(*open_to_me, ~is_gold, tasks.c.id.not_in(full) if full else sa.true(), slots < tasks.c.k)
                    .order_by(tasks.c.id)
                    .limit(1)
                ).first()
                if candidate is None:
                    conn.commit()
                    return None
                found = int(candidate[0])
                # another annotator may have taken the last slot since the search: look again under the lock
                task = self.db.lock_task(conn, found)
                if taken(conn, found, now, besides=annotator, ignore=below) < int(task["k"]):
                    task_id = found
                else:
                    full.add(found)
            if not testing and rate > 0 and _gold_due(conn, annotator, task_type, rate, is_gold):
                golden = conn.execute(
                    sa.select(tasks.c.id).where(*open_to_me, is_gold).order_by(tasks.c.id).limit(1)
                ).first()
                if golden is not None:  # one the annotator has not seen: it takes this turn
                    task_id = int(golden[0])
            expires = now + self.lease_s
            updated = conn.execute(
                assignments.update()
                .where(assignments.c.task_id == task_id, assignments.c.annotator == annotator)
                .values(leased_at=now, expires_at=expires, done_at=None)
            )
            if updated.rowcount == 0:
                conn.execute(
                    assignments.insert().values(task_id=task_id, annotator=annotator, leased_at=now, expires_at=expires)
                )
            assignment_id = conn.execute(
                sa.select(assignments.c.id).where(
                    assignments.c.task_id == task_id, assignments.c.annotator == annotator
                )
            ).scalar_one()
            conn.commit()
        except BaseException:
            conn.rollback()
            raise
        finally:
            conn.close()
        return self.assignment(int(assignment_id))

    def assignment(self, assignment_id: int) -> Assignment | None:
        """One assignment with its task's item."""
        with self.db.engine.connect() as conn:
            row = (
                conn.execute(
                    sa.select(
                        assignments.c.id,
                        assignments.c.task_id,
                        assignments.c.annotator,
                        assignments.c.expires_at,
                        tasks.c.type,
                        tasks.c.item,
                    )
                    .join(tasks, tasks.c.id == assignments.c.task_id)
                    .where(assignments.c.id == assignment_id)
                )
                .mappings()
                .first()
            )
        if row is None:
            return None
        return Assignment(
            id=row["id"],
            task_id=row["task_id"],
            type=row["type"],
            input=task_type_of(row["type"]).input_model.model_validate_json(row["item"]),
            annotator=row["annotator"],
            expires_at=row["expires_at"],
        )

    def items(self, task_type: str) -> list[tuple[MCItem, int, str]]:
        """(item, k, group) of every task of a type over items, in queue order."""
        return [(item, k, grp) for item, k, grp in self.inputs(task_type) if isinstance(item, MCItem)]

    def inputs(self, task_type: str) -> list[tuple[BaseModel, int, str]]:
        """(input, k, group) of every task of a type, in queue order."""
        model = task_type_of(task_type).input_model
        with self.db.engine.connect() as conn:
            rows = conn.execute(
                sa.select(tasks.c.item, tasks.c.k, tasks.c.grp).where(tasks.c.type == task_type).order_by(tasks.c.id)
            ).all()
        return [(model.model_validate_json(item), int(k), str(grp)) for item, k, grp in rows]

    def available(self, annotator: str) -> dict[str, int]:
        """Per task type, how many tasks this annotator could take now (not theirs to skip, not full, not done)."""
        now = self.db.clock()
        slots = (
            sa.select(sa.func.count())
            .where(
                assignments.c.task_id == tasks.c.id,
                assignments.c.annotator != annotator,
                sa.or_(assignments.c.done_at.is_not(None), assignments.c.expires_at > now),
            )
            .scalar_subquery()
        )
        done = sa.select(assignments.c.task_id).where(
            assignments.c.annotator == annotator, assignments.c.done_at.is_not(None)
        )
        query = (
            sa.select(tasks.c.type, sa.func.count())
            .where(
                sa.or_(tasks.c.creator.is_(None), tasks.c.creator != annotator),
                eligible(annotator),
                tasks.c.id.not_in(done),
                tasks.c.id.not_in(sa.select(gold.c.task_id)),
                slots < tasks.c.k,
            )
            .group_by(tasks.c.type)
        )
        with self.db.engine.connect() as conn:
            return {str(t): int(n) for t, n in conn.execute(query)}

    def position(self, annotator: str, task_type: str) -> tuple[int, int]:
        """Where the annotator stands in their queue of a type: ``(n, total)``, ``n`` the one they are on (those
        they have done, plus one) and ``total`` those done plus those open to them now, the one they hold
        included (a gold task among them counts). Others taking the last slots of a task can lower ``total``."""
        now = self.db.clock()
        with self.db.engine.connect() as conn:
            done = conn.execute(
                sa.select(sa.func.count())
                .select_from(assignments.join(tasks, tasks.c.id == assignments.c.task_id))
                .where(
                    assignments.c.annotator == annotator, tasks.c.type == task_type, assignments.c.done_at.is_not(None)
                )
            ).scalar_one()
            held_gold = conn.execute(
                sa.select(sa.func.count()).where(
                    assignments.c.annotator == annotator,
                    assignments.c.done_at.is_(None),
                    assignments.c.expires_at > now,
                    assignments.c.task_id.in_(
                        sa.select(tasks.c.id).where(
                            tasks.c.type == task_type, tasks.c.id.in_(sa.select(gold.c.task_id))
                        )
                    ),
                )
            ).scalar_one()
        left = self.available(annotator).get(task_type, 0) + int(held_gold)
        return int(done) + 1, int(done) + max(left, 1)

    def task_types(self) -> list[str]:
        """The task types with tasks queued, sorted."""
        with self.db.engine.connect() as conn:
            return [r[0] for r in conn.execute(sa.select(tasks.c.type).distinct().order_by(tasks.c.type))]


def _gold_due(conn: Connection, annotator: str, task_type: str, rate: float, is_gold: Any) -> bool:
    """Whether the next task served should be gold: it keeps the annotator's gold share at most ``rate``."""
    rows = conn.execute(
        sa.select(is_gold, sa.func.count())
        .select_from(assignments.join(tasks, tasks.c.id == assignments.c.task_id))
        .where(assignments.c.annotator == annotator, tasks.c.type == task_type, assignments.c.done_at.is_not(None))
        .group_by(is_gold)
    ).all()
    done = {bool(flag): int(n) for flag, n in rows}
    golds, real = done.get(True, 0), done.get(False, 0)
    return golds + 1 <= rate * (golds + real + 1)


def eligible(annotator: str) -> Any:
    """The condition "this annotator may take the task": nobody is listed for it, or they are."""
    listed = sa.select(task_eligible.c.task_id).where(task_eligible.c.task_id == tasks.c.id)
    mine = listed.where(task_eligible.c.annotator == annotator)
    return sa.or_(~sa.exists(listed), sa.exists(mine))


__all__ = ["DEFAULT_LEASE_S", "Assignment", "Leases", "eligible"]
