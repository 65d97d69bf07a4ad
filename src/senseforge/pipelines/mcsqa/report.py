"""What an mCSQA run writes beyond the engine's reports: the dataset, and the funnel's own figures.

The funnel (paper Fig. 3, Table 4) is the engine's stage rows plus the refined share,
verification and review outcomes, and Easy/Hard per split; the cost (Fig. 4) is the
engine's, per kept question. Everything here is computed from the run store alone, so a
resumed run writes the same bytes as an uninterrupted one.
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any, ClassVar

from rich.console import RenderableType

from senseforge.data.adapters import item_to_csqa_row
from senseforge.data.schema import MCItem
from senseforge.data.splits import SPLIT_NAMES
from senseforge.data.text import plural
from senseforge.pipelines.mcsqa.records import McsqaRecord, have
from senseforge.pipelines.report import Funnel, StageFunnel
from senseforge.pipelines.runstore import RunStore

logger = logging.getLogger(__name__)


class McsqaFunnel(Funnel):
    """The mCSQA funnel: the engine's stage rows plus the paper's figures (Fig. 3, Table 4)."""

    key_order: ClassVar[tuple[str, ...]] = (
        "lang",
        "question_sets",
        "stages",
        "refined",
        "verify",
        "review",
        "kept",
        "splits",
    )

    lang: str
    question_sets: dict[str, Any]
    """How many question sets were sampled, and the extraction's own funnel."""
    refined: dict[str, Any]
    """Refined questions, how many the refinement changed, and the share."""
    verify: dict[str, int]
    """Easy items, and the ones sent to review (wrong or unparsed answers)."""
    review: dict[str, int]
    """Hard items by who accepted them."""
    splits: dict[str, dict[str, int]]
    """Easy and Hard items per split."""
    kept_unit: ClassVar[str] = "question"

    def title(self, recipe: str) -> str:
        return f"mCSQA funnel ({self.lang})"

    def summary(self) -> list[RenderableType]:
        """Easy and Hard per split, and how many questions the refinement changed."""
        shown = " · ".join(f"{name} {c['easy']} easy / {c['hard']} hard" for name, c in self.splits.items())
        lines: list[RenderableType] = [f"kept {plural(self.kept, 'item')}" + (f": {shown}" if shown else "")]
        if self.refined:
            share = self.refined["changed_share"]
            changed = f"refinement changed {self.refined['changed']} question(s)"
            lines.append(changed + (f" ({share:.0%})" if share else ""))
        return lines


def funnel(store: RunStore, lang: str, question_sets: dict[str, Any], rows: list[StageFunnel]) -> McsqaFunnel:
    """The stage rows, the refined share, verification and review outcomes, Easy/Hard per split."""
    refine_ok = store.results("refine", "ok", McsqaRecord)
    changed = sum(1 for r in refine_ok if r.data.refined_changed)
    verified = store.results("verify", "ok", McsqaRecord)
    outcomes = Counter(have(r.data.verify, "verdict").outcome for r in verified)
    reviewed = store.results("review", "ok", McsqaRecord)
    final = store.results("split", "ok", McsqaRecord)
    splits: dict[str, dict[str, int]] = {name: {"easy": 0, "hard": 0} for name in SPLIT_NAMES}
    for record in final:
        splits[have(record.data.split, "split")][have(record.data.difficulty, "difficulty")] += 1
    return McsqaFunnel(
        lang=lang,
        question_sets=question_sets,
        stages=rows,
        refined={
            "refined_questions": len(refine_ok),
            "changed": changed,
            "changed_share": round(changed / len(refine_ok), 4) if refine_ok else None,
        },
        verify={
            "easy": outcomes.get("correct", 0),
            "to_review": outcomes.get("wrong", 0) + outcomes.get("unparsed", 0),
            "wrong_answer": outcomes.get("wrong", 0),
            "unparsed_answer": outcomes.get("unparsed", 0),
        },
        review={
            "hard_by_humans": sum(1 for r in reviewed if r.review == "human"),
            "hard_by_lm_panel": sum(1 for r in reviewed if r.review == "lm"),
        },
        kept=len(final),
        splits=splits,
    )


def final_items(store: RunStore) -> dict[str, list[MCItem]]:
    """The kept items per split, sorted by id."""
    out: dict[str, list[MCItem]] = {name: [] for name in SPLIT_NAMES}
    for record in store.results("split", "ok", McsqaRecord):
        item = have(record.data.item, "item")
        if record.data.contamination:  # what the contamination check flagged, for people to see
            item = item.model_copy(update={"metadata": {**item.metadata, "contamination": record.data.contamination}})
        out[have(record.data.split, "split")].append(item)
    return out


def released_row(item: MCItem) -> dict[str, Any]:
    """An item in the published mCSQA schema."""
    return item_to_csqa_row(item)
