"""Re-checks: items of a finished run sent back to people after the fact (an item-response fit found them suspicious).

A re-check is an ordinary ``verify`` task in the run's own store, under the id ``<item>@recheck``, showing the
released item as it is. :func:`queue_rechecks` queues them; like every queue write it leaves a task already queued
as it is, so asking twice queues nothing new. Only the run's own released items can be re-checked: any other id is
refused, all of them named in one line, before anything is queued.

At the run's next ``build --resume`` the engine's release (:mod:`.finish`) reads people's verdicts
(:func:`rejected_on_recheck`): an item the first ``k`` distinct people did not all accept is left out of the released
files, after the splits were drawn over every kept record (the other items keep their split), and the funnel gains a
``recheck`` row counting it as ``rejected_on_recheck``. A confirmed item, one still waiting for people, and a run
without re-checks release exactly what they did before. Nothing of the run's config changes, so neither does its
hash. The run's ``rejects.jsonl`` lists each rejected item after the build's own rejects (:func:`recheck_reject`),
with people's votes as its evidence.

A run that releases binary examples, not items (CRoW's ``release/private.jsonl``), is re-checked by example: the
ids are the examples' ``example_id`` (as ``eval`` names them), each shown as a two-option item (:func:`binary_item`),
and at ``--resume`` the recipe's own release leaves a rejected example out of every file it writes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from pydantic import ValidationError

from senseforge.data.crow import read_crow
from senseforge.data.schema import ACCEPT_VOTE, BinaryExample, Choice, MCItem
from senseforge.errors import ConfigError, DataValidationError
from senseforge.pipelines.rundir import store_url_of
from senseforge.pipelines.runstore import RunStore
from senseforge.pipelines.tables import judgements, tasks
from senseforge.pipelines.taskqueue import QueuedTask, creator_of, queue_tasks
from senseforge.runfolder.files import ITEMS

RECHECK = "recheck"
"""The round of a re-check task's id (``<item>@recheck``) and its group in the annotation app."""
RECHECK_TASK = "verify"
"""The task type of a re-check: people accept or reject the item's marked answer."""


def recheck_id(item_id: str) -> str:
    """The task id of an item's re-check."""
    return f"{item_id}@{RECHECK}"


BINARY_RELEASE = "release/private.jsonl"
"""Where a run that releases binary examples, not items (CRoW), keeps every one of them with its label."""


def released_items(run_dir: Path) -> dict[str, MCItem]:
    """The run's released items by id (every ``items/<split>.jsonl``, grouped runs' too); for a run that releases
    binary examples (CRoW's ``release/private.jsonl``), each example as the item people re-check
    (:func:`binary_item`), by its ``example_id``, as ``eval`` names it.

    Raises:
        ConfigError: the folder holds no released items (not a finished run).
        DataValidationError: a line that is not an item, with its file and line.
    """
    files = sorted(run_dir.glob(f"**/{ITEMS}/*.jsonl"))
    if not files:
        if (run_dir / BINARY_RELEASE).is_file():
            return {example.id: binary_item(example) for example in read_crow(run_dir / BINARY_RELEASE)}
        raise ConfigError(
            f"{run_dir}: no released items ({ITEMS}/<split>.jsonl or {BINARY_RELEASE}); is it a finished run's folder?"
        )
    found: dict[str, MCItem] = {}
    for path in files:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                item = MCItem.model_validate_json(line)
            except ValidationError as error:
                raise DataValidationError(f"{path}:{number}: not an item: {error.errors()[0]['msg']}") from None
            found[item.id] = item
    return found


def binary_item(example: BinaryExample) -> MCItem:
    """A binary example as the verify page shows it: its context and target, and whether the target fits, the
    example's label marked as the answer (people accept the label or reject it)."""
    lang = example.lang or str(example.metadata.get("target_lang") or "en")
    ask = f"Does the target fit the context ({example.task})?"
    question = f"Context: {example.context}\nTarget: {example.target}\n{ask}"
    return MCItem(
        id=example.id,
        lang=lang,
        question=question,
        choices=[Choice(label="A", text="yes, it fits"), Choice(label="B", text="no, it does not")],
        answer="A" if example.label else "B",
        category=example.task,
    )


