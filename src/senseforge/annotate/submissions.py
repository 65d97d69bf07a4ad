"""Submissions to the annotation store: people's judgements of their assignments, imported ones, and reading them.

Judgements go to the run store's ``judgements`` table by the run store's one rule
(:func:`~senseforge.pipelines.runstore.put_judgement`, also that of ``--decisions``): one per
(item, annotator, task); a submission that differs from one stored before (an imported
decision) replaces it, a repeated or concurrent second submission of the same judgement is
answered "already stored" and never doubled. A gold task has no ``k``: everyone may do it once.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError

from senseforge.annotate.db import StoreDb, taken
from senseforge.data.schema import Judgement
from senseforge.pipelines.quality import excluded_annotators, gold_item_ids
from senseforge.pipelines.runstore import put_judgement
from senseforge.pipelines.tables import assignments, gold, tasks


class NotYours(Exception):
    """The assignment belongs to someone else (HTTP 403)."""


class Closed(Exception):
    """The task needs no more judgements, or the lease is gone and the slot was taken (HTTP 409)."""


class Submissions:
    """People's judgements of their assignments, on the store's database."""

    def __init__(self, db: StoreDb) -> None:
        self.db = db

    def submit(self, assignment_id: int, annotator: str, judgement: Judgement) -> bool:
        """Store the judgement of an assignment (by :func:`~senseforge.pipelines.runstore.put_judgement`'s rule);
        ``False`` when the same judgement was already stored.

        Raises:
            NotYours: the assignment is someone else's.
            Closed: the task has its k judgements already, or the lease expired and the slot was taken.
            LookupError: no such assignment.
        """
        now = self.db.clock()
        below_bar = excluded_annotators(self.db.runs)  # read before the write transaction holds a connection
        conn = self.db.begin()
        try:
            row = (
                conn.execute(
                    sa.select(assignments, tasks.c.k, tasks.c.item_id, tasks.c.type)
                    .join(tasks, tasks.c.id == assignments.c.task_id)
                    .where(assignments.c.id == assignment_id)
                )
                .mappings()
                .first()
            )
            if row is None:
                raise LookupError(f"no assignment {assignment_id}")
            if row["annotator"] != annotator:
                raise NotYours(f"assignment {assignment_id} is not yours")
            if judgement.item_id != row["item_id"] or judgement.task != row["type"]:
                raise ValueError("the judgement does not match its assignment")
            if row["done_at"] is not None:
                conn.commit()
                return False
            self.db.lock_task(conn, row["task_id"])
            below = below_bar.get(str(row["type"]), frozenset())
            golden = conn.execute(sa.select(gold.c.task_id).where(gold.c.task_id == row["task_id"])).first()
            full = taken(conn, row["task_id"], now, besides=annotator, ignore=below) >= row["k"]
            if full and golden is None:  # a gold task has no k: everyone may do it once
                # the lease ran out and the slot went to someone else: let the annotator move on
                conn.execute(assignments.update().where(assignments.c.id == assignment_id).values(expires_at=now - 1.0))
                conn.commit()
                raise Closed("this item has all the judgements it needs")
            stamped = judgement.model_copy(update={"annotator": annotator, "created_at": judgement.created_at})
            try:
                stored = put_judgement(conn, stamped, "human", now)  # the run store's rule: a repeat replaces
            except IntegrityError:  # the same person's judgement stored between the read and the write
                stored = 0
            if not stored:
                conn.rollback()
                return False
            conn.execute(assignments.update().where(assignments.c.id == assignment_id).values(done_at=now))
            conn.commit()
            return True
        except BaseException:
            conn.rollback()
            raise
        finally:
            conn.close()

    def judgements(self, task_type: str, *, gold: bool = False) -> dict[str, list[Judgement]]:
        """Human judgements per item of a task type, in the order they were stored (gold tasks' only if asked)."""
        stored = self.db.runs.judgements_for(task_type)
        skip = set() if gold else gold_item_ids(self.db.runs).get(task_type, set())
        return {
            item: [s.judgement for s in entries if s.source == "human"]
            for item, entries in stored.items()
            if item not in skip
        }

    def store_imported(self, made: Sequence[Judgement]) -> int:
        """Store judgements made elsewhere (Label Studio, Argilla) as people's, and close their tasks' slots.

        Each judgement's (task, annotator) assignment is marked done, so the app neither offers
        that task to the annotator again nor counts the slot as open; rows already there are
        updated. Returns how many judgements were new or changed.
        """
        changed = self.db.runs.add_judgements(made, "human")
        now = self.db.clock()
        with self.db.engine.begin() as conn:
            ids = {
                (str(t), str(i)): int(n)
                for n, t, i in conn.execute(sa.select(tasks.c.id, tasks.c.type, tasks.c.item_id))
            }
            for judgement in made:
                task_id = ids.get((judgement.task, judgement.item_id))
                if task_id is None:
                    continue
                where = sa.and_(assignments.c.task_id == task_id, assignments.c.annotator == judgement.annotator)
                done = {"leased_at": now, "expires_at": now, "done_at": now}
                if conn.execute(assignments.update().where(where).values(**done)).rowcount == 0:
                    conn.execute(assignments.insert().values(task_id=task_id, annotator=judgement.annotator, **done))
        return changed


__all__ = ["Closed", "NotYours", "Submissions"]
