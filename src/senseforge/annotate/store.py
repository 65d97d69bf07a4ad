"""The annotation store: annotators, tasks and leased assignments, beside a run's judgements.

It lives in the run store's database (same SQLAlchemy URL: SQLite by default, PostgreSQL
for a team), so the decisions people make are the very rows ``build --resume`` reads.

:class:`AnnotationStore` is one front over parts by responsibility, each sharing the one
database handle (:class:`~senseforge.annotate.db.StoreDb`):

* :class:`~senseforge.annotate.people.People` — annotators, roles and invite tokens
  (``annotators``; the token itself is shown once, never stored);
* :class:`~senseforge.annotate.leases.Leases` — the task queue (``tasks``), who may take a
  task (``task_eligible``) and the leases on it (``assignments``), gold served at its rate;
* :class:`~senseforge.annotate.submissions.Submissions` — people's judgements of their
  assignments and imported ones, by the run store's one rule
  (:func:`~senseforge.pipelines.runstore.put_judgement`): one per (item, annotator, task);
  a repeated or concurrent second submission of the same judgement is answered "already
  stored" and never doubled;
* :class:`~senseforge.annotate.oversight.Oversight` — progress, gold accuracy,
  adjudication and the QC queue.

Callers use the store's methods; each says which part answers it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel
from sqlalchemy.engine import Engine

from senseforge.annotate.db import StoreDb
from senseforge.annotate.leases import DEFAULT_LEASE_S, Assignment, Leases
from senseforge.annotate.oversight import Oversight
from senseforge.annotate.people import Annotator, People, Role, token_hash
from senseforge.annotate.submissions import Closed, NotYours, Submissions
from senseforge.data.schema import Judgement, MCItem
from senseforge.pipelines.runstore import RunStore
from senseforge.pipelines.taskqueue import QueuedTask


class AnnotationStore:
    """Annotators, tasks and assignments of one run, on the run store's database.

    Args:
        url: the run store's SQLAlchemy URL.
        lease_s: how long an assignment is reserved.
        clock: the time source (tests move it forward).
    """

    def __init__(self, url: str, *, lease_s: float = DEFAULT_LEASE_S, clock: Callable[[], float] = time.time) -> None:
        self.db = StoreDb(url, clock)
        self.people = People(self.db)
        self.leases = Leases(self.db, lease_s=lease_s)
        self.submissions = Submissions(self.db)
        self.oversight = Oversight(self.db, self.leases, self.submissions)

    @property
    def runs(self) -> RunStore:
        """The run store the annotation tables live beside."""
        return self.db.runs

    @property
    def engine(self) -> Engine:
        """The run store's SQLAlchemy engine."""
        return self.db.engine

    @property
    def clock(self) -> Callable[[], float]:
        """The time source."""
        return self.db.clock

    @property
    def lease_s(self) -> float:
        """How long an assignment is reserved."""
        return self.leases.lease_s

    def close(self) -> None:
        self.db.close()

    # -- people --------------------------------------------------------------------------

    def invite(self, name: str, role: Role = "annotator", lang: str | None = None) -> str:
        """Create (or re-key) an annotator; returns their new invite token (:meth:`People.invite`)."""
        return self.people.invite(name, role, lang)

    def set_language(self, name: str, lang: str) -> None:
        """Remember the language of ``name``'s pages (:meth:`People.set_language`)."""
        self.people.set_language(name, lang)

    def who(self, token: str | None) -> Annotator | None:
        """The annotator holding ``token``, or ``None`` (:meth:`People.who`)."""
        return self.people.who(token)

    def annotator_names(self) -> list[str]:
        """Every annotator's name, sorted."""
        return self.people.annotator_names()

    # -- the queue and its leases --------------------------------------------------------

    def add_tasks(
        self, task_type: str, items: Iterable[MCItem], *, k: int, group: str, creator: str | None = None
    ) -> int:
        """Queue items for a task type; how many were new (:meth:`Leases.add_tasks`)."""
        return self.leases.add_tasks(task_type, items, k=k, group=group, creator=creator)

    def queue(self, queued: Sequence[QueuedTask]) -> int:
        """Queue tasks of any type; how many were new (:meth:`Leases.queue`)."""
        return self.leases.queue(queued)

    def next_assignment(self, annotator: str, task_type: str) -> Assignment | None:
        """The annotator's open assignment of this type, or a new lease (:meth:`Leases.next_assignment`)."""
        return self.leases.next_assignment(annotator, task_type)

    def assignment(self, assignment_id: int) -> Assignment | None:
        """One assignment with its task's item."""
        return self.leases.assignment(assignment_id)

    def items(self, task_type: str) -> list[tuple[MCItem, int, str]]:
        """(item, k, group) of every task of a type over items, in queue order."""
        return self.leases.items(task_type)

    def inputs(self, task_type: str) -> list[tuple[BaseModel, int, str]]:
        """(input, k, group) of every task of a type, in queue order."""
        return self.leases.inputs(task_type)

    def available(self, annotator: str) -> dict[str, int]:
        """Per task type, how many tasks this annotator could take now (:meth:`Leases.available`)."""
        return self.leases.available(annotator)

    def task_types(self) -> list[str]:
        """The task types with tasks queued, sorted."""
        return self.leases.task_types()

    def position(self, annotator: str, task_type: str) -> tuple[int, int]:
        """Where the annotator stands in their queue of a type: (done so far + 1, done + left to them)
        (:meth:`Leases.position`)."""
        return self.leases.position(annotator, task_type)

    # -- submissions ---------------------------------------------------------------------

    def submit(self, assignment_id: int, annotator: str, judgement: Judgement) -> bool:
        """Store the judgement of an assignment; ``False`` when the same one was already stored.

        Raises:
            NotYours: the assignment is someone else's.
            Closed: the task has its k judgements already, or the lease expired and the slot was taken.
            LookupError: no such assignment.
        """
        return self.submissions.submit(assignment_id, annotator, judgement)

    def judgements(self, task_type: str, *, gold: bool = False) -> dict[str, list[Judgement]]:
        """Human judgements per item of a task type, in the order they were stored (gold tasks' only if asked)."""
        return self.submissions.judgements(task_type, gold=gold)

    def last_done(self, annotator: str, task_type: str) -> int | None:
        """The id of the annotator's assignment of this type they judged last (:meth:`Submissions.last_done`)."""
        return self.submissions.last_done(annotator, task_type)

    def undo(self, assignment_id: int, annotator: str) -> Assignment:
        """Take back the annotator's last judgement of its type while undecided; the task, theirs again.

        See :meth:`Submissions.undo`.

        Raises:
            NotYours: the assignment is someone else's.
            Closed: nothing to take back, not their last judgement of the type, or a stage has decided it.
            LookupError: no such assignment.
        """
        self.submissions.undo(assignment_id, annotator, lease_s=self.lease_s)
        reopened = self.assignment(assignment_id)
        assert reopened is not None  # it was there in the transaction that reopened it
        return reopened

    def undone(self) -> list[dict[str, Any]]:
        """The judgements taken back, oldest first (:meth:`Submissions.undone`)."""
        return self.submissions.undone()

    def store_imported(self, made: Sequence[Judgement]) -> int:
        """Store judgements made elsewhere as people's and close their slots (:meth:`Submissions.store_imported`)."""
        return self.submissions.store_imported(made)

    # -- oversight -----------------------------------------------------------------------

    def progress(self) -> dict[str, Any]:
        """Per task type: tasks, complete ones, judgements wanted and made; per annotator: done and open."""
        return self.oversight.progress()

    def short_of_people(self) -> list[dict[str, Any]]:
        """Per task type, the open tasks that need more distinct people than could take them
        (:meth:`Oversight.short_of_people`)."""
        return self.oversight.short_of_people()

    def add_gold(self, task_type: str, entries: Sequence[tuple[BaseModel, Mapping[str, Any]]]) -> int:
        """Queue gold tasks of a type; how many were new (:meth:`Oversight.add_gold`).

        Raises:
            ConfigError: the task type casts no vote, or an entry's fields are not a valid judgement of it.
        """
        return self.oversight.add_gold(task_type, entries)

    def gold_report(self) -> dict[str, dict[str, dict[str, Any]]]:
        """Per annotator, per task type: gold done, right, accuracy, and whether they are below the bar."""
        return self.oversight.gold_report()

    def splits(self, task_type: str) -> list[dict[str, Any]]:
        """The items people split on and nobody has ruled on (:meth:`Oversight.splits`)."""
        return self.oversight.splits(task_type)

    def adjudicate(
        self, admin: str, task_type: str, item_id: str, fields: Mapping[str, Any], *, comment: str | None = None
    ) -> Judgement:
        """Record an admin's ruling on an item (:meth:`Oversight.adjudicate`).

        Raises:
            LookupError: no task of this type for the item.
            InvalidSubmission: the fields are not a valid judgement of the task type.
        """
        return self.oversight.adjudicate(admin, task_type, item_id, fields, comment=comment)

    def qc_queue(self) -> dict[str, Any]:
        """Where each written item stands in QC (:meth:`Oversight.qc_queue`)."""
        return self.oversight.qc_queue()


__all__: Sequence[str] = [
    "DEFAULT_LEASE_S",
    "AnnotationStore",
    "Annotator",
    "Assignment",
    "Closed",
    "NotYours",
    "Role",
    "token_hash",
]