def queue_rechecks(
    run_dir: Path, item_ids: Sequence[str], *, store_url: str | None = None, k: int = 1, now: float | None = None
) -> int:
    """Queue a ``verify`` re-check of each item (``<item>@recheck``, ``k`` people); how many were new.

    Raises:
        ConfigError: an id that is not one of the run's released items (all of them named, nothing queued), or the
            run's store cannot be found.
    """
    items = released_items(run_dir)
    unknown = sorted({i for i in item_ids if i not in items})
    if unknown:
        binary = not any(run_dir.glob(f"**/{ITEMS}/*.jsonl"))
        what = f" (its items are the example_id of its {BINARY_RELEASE}, as eval names them)" if binary else ""
        raise ConfigError(f"{run_dir}: not items of this run{what}, nothing queued: {', '.join(unknown)}")
    queued = []
    for item_id in dict.fromkeys(item_ids):
        item = items[item_id].model_copy(update={"id": recheck_id(item_id)})
        queued.append(QueuedTask(RECHECK_TASK, item, k=k, group=RECHECK, creator=creator_of(item)))
    store = RunStore(store_url_of(run_dir, store_url))
    try:
        return queue_tasks(store.engine, queued, now=now)
    finally:
        store.close()


REJECTED_ON_RECHECK = "rejected_on_recheck"
"""The funnel's reason for an item people rejected on a re-check."""


def rejected_on_recheck(run: RunStore) -> dict[str, dict[str, Any]]:
    """The items people rejected on a re-check, by id, each with its evidence (the task's id and the first ``k``
    distinct people's votes, flags and comments): the first ``k`` people (the task's ``k``) voted, and not all of
    them accepted. Confirmed items and those still waiting for people are not in it."""
    suffix = f"@{RECHECK}"
    with run.engine.connect() as conn:
        query = sa.select(tasks.c.item_id, tasks.c.k).where(
            tasks.c.type == RECHECK_TASK, tasks.c.item_id.endswith(suffix, autoescape=True)
        )
        queued = {str(task_id): int(k) for task_id, k in conn.execute(query)}
    if not queued:
        return {}
    judged = run.judgements_for(RECHECK_TASK, queued)
    out: dict[str, dict[str, Any]] = {}
    for task_id, k in sorted(queued.items()):
        votes: dict[str, dict[str, Any]] = {}
        for stored in judged.get(task_id, []):
            found = stored.judgement
            vote = found.vote()
            if stored.source == "human" and vote is not None and found.annotator not in votes:
                votes[found.annotator] = {
                    "annotator": found.annotator,
                    "vote": vote,
                    "flags": list(getattr(found, "flags", [])),
                    "comment": getattr(found, "comment", None),
                }
        first = list(votes.values())[:k]
        if len(first) == k and any(entry["vote"] != ACCEPT_VOTE for entry in first):
            out[task_id.removesuffix(suffix)] = {"task": task_id, "votes": first}
    return out


def recheck_reject(
    record_id: str, item_id: str, evidence: Mapping[str, Any], shown: Mapping[str, Any]
) -> dict[str, Any]:
    """The row ``rejects.jsonl`` holds for an item people rejected on a re-check (``shown``: its ``question`` and
    ``checked``, as the record's other rows show them)."""
    return {
        "stage": RECHECK,
        "id": record_id,
        "reason": REJECTED_ON_RECHECK,
        **shown,
        "evidence": {"item": item_id, **evidence},
        "response": None,
    }


def recheck_judgements(run: RunStore) -> int:
    """How many of people's judgements are re-checks' (the run's cost report leaves them out: they came after the
    build, and a re-check that changes nothing changes no byte of the run)."""
    query = sa.select(sa.func.count()).where(
        judgements.c.task == RECHECK_TASK,
        judgements.c.source == "human",
        judgements.c.item_id.endswith(f"@{RECHECK}", autoescape=True),
    )
    with run.engine.connect() as conn:
        return int(conn.execute(query).scalar_one())
