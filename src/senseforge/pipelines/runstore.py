"""The run store: every stage result of one run, per record, on the SQLAlchemy layer.

A run directory holds ``run.db`` (SQLite) by default; any SQLAlchemy URL (PostgreSQL for
a team of annotators) works the same. Three tables:

``stage_results``
    One row per (stage, record): ``ok`` with the record's payload after the stage, or
    ``rejected`` with the reason. The raw prompt and response of an LM stage are kept
    beside it. A row is written once, in the transaction of its batch, so a run killed at
    any moment resumes from the rows that exist and repeats nothing else.
``judgements``
    Review decisions about items, by humans (a decisions file now, the annotation app
    later) or by LM reviewers, one per (item, annotator, task).
``run_meta``
    Small key/value facts about the run (its state, e.g. ``awaiting_review``, and the heartbeat of the
    process that builds it: :class:`Heartbeat`).
``run_lease``
    One row: the one process that may write the run now (:class:`WriterLease`; every build and resume takes it).

The annotation task queue's tables live beside these (:mod:`senseforge.pipelines.tables`)
and are created with them.
"""

from __future__ import annotations

import json
import logging
import os
import re
import socket
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Literal, Self

import sqlalchemy as sa
from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic_core import to_jsonable_python
from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError
from typing_extensions import TypeVar

from senseforge.data.schema import JUDGEMENT, Judgement
from senseforge.errors import StoreError
from senseforge.pipelines.heartbeat import HEARTBEAT as HEARTBEAT
from senseforge.pipelines.heartbeat import HEARTBEAT_STALE_S as HEARTBEAT_STALE_S  # re-exported: `runs show`
from senseforge.pipelines.heartbeat import Beat as Beat
from senseforge.pipelines.heartbeat import Heartbeat as Heartbeat  # re-exported: the runner
from senseforge.pipelines.heartbeat import process_exists as process_exists  # re-exported: the writer lease
from senseforge.pipelines.panel import PanelVerdict
from senseforge.pipelines.payloads import CALLS as CALLS
from senseforge.pipelines.payloads import ENGINE_KEYS as ENGINE_KEYS
from senseforge.pipelines.payloads import EVIDENCE as EVIDENCE
from senseforge.pipelines.payloads import REVIEW as REVIEW
from senseforge.pipelines.payloads import CallEntry as CallEntry  # re-exported: the stages' modules
from senseforge.pipelines.payloads import dumps as _dumps
from senseforge.pipelines.payloads import engine_fields, read, split, stored_entry
from senseforge.pipelines.payloads import loads as _loads
from senseforge.pipelines.runwrites import CHUNK as _CHUNK
from senseforge.pipelines.runwrites import JudgementSource as JudgementSource  # re-exported: the records' modules
from senseforge.pipelines.runwrites import insert_rows, put_judgements
from senseforge.pipelines.runwrites import put_judgement as put_judgement  # re-exported: the annotation app
from senseforge.pipelines.tables import judgements, metadata, run_meta, stage_results
from senseforge.store.db import connect, create_tables

logger = logging.getLogger(__name__)

Status = Literal["ok", "rejected"]


class Record(BaseModel):
    """The base of a recipe's record data: what passes between its stages, validated on every read.

    A recipe subclasses it with the fields its stages fill in as a record moves on (``None``
    until a stage sets them). Only the fields that were set are stored, so a record reads
    back as it was written. :meth:`shown_question` and :meth:`shown_checked` build the
    record's row in ``rejects.jsonl``.
    """

    model_config = ConfigDict(extra="forbid")

    contamination: list[dict[str, Any]] | None = None
    """What the contamination check found and let the record pass with (a flag for people: a cross-lingual
    match, or any match under ``--contamination flag``), each a registry match; unset when nothing was found."""
    panel: PanelVerdict | None = None
    """What a verification panel (``--panel``) answered and decided (:mod:`senseforge.pipelines.verification`);
    unset without one."""

    def stored(self) -> dict[str, Any]:
        """The fields that were set, as JSON values (nested models whole)."""
        return self.model_dump(mode="json", include=set(self.model_fields_set), by_alias=True)

    def with_(self, **changes: Any) -> Self:
        """A copy with ``changes`` set (validated, so a wrong type fails where it is made)."""
        values = {name: getattr(self, name) for name in self.model_fields_set}
        return type(self).model_validate({**values, **changes})

    def shown_question(self) -> str | None:
        """The question ``rejects.jsonl`` shows for the record (none by default)."""
        return None

    def shown_checked(self) -> dict[str, Any]:
        """The record's text as its checks saw it, besides the question (``rejects.jsonl``'s ``checked``)."""
        return {}


