"""What the parts of the annotation store share: the run store, its engine, the clock and the write transaction.

:class:`~senseforge.annotate.store.AnnotationStore` is composed of parts by responsibility
(:mod:`~senseforge.annotate.people`, :mod:`~senseforge.annotate.leases`,
:mod:`~senseforge.annotate.submissions`, :mod:`~senseforge.annotate.oversight`); each holds
one :class:`StoreDb`, so all of them read and write the one database under the one clock.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from senseforge.pipelines.runstore import RunStore
from senseforge.pipelines.tables import assignments, tasks


class StoreDb:
    """The run store (with the task queue beside its tables), its engine and the time source.

    Args:
        url: the run store's SQLAlchemy URL.
        clock: the time source (tests move it forward).
    """

    def __init__(self, url: str, clock: Callable[[], float]) -> None:
        self.runs = RunStore(url)  # creates the run tables and the task queue beside them
        self.engine = self.runs._engine
        self.clock = clock
        self.postgres = self.engine.dialect.name == "postgresql"

    def close(self) -> None:
        self.runs.close()

    def begin(self) -> Any:
        """A write transaction that holds the database's write lock from the start (SQLite)."""
        conn = self.engine.connect()
        if self.engine.dialect.name == "sqlite":
            conn.exec_driver_sql("BEGIN IMMEDIATE")
        else:
            conn.begin()
        return conn

    def lock_task(self, conn: Connection, task_id: int) -> Any:
        """A task's row, locked for this transaction where the database locks rows (PostgreSQL)."""
        query = sa.select(tasks).where(tasks.c.id == task_id)
        if self.postgres:
            query = query.with_for_update()
        return conn.execute(query).mappings().first()


def taken(conn: Connection, task_id: int, now: float, *, besides: str, ignore: frozenset[str] = frozenset()) -> int:
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


__all__ = ["StoreDb", "taken"]
