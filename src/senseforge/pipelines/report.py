"""What every run writes when it finishes: the funnel, the cost, the rejects — typed, from the run store alone.

Everything here is computed from the run store, so a resumed run writes the same bytes
as an uninterrupted one.

* The **funnel** has one row per stage of the recipe, in the stage's own unit: ``in`` =
  ``out`` + Σ ``rejected``. A stage that splits records (one reply into its items) counts
  its children, and says how many records it took ``from`` the stage before it.
* The **cost** is priced from the tokens of every distinct call the data rests on —
  whether this process made the call or the cache answered it — with the price table; a
  model without a price makes its stage's cost (and every total that includes it)
  ``null``, never zero. Human judgements count at the rate given per task type. What this
  run's processes actually sent (attempts, retries, failures, cache hits) is the ledger's
  business: ``ledger.json``.

What a recipe releases, and the figures of its funnel, it declares (:mod:`senseforge.pipelines.release`); the
engine writes them (:mod:`senseforge.pipelines.finish`).
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel

from senseforge.data.io import atomic_open
from senseforge.data.splits import SPLIT_NAMES
from senseforge.llm.prices import Price, PriceTable
from senseforge.pipelines.runstore import CallEntry, Loose, Record, RunStore, StageResult
from senseforge.runfolder.cost import Cost, HumanCost, StageCost
from senseforge.runfolder.funnel import StageRow

logger = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2, sort_keys=False) + "\n"


def _plain(value: Any) -> Any:
    return value.model_dump(mode="json", by_alias=True) if isinstance(value, BaseModel) else value


def write_json(path: Path, value: Any) -> None:
    """Write JSON atomically (a pydantic model as its JSON form, in a mapping too)."""
    value = {key: _plain(item) for key, item in value.items()} if isinstance(value, Mapping) else _plain(value)
    with atomic_open(path) as handle:
        handle.write(_dumps(value))


def write_jsonl(path: Path, rows: Iterable[BaseModel | Mapping[str, Any]]) -> None:
    """One JSON line per row, atomically (a pydantic model as its JSON, a mapping with its text as written)."""
    with atomic_open(path) as handle:
        for row in rows:
            text = row.model_dump_json() if isinstance(row, BaseModel) else json.dumps(row, ensure_ascii=False)
            handle.write(text + "\n")


def write_splits(
    folder: Path, splits: Mapping[str, Sequence[BaseModel]], released: Callable[[Any], Mapping[str, Any]]
) -> None:
    """A recipe's dataset: ``dataset/<split>.jsonl`` (rows by ``released``) and ``items/<split>.jsonl`` (the full
    items), each file atomically; a split not in ``splits`` has no file (an old one is removed)."""
    for sub in ("dataset", "items"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    for name in SPLIT_NAMES:
        for sub, rows in (("dataset", map(released, splits.get(name, ()))), ("items", splits.get(name, ()))):
            path = folder / sub / f"{name}.jsonl"
            if name in splits:
                write_jsonl(path, rows)
            else:
                path.unlink(missing_ok=True)


def funnel_rows(store: RunStore, stages: Sequence[str], splitting: frozenset[str] = frozenset()) -> list[StageRow]:
    """The stage rows of a funnel for the recipe's stages, in order (``splitting``: stages that make children)."""
    return _rows({stage: store.counts(stage) for stage in stages}, stages, splitting)


def _rows(counts: Mapping[str, Mapping[str, int]], stages: Sequence[str], splitting: frozenset[str]) -> list[StageRow]:
    rows: list[StageRow] = []
    previous_out: int | None = None
    for stage in stages:
        rejected = dict(counts.get(stage, {}))
        out = rejected.pop("ok", 0)
        total = out + sum(rejected.values())
        parents = previous_out if stage in splitting else None
        rows.append(StageRow(stage=stage, in_=total, out=out, rejected=dict(sorted(rejected.items())), from_=parents))
        previous_out = out
    return rows


def outcomes_by(
    store: RunStore, stages: Sequence[str], key: Callable[[StageResult[Any]], K], record_model: type[Record] = Loose
) -> dict[K, dict[str, Counter[str]]]:
    """Per group (``key`` of each record, read as ``record_model``) and stage: ``ok`` and each reject reason
    counted, groups, stages and reasons in the order first met."""
    out: dict[K, dict[str, Counter[str]]] = {}
    for stage in stages:
        for record in store.results(stage, None, record_model):
            outcome = "ok" if record.status == "ok" else record.reason or "rejected"
            out.setdefault(key(record), {}).setdefault(stage, Counter())[outcome] += 1
    return out


