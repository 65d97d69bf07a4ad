"""The annotation store: annotators, tasks and leased assignments, beside a run's judgements.

It lives in the run store's database (same SQLAlchemy URL: SQLite by default, PostgreSQL
for a team), so the decisions people make are the very rows ``build --resume`` reads.

* ``annotators`` — a name, a role (``admin`` or ``annotator``) and the SHA-256 of their
  invite token (the token itself is shown once, never stored);
* ``tasks`` — one per (task type, input): the input (the task type's input model: an
  item, a concept slot, a draft), ``k`` (distinct annotators wanted), who created the item
  (they never judge it) and a group (``mcsqa-review``, ``baseline`` …);
* ``task_eligible`` — who may take a task, when only some may (none listed: anyone);
* ``assignments`` — one per (task, annotator): a lease that expires (its slot goes back
  to the pool) or is closed by the annotator's judgement.

Judgements go to the run store's ``judgements`` table by the run store's one rule
(:func:`~senseforge.pipelines.runstore.put_judgement`, also that of ``--decisions``): one per
(item, annotator, task); a submission that differs from one stored before (an imported
decision) replaces it, a repeated or concurrent second submission of the same judgement is
answered "already stored" and never doubled.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import sqlalchemy as sa
from pydantic import BaseModel
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from senseforge.annotate.oversight import Oversight
from senseforge.annotate.tasktypes import task_type as task_type_of
from senseforge.data.schema import Judgement, MCItem
from senseforge.errors import ConfigError
from senseforge.pipelines.quality import (
    excluded_annotators,
    gold_item_ids,
    qualification,
    quality_settings,
)
from senseforge.pipelines.runstore import RunStore, put_judgement
from senseforge.pipelines.tables import annotators, assignments, gold, task_eligible, tasks
from senseforge.pipelines.taskqueue import QueuedTask, add_tasks, queue_tasks

Role = Literal["admin", "annotator"]
DEFAULT_LEASE_S = 600.0
"""How long an assignment stays reserved for its annotator (10 minutes)."""


def token_hash(token: str) -> str:
    """What the store keeps of an invite token."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Annotator:
    name: str
    role: Role


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


class NotYours(Exception):
    """The assignment belongs to someone else (HTTP 403)."""


class Closed(Exception):
    """The task needs no more judgements, or the lease is gone and the slot was taken (HTTP 409)."""


