"""Annotator quality: gold tasks with known answers, each annotator's accuracy on them, and who falls below the bar.

Gold tasks are ordinary tasks of a task type (the same page, an id like the others) whose
right vote is known (table ``gold``). The annotation app mixes them into each annotator's
queue at the type's configured rate and never shows one gold task twice to one person. An
annotator whose accuracy on at least ``min_gold`` gold tasks of a type is below
``min_accuracy`` has every judgement of that type left out of decisions: the runner drops
them before a stage reads them, and the app gives their slots to others.

The settings live in the run store (``run_meta`` key ``quality``), so ``build --resume``
and the app read the same ones.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import sqlalchemy as sa

from senseforge.data.schema import JUDGEMENT
from senseforge.errors import ConfigError
from senseforge.pipelines.runstore import RunStore, StoredJudgement
from senseforge.pipelines.tables import gold, judgements, tasks
from senseforge.pipelines.taskqueue import QueuedTask, queue_tasks

QUALITY_META = "quality"
GOLD_GROUP = "gold"


@dataclass(frozen=True)
class QualitySettings:
    """How often gold tasks come, and the bar an annotator must clear."""

    rates: Mapping[str, float] = field(default_factory=dict)
    """Per task type, the share of the tasks an annotator is served that are gold (0.1: one in ten)."""
    min_accuracy: float | None = None
    """Below this accuracy on gold tasks of a type, an annotator's judgements of that type do not count."""
    min_gold: int = 5
    """Gold tasks of a type an annotator must have done before the bar applies."""
    qualify: Mapping[str, float] = field(default_factory=dict)
    """Per task type, a qualification: its gold tasks come first, all of them, and only an annotator who got at
    least this share right is served its real tasks (CRoW qualified workers at a precision of 0.8)."""

    def to_json(self) -> str:
        return json.dumps(
            {
                "rates": dict(self.rates),
                "min_accuracy": self.min_accuracy,
                "min_gold": self.min_gold,
                "qualify": dict(self.qualify),
            },
            sort_keys=True,
        )


def quality_settings(run: RunStore) -> QualitySettings:
    """The run's quality settings (none set: no gold, no bar)."""
    raw = run.meta(QUALITY_META)
    if not raw:
        return QualitySettings()
    value = json.loads(raw)
    return QualitySettings(
        rates={str(k): float(v) for k, v in value.get("rates", {}).items()},
        min_accuracy=value.get("min_accuracy"),
        min_gold=int(value.get("min_gold", 5)),
        qualify={str(k): float(v) for k, v in value.get("qualify", {}).items()},
    )


def set_quality(
    run: RunStore,
    *,
    task_type: str | None = None,
    rate: float | None = None,
    min_accuracy: float | None = None,
    min_gold: int | None = None,
    qualify: float | None = None,
) -> QualitySettings:
    """Change some settings (the others stay); returns them all.

    Raises:
        ConfigError: a rate outside [0, 1), an accuracy outside [0, 1], ``min_gold`` below 1.
    """
    current = quality_settings(run)
    rates = dict(current.rates)
    if rate is not None:
        if task_type is None:
            raise ConfigError("a gold rate belongs to a task type")
        if not 0.0 <= rate < 1.0:
            raise ConfigError(f"gold rate {rate}: a share of the tasks served, at least 0 and below 1")
        rates[task_type] = rate
    if min_accuracy is not None and not 0.0 <= min_accuracy <= 1.0:
        raise ConfigError(f"minimum accuracy {min_accuracy}: between 0 and 1")
    if min_gold is not None and min_gold < 1:
        raise ConfigError("the bar needs at least one gold task (min_gold >= 1)")
    qualifies = dict(current.qualify)
    if qualify is not None:
        if task_type is None:
            raise ConfigError("a qualification belongs to a task type")
        if not 0.0 < qualify <= 1.0:
            raise ConfigError(f"qualification {qualify}: the share of its gold tasks to get right, above 0, at most 1")
        qualifies[task_type] = qualify
    updated = QualitySettings(
        rates=rates,
        min_accuracy=current.min_accuracy if min_accuracy is None else min_accuracy,
        min_gold=current.min_gold if min_gold is None else min_gold,
        qualify=qualifies,
    )
    run.set_meta({QUALITY_META: updated.to_json()})
    return updated


def add_gold(run: RunStore, queued: Sequence[tuple[QueuedTask, str]], *, now: float | None = None) -> int:
    """Queue gold tasks, each with the vote a right judgement casts; how many were new."""
    new = queue_tasks(run.engine, [task for task, _ in queued], now=now)
    with run.engine.begin() as conn:
        ids = {
            (str(t), str(i)): int(n) for n, t, i in conn.execute(sa.select(tasks.c.id, tasks.c.type, tasks.c.item_id))
        }
        known = {int(r[0]) for r in conn.execute(sa.select(gold.c.task_id))}
        rows = []
        for task, expected in queued:
            task_id = ids[(task.type, task.id)]
            if task_id not in known:
                known.add(task_id)
                rows.append({"task_id": task_id, "expected": expected})
        if rows:
            conn.execute(gold.insert(), rows)
    return new


