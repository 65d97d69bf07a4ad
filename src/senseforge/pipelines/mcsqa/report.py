"""What an mCSQA run writes: the dataset, the funnel (paper Fig. 3, Table 4) and the cost (Fig. 4).

Everything here is computed from the run store alone, so a resumed run writes the same
bytes as an uninterrupted one. Costs are priced from the tokens of every distinct call
the data rests on — whether this process made the call or the cache answered it — with
the price table; a model without a price makes its stage's cost (and every total that
includes it) ``null``, never zero. What this run's processes actually sent (attempts,
retries, failures, cache hits) is the ledger's business: ``ledger.json``.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

from senseforge.data.adapters import item_to_csqa_row
from senseforge.data.io import atomic_open
from senseforge.data.schema import MCItem
from senseforge.data.splits import SPLIT_NAMES
from senseforge.llm.prices import PriceTable
from senseforge.pipelines.runstore import RunStore

logger = logging.getLogger(__name__)

STAGES: tuple[str, ...] = (
    "select",
    "generate",
    "filter",
    "refine",
    "filter_refined",
    "distractors",
    "shuffle",
    "verify",
    "review",
    "moderate",
    "split",
)
"""The stages of the recipe, in order."""


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2, sort_keys=False) + "\n"


def write_json(path: Path, value: Any) -> None:
    """Write JSON atomically."""
    with atomic_open(path) as handle:
        handle.write(_dumps(value))


def funnel(store: RunStore, lang: str, question_sets: dict[str, Any]) -> dict[str, Any]:
    """Per stage: in, out, rejected by reason; the refined share; verification and review outcomes."""
    rows = []
    entering: int | None = None
    for stage in STAGES:
        counts = store.counts(stage)
        out = counts.pop("ok", 0)
        rejected = dict(sorted(counts.items()))
        total = out + sum(rejected.values())
        rows.append({"stage": stage, "in": total if entering is None else entering, "out": out, "rejected": rejected})
        entering = out
    refine_ok = store.results("refine", "ok")
    changed = sum(1 for r in refine_ok if r.payload.get("refined_changed"))
    verified = store.results("verify", "ok")
    outcomes = Counter(r.payload["verify"]["outcome"] for r in verified)
    reviewed = store.results("review", "ok")
    final = store.results("split", "ok")
    splits: dict[str, dict[str, int]] = {name: {"easy": 0, "hard": 0} for name in SPLIT_NAMES}
    for record in final:
        splits[record.payload["split"]][record.payload["difficulty"]] += 1
    return {
        "lang": lang,
        "question_sets": question_sets,
        "stages": rows,
        "refined": {
            "refined_questions": len(refine_ok),
            "changed": changed,
            "changed_share": round(changed / len(refine_ok), 4) if refine_ok else None,
        },
        "verify": {
            "easy": outcomes.get("correct", 0),
            "to_review": outcomes.get("wrong", 0) + outcomes.get("unparsed", 0),
            "wrong_answer": outcomes.get("wrong", 0),
            "unparsed_answer": outcomes.get("unparsed", 0),
        },
        "review": {
            "hard_by_humans": sum(1 for r in reviewed if r.payload.get("review") == "human"),
            "hard_by_lm_panel": sum(1 for r in reviewed if r.payload.get("review") == "lm"),
        },
        "kept": len(final),
        "splits": splits,
    }


def _calls_by_stage(store: RunStore) -> dict[str, dict[str, dict[str, Any]]]:
    """Per LM stage, the distinct calls (by cache key) any record's payload recorded, in every stage's results."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for stage in STAGES:
        for record in store.results(stage):
            for call_stage, entries in record.payload.get("calls", {}).items():
                for entry in entries:
                    out.setdefault(call_stage, {}).setdefault(entry["key"], entry)
    return out


