"""culture-gen's verification panel (``--panel``): several models answer each kept item before review.

Without ``--panel`` there is no such stage, and culture-gen runs as LLM_Gen did. With it, the stage ``verify``
(the engine's :class:`~senseforge.pipelines.verification.PanelVerify`) has every member answer the item people
would review (:func:`~senseforge.pipelines.culture_gen.stages.review_item`), each by its ``@method`` or as its
chat template says; the decision table makes the item **Easy** (it skips review), sends it to review (which then
always runs: people by default, ``--reviewers`` first; an item it accepts is **Hard**), or rejects it. Each
language's ``panel.jsonl`` (beside ``<lang>/dataset``) holds every member's answer, under the released item's id.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from senseforge.data.schema import MCItem
from senseforge.evaluate.records import MCSample
from senseforge.pipelines.config import VerifiedConfig
from senseforge.pipelines.culture_gen.records import CultureRecord
from senseforge.pipelines.culture_gen.stages import review_item
from senseforge.pipelines.panel import PanelVerdict
from senseforge.pipelines.release import Finished
from senseforge.pipelines.runstore import RunStore, StageResult
from senseforge.pipelines.verification import PanelVerify, Placed, answered, verdict_figures
from senseforge.runfolder.figures import Counts, Figure

VERIFY = "verify"
"""The panel's stage."""


@dataclass
class CultureVerify(PanelVerify[CultureRecord]):
    """The verification panel over culture-gen's kept items (one per record), its verdicts per language."""

    @classmethod
    def configured(cls, config: VerifiedConfig, langs: Sequence[str]) -> list[CultureVerify]:
        """The stage ``--panel`` describes (none without a panel). The flow without it reviews every item when
        ``--reviewers`` names LM judges, else none: the items it saves from review are counted against that."""
        panel = config.verification_panel()
        if not panel.members:
            return []
        stage = cls.of_panel(
            VERIFY, config, panel, reference="all" if config.review.judges else "none", folders=tuple(langs)
        )
        return [stage]

    def item(self, record: StageResult[CultureRecord]) -> MCItem:
        return review_item(record)

    def items(self, record: StageResult[CultureRecord]) -> list[tuple[str, MCItem]]:
        return [(record.data.lang, self.item(record))]

    def placed(self, record: StageResult[CultureRecord]) -> list[Placed]:
        verdict = record.data.panel
        return [] if verdict is None else [(record.data.lang, record.data.released_id(), verdict)]

    def decided(
        self, record: StageResult[CultureRecord], verdict: PanelVerdict, samples: Sequence[MCSample]
    ) -> CultureRecord:
        data = record.data.with_(panel=verdict)
        return data.with_(difficulty="easy") if verdict.decision == "easy" else data


def verified(run: RunStore, lang: str) -> list[StageResult[CultureRecord]]:
    """The records of ``lang`` the panel answered (kept on or rejected by it), in record-id order."""
    return [r for r in answered(run, VERIFY, CultureRecord) if r.data.lang == lang]


def panel_figures(done: Finished[CultureRecord], lang: str) -> list[Figure]:
    """A language's panel figures: its decisions, then the panel's own (accuracy, agreement, each policy's
    Easy/Hard); none where the panel answered nothing."""
    found = verified(done.run, lang)
    if not found:
        return []
    verdicts = [(r.data.released_id(), r.data.panel) for r in found if r.data.panel is not None]
    decided = Counter(verdict.decision for _, verdict in verdicts)
    values: dict[str, int | float | None] = {
        "easy": decided["easy"],
        "to_review": decided["review"],
        "panel_rejected": decided["rejected"],
        "likely_wrong_key": sum(verdict.rule == "wrong-key" for _, verdict in verdicts),
        "review_saved": sum(verdict.saved for _, verdict in verdicts),
    }
    counts = Counts(
        name=VERIFY,
        title="Verification by the panel",
        values=values,
        unit="items",
        caption=f"{lang}: the verification panel's decisions: Easy (no review), to review (Hard if accepted), "
        "rejected without review; of those to review, the likely wrong keys (every member chose the same other "
        "option); and the items the review without a panel would have read that the panel settled.",
    )
    kept = [item.id for item in done.items[lang]]
    return [counts, *verdict_figures(verdicts, kept)]
