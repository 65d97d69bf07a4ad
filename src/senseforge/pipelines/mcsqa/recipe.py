"""``build mcsqa``: question sets → generate → filter → refine → filter → distractors → shuffle
→ verify → review → moderate → split, on the recipe engine.

The run directory is the engine's (:mod:`senseforge.pipelines.runner`); this recipe's release
(:mod:`.report`) is ``dataset/{train,validation,test}.jsonl`` (published mCSQA schema) and ``items/`` (the
same items as full records, with provenance). While items wait for people the run stops
with ``review/queue.jsonl`` and state ``awaiting_review``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any, Final

from senseforge.data.schema import QuestionSet
from senseforge.kb.question_sets import Funnel as DrawFunnel
from senseforge.kb.question_sets import extract_many, extract_question_sets
from senseforge.llm.base import GenerateRequest, LoglikelihoodRequest
from senseforge.pipelines.contamination import gate
from senseforge.pipelines.contamination import manifest_facts as contamination_facts
from senseforge.pipelines.mcsqa.config import McsqaConfig, manifest_facts
from senseforge.pipelines.mcsqa.dryrun import author_reply
from senseforge.pipelines.mcsqa.judging import REVIEW_TASK, McsqaReview, McsqaSplit, McsqaVerify
from senseforge.pipelines.mcsqa.records import McsqaRecord, have
from senseforge.pipelines.mcsqa.report import release
from senseforge.pipelines.mcsqa.stages import Distractors, Filter, FilterCopies, Generate, Moderate, Refine, Shuffle
from senseforge.pipelines.moderation import Moderator, default_moderator
from senseforge.pipelines.recipe import Flag
from senseforge.pipelines.release import Release
from senseforge.pipelines.runstore import Record, StageResult
from senseforge.pipelines.split import Ratios
from senseforge.pipelines.stage import Stage
from senseforge.registry.store import Unit


def mcsqa_author(request: GenerateRequest | LoglikelihoodRequest) -> str | float:
    """``scripted/mcsqa-author``: the stand-in author of dry runs (chat replies; log-likelihood by length)."""
    if isinstance(request, LoglikelihoodRequest):
        return -float(len(request.continuation))
    return author_reply(request.as_messages(), request.tag)


Drawn = Mapping[tuple[Any, ...], tuple[list[QuestionSet], DrawFunnel]]
"""Question sets already drawn from the store, by :func:`drawing` of the config they are for."""


def drawing(config: McsqaConfig) -> tuple[Any, ...]:
    """What decides the question sets a config draws: store, language, its store code, count, seed, relations."""
    return (config.kb, config.lang, config.source_lang, config.n, config.seed, tuple(config.relations))


@dataclass(frozen=True)
class QuestionSets:
    """The source: (question set, answer) records from the knowledge store, one per question to write."""

    name: str = "select"
    drawn: Drawn = field(default_factory=dict)
    """Sets drawn beforehand for several runs in one pass (:meth:`Mcsqa.together`); others are drawn here."""

    def records(self, config: McsqaConfig) -> tuple[list[StageResult], dict[str, Any]]:
        kb = Path(config.kb) if config.kb else None
        found = self.drawn.get(drawing(config))
        sets, qs_funnel = found or extract_question_sets(
            kb, config.lang, config.n, config.seed, relations=config.relations, source_lang=config.source_lang
        )
        records: list[StageResult] = [
            StageResult(f"{qs.id}-{index}", "ok", McsqaRecord(qs=qs, answer=qs.targets[index]))
            for qs in sets
            for index in range(config.answers_per_set)
        ]
        return records, {"funnel": [list(row) for row in qs_funnel.rows()], "sampled": len(sets)}


CONTAMINATION_DEFAULT: Final = "reject"
"""mCSQA writes its questions anew: a copy of a registered benchmark's is rejected (see ``--contamination``)."""


def question_unit(lang: str, record_id: str, data: McsqaRecord) -> Unit:
    """A question as the contamination check sees it: its text and its answer (the target it was written for)."""
    return Unit(record_id, lang, have(data.question, "question"), data.answer)


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
            "lang": Flag(
                short="-l",
                help="Language of the questions (BCP-47), e.g. ja; several (en,ja,zh) make one run each, their "
                "question sets drawn in one pass over the store.",
            ),
            "kb": Flag(path=True, help="Knowledge store folder (default: $SENSEFORGE_HOME/kb)."),
            "n": Flag(none_flag="--all", none_help="Use every question set instead of sampling --n."),
            "lm_review_final": Flag(
                aliases=("--lm-review-as-hard",), help="Items the LM panel accepts become Hard (labelled)."
            ),
        }
    )
    authors: Mapping[str, Any] = field(default_factory=lambda: {"mcsqa-author": mcsqa_author})
    drawn: Drawn = field(default_factory=dict)
    """Question sets drawn for several runs at once (see :meth:`together`)."""

    def default_run_dir(self, config: McsqaConfig) -> Path:
        """``runs/mcsqa-<lang>``."""
        return Path("runs") / f"{config.recipe}-{config.lang}"

    def source(self, config: McsqaConfig) -> QuestionSets:
        return QuestionSets(drawn=self.drawn)

    def together(self, configs: Sequence[McsqaConfig]) -> Mcsqa:
        """This recipe with the question sets of every config drawn in one scan per knowledge store
        (:func:`~senseforge.kb.question_sets.extract_many`): the same sets each config draws alone.

        Raises:
            ConfigError: a language without edges in its store (before any run starts).
        """
        groups: dict[tuple[Any, ...], dict[str, McsqaConfig]] = {}
        for config in configs:
            key = (config.kb, config.n, config.seed, tuple(config.relations))
            groups.setdefault(key, {})[config.lang] = config
        drawn = dict(self.drawn)
        for (kb, n, seed, relations), by_lang in groups.items():
            codes = {lang: config.source_lang for lang, config in by_lang.items() if config.source_lang}
            found = extract_many(
                Path(kb) if kb else None, list(by_lang), n, seed, relations=relations, source_langs=codes
            )
            for lang, config in by_lang.items():
                drawn[drawing(config)] = found[lang]
        return replace(self, drawn=drawn)

    def stages(self, config: McsqaConfig) -> list[Stage]:
        moderator = self.moderator
        return [
            Generate("generate", config.model_for("generate"), config),
            Filter("filter", config, moderator),
            Refine("refine", config.model_for("refine"), config),
            FilterCopies("filter_refined", config, moderator),
            *gate(config, partial(question_unit, config.lang), CONTAMINATION_DEFAULT),
            Distractors("distractors", config.model_for("distractors"), config, moderator),
            Shuffle("shuffle", config),
            McsqaVerify.configured("verify", config),
            McsqaReview.configured("review", REVIEW_TASK, config),
            Moderate("moderate", config, moderator),
            McsqaSplit("split", Ratios.of(config.ratios), config.seed),
        ]

    def splitting(self) -> frozenset[str]:
        return frozenset()

    def manifest(self, config: McsqaConfig) -> dict[str, Any]:
        return {**manifest_facts(config), **contamination_facts(config, CONTAMINATION_DEFAULT)}

    def release(self, config: McsqaConfig) -> Release[McsqaRecord]:
        return release(config)


MCSQA = Mcsqa()
"""The recipe with the shipped moderation word lists."""


__all__ = ["MCSQA", "Mcsqa", "McsqaConfig"]