def cost(
    store: RunStore,
    lang: str,
    *,
    kept: int,
    human_judgements: int,
    human_rate: float | None,
    prices: PriceTable | None = None,
) -> dict[str, Any]:
    """Tokens and money per stage, human judgements at ``human_rate``, and cost per kept question."""
    table = prices or PriceTable.load()
    calls = _calls_by_stage(store)
    stages: dict[str, Any] = {}
    unknown: set[str] = set()
    total: float | None = 0.0
    for stage, entries in calls.items():
        models = sorted({e["model"] for e in entries.values()})
        money: float | None = 0.0
        tokens_in = tokens_out = 0
        for entry in entries.values():
            tokens_in += entry["tokens_in"] or 0
            tokens_out += entry["tokens_out"] or 0
            price = table.lookup(entry["model"])
            priced = price.cost(entry["tokens_in"] or 0, entry["tokens_out"] or 0) if price is not None else None
            if priced is None:
                unknown.add(entry["model"])
                money = None
            elif money is not None:
                money += priced
        stages[stage] = {
            "models": models,
            "calls": len(entries),
            "tokens_in": tokens_in,
            "tokens_out": tokens_out,
            "cost_usd": None if money is None else round(money, 8),
        }
        total = None if total is None or money is None else total + money
    human_cost: float | None = 0.0
    if human_judgements:
        human_cost = None if human_rate is None else human_judgements * human_rate
        if human_rate is None:
            logger.warning("%d human judgements but no --human-rate: the human cost is unknown", human_judgements)
    total = None if total is None or human_cost is None else total + human_cost
    for model in sorted(unknown):
        logger.warning("no price for %s: its cost is unknown (null); add it to the price table", model)
    return {
        "lang": lang,
        "currency": "USD",
        "stages": {stage: stages[stage] for stage in STAGES if stage in stages},
        "human": {"judgements": human_judgements, "rate_usd": human_rate, "cost_usd": human_cost},
        "unpriced_models": sorted(unknown),
        "total_usd": None if total is None else round(total, 8),
        "kept": kept,
        "cost_per_kept_question_usd": None if total is None or not kept else round(total / kept, 8),
    }


def final_items(store: RunStore) -> dict[str, list[MCItem]]:
    """The kept items per split, sorted by id."""
    out: dict[str, list[MCItem]] = {name: [] for name in SPLIT_NAMES}
    for record in store.results("split", "ok"):
        out[record.payload["split"]].append(MCItem.model_validate(record.payload["item"]))
    return out


def write_dataset(run_dir: Path, splits: dict[str, list[MCItem]]) -> None:
    """``dataset/`` in the published mCSQA schema and ``items/`` as full records, each folder replaced atomically."""
    for folder, render in (
        ("dataset", lambda item: json.dumps(item_to_csqa_row(item), ensure_ascii=False)),
        ("items", lambda item: item.model_dump_json()),
    ):
        target = run_dir / folder
        tmp = run_dir / f".{folder}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        for name in SPLIT_NAMES:
            with open(tmp / f"{name}.jsonl", "w", encoding="utf-8", newline="\n") as handle:
                for item in splits[name]:
                    handle.write(render(item) + "\n")
                handle.flush()
                os.fsync(handle.fileno())
        old = run_dir / f".{folder}.old"
        shutil.rmtree(old, ignore_errors=True)
        if target.exists():
            os.rename(target, old)
        os.rename(tmp, target)
        shutil.rmtree(old, ignore_errors=True)


def write_rejects(run_dir: Path, store: RunStore) -> int:
    """``rejects.jsonl``: every rejected record with its stage, reason and the model's raw output."""
    count = 0
    with atomic_open(run_dir / "rejects.jsonl") as handle:
        for stage in STAGES:
            for record in store.results(stage, "rejected"):
                row = {
                    "stage": stage,
                    "id": record.record_id,
                    "reason": record.reason,
                    "question": record.payload.get("question"),
                    "response": record.response,
                }
                handle.write(json.dumps(row, ensure_ascii=False) + "\n")
                count += 1
    return count
