"""Submissions to the annotation store: people's judgements of their assignments, imported ones, and reading them.

Judgements go to the run store's ``judgements`` table by the run store's one rule
(:func:`~senseforge.pipelines.runstore.put_judgement`, also that of ``--decisions``): one per
(item, annotator, task); a submission that differs from one stored before (an imported
decision) replaces it, a repeated or concurrent second submission of the same judgement is
answered "already stored" and never doubled. A gold task has no ``k``: everyone may do it once.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from senseforge.annotate.db import StoreDb, taken
from senseforge.data.schema import Judgement
from senseforge.pipelines.quality import excluded_annotators, gold_item_ids
from senseforge.pipelines.runstore import put_judgement
from senseforge.pipelines.tables import assignments, gold, judgements, stage_results, tasks, undone
from senseforge.pipelines.taskqueue import PEOPLE_STAGES, record_of

logger = logging.getLogger(__name__)


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

    def last_done(self, annotator: str, task_type: str) -> int | None:
        """The id of the annotator's assignment of this type they judged last, or ``None``."""
        with self.db.engine.connect() as conn:
            row = conn.execute(
                sa.select(assignments.c.id)
                .join(tasks, tasks.c.id == assignments.c.task_id)
                .where(
                    assignments.c.annotator == annotator,
                    tasks.c.type == task_type,
                    assignments.c.done_at.is_not(None),
                )
                .order_by(assignments.c.done_at.desc(), assignments.c.id.desc())
                .limit(1)
            ).first()
        return None if row is None else int(row[0])

    def undo(self, assignment_id: int, annotator: str, *, lease_s: float) -> None:
        """Take back the annotator's last judgement of its type while no stage has decided on it: the judgement is
        removed (kept in the ``undone`` trail) and the task is theirs again, leased for ``lease_s``; any other open
        lease of theirs of the type is let go, so that the task taken back is the one they are served next.

        A judgement is decided when a stage that reads its task type (the run fact
        :data:`~senseforge.pipelines.taskqueue.PEOPLE_STAGES`) has stored a result for its record, when a task
        queued after it is about the same record (the run went on with it: a revision it asked for, the next
        stage's work), or when an admin has ruled on the item.

        Raises:
            NotYours: the assignment is someone else's.
            Closed: nothing to take back (not judged yet), not their last judgement of the type, or decided.
            LookupError: no such assignment.
        """
        stages = _people_stages(self.db.runs.meta(PEOPLE_STAGES))
        now = self.db.clock()
        conn = self.db.begin()
        try:
            row = (
                conn.execute(
                    sa.select(assignments, tasks.c.item_id, tasks.c.type)
                    .join(tasks, tasks.c.id == assignments.c.task_id)
                    .where(assignments.c.id == assignment_id)
                )
                .mappings()
                .first()
            )
            if row is None:
                raise LookupError(f"no assignment {assignment_id}")
            if row["annotator"] != annotator:
                raise NotYours(f"assignment {assignment_id} is not yours: only your own judgement can be undone")
            task_type, item_id = str(row["type"]), str(row["item_id"])
            if row["done_at"] is None:
                raise Closed(f"assignment {assignment_id} has no judgement of yours to undo")
            last = conn.execute(
                sa.select(assignments.c.id)
                .join(tasks, tasks.c.id == assignments.c.task_id)
                .where(
                    assignments.c.annotator == annotator, tasks.c.type == task_type, assignments.c.done_at.is_not(None)
                )
                .order_by(assignments.c.done_at.desc(), assignments.c.id.desc())
                .limit(1)
            ).scalar_one()
            if int(last) != assignment_id:
                raise Closed(f"only your last {task_type} judgement can be undone (assignment {last})")
            why = _decided(conn, task_type, item_id, int(row["task_id"]), stages.get(task_type, ()))
            if why is not None:
                raise Closed(f"your {task_type} judgement of {item_id} can no longer be undone: {why}")
            mine = sa.and_(
                judgements.c.item_id == item_id,
                judgements.c.annotator == annotator,
                judgements.c.task == task_type,
                judgements.c.source == "human",
            )
            body = conn.execute(sa.select(judgements.c.body).where(mine)).scalar_one_or_none()
            if body is None:
                raise Closed(f"your {task_type} judgement of {item_id} is not in the run store (imported or replaced)")
            conn.execute(judgements.delete().where(mine))
            conn.execute(
                undone.insert().values(task=task_type, item_id=item_id, annotator=annotator, body=body, undone_at=now)
            )
            conn.execute(  # their other open leases of the type go back to the pool: the undone task comes next
                assignments.update()
                .where(
                    assignments.c.annotator == annotator,
                    assignments.c.done_at.is_(None),
                    assignments.c.expires_at > now,
                    assignments.c.task_id.in_(sa.select(tasks.c.id).where(tasks.c.type == task_type)),
                )
                .values(expires_at=now - 1.0)
            )
            conn.execute(
                assignments.update()
                .where(assignments.c.id == assignment_id)
                .values(done_at=None, leased_at=now, expires_at=now + lease_s)
            )
            conn.commit()
        except BaseException:
            conn.rollback()
            raise
        finally:
            conn.close()
        logger.info("%s undid their %s judgement of %s (assignment %d)", annotator, task_type, item_id, assignment_id)

    def undone(self) -> list[dict[str, Any]]:
        """The judgements taken back, oldest first: task, item, annotator, when, and the judgement as it was."""
        with self.db.engine.connect() as conn:
            rows = conn.execute(sa.select(undone).order_by(undone.c.id)).mappings().all()
        return [
            {
                "task": r["task"],
                "item_id": r["item_id"],
                "annotator": r["annotator"],
                "undone_at": r["undone_at"],
                "judgement": json.loads(r["body"]),
            }
            for r in rows
        ]

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


def _people_stages(text: str | None) -> dict[str, tuple[str, ...]]:
    """The run fact :data:`~senseforge.pipelines.taskqueue.PEOPLE_STAGES`, read (empty when absent or unreadable)."""
    try:
        value = json.loads(text) if text else {}
    except ValueError:
        return {}
    if not isinstance(value, dict):
        return {}
    return {str(k): tuple(str(s) for s in v) for k, v in value.items() if isinstance(v, list)}


def _decided(conn: Connection, task_type: str, item_id: str, task_id: int, stages: Sequence[str]) -> str | None:
    """Why a judgement of ``item_id`` can no longer be taken back, or ``None`` while nothing has acted on it."""
    record = record_of(item_id)
    if stages:
        stage = conn.execute(
            sa.select(stage_results.c.stage).where(
                stage_results.c.stage.in_(list(stages)), stage_results.c.record_id == record
            )
        ).first()
        if stage is not None:
            return f"stage {stage[0]} has decided its record"
    later = conn.execute(
        sa.select(tasks.c.type, tasks.c.item_id).where(
            tasks.c.id > task_id,
            sa.or_(tasks.c.item_id == record, tasks.c.item_id.like(f"{_like(record)}@%", escape="\\")),
        )
    ).first()
    if later is not None:
        return f"the run has gone on with it (a {later[0]} task of {later[1]} is queued)"
    ruled = conn.execute(
        sa.select(judgements.c.annotator).where(
            judgements.c.item_id == item_id,
            judgements.c.task == task_type,
            judgements.c.annotator.like("adjudicator:%"),
        )
    ).first()
    if ruled is not None:
        return "an admin has ruled on it"
    return None


def _like(text: str) -> str:
    """``text`` as a literal in a LIKE pattern (escape character: backslash)."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


__all__ = ["Closed", "NotYours", "Submissions"]
