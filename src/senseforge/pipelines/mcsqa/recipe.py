"""``build mcsqa``: question sets → generate → filter → refine → filter → distractors → shuffle
→ verify → review → moderate → split, on the recipe engine.

The run directory is the engine's (:mod:`senseforge.pipelines.runner`); this recipe adds
``dataset/{train,validation,test}.jsonl`` (published mCSQA schema) and ``items/`` (the
same items as full records, with provenance). While items wait for people the run stops
with ``review/queue.jsonl`` and state ``awaiting_review``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from senseforge.kb.question_sets import extract_question_sets
from senseforge.llm.base import GenerateRequest, LoglikelihoodRequest
from senseforge.pipelines.mcsqa.config import McsqaConfig, manifest_facts
from senseforge.pipelines.mcsqa.dryrun import author_reply
from senseforge.pipelines.mcsqa.judging import REVIEW_TASK, LMVerify, McsqaReview, McsqaSplit
from senseforge.pipelines.mcsqa.records import McsqaRecord
from senseforge.pipelines.mcsqa.report import final_items, funnel, released_row
from senseforge.pipelines.mcsqa.stages import Distractors, Filter, FilterCopies, Generate, Moderate, Refine, Shuffle
from senseforge.pipelines.moderation import Moderator, default_moderator
from senseforge.pipelines.recipe import Flag
from senseforge.pipelines.report import Funnel, StageFunnel, write_splits
from senseforge.pipelines.runstore import Record, RunStore, StageResult
from senseforge.pipelines.split import Ratios
from senseforge.pipelines.stage import Stage


def mcsqa_author(request: GenerateRequest | LoglikelihoodRequest) -> str | float:
    """``scripted/mcsqa-author``: the stand-in author of dry runs (chat replies; log-likelihood by length)."""
    if isinstance(request, LoglikelihoodRequest):
        return -float(len(request.continuation))
    return author_reply(request.as_messages(), request.tag)


@dataclass(frozen=True)
class QuestionSets:
    """The source: (question set, answer) records from the knowledge store, one per question to write."""

    name: str = "select"

    def records(self, config: McsqaConfig) -> tuple[list[StageResult], dict[str, Any]]:
        kb = Path(config.kb) if config.kb else None
        sets, qs_funnel = extract_question_sets(
            kb, config.lang, config.n, config.seed, relations=config.relations, source_lang=config.source_lang
        )
        records: list[StageResult] = [
            StageResult(f"{qs.id}-{index}", "ok", McsqaRecord(qs=qs, answer=qs.targets[index]))
            for qs in sets
            for index in range(config.answers_per_set)
        ]
        return records, {"funnel": [list(row) for row in qs_funnel.rows()], "sampled": len(sets)}


@dataclass
class Mcsqa:
    """The mCSQA recipe (Sakai et al.)."""

    moderator: Moderator = field(default_factory=default_moderator)
    name: str = "mcsqa"
    summary: str = (
        "ConceptNet question sets → LM-written questions → Easy (LM-verified) / Hard (human-verified), splits."
    )
    config_model: type[McsqaConfig] = McsqaConfig
    record: type[Record] = McsqaRecord
    flags: Mapping[str, Flag] = field(
        default_factory=lambda: {
            "lang": Flag(short="-l", help="Language of the questions (BCP-47), e.g. ja."),
            "kb": Flag(path=True, help="Knowledge store folder (default: $SENSEFORGE_HOME/kb)."),
            "n": Flag(none_flag="--all", none_help="Use every question set instead of sampling --n."),
            "lm_review_final": Flag(
                aliases=("--lm-review-as-hard",), help="Items the LM panel accepts become Hard (labelled)."
            ),
        }
    )
    authors: Mapping[str, Any] = field(default_factory=lambda: {"mcsqa-author": mcsqa_author})

    def default_run_dir(self, config: McsqaConfig) -> Path:
        """``runs/mcsqa-<lang>``."""
        return Path("runs") / f"{config.recipe}-{config.lang}"

    def source(self, config: McsqaConfig) -> QuestionSets:
        return QuestionSets()

    def stages(self, config: McsqaConfig) -> list[Stage]:
        moderator = self.moderator
        return [
            Generate("generate", config.model_for("generate"), config),
            Filter("filter", config, moderator),
            Refine("refine", config.model_for("refine"), config),
            FilterCopies("filter_refined", config, moderator),
            Distractors("distractors", config.model_for("distractors"), config, moderator),
            Shuffle("shuffle", config),
            LMVerify("verify", config.model_for("verify"), config),
            McsqaReview.configured("review", REVIEW_TASK, config),
            Moderate("moderate", config, moderator),
            McsqaSplit("split", Ratios.of(config.ratios), config.seed),
        ]

    def splitting(self) -> frozenset[str]:
        return frozenset()

    def manifest(self, config: McsqaConfig) -> dict[str, Any]:
        return manifest_facts(config)

    def finish(
        self, config: McsqaConfig, run: RunStore, run_dir: Path, rows: list[StageFunnel], facts: dict[str, Any]
    ) -> Funnel:
        question_sets = {"sampled": facts.get("sampled"), "extraction": dict(facts.get("funnel", []))}
        write_splits(run_dir, final_items(run), released_row)
        return funnel(run, config.lang, question_sets, rows)


MCSQA = Mcsqa()
"""The recipe with the shipped moderation word lists."""


__all__ = ["MCSQA", "Mcsqa", "McsqaConfig"]