def funnel_rows_by(
    store: RunStore,
    stages: Sequence[str],
    key: Callable[[StageResult[Any]], K],
    record_model: type[Record] = Loose,
    splitting: frozenset[str] = frozenset(),
    groups: Iterable[K] | None = None,
) -> dict[K, list[StageRow]]:
    """:func:`funnel_rows` per group of records (per language, per task …), every stage in each: for ``groups``
    (a group no record is in has rows of zeros), or else the groups met, in order."""
    counted = outcomes_by(store, stages, key, record_model)
    return {
        group: _rows(counted.get(group, {}), stages, splitting) for group in (counted if groups is None else groups)
    }


Calls = dict[str, dict[str, CallEntry]]
"""Per LM stage, the distinct calls by cache key."""


def calls_by_stage(store: RunStore, stages: Sequence[str]) -> Calls:
    """Per LM stage, the distinct calls (by cache key) any record recorded, in every stage's results, in the order
    first met (stage by stage, record by record)."""
    out: Calls = {}
    met: set[tuple[str, str]] = set()
    for stage in stages:
        for call_stage, text in store.recorded_calls(stage):
            if (call_stage, text) in met:
                continue  # the same list met before: its every call is counted already
            met.add((call_stage, text))
            found = out.setdefault(call_stage, {})
            for entry in json.loads(text):
                if entry["key"] not in found:
                    found[entry["key"]] = CallEntry.model_validate(entry)
    return out


def calls_by(
    store: RunStore, stages: Sequence[str], key: Callable[[StageResult[Any]], K], record_model: type[Record] = Loose
) -> dict[K, Calls]:
    """:func:`calls_by_stage` per group of records (``key`` of each, read as ``record_model``)."""
    out: dict[K, Calls] = {}
    for stage in stages:
        for record in store.results(stage, None, record_model):
            group = out.setdefault(key(record), {})
            for call_stage, entries in record.calls.items():
                for entry in entries:
                    group.setdefault(call_stage, {}).setdefault(entry.key, entry)
    return out


def cost(
    store: RunStore,
    stages: Sequence[str],
    *,
    kept: int,
    human_judgements: Mapping[str, int],
    human_rate: float | Mapping[str, float] | None,
    lang: str | None = None,
    prices: PriceTable | None = None,
    kept_unit: str = "item",
    calls: Calls | None = None,
) -> Cost:
    """Tokens and money per stage, human judgements per task type at their rate, and cost per kept item (``calls``:
    :func:`calls_by_stage` of ``stages``, when read already)."""
    calls = calls_by_stage(store, stages) if calls is None else calls
    return _priced(calls, stages, kept, human_judgements, human_rate, lang, prices or PriceTable.load(), kept_unit)


def cost_by(
    store: RunStore,
    stages: Sequence[str],
    key: Callable[[StageResult[Any]], K],
    *,
    kept: Mapping[K, int],
    human_judgements: Mapping[K, Mapping[str, int]] | None = None,
    human_rate: float | Mapping[str, float] | None = None,
    langs: bool = False,
    prices: PriceTable | None = None,
    kept_unit: str = "item",
    record_model: type[Record] = Loose,
) -> dict[K, Cost]:
    """:func:`cost` per group of records (``key`` of each, read as ``record_model``), for the groups of ``kept``
    (each with its kept count and, in ``human_judgements``, its people's judgements); ``langs``: the groups are
    languages, and each cost names its own."""
    table = prices or PriceTable.load()
    calls = calls_by(store, stages, key, record_model)
    return {
        group: _priced(
            calls.get(group, {}),
            stages,
            n,
            (human_judgements or {}).get(group, {}),
            human_rate,
            str(group) if langs else None,
            table,
            kept_unit,
        )
        for group, n in kept.items()
    }


