"""What an mCSQA run releases, declared: the kept questions in the published mCSQA schema, split as the split
stage placed them, and the funnel's figures (the paper's Fig. 3 and Table 4); the cost (Fig. 4) is the engine's,
per kept question."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from senseforge.data.adapters import item_to_csqa_row
from senseforge.data.schema import MCItem
from senseforge.data.splits import SPLIT_NAMES
from senseforge.pipelines.mcsqa.config import McsqaConfig
from senseforge.pipelines.mcsqa.records import McsqaRecord, have
from senseforge.pipelines.release import Finished, Release, Splitting
from senseforge.pipelines.runstore import StageResult
from senseforge.pipelines.verification import panel_figures
from senseforge.runfolder.figures import Counts, Figure, Share, Table


def item(record: StageResult[McsqaRecord], _group: str | None = None) -> MCItem:
    """A kept record's item, with what the contamination check flagged for people to see."""
    found = have(record.data.item, "item")
    if record.data.contamination:
        return found.model_copy(update={"metadata": {**found.metadata, "contamination": record.data.contamination}})
    return found


def figures(done: Finished[McsqaRecord]) -> list[Figure]:
    """Question sets drawn, the refined share, verification and review outcomes, Easy and Hard per split."""
    run = done.run
    # the fields the figures count, picked out of the stored records (read whole: only what a panel answered)
    refined = run.values("refine", ("refined_changed",), "ok")
    changed = sum(1 for _, _, found in refined if found["refined_changed"])
    verified = run.values("verify", ("verify", "panel"))
    outcomes = Counter[str](
        found["verify"]["outcome"] for _, status, found in verified if status == "ok" and found["verify"]
    )
    reviewed = run.values("review", ("review",), "ok")  # who accepted each: the engine's field alone
    sets = {"sampled": done.facts.get("sampled"), **dict(done.facts.get("funnel", []))}
    out: list[Figure] = [Counts(name="question-sets", title="Question sets", values=sets, draw=False)]
    if refined:
        share = f"{100 * changed / len(refined):.1f}%"
        caption = f"Refinement: {changed} of {len(refined)} questions changed by the refine step ({share})."
        out.append(
            Share(
                name="refined",
                title="Refinement",
                part=changed,
                whole=len(refined),
                part_label="changed",
                rest_label="unchanged",
                unit="questions",
                caption=caption,
                summary=True,
            )
        )
    answered = any(found["panel"] for _, _, found in verified)
    panel = [r for r in run.results("verify", None, McsqaRecord) if r.data.panel] if answered else []
    out += panel_counts(done, sorted(panel, key=lambda r: r.record_id)) or verify_counts(outcomes)
    by = Counter(found["review"] for _, _, found in reviewed)
    out.append(
        Counts(name="review", title="Hard kept by", values={"humans": by["human"], "lm_panel": by["lm"]}, draw=False)
    )
    cut = done.splits[None]
    counts = [[sum(i.difficulty == d for i in cut.get(name, [])) for d in ("easy", "hard")] for name in SPLIT_NAMES]
    out.append(
        Table(
            name="splits",
            title="Easy and Hard per split",
            rows=list(SPLIT_NAMES),
            columns=["Easy", "Hard"],
            values=[list(row) for row in counts],
            stacked=True,
            unit="questions",
            caption="Easy and Hard questions per split (mCSQA's Table 3 shape; stratified 80/10/10 by default).",
            summary=True,
        )
    )
    return out


def verify_counts(outcomes: Counter[str]) -> list[Figure]:
    """Verification by the verify model alone: Easy, and to review (wrong or unreadable answers)."""
    wrong, unparsed = outcomes.get("wrong", 0), outcomes.get("unparsed", 0)
    verify = {"easy": outcomes.get("correct", 0), "to_review": wrong + unparsed}
    return [
        Counts(
            name="verify",
            title="Verification",
            values={**verify, "wrong_answer": wrong, "unparsed_answer": unparsed},
            unit="questions",
            caption="Verification outcomes: Easy (the verifying model chose the answer), to review (it did not), "
            "of them those it answered wrongly or unreadably.",
        )
    ]


def panel_counts(done: Finished[McsqaRecord], found: Sequence[StageResult[McsqaRecord]]) -> list[Figure]:
    """Verification by a panel (``--panel``; ``found``: the records it answered, kept or rejected, in record-id
    order): its decisions, then its own figures; none without a panel."""
    if not found:
        return []
    verdicts = [have(r.data.panel, "panel") for r in found]
    decided = Counter(v.decision for v in verdicts)
    values = {
        "easy": decided["easy"],
        "to_review": decided["review"],
        "panel_rejected": decided["rejected"],
        "likely_wrong_key": sum(v.rule == "wrong-key" for v in verdicts),
        "review_saved": sum(v.saved for v in verdicts),
    }
    counts = Counts(
        name="verify",
        title="Verification by the panel",
        values=values,
        unit="questions",
        caption="The verification panel's decisions: Easy, to review, rejected without review; of those to review, "
        "the likely wrong keys (every member chose the same other option); and the items the writer alone would "
        "have sent to review that the panel did not.",
    )
    return [counts, *panel_figures(found, [r.record_id for r in done.kept])]


def release(config: McsqaConfig) -> Release[McsqaRecord]:
    """The kept questions (the split stage's), in the mCSQA schema, in the splits the split stage chose."""
    return Release(
        kept="split",
        record=McsqaRecord,
        item=item,
        row=lambda _record, kept: item_to_csqa_row(kept),
        split=Splitting(of=lambda record: have(record.data.split, "split"), every=True),
        figures=figures,
        lang=config.lang,
        title="mCSQA's construction funnel (its Figure 3): records into and out of each step",
        cost_title="Cost per step (mCSQA's Figure 4)",
        kept_unit="question",
    )