@dataclass(frozen=True)
class GoldScore:
    """One annotator's record on the gold tasks of one type."""

    done: int
    correct: int

    @property
    def accuracy(self) -> float | None:
        return self.correct / self.done if self.done else None


def gold_scores(run: RunStore) -> dict[str, dict[str, GoldScore]]:
    """Per annotator, per task type: gold tasks judged and judged right (first judgement per task)."""
    query = (
        sa.select(judgements.c.annotator, tasks.c.type, gold.c.expected, judgements.c.body)
        .select_from(gold.join(tasks, tasks.c.id == gold.c.task_id))
        .join(judgements, sa.and_(judgements.c.item_id == tasks.c.item_id, judgements.c.task == tasks.c.type))
        .where(judgements.c.source == "human")
        .order_by(judgements.c.id)
    )
    counts: dict[str, dict[str, list[int]]] = {}
    with run.engine.connect() as conn:
        for annotator, task_type, expected, body in conn.execute(query):
            judgement = JUDGEMENT.validate_json(body)
            entry = counts.setdefault(str(annotator), {}).setdefault(str(task_type), [0, 0])
            entry[0] += 1
            entry[1] += judgement.vote() == expected
    return {who: {t: GoldScore(d, c) for t, (d, c) in per.items()} for who, per in counts.items()}


def excluded_annotators(run: RunStore, settings: QualitySettings | None = None) -> dict[str, frozenset[str]]:
    """Per task type, the annotators whose judgements do not count (below the bar on enough gold)."""
    bar = settings or quality_settings(run)
    if bar.min_accuracy is None and not bar.qualify:
        return {}
    out: dict[str, set[str]] = {}
    totals = {task_type: len(ids) for task_type, ids in gold_item_ids(run).items()} if bar.qualify else {}
    for who, per_type in gold_scores(run).items():
        for task_type, score in per_type.items():
            accuracy = score.accuracy
            if accuracy is None:
                continue
            if bar.min_accuracy is not None and score.done >= bar.min_gold and accuracy < bar.min_accuracy:
                out.setdefault(task_type, set()).add(who)
            if _standing(score, totals.get(task_type, 0), bar.qualify.get(task_type)) == "failed":
                out.setdefault(task_type, set()).add(who)
    return {t: frozenset(names) for t, names in out.items()}


def _standing(score: GoldScore, total: int, bar: float | None) -> str:
    if bar is None:
        return "none"
    if score.done < total or score.accuracy is None:
        return "testing"
    return "passed" if score.accuracy >= bar else "failed"


def qualification(run: RunStore, annotator: str, task_type: str, settings: QualitySettings | None = None) -> str:
    """Where an annotator stands on a task type's qualification: ``none`` (the type has none), ``testing``
    (gold tasks of it still to do), ``passed`` or ``failed``."""
    bar = settings or quality_settings(run)
    if task_type not in bar.qualify:
        return "none"
    total = len(gold_item_ids(run).get(task_type, set()))
    score = gold_scores(run).get(annotator, {}).get(task_type, GoldScore(0, 0))
    return _standing(score, total, bar.qualify[task_type])


def gold_item_ids(run: RunStore) -> dict[str, set[str]]:
    """Per task type, the ids of its gold tasks (they never feed a decision)."""
    query = sa.select(tasks.c.type, tasks.c.item_id).select_from(gold.join(tasks, tasks.c.id == gold.c.task_id))
    out: dict[str, set[str]] = {}
    with run.engine.connect() as conn:
        for task_type, item_id in conn.execute(query):
            out.setdefault(str(task_type), set()).add(str(item_id))
    return out


def counted(
    stored: Mapping[str, Sequence[StoredJudgement]], excluded: Mapping[str, frozenset[str]]
) -> dict[str, list[StoredJudgement]]:
    """The judgements that count: people's judgements of a type by an annotator below the bar are dropped."""
    if not excluded:
        return {item: list(entries) for item, entries in stored.items()}
    return {
        item: [
            s
            for s in entries
            if s.source != "human" or s.judgement.annotator not in excluded.get(s.judgement.task, frozenset())
        ]
        for item, entries in stored.items()
    }


__all__: Sequence[str] = [
    "GOLD_GROUP",
    "GoldScore",
    "QualitySettings",
    "add_gold",
    "counted",
    "excluded_annotators",
    "gold_item_ids",
    "gold_scores",
    "qualification",
    "quality_settings",
    "set_quality",
]