class Loose(Record):
    """Any record's data, unchecked: what the engine reads when it needs only its own fields of a result (the
    calls the cost report sums), whatever the recipe."""

    model_config = ConfigDict(extra="allow")

    def stored(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


def as_stored(value: Any) -> Any:
    """A value as the run store hands it back: JSON, every object's keys sorted (outputs built from stored
    records before they were typed show their nested values so)."""
    return json.loads(_dumps(to_jsonable_python(value)))


D = TypeVar("D", bound=Record, default=Record, covariant=True)
"""A result's data model (a bare ``StageResult`` holds any :class:`Record`)."""
R = TypeVar("R", bound=Record)
"""Another record model (a result read back as a model of its own)."""


@dataclass(frozen=True)
class StageResult(Generic[D]):
    """What one stage made of one record: the recipe's data, and the engine's fields beside it.

    In the run store the two share one JSON object (``payload``): the data's fields, and
    ``calls``, ``review`` and ``evidence`` when set — the layout of runs stored before typed
    records, so those read back unchanged (:meth:`from_payload` is the adapter).
    """

    record_id: str
    status: Status
    data: D
    reason: str | None = None
    prompt: str | None = None
    response: str | None = None
    calls: Mapping[str, tuple[CallEntry, ...]] = field(default_factory=dict)
    """The LM calls the record made, per stage that made them (for the cost report)."""
    review: JudgementSource | None = None
    """Who accepted the record in a review (``lm`` or ``human``); ``None`` when it was not reviewed."""
    evidence: Mapping[str, Any] | None = None
    """What the check that rejected the record found."""
    stored: str | None = field(default=None, init=False, compare=False, repr=False)
    """The payload as the run store holds it, on a result read from it (:meth:`RunStore.results`, :meth:`as_read`,
    a replayed outcome); ``None`` on one made since (``dataclasses.replace`` does not carry it over)."""

    def keep_stored(self, payload: str) -> StageResult[D]:
        """This result, marked as the one ``payload`` reads back as (:attr:`stored`)."""
        object.__setattr__(self, "stored", payload)
        return self

    def as_read(self, model: type[R], stored: str | None = None, *, unchanged: bool = False) -> StageResult[R]:
        """This result as the run store hands it back once stored: its payload through JSON (``stored``: as
        :meth:`RunStore.put` wrote it), read as ``model``.

        ``unchanged``: the data is a record the run store handed back (read, or made by this method) that the stage
        passed on as it was. Such a record reads back as itself, so it is kept, not parsed and validated again (a
        third of the records a stage hands on in a build, each a payload read)."""
        if unchanged and type(self.data) is model and not self.evidence:
            calls = {stage: tuple(self.calls[stage]) for stage in sorted(self.calls)} if self.calls else None
            kept: Any = self.data
            same = StageResult(
                self.record_id,
                self.status,
                kept,
                reason=self.reason,
                prompt=self.prompt,
                response=self.response,
                **engine_fields(calls, self.review, None),
            )
            return same if stored is None else same.keep_stored(stored)
        payload = _dumps(self._stored()) if stored is None else stored
        data, engine = read(payload, model, self.calls)
        return StageResult(
            self.record_id, self.status, data, reason=self.reason, prompt=self.prompt, response=self.response, **engine
        ).keep_stored(payload)

    @property
    def payload(self) -> dict[str, Any]:
        """The stored JSON object: the data's fields and the engine's."""
        out = self._stored()
        if CALLS in out:  # the entries are shared (:func:`stored_entry`): the caller gets its own
            out[CALLS] = {stage: [dict(e) for e in entries] for stage, entries in out[CALLS].items()}
        return out

    def _stored(self) -> dict[str, Any]:
        """:attr:`payload` with the call entries shared, for :func:`_dumps` alone."""
        out = self.data.stored()
        if self.calls:
            out[CALLS] = {stage: list(map(stored_entry, entries)) for stage, entries in self.calls.items()}
        if self.review is not None:
            out[REVIEW] = self.review
        if self.evidence:
            out[EVIDENCE] = dict(self.evidence)
        return out

    @classmethod
    def from_payload(
        cls,
        record_id: str,
        status: Status,
        payload: Mapping[str, Any],
        model: type[D],
        *,
        reason: str | None = None,
        prompt: str | None = None,
        response: str | None = None,
    ) -> StageResult[D]:
        """A result read from its stored JSON object, its data validated as ``model``."""
        data, engine = split(payload, model)
        return cls(record_id, status, data, reason=reason, prompt=prompt, response=response, **engine)


@dataclass(frozen=True)
class StoredJudgement:
    """A judgement as the run store holds it, with who made it."""

    judgement: Judgement
    source: JudgementSource


_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _picked(payload: Mapping[str, Any], keys: Sequence[str]) -> dict[str, Any]:
    return {key: payload.get(key) for key in keys}


def sqlite_url(path: Path) -> str:
    """The SQLAlchemy URL of a SQLite file."""
    return f"sqlite:///{path.resolve()}"


PAGE_SIZE = 16384
"""Bytes per page of a new SQLite run store: a build writes every stage's records (a few KiB each, by record id, not
in order), and pages four times SQLite's default take a quarter of the reads and writes (see
``benchmarks/paper_scale.py``'s rerun)."""
CACHE_KIB = 32768
"""SQLite's page cache per connection of a run store, in KiB (SQLite's default, 2 MiB, is outrun by a build)."""


class RunStore:
    """The stage results and judgements of one run.

    Args:
        url: a SQLAlchemy URL (``sqlite:///…/run.db`` or ``postgresql+psycopg://…``).

    Raises:
        StoreError: the database cannot be opened or created.
    """

    def __init__(self, url: str) -> None:
        self.url = url
        try:
            self._engine: Engine = connect(url, page_size=PAGE_SIZE, cache_kib=CACHE_KIB)
            create_tables(self._engine, metadata)
        except (SQLAlchemyError, OSError) as exc:
            raise StoreError(f"cannot open the run store {url}: {exc}") from exc

    def close(self) -> None:
        """Release the connection pool."""
        self._engine.dispose()

    # -- stage results ---------------------------------------------------------------------

    @property
    def engine(self) -> Engine:
        """The database engine (the annotation task queue shares it)."""
        return self._engine

    def put(
        self,
        stage: str,
        results: Sequence[StageResult[Any]],
        *,
        judgements: Sequence[tuple[Judgement, JudgementSource]] = (),
    ) -> list[str]:
        """Store results of one stage, and the judgements made for them, in one transaction.

        A record already stored is an error; a judgement already stored is replaced. A result that holds the
        payload it reads back as (:attr:`StageResult.stored`: read from the store, replayed, or passed on as it came)
        is stored as that payload, not dumped again.

        Returns:
            The results' payloads as stored (JSON), in order: what :meth:`StageResult.as_read` reads back.
        """
        if not results and not judgements:
            return []
        now = time.time()
        payloads = [r.stored if r.stored is not None else _dumps(r._stored()) for r in results]
        rows = [
            {
                "stage": stage,
                "record_id": r.record_id,
                "status": r.status,
                "reason": r.reason,
                "payload": payload,
                "prompt": r.prompt,
                "response": r.response,
                "created_at": now,
            }
            for r, payload in zip(results, payloads, strict=True)
        ]
        with self._engine.begin() as conn:
            put_judgements(conn, judgements, now)
            insert_rows(conn, stage_results, rows)
        return payloads

    def done_ids(self, stage: str) -> set[str]:
        """Ids of the records that already have a result in ``stage``."""
        with self._engine.connect() as conn:
            rows = conn.execute(sa.select(stage_results.c.record_id).where(stage_results.c.stage == stage))
            return {row[0] for row in rows}

    def results(
        self,
        stage: str,
        status: Status | None = None,
        model: type[D] = Loose,  # type: ignore[assignment]
    ) -> list[StageResult[D]]:
        """Results of ``stage`` sorted by record id (only ``status`` ones when given), their data read as ``model``.

        Raises:
            StoreError: a stored record does not fit ``model`` (a run of another version or recipe).
        """
        query = sa.select(stage_results).where(stage_results.c.stage == stage)
        if status is not None:
            query = query.where(stage_results.c.status == status)
        with self._engine.connect() as conn:
            rows = conn.execute(query.order_by(stage_results.c.record_id)).mappings().all()
        out: list[StageResult[D]] = []
        for row in rows:
            try:
                data, engine = read(row["payload"], model)
                out.append(
                    StageResult(
                        row["record_id"],
                        row["status"],
                        data,
                        reason=row["reason"],
                        prompt=row["prompt"],
                        response=row["response"],
                        **engine,
                    ).keep_stored(row["payload"])
                )
            except ValidationError as exc:
                problem = exc.errors()[0]
                where = ".".join(str(part) for part in problem["loc"])
                raise StoreError(
                    f"{self.url}: stage {stage}, record {row['record_id']}: {where}: {problem['msg']} "
                    f"(not a {model.__name__}: a run of another senseforge version or recipe?)"
                ) from exc
        return out

    def recorded_calls(self, stage: str) -> list[tuple[str, str]]:
        """The LM calls each result of ``stage`` recorded, as (the stage that made them, their entries as JSON text)
        per record and making stage, in record-id order and then as the payload holds them: what the cost report
        sums, without reading the records' data. The text lets a reader skip a list it met before (a record's calls
        go on with it, unchanged, through every later stage)."""
        if self._engine.dialect.name == "sqlite":  # the database takes the lists out of the payloads
            query = (
                "SELECT made.key, made.value FROM stage_results AS r, json_each(r.payload, '$.calls') AS made "
                "WHERE r.stage = ? AND made.type = 'array' ORDER BY r.record_id, made.id"
            )
            with self._engine.connect() as conn:
                return [(str(made), str(entries)) for made, entries in conn.exec_driver_sql(query, (stage,))]
        return [
            (made, _dumps(entries))
            for _, _, found in self.values(stage, (CALLS,))
            for made, entries in (found[CALLS] or {}).items()
        ]

    def values(
        self, stage: str, keys: Sequence[str], status: Status | None = None
    ) -> list[tuple[str, Status, dict[str, Any]]]:
        """Record id, status and the payload's values under ``keys`` (top-level keys; ``None`` where missing) of each
        result of ``stage`` (only ``status`` ones when given), sorted by record id: a figure or a report that needs
        a field or two of every record reads them without reading the records (the database picks them out).

        Raises:
            ValueError: a key that is not a plain name.
        """
        for key in keys:
            if not _KEY.fullmatch(key):
                raise ValueError(f"not a payload key: {key!r}")
        dialect = self._engine.dialect.name
        picked: list[Any]
        if dialect == "sqlite":
            picked = [sa.literal_column(f"payload -> '$.{key}'") for key in keys]
        elif dialect == "postgresql":
            picked = [sa.literal_column(f"(CAST(payload AS JSONB) -> '{key}')::text") for key in keys]
        else:
            picked = [stage_results.c.payload]
        query = sa.select(stage_results.c.record_id, stage_results.c.status, *picked).where(
            stage_results.c.stage == stage
        )
        if status is not None:
            query = query.where(stage_results.c.status == status)
        with self._engine.connect() as conn:
            rows = conn.execute(query.order_by(stage_results.c.record_id)).all()
        if dialect not in ("sqlite", "postgresql"):
            return [(row[0], row[1], _picked(_loads(row[2]), keys)) for row in rows]
        return [
            (
                row[0],
                row[1],
                {key: None if text is None else _loads(text) for key, text in zip(keys, row[2:], strict=True)},
            )
            for row in rows
        ]

    def stored(self) -> int:
        """How many stage results and judgements the run holds (0: nothing was stored yet)."""
        with self._engine.connect() as conn:
            results = conn.execute(sa.select(sa.func.count()).select_from(stage_results)).scalar_one()
            judged = conn.execute(sa.select(sa.func.count()).select_from(judgements)).scalar_one()
        return int(results) + int(judged)

    def counts(self, stage: str) -> dict[str, int]:
        """``{"ok": n, "<reason>": n, …}`` for one stage."""
        key = sa.func.coalesce(stage_results.c.reason, stage_results.c.status)
        query = (
            sa.select(stage_results.c.status, key, sa.func.count())
            .where(stage_results.c.stage == stage)
            .group_by(stage_results.c.status, key)
        )
        with self._engine.connect() as conn:
            return {("ok" if status == "ok" else reason): n for status, reason, n in conn.execute(query)}

    # -- judgements --------------------------------------------------------------------------

    def add_judgements(self, items: Iterable[Judgement], source: JudgementSource) -> int:
        """Store judgements by the rule of :func:`put_judgement`; how many rows were new or changed."""
        now = time.time()
        with self._engine.begin() as conn:
            return put_judgements(conn, [(judgement, source) for judgement in items], now)

    def count_judgements(self, task: str, source: JudgementSource) -> int:
        """How many judgements of ``task`` came from ``source``."""
        query = sa.select(sa.func.count()).where(judgements.c.task == task, judgements.c.source == source)
        with self._engine.connect() as conn:
            return int(conn.execute(query).scalar_one())

    def judgements_for(self, task: str, item_ids: Iterable[str] | None = None) -> dict[str, list[StoredJudgement]]:
        """Judgements of ``task`` per item, in the order they were first stored."""
        query = sa.select(judgements.c.item_id, judgements.c.source, judgements.c.body).where(judgements.c.task == task)
        wanted = set(item_ids) if item_ids is not None else None
        out: dict[str, list[StoredJudgement]] = {}
        with self._engine.connect() as conn:
            for item_id, source, body in conn.execute(query.order_by(judgements.c.id)):
                if wanted is not None and item_id not in wanted:
                    continue
                out.setdefault(item_id, []).append(StoredJudgement(JUDGEMENT.validate_json(body), source))
        return out

    def every_judgement(self) -> list[StoredJudgement]:
        """Every judgement, in the order they were first stored."""
        query = sa.select(judgements.c.source, judgements.c.body).order_by(judgements.c.id)
        with self._engine.connect() as conn:
            return [StoredJudgement(JUDGEMENT.validate_json(body), source) for source, body in conn.execute(query)]

    def judgements_of_records(
        self, tasks: Sequence[str], record_ids: Iterable[str]
    ) -> dict[str, list[StoredJudgement]]:
        """Judgements of any of ``tasks`` per record, in the order they were first stored.

        A judgement counts for a record when its item is the record (``<id>``) or one round
        of it (``<id>@<round>``: QC and revision happen once per round).
        """
        wanted = sorted(set(record_ids))
        if not wanted or not tasks:
            return {}
        rows: dict[int, tuple[str, JudgementSource, str]] = {}
        with self._engine.connect() as conn:
            binary = conn.dialect.name == "sqlite"  # SQLite compares text bytewise: "<id>@…" sorts below "<id>A"
            for start in range(0, len(wanted), _CHUNK):  # the records' own rows, not every judgement of the run
                chunk = wanted[start : start + _CHUNK]
                if binary and conn.dialect.paramstyle == "qmark":  # the same query, written without SQLAlchemy's
                    found = conn.exec_driver_sql(*_judged_sqlite(tasks, chunk))  # expressions (built per record,
                    rows.update((row_id, (item_id, source, body)) for row_id, item_id, source, body in found)
                    continue  # they cost more than the query)
                rounds = [
                    sa.and_(judgements.c.item_id > f"{record}@", judgements.c.item_id < f"{record}A")
                    if binary
                    else judgements.c.item_id.startswith(f"{record}@", autoescape=True)
                    for record in chunk
                ]
                query = sa.select(judgements.c.id, judgements.c.item_id, judgements.c.source, judgements.c.body).where(
                    judgements.c.task.in_(list(tasks)), sa.or_(judgements.c.item_id.in_(chunk), *rounds)
                )
                rows.update((row_id, (item_id, source, body)) for row_id, item_id, source, body in conn.execute(query))
        out: dict[str, list[StoredJudgement]] = {}
        chosen = set(wanted)
        for _, (item_id, source, body) in sorted(rows.items()):  # the order they were first stored
            record = item_id.split("@", 1)[0]
            if record in chosen:
                out.setdefault(record, []).append(StoredJudgement(JUDGEMENT.validate_json(body), source))
        return out

    # -- run facts ---------------------------------------------------------------------------

    def set_meta(self, values: Mapping[str, str]) -> None:
        """Set run facts (upsert)."""
        with self._engine.begin() as conn:
            for key, value in values.items():
                updated = conn.execute(run_meta.update().where(run_meta.c.key == key).values(value=value))
                if updated.rowcount == 0:
                    conn.execute(run_meta.insert().values(key=key, value=value))

    def meta(self, key: str) -> str | None:
        """One run fact, or ``None``."""
        with self._engine.connect() as conn:
            return conn.execute(sa.select(run_meta.c.value).where(run_meta.c.key == key)).scalar_one_or_none()

    def beat(self, *, ended: bool = False, now: float | None = None) -> Beat:
        """Record that this process is building the run (``ended``: it has stopped), and return the beat."""
        ts = time.time() if now is None else now
        beat = Beat(ts=ts, pid=os.getpid(), host=socket.gethostname(), ended=ts if ended else None)
        self.set_meta({HEARTBEAT: json.dumps(beat.as_json(), sort_keys=True)})
        return beat

    def last_beat(self) -> Beat | None:
        """The newest heartbeat of a process that built the run, or ``None`` (none recorded: an older run)."""
        text = self.meta(HEARTBEAT)
        if text is None:
            return None
        try:
            value = json.loads(text)
            ended = value.get("ended")
            return Beat(
                ts=float(value["ts"]),
                pid=int(value["pid"]),
                host=str(value["host"]),
                ended=None if ended is None else float(ended),
            )
        except (ValueError, TypeError, KeyError, AttributeError):
            logger.debug("unreadable heartbeat %r", text)
            return None


def _judged_sqlite(tasks: Sequence[str], records: Sequence[str]) -> tuple[str, tuple[str, ...]]:
    """:meth:`RunStore.judgements_of_records`' query of one chunk of records on SQLite, and its parameters."""
    rounds = " OR (item_id > ? AND item_id < ?)" * len(records)
    sql = (
        f"SELECT id, item_id, source, body FROM {judgements.name} WHERE task IN ({','.join('?' * len(tasks))}) "
        f"AND (item_id IN ({','.join('?' * len(records))}){rounds})"
    )
    return sql, (*tasks, *records, *(bound for record in records for bound in (f"{record}@", f"{record}A")))