def _priced(
    calls: Calls,
    stages: Sequence[str],
    kept: int,
    human_judgements: Mapping[str, int],
    human_rate: float | Mapping[str, float] | None,
    lang: str | None,
    table: PriceTable,
    kept_unit: str,
) -> Cost:
    per_stage: dict[str, StageCost] = {}
    unknown: set[str] = set()
    total: float | None = 0.0
    prices: dict[str, Price | None] = {}  # per model, looked up once
    for stage, entries in calls.items():  # totals in the order calls were found, as recorded
        money: float | None = 0.0
        tokens_in = tokens_out = 0
        for entry in entries.values():
            tokens_in += entry.tokens_in or 0
            tokens_out += entry.tokens_out or 0
            if entry.model not in prices:
                prices[entry.model] = table.lookup(entry.model)
            price = prices[entry.model]
            priced = price.cost(entry.tokens_in or 0, entry.tokens_out or 0, batched=entry.batched) if price else None
            if priced is None:
                unknown.add(entry.model)
                money = None
            elif money is not None:
                money += priced
        per_stage[stage] = StageCost(
            models=sorted({e.model for e in entries.values()}),
            calls=len(entries),
            tokens_in=tokens_in,
            tokens_out=tokens_out,
            cost_usd=None if money is None else round(money, 8),
            batched_calls=sum(entry.batched for entry in entries.values()),
        )
        total = None if total is None or money is None else total + money
    per_stage = {stage: per_stage[stage] for stage in stages if stage in per_stage}
    by_task = {task: _human(task, n, human_rate) for task, n in human_judgements.items()}
    count = sum(human_judgements.values())
    spent = [h.cost_usd for h in by_task.values()]
    human_cost = None if None in spent else sum(c for c in spent if c is not None)
    rates = {h.rate_usd for h in by_task.values() if h.judgements}
    human = HumanCost(
        judgements=count,
        rate_usd=(next(iter(rates)) if len(rates) == 1 else None) if count else _rate(None, human_rate),
        cost_usd=human_cost if count else 0.0,
    )
    total = None if total is None or human.cost_usd is None else total + human.cost_usd
    for name in sorted(unknown):
        logger.warning("no price for %s: its cost is unknown (null); add it to the price table", name)
    return Cost(
        lang=lang,
        stages=per_stage,
        human=human,
        human_by_task=by_task if len(by_task) > 1 else None,
        unpriced_models=sorted(unknown),
        total_usd=None if total is None else round(total, 8),
        kept=kept,
        cost_per_kept_item_usd=None if total is None or not kept else round(total / kept, 8),
        kept_unit=kept_unit,
    )


def _rate(task: str | None, rate: float | Mapping[str, float] | None) -> float | None:
    if rate is None or isinstance(rate, int | float):
        return rate
    return rate.get(task) if task is not None else None


def _human(task: str, judgements: int, rate: float | Mapping[str, float] | None) -> HumanCost:
    per = _rate(task, rate)
    if judgements and per is None:
        logger.warning("%d human judgements (%s) but no --human-rate: the human cost is unknown", judgements, task)
    return HumanCost(
        judgements=judgements, rate_usd=per, cost_usd=(None if per is None else judgements * per) if judgements else 0.0
    )


def shown_question(record: StageResult[Any]) -> str | None:
    """The question ``rejects.jsonl`` shows for a record (its recipe's record says which)."""
    question: str | None = record.data.shown_question()
    return question


def shown_checked(record: StageResult[Any]) -> dict[str, Any]:
    """The record's text as its checks saw it, besides the question (its recipe's record says what)."""
    shown: dict[str, Any] = record.data.shown_checked()
    return shown


def write_rejects(
    run_dir: Path,
    store: RunStore,
    stages: Sequence[str],
    model: type[Record],
    rechecked: Sequence[Mapping[str, Any]] = (),
) -> int:
    """``rejects.jsonl``: every rejected record with its stage, reason, its text as checked, the check's
    evidence and the model's raw output; then ``rechecked``, the rows of the items people rejected on a re-check
    (:mod:`.recheck`), in the same shape.

    A reply is written once per call: a later record rejected from the same call (the triples of one
    CKA reply, the items of one culture-gen batch) names the row that holds it under ``response_of``.
    ``model`` is the recipe's record model (its records say what is shown).
    """
    count = 0
    first_with: dict[tuple[str, str | None, str], str] = {}
    with atomic_open(run_dir / "rejects.jsonl") as handle:
        for stage in stages:
            for record in store.results(stage, "rejected", model):
                row: dict[str, Any] = {
                    "stage": stage,
                    "id": record.record_id,
                    "reason": record.reason,
                    "question": shown_question(record),
                    "checked": shown_checked(record),
                    "evidence": dict(record.evidence) if record.evidence else None,
                    "response": record.response,
                }
                if record.response:
                    call = (stage, record.prompt, record.response)
                    earlier = first_with.setdefault(call, record.record_id)
                    if earlier != record.record_id:
                        row["response"] = None
                        row["response_of"] = earlier
                handle.write(json.dumps(row, ensure_ascii=False) + "\n")
                count += 1
        for shown in rechecked:
            handle.write(json.dumps(dict(shown), ensure_ascii=False) + "\n")
            count += 1
    return count
