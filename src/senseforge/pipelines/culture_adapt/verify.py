"""culture-adapt's verification panel (``--panel``): several models answer each kept item, in every language.

Without ``--panel`` there is no such stage. With it, the stage ``verify`` (the engine's
:class:`~senseforge.pipelines.verification.PanelVerify`) follows ``keep``: every member answers the item in each
language (its ``@method``, else as its chat template says), and the decision table decides each language's item
on its own. culture-adapt has no review (LLM_Adapt had none), so a language's item the panel sends to review is
**Hard** as it stands, one it settles is **Easy**; one it rejects drops the whole item, in every language, as
``keep`` drops an item whose concept or translation fails in one language (an item is kept in every language or
in none). Each language's ``panel.jsonl`` (beside ``<lang>/dataset``) holds every member's answer to its items.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from senseforge.data.schema import Choice, Difficulty, MCItem
from senseforge.evaluate.records import MCSample
from senseforge.pipelines.config import PanelledConfig
from senseforge.pipelines.culture_adapt.records import AdaptRecord, item_id
from senseforge.pipelines.culture_adapt.stages import item_in
from senseforge.pipelines.panel import PanelVerdict
from senseforge.pipelines.release import Finished
from senseforge.pipelines.runstore import StageResult
from senseforge.pipelines.verification import (
    PanelVerify,
    Placed,
    verdict_figures,
)
from senseforge.runfolder.figures import Counts, Figure

VERIFY = "verify"
"""The panel's stage."""


def answered_item(data: AdaptRecord, lang: str) -> MCItem:
    """The item in ``lang`` as the panel's members answer it (its released id; labels and answer upper-cased)."""
    item = item_in(data, lang)
    return MCItem(
        id=item_id(lang, data.source_id),
        lang=lang,
        question=item.question,
        question_concept=item.concept,
        choices=[Choice(label=label.strip().upper(), text=text) for label, text in item.choices],
        answer=item.answer.strip().upper(),
    )


def difficulty(data: AdaptRecord, lang: str) -> Difficulty | None:
    """The difficulty of the item in ``lang``: Easy where the panel settled it, else Hard (no review follows);
    ``None`` without a panel."""
    verdict = (data.panels or {}).get(lang)
    if verdict is None:
        return None
    return "easy" if verdict.decision == "easy" else "hard"


@dataclass
class AdaptVerify(PanelVerify[AdaptRecord]):
    """The verification panel over culture-adapt's kept items, one verdict per language."""

    langs: tuple[str, ...] = ()
    """The languages of each item, in order."""

    @classmethod
    def configured(cls, config: PanelledConfig, langs: tuple[str, ...]) -> list[AdaptVerify]:
        """The stage ``--panel`` describes (none without a panel); nothing is reviewed without it, so it saves
        no review."""
        panel = config.verification_panel()
        if not panel.members:
            return []
        stage = cls.of_panel(VERIFY, config, panel, reference="none", folders=langs, langs=langs)
        return [stage]

    def items(self, record: StageResult[AdaptRecord]) -> list[tuple[str, MCItem]]:
        return [(lang, answered_item(record.data, lang)) for lang in self.langs]

    def settled(
        self,
        record: StageResult[AdaptRecord],
        verdicts: Sequence[tuple[str, PanelVerdict]],
        samples: Sequence[Sequence[MCSample]],
    ) -> AdaptRecord:
        return record.data.with_(panels=dict(verdicts))

    def placed(self, record: StageResult[AdaptRecord]) -> list[Placed]:
        data = record.data
        return [(lang, item_id(lang, data.source_id), verdict) for lang, verdict in (data.panels or {}).items()]

    def rejection(self, verdicts: Sequence[tuple[str, PanelVerdict]]) -> dict[str, Any] | None:
        """The languages whose item every member answered wrong, confidently (the item goes in every language)."""
        return {"rejected_in": [lang for lang, verdict in verdicts if verdict.decision == "rejected"]}


def panel_figures(done: Finished[AdaptRecord], lang: str) -> list[Figure]:
    """A language's panel figures: its decisions, then the panel's own (accuracy, agreement, each policy's
    Easy/Hard); none where the panel answered nothing."""
    found = answered_by_lang(done, lang)
    if not found:
        return []
    decided = Counter(verdict.decision for _, verdict in found)
    values: dict[str, int | float | None] = {
        "easy": decided["easy"],
        "hard": decided["review"],
        "panel_rejected": decided["rejected"],
        "likely_wrong_key": sum(verdict.rule == "wrong-key" for _, verdict in found),
    }
    counts = Counts(
        name=VERIFY,
        title="Verification by the panel",
        values=values,
        unit="items",
        caption=f"{lang}: the verification panel's decisions: Easy, Hard (no review follows), rejected (the item "
        "goes in every language); of the Hard, the likely wrong keys (every member chose the same other option).",
    )
    kept = [item.id for item in done.items[lang]]
    return [counts, *verdict_figures(found, kept)]


def answered_by_lang(done: Finished[AdaptRecord], lang: str) -> list[tuple[str, PanelVerdict]]:
    """``(item id, verdict)`` of every item in ``lang`` the panel answered, in record-id order."""
    return [
        (item_id(lang, r.data.source_id), verdict)
        for r in answered_records(done)
        if (verdict := (r.data.panels or {}).get(lang)) is not None
    ]


def answered_records(done: Finished[AdaptRecord]) -> list[StageResult[AdaptRecord]]:
    """The records the panel answered (kept on or rejected by it)."""
    found = [r for status in ("ok", "rejected") for r in done.run.results(VERIFY, status, AdaptRecord) if r.data.panels]
    return sorted(found, key=lambda r: r.record_id)