class AnnotationStore(Oversight):
    """Annotators, tasks and assignments of one run, on the run store's database.

    Args:
        url: the run store's SQLAlchemy URL.
        lease_s: how long an assignment is reserved.
        clock: the time source (tests move it forward).
    """

    def __init__(self, url: str, *, lease_s: float = DEFAULT_LEASE_S, clock: Any = time.time) -> None:
        self.runs = RunStore(url)  # creates the run tables and the task queue beside them
        self.engine = self.runs._engine
        self.lease_s = lease_s
        self.clock = clock
        self._postgres = self.engine.dialect.name == "postgresql"

    def close(self) -> None:
        self.runs.close()

    # -- people --------------------------------------------------------------------------

    def invite(self, name: str, role: Role = "annotator") -> str:
        """Create (or re-key) an annotator; returns their new invite token (shown once)."""
        if not name.strip() or len(name) > 128:
            raise ConfigError("an annotator needs a name of 1 to 128 characters")
        if role not in ("admin", "annotator"):
            raise ConfigError(f"unknown role {role!r}: admin or annotator")
        token = secrets.token_urlsafe(24)
        values = {"role": role, "token_sha256": token_hash(token)}
        with self.engine.begin() as conn:
            updated = conn.execute(annotators.update().where(annotators.c.name == name).values(**values))
            if updated.rowcount == 0:
                conn.execute(annotators.insert().values(name=name, created_at=self.clock(), **values))
        return token

    def who(self, token: str | None) -> Annotator | None:
        """The annotator holding ``token``, or ``None``."""
        if not token:
            return None
        with self.engine.connect() as conn:
            row = conn.execute(
                sa.select(annotators.c.name, annotators.c.role).where(annotators.c.token_sha256 == token_hash(token))
            ).first()
        return Annotator(row[0], row[1]) if row else None

    def annotator_names(self) -> list[str]:
        with self.engine.connect() as conn:
            return [r[0] for r in conn.execute(sa.select(annotators.c.name).order_by(annotators.c.name))]

    # -- tasks ---------------------------------------------------------------------------

    def add_tasks(
        self, task_type: str, items: Iterable[MCItem], *, k: int, group: str, creator: str | None = None
    ) -> int:
        """Queue items for a task type (an item already queued for it is left as it is); how many were new."""
        return add_tasks(self.engine, task_type, items, k=k, group=group, creator=creator, now=self.clock())

    def queue(self, queued: Sequence[QueuedTask]) -> int:
        """Queue tasks of any type (one already queued is left as it is); how many were new."""
        return queue_tasks(self.engine, queued, now=self.clock())

    def _lock_task(self, conn: Connection, task_id: int) -> Any:
        query = sa.select(tasks).where(tasks.c.id == task_id)
        if self._postgres:
            query = query.with_for_update()
        return conn.execute(query).mappings().first()

    def _taken(
        self, conn: Connection, task_id: int, now: float, *, besides: str, ignore: frozenset[str] = frozenset()
    ) -> int:
        """Slots of a task held by other annotators: judged, or leased and not expired (``ignore``: below the bar)."""
        return int(
            conn.execute(
                sa.select(sa.func.count()).where(
                    assignments.c.task_id == task_id,
                    assignments.c.annotator != besides,
                    assignments.c.annotator.not_in(sorted(ignore)) if ignore else sa.true(),
                    sa.or_(assignments.c.done_at.is_not(None), assignments.c.expires_at > now),
                )
            ).scalar_one()
        )

    @staticmethod
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

    def _begin(self) -> Any:
        """A write transaction that holds the database's write lock from the start (SQLite)."""
        conn = self.engine.connect()
        if self.engine.dialect.name == "sqlite":
            conn.exec_driver_sql("BEGIN IMMEDIATE")
        else:
            conn.begin()
        return conn

    def next_assignment(self, annotator: str, task_type: str) -> Assignment | None:
        """The annotator's open assignment of this type, or a new lease on the next task that needs them.

        Gold tasks of the type come in at its configured rate (see :mod:`senseforge.pipelines.quality`),
        each at most once per annotator and only while real work is left; an annotator below
        the accuracy bar gets nothing more of the type, and the slots they held count for nobody.
        """
        now = self.clock()
        bar = quality_settings(self.runs)
        below = excluded_annotators(self.runs, bar).get(task_type, frozenset())
        if annotator in below:
            return None
        rate = bar.rates.get(task_type, 0.0)
        conn = self._begin()
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
            taken = (
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
                _eligible(annotator),
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
                elif qualification(self.runs, annotator, task_type, bar) != "passed":
                    conn.commit()
                    return None
            full: set[int] = set()
            while task_id is None:
                candidate = conn.execute(
                    sa.select(tasks.c.id)
                    .where(*open_to_me, ~is_gold, tasks.c.id.not_in(full) if full else sa.true(), taken < tasks.c.k)
                    .order_by(tasks.c.id)
                    .limit(1)
                ).first()
                if candidate is None:
                    conn.commit()
                    return None
                found = int(candidate[0])
                # another annotator may have taken the last slot since the search: look again under the lock
                task = self._lock_task(conn, found)
                if self._taken(conn, found, now, besides=annotator, ignore=below) < int(task["k"]):
                    task_id = found
                else:
                    full.add(found)
            if not testing and rate > 0 and self._gold_due(conn, annotator, task_type, rate, is_gold):
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
        with self.engine.connect() as conn:
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

    def submit(self, assignment_id: int, annotator: str, judgement: Judgement) -> bool:
        """Store the judgement of an assignment (by :func:`~senseforge.pipelines.runstore.put_judgement`'s rule);
        ``False`` when the same judgement was already stored.

        Raises:
            NotYours: the assignment is someone else's.
            Closed: the task has its k judgements already, or the lease expired and the slot was taken.
            LookupError: no such assignment.
        """
        now = self.clock()
        below_bar = excluded_annotators(self.runs)  # read before the write transaction holds a connection
        conn = self._begin()
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
            self._lock_task(conn, row["task_id"])
            below = below_bar.get(str(row["type"]), frozenset())
            golden = conn.execute(sa.select(gold.c.task_id).where(gold.c.task_id == row["task_id"])).first()
            full = self._taken(conn, row["task_id"], now, besides=annotator, ignore=below) >= row["k"]
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

    # -- reading -------------------------------------------------------------------------

    def judgements(self, task_type: str, *, gold: bool = False) -> dict[str, list[Judgement]]:
        """Human judgements per item of a task type, in the order they were stored (gold tasks' only if asked)."""
        stored = self.runs.judgements_for(task_type)
        skip = set() if gold else gold_item_ids(self.runs).get(task_type, set())
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
        changed = self.runs.add_judgements(made, "human")
        now = self.clock()
        with self.engine.begin() as conn:
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

    def items(self, task_type: str) -> list[tuple[MCItem, int, str]]:
        """(item, k, group) of every task of a type over items, in queue order."""
        return [(item, k, grp) for item, k, grp in self.inputs(task_type) if isinstance(item, MCItem)]

    def inputs(self, task_type: str) -> list[tuple[BaseModel, int, str]]:
        """(input, k, group) of every task of a type, in queue order."""
        model = task_type_of(task_type).input_model
        with self.engine.connect() as conn:
            rows = conn.execute(
                sa.select(tasks.c.item, tasks.c.k, tasks.c.grp).where(tasks.c.type == task_type).order_by(tasks.c.id)
            ).all()
        return [(model.model_validate_json(item), int(k), str(grp)) for item, k, grp in rows]

    def available(self, annotator: str) -> dict[str, int]:
        """Per task type, how many tasks this annotator could take now (not theirs to skip, not full, not done)."""
        now = self.clock()
        taken = (
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
                _eligible(annotator),
                tasks.c.id.not_in(done),
                tasks.c.id.not_in(sa.select(gold.c.task_id)),
                taken < tasks.c.k,
            )
            .group_by(tasks.c.type)
        )
        with self.engine.connect() as conn:
            return {str(t): int(n) for t, n in conn.execute(query)}

    def task_types(self) -> list[str]:
        with self.engine.connect() as conn:
            return [r[0] for r in conn.execute(sa.select(tasks.c.type).distinct().order_by(tasks.c.type))]

    def progress(self) -> dict[str, Any]:
        """Per task type: tasks, complete ones, judgements wanted and made; per annotator: done and open."""
        now = self.clock()
        out: dict[str, Any] = {"tasks": {}, "annotators": {}}
        with self.engine.connect() as conn:
            per_task = conn.execute(
                sa.select(
                    tasks.c.type,
                    tasks.c.k,
                    sa.select(sa.func.count())
                    .where(assignments.c.task_id == tasks.c.id, assignments.c.done_at.is_not(None))
                    .scalar_subquery(),
                ).where(tasks.c.id.not_in(sa.select(gold.c.task_id)))  # gold tasks are no work to finish
            ).all()
            people = conn.execute(
                sa.select(
                    assignments.c.annotator,
                    tasks.c.type,
                    sa.func.sum(sa.case((assignments.c.done_at.is_not(None), 1), else_=0)),
                    sa.func.sum(
                        sa.case((sa.and_(assignments.c.done_at.is_(None), assignments.c.expires_at > now), 1), else_=0)
                    ),
                )
                .join(tasks, tasks.c.id == assignments.c.task_id)
                .group_by(assignments.c.annotator, tasks.c.type)
            ).all()
        for task_type, k, done in per_task:
            entry = out["tasks"].setdefault(task_type, {"tasks": 0, "complete": 0, "wanted": 0, "done": 0})
            entry["tasks"] += 1
            entry["wanted"] += int(k)
            entry["done"] += min(int(done), int(k))
            entry["complete"] += int(done) >= int(k)
        for name, task_type, done, open_ in people:
            out["annotators"].setdefault(name, {})[task_type] = {"done": int(done or 0), "open": int(open_ or 0)}
        return out


def _eligible(annotator: str) -> Any:
    """The condition "this annotator may take the task": nobody is listed for it, or they are."""
    listed = sa.select(task_eligible.c.task_id).where(task_eligible.c.task_id == tasks.c.id)
    mine = listed.where(task_eligible.c.annotator == annotator)
    return sa.or_(~sa.exists(listed), sa.exists(mine))


__all__: Sequence[str] = [
    "DEFAULT_LEASE_S",
    "AnnotationStore",
    "Annotator",
    "Assignment",
    "Closed",
    "NotYours",
    "token_hash",
]
