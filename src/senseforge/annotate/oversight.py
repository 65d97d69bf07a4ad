"""The oversight part of the annotation store: progress, gold tasks and accuracy, adjudication, and the QC queue.

:class:`Oversight` is one part of :class:`~senseforge.annotate.store.AnnotationStore`; it
reads the queue's inputs and the submitted judgements through the store's other parts and
adds what admins use to watch and steer the work (the admin page, ``annotate status``,
``annotate gold``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from pydantic import BaseModel

from senseforge.annotate.db import StoreDb
from senseforge.annotate.leases import Leases
from senseforge.annotate.submissions import Submissions
from senseforge.annotate.tasktypes import TASK_TYPES, InvalidSubmission
from senseforge.annotate.tasktypes import task_type as task_type_of
from senseforge.data.schema import Judgement
from senseforge.errors import ConfigError
from senseforge.evaluate.policies import ruling, split, votes_of
from senseforge.pipelines.quality import (
    GOLD_GROUP,
    add_gold,
    excluded_annotators,
    gold_scores,
    quality_settings,
)
from senseforge.pipelines.runstore import RunStore
from senseforge.pipelines.tables import annotators, assignments, gold, judgements, task_eligible, tasks
from senseforge.pipelines.taskqueue import QueuedTask


class Oversight:
    """Progress, gold tasks, adjudication and the QC queue, over the store's queue and judgements.

    Args:
        db: the store's shared database handle.
        leases: the store's task queue (for the tasks' inputs).
        submissions: the store's judgements.
    """

    def __init__(self, db: StoreDb, leases: Leases, submissions: Submissions) -> None:
        self.db = db
        self.leases = leases
        self.submissions = submissions

    @property
    def runs(self) -> RunStore:
        return self.db.runs

    def inputs(self, task_type: str) -> list[tuple[BaseModel, int, str]]:
        """(input, k, group) of every task of a type: the queue's."""
        return self.leases.inputs(task_type)

    def judgements(self, task_type: str, *, gold: bool = False) -> dict[str, list[Judgement]]:
        """Human judgements per item of a task type: the submissions'."""
        return self.submissions.judgements(task_type, gold=gold)

    def progress(self) -> dict[str, Any]:
        """Per task type: tasks, complete ones, judgements wanted and made; per annotator: done and open."""
        now = self.db.clock()
        out: dict[str, Any] = {"tasks": {}, "annotators": {}}
        with self.db.engine.connect() as conn:
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

    def short_of_people(self) -> list[dict[str, Any]]:
        """The task types whose open tasks need more distinct people than could ever take them.

        A task can be taken by the invited annotators it is open to (those listed for it, or anyone), never its
        creator; one that wants ``k`` judgements from fewer such people than ``k`` never completes. Per task
        type with any such task, in name order: ``type``, ``tasks`` (how many are short), ``k`` (the most people
        one of them needs), ``people`` (the fewest who could take one of them) and ``invited`` (how many people
        are invited); and ``message``, which says it with what to do.
        """
        with self.db.engine.connect() as conn:
            names = {str(r[0]) for r in conn.execute(sa.select(annotators.c.name))}
            done = (
                sa.select(sa.func.count())
                .where(assignments.c.task_id == tasks.c.id, assignments.c.done_at.is_not(None))
                .scalar_subquery()
            )
            open_ = conn.execute(
                sa.select(tasks.c.id, tasks.c.type, tasks.c.k, tasks.c.creator).where(
                    tasks.c.id.not_in(sa.select(gold.c.task_id)), done < tasks.c.k
                )
            ).all()
            listed: dict[int, set[str]] = {}
            for task_id, who in conn.execute(sa.select(task_eligible.c.task_id, task_eligible.c.annotator)):
                listed.setdefault(int(task_id), set()).add(str(who))
        short: dict[str, dict[str, Any]] = {}
        for task_id, task_type, k, creator in open_:
            could = (listed.get(int(task_id)) or set(names)) & names - ({str(creator)} if creator else set())
            if len(could) >= int(k):
                continue
            row = short.setdefault(str(task_type), {"type": str(task_type), "tasks": 0, "k": 0, "people": len(names)})
            row["tasks"] += 1
            row["k"] = max(row["k"], int(k))
            row["people"] = min(row["people"], len(could))
        out = []
        for name in sorted(short):
            row = {**short[name], "invited": len(names)}
            row["message"] = (
                f"{name}: {row['tasks']} open task(s) need {row['k']} different people but only {row['people']} "
                f"of the {row['invited']} invited can take them (never an item's creator, only those a task is "
                f"for): invite more people (senseforge annotate invite NAME RUN_DIR) or queue them with a lower k"
            )
            out.append(row)
        return out

    def add_gold(self, task_type: str, entries: Sequence[tuple[BaseModel, Mapping[str, Any]]]) -> int:
        """Queue gold tasks of a type: each an input and the fields a right judgement posts; how many were new.

        Raises:
            ConfigError: the task type casts no vote (nothing to score), or an entry's fields are not a
                valid judgement of it (named by the input's id).
        """
        kind = task_type_of(task_type)
        queued = []
        for task, fields in entries:
            task_id = str(getattr(task, "id"))  # noqa: B009 — every task input model has an id
            try:
                expected = kind.parse(task, fields).vote()
            except InvalidSubmission as exc:
                raise ConfigError(f"gold {task_type} {task_id}: {'; '.join(exc.problems)}") from None
            if expected is None:
                raise ConfigError(f"{task_type} judgements cast no vote: there is nothing to score gold items by")
            queued.append((QueuedTask(task_type, task, k=1, group=GOLD_GROUP), expected))
        return add_gold(self.runs, queued, now=self.db.clock())

    def gold_report(self) -> dict[str, dict[str, dict[str, Any]]]:
        """Per annotator, per task type: gold done, right, accuracy, and whether they are below the bar."""
        bar = quality_settings(self.runs)
        below = excluded_annotators(self.runs, bar)
        return {
            who: {
                task_type: {
                    "gold": score.done,
                    "correct": score.correct,
                    "accuracy": score.accuracy,
                    "excluded": who in below.get(task_type, frozenset()),
                }
                for task_type, score in sorted(per_type.items())
            }
            for who, per_type in sorted(gold_scores(self.runs).items())
        }

    def splits(self, task_type: str) -> list[dict[str, Any]]:
        """The items people split on and nobody has ruled on: the input, and each counted annotator's vote."""
        below = excluded_annotators(self.runs).get(task_type, frozenset())
        inputs = {str(getattr(i, "id")): i for i, _, _ in self.inputs(task_type)}  # noqa: B009
        out = []
        for item_id, judged in self.judgements(task_type).items():
            counted_ = [j for j in judged if j.annotator not in below]
            if item_id not in inputs or ruling(counted_) is not None or not split(counted_):
                continue
            out.append({"item_id": item_id, "input": inputs[item_id], "votes": votes_of(counted_)})
        return out

    def adjudicate(
        self, admin: str, task_type: str, item_id: str, fields: Mapping[str, Any], *, comment: str | None = None
    ) -> Judgement:
        """Record an admin's ruling on an item: a judgement of the task type, marked as the adjudication.

        Raises:
            LookupError: no task of this type for the item.
            InvalidSubmission: the fields are not a valid judgement of the task type.
        """
        inputs = {str(getattr(i, "id")): i for i, _, _ in self.inputs(task_type)}  # noqa: B009
        if item_id not in inputs:
            raise LookupError(f"no {task_type} task for item {item_id!r}")
        body = task_type_of(task_type).parse(inputs[item_id], fields)
        made = datetime.fromtimestamp(float(self.db.clock()), tz=UTC)
        update: dict[str, Any] = {"annotator": f"adjudicator:{admin}", "adjudication": True, "created_at": made}
        if comment and "comment" in type(body).model_fields:
            update["comment"] = comment
        ruled = body.model_copy(update=update)
        self.runs.add_judgements([ruled], "human")
        return ruled

    def qc_queue(self) -> dict[str, Any]:
        """Where each written item stands in QC, read from the ``qc`` tasks and the qc and revise judgements.

        The task types are found by what they declare: those that check drafts
        (:attr:`~senseforge.annotate.fields.TaskType.checks_drafts`, ``qc``) and those that
        revise them (:attr:`~senseforge.annotate.fields.TaskType.revises_drafts`, ``revise``).

        An item is the part of a qc task's id before ``@<round>``; its state is its latest
        queued round's:

        * ``awaiting_qc`` — that round's qc task has no verdict yet;
        * ``needs_revision`` — the verdict sent the item back and its creator has not revised it yet;
        * ``revised`` — the creator revised it and the next round's qc task is not queued yet
          (resuming the build queues it);
        * ``complete`` — the verdict is ``complete``.

        As the Human_Gen recipe reads them: only human judgements count; a round's verdict is
        the first qc judgement stored for it by someone other than the creator, and only the
        creator's revise judgement revises. Two queries, whatever the number of items.

        Returns:
            ``{"items": [...], "counts": {state: n}}``: per item, in the order its first qc
            task was queued, ``item``, ``state``, ``round`` (the latest queued round),
            ``creator`` (of that round's draft) and ``comment`` (the comment of the latest
            round's verdict that has been given, ``None`` without one); ``counts`` has every
            state, zeros included.
        """

        def split(task_id: str) -> tuple[str, int] | None:
            item, sep, raw = task_id.rpartition("@")
            if not sep or not item or not (raw.isascii() and raw.isdigit()):
                return None
            return item, int(raw)

        checking = sorted(name for name, kind in TASK_TYPES.items() if kind.checks_drafts)
        revising = frozenset(name for name, kind in TASK_TYPES.items() if kind.revises_drafts)
        with self.db.engine.connect() as conn:
            queued = conn.execute(
                sa.select(
                    tasks.c.item_id,
                    tasks.c.creator,
                    # the draft's JSON only where the task does not name the creator itself
                    sa.case((tasks.c.creator.is_(None), tasks.c.item), else_=sa.null()),
                )
                .where(tasks.c.type.in_(checking))
                .order_by(tasks.c.id)
            ).all()
            judged = conn.execute(
                sa.select(judgements.c.item_id, judgements.c.task, judgements.c.annotator, judgements.c.body)
                .where(judgements.c.task.in_([*checking, *sorted(revising)]), judgements.c.source == "human")
                .order_by(judgements.c.id)
            ).all()
        latest: dict[str, tuple[int, str | None]] = {}  # item -> (latest round, its creator)
        for task_id, creator, draft in queued:
            parts = split(str(task_id))
            if parts is None:
                continue
            item, round_ = parts
            if item in latest and latest[item][0] >= round_:
                continue
            if creator is None and draft is not None:
                found = json.loads(draft).get("creator")
                creator = found if isinstance(found, str) else None
            latest[item] = (round_, None if creator is None else str(creator))
        verdicts: dict[tuple[str, int], str | None] = {}  # (item, round) -> the verdict that decides it
        revised: set[tuple[str, int]] = set()
        last_comment: dict[str, tuple[int, str | None]] = {}  # item -> (round, comment) of its latest verdict
        for task_id, task, annotator, body in judged:
            parts = split(str(task_id))
            if parts is None or parts[0] not in latest:
                continue
            creator = latest[parts[0]][1]
            by_creator = creator is not None and annotator == creator
            if task in revising:
                if by_creator or creator is None:
                    revised.add(parts)
                continue
            if by_creator or parts in verdicts:
                continue
            fields = json.loads(body)
            verdicts[parts] = fields.get("verdict")
            if parts[0] not in last_comment or last_comment[parts[0]][0] < parts[1]:
                last_comment[parts[0]] = (parts[1], fields.get("comment"))
        counts = dict.fromkeys(("awaiting_qc", "needs_revision", "revised", "complete"), 0)
        rows: list[dict[str, Any]] = []
        for item, (round_, creator) in latest.items():
            verdict = verdicts.get((item, round_))
            if verdict is None:
                state = "awaiting_qc"
            elif verdict == "complete":
                state = "complete"
            elif (item, round_) in revised:
                state = "revised"
            else:
                state = "needs_revision"
            counts[state] += 1
            rows.append(
                {
                    "item": item,
                    "state": state,
                    "round": round_,
                    "creator": creator,
                    "comment": last_comment.get(item, (0, None))[1],
                }
            )
        return {"items": rows, "counts": counts}
