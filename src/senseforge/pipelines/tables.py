"""The tables of a run's database: the run store's and, beside them, the annotation task queue's.

One :class:`sqlalchemy.MetaData` holds them all, so opening a run store creates every
table the run and its annotators need (see :mod:`senseforge.pipelines.runstore` and
:mod:`senseforge.pipelines.taskqueue`).
"""

from __future__ import annotations

import sqlalchemy as sa

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

annotators = sa.Table(
    "annotators",
    metadata,
    sa.Column("name", sa.String(128), primary_key=True),
    sa.Column("role", sa.String(16), nullable=False),
    sa.Column("token_sha256", sa.String(64), nullable=False, unique=True),
    sa.Column("created_at", sa.Float, nullable=False),
    # the language of their pages (a code of senseforge/annotate/locale; NULL: the app's default); added to older
    # stores by senseforge.annotate.people
    sa.Column("lang", sa.String(16), nullable=True),
)

tasks = sa.Table(
    "tasks",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("type", sa.String(32), nullable=False),
    sa.Column("item_id", sa.String(255), nullable=False),
    sa.Column("item", sa.Text, nullable=False),
    sa.Column("k", sa.Integer, nullable=False),
    sa.Column("creator", sa.String(128), nullable=True),
    sa.Column("grp", sa.String(64), nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.UniqueConstraint("type", "item_id", name="uq_task"),
)

assignments = sa.Table(
    "assignments",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("task_id", sa.Integer, sa.ForeignKey("tasks.id"), nullable=False),
    sa.Column("annotator", sa.String(128), nullable=False),
    sa.Column("leased_at", sa.Float, nullable=False),
    sa.Column("expires_at", sa.Float, nullable=False),
    sa.Column("done_at", sa.Float, nullable=True),
    sa.UniqueConstraint("task_id", "annotator", name="uq_assignment"),
)

task_eligible = sa.Table(
    "task_eligible",
    metadata,
    sa.Column("task_id", sa.Integer, sa.ForeignKey("tasks.id"), primary_key=True),
    sa.Column("annotator", sa.String(128), primary_key=True),
)
"""Who may take a task, when only some may (a slot for its creator, answers for the pool); none listed: anyone."""

gold = sa.Table(
    "gold",
    metadata,
    sa.Column("task_id", sa.Integer, sa.ForeignKey("tasks.id"), primary_key=True),
    sa.Column("expected", sa.Text, nullable=False),  # the vote a right judgement of this gold task casts
)
"""Gold tasks: items with a known answer, mixed into a task type's queue to measure each annotator."""

undone = sa.Table(
    "undone",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("task", sa.String(32), nullable=False),
    sa.Column("item_id", sa.String(255), nullable=False),
    sa.Column("annotator", sa.String(128), nullable=False),
    sa.Column("body", sa.Text, nullable=False),  # the judgement taken back, as it was stored
    sa.Column("undone_at", sa.Float, nullable=False),
)
"""Judgements their annotators took back while no stage had decided on them (the annotation app's undo): the trail."""


run_lease = sa.Table(
    "run_lease",
    metadata,
    sa.Column("name", sa.String(16), primary_key=True),  # one row, ``writer``: who builds the run now
    sa.Column("token", sa.String(64), nullable=False),
    sa.Column("pid", sa.Integer, nullable=False),
    sa.Column("host", sa.String(255), nullable=False),
    sa.Column("since", sa.Float, nullable=False),
    sa.Column("renewed", sa.Float, nullable=False),
)
"""The run's writer lease: the one process that may build (or resume) the run now, renewed while it runs
(:class:`senseforge.pipelines.runlease.WriterLease`)."""
