"""``build culture-gen``: Putri et al.'s LLM_Gen (§4.3) on the recipe engine.

batches (at most five concepts of one category, per language, in input order) →
generate (one call per batch, written directly in the target language; the reply split
into one record per concept) → check → dedup → flag the language → moderate → split.
With ``--panel``, a verification panel answers each kept item and people (``--reviewers`` first) review the
ones it sends on (:mod:`.verify`); with ``--reviewers`` alone, the LM judges review every item.

Outputs, per language, under the run directory: ``<lang>/dataset/<split>.jsonl`` in
Putri et al.'s released shape (``id``, ``category``, ``question_concept``, ``question``,
``choices{label,text}``, ``answer_creator``) plus ``lang``; ``<lang>/items/`` (full
records with provenance); ``<lang>/funnel.json`` (per stage and per category) and
``<lang>/cost.json``. The run's own ``funnel.json`` and ``cost.json`` cover every language.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, ClassVar, Final, Literal

from pydantic import Field, field_validator, model_validator

from senseforge.data.concepts import example_table, read_concepts
from senseforge.data.lang import normalize_tag
from senseforge.data.schema import Choice, MCItem, Provenance
from senseforge.llm.base import GenerateRequest, LoglikelihoodRequest
from senseforge.pipelines.config import VerifiedConfig, runs_locally
from senseforge.pipelines.contamination import gate
from senseforge.pipelines.contamination import manifest_facts as contamination_facts
from senseforge.pipelines.culture_gen.concepts import batches
from senseforge.pipelines.culture_gen.dryrun import author_reply
from senseforge.pipelines.culture_gen.records import CultureRecord, item_id
from senseforge.pipelines.culture_gen.stages import (
    REVIEW_TASK,
    Check,
    CultureReview,
    Dedup,
    FlagLanguage,
    Generate,
    Moderate,
)
from senseforge.pipelines.culture_gen.templates import template_hashes
from senseforge.pipelines.culture_gen.verify import CultureVerify, panel_figures
from senseforge.pipelines.moderation import Moderator, default_moderator
from senseforge.pipelines.recipe import Flag
from senseforge.pipelines.release import Finished, Release, Splitting
from senseforge.pipelines.report import outcomes_by
from senseforge.pipelines.runstore import Record, StageResult
from senseforge.pipelines.split import Ratios
from senseforge.pipelines.stage import Stage
from senseforge.registry.store import Unit
from senseforge.runfolder.figures import Counts, Figure, Table

logger = logging.getLogger(__name__)

LOCAL_BATCH_CONCEPTS = 2
"""Concepts per call for a local base model: a base model of 270M writes one JSON line per call at best."""
LOCAL_MAX_TOKENS = 192
"""Reply budget of a local base model: it writes until the limit, and 2048 tokens take minutes a call on 2 cores."""


class CultureGenConfig(VerifiedConfig):
    """Everything that decides what a culture-gen build produces (hashed into the manifest)."""

    lm_stages: ClassVar[tuple[str, ...]] = ("generate",)

    recipe: Literal["culture-gen"] = "culture-gen"
    concepts: str | None = None
    """The concept table (CSV or JSONL: category, concept[, lang]); ``None``: our bundled example table."""
    langs: tuple[str, ...] = ("id", "su")
    """Languages to write in (BCP-47)."""
    batch_concepts: int = Field(default=None, ge=1)  # type: ignore[assignment]  # by model: set on validation
    """Concepts per call (paper: at most five of one category); by default by the writer's model: 2 for a local
    base model (llamacpp/…, hf/…), 5 for a chat model."""
    prompt_language: Literal["english", "target"] = "english"
    """The instruction in English (the paper's) or in the target language."""
    temperature: float = Field(default=0.1, ge=0.0, le=2.0)
    """Sampling temperature of the writer (paper: 0.1)."""
    max_tokens: int = Field(default=None, ge=16)  # type: ignore[assignment]  # by model: set on validation
    """Longest reply per call; by default by the writer's model: 192 for a local base model (llamacpp/…, hf/…:
    it writes until the limit, slowly), 2048 for a chat model. The resolved value goes into the manifest."""
    concept_match: Literal["strict", "lenient"] = "strict"
    """Concept in the question: as written (the paper's filter), or a morphological variant too."""
    dedup: Literal["item", "question"] = "item"
    """Drop repeated items (same question and options), or also a repeated question with other options."""
    split: str | None = None
    """Train/validation/test shares such as ``80/10/10``; by default every item in test (the paper's release)."""

    @field_validator("langs")
    @classmethod
    def _tags(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value:
            raise ValueError("give at least one language")
        return tuple(normalize_tag(tag) for tag in value)

    @field_validator("split")
    @classmethod
    def _split(cls, value: str | None) -> str | None:
        if value is not None:
            Ratios.of(value)
        return value

    @model_validator(mode="after")
    def _by_model(self) -> CultureGenConfig:
        """Settings left to the model get its values, so the manifest and hash hold what the run uses."""
        local = runs_locally(self.model_for("generate"))
        if self.batch_concepts is None:
            object.__setattr__(self, "batch_concepts", LOCAL_BATCH_CONCEPTS if local else 5)
        if self.max_tokens is None:
            object.__setattr__(self, "max_tokens", LOCAL_MAX_TOKENS if local else 2048)
        return self


def culture_gen_author(request: GenerateRequest | LoglikelihoodRequest) -> str | float:
    """``scripted/culture-gen-author``: the stand-in writer of dry runs."""
    if isinstance(request, LoglikelihoodRequest):
        return -float(len(request.continuation))
    return author_reply(request)


@dataclass(frozen=True)
class ConceptBatches:
    """The source: one record per batch of concepts (one call each)."""

    name: str = "batches"

    def records(self, config: CultureGenConfig) -> tuple[list[StageResult], dict[str, Any]]:
        table = Path(config.concepts) if config.concepts else example_table()
        rows = read_concepts(table)
        other = Counter(row.lang for row in rows if row.lang is not None and row.lang not in config.langs)
        if other:
            listed = ", ".join(f"{lang} {n}" for lang, n in sorted(other.items()))
            logger.warning(
                "%s: %d row(s) in languages not asked for were left out (%s); add them with --langs",
                table,
                sum(other.values()),
                listed,
            )
        cut = batches(rows, config.langs, config.batch_concepts)
        records: list[StageResult] = [
            StageResult(
                f"{batch.lang}-{index:05d}",
                "ok",
                CultureRecord(
                    lang=batch.lang,
                    category=batch.category,
                    concepts=list(batch.concepts),
                    occurrence=batch.occurrence,
                ),
            )
            for index, batch in enumerate(cut)
        ]
        slots = {lang: sum(len(b.concepts) for b in cut if b.lang == lang) for lang in config.langs}
        return records, {"table": str(table), "rows": len(rows), "slots": slots}


def _lang(record: StageResult[CultureRecord]) -> str:
    return record.data.lang


def to_item(record: StageResult[CultureRecord], model: str, template: str | None = None) -> MCItem:
    """A kept record as a full item (labels sorted A–E)."""
    data = record.data
    raw = data.raw_item()
    choices = sorted((label.strip().upper(), text) for label, text in raw.choices)
    concept = data.named_concept()
    return MCItem(
        id=item_id(data.lang, concept, raw.question, choices),
        lang=data.lang,
        question=raw.question,
        question_concept=concept,
        choices=[Choice(label=label, text=text) for label, text in choices],
        answer=raw.answer,
        difficulty=data.difficulty,
        category=data.category,
        provenance=Provenance(recipe="culture-gen", source_ids=[record.record_id], model_ids=[model]),
        metadata={
            "lang_detected": data.lang_detected,
            "batch": record.record_id.rsplit("/", 1)[0],
            "batch_concepts": data.batch_concepts,
            "template_sha256": template,
            "review": record.review,
            **({"contamination": data.contamination} if data.contamination else {}),
        },
    )


GROUPS_TITLE: Final = "Records out of each stage per language (Putri et al.'s per-language construction)."

CONTAMINATION_DEFAULT: Final = "reject"
"""culture-gen writes its items anew: a copy of a registered benchmark's is rejected (see ``--contamination``)."""


def culture_unit(record_id: str, data: CultureRecord) -> Unit:
    """An item as the contamination check sees it: its question, in its language, with its gold answer's text."""
    raw = data.raw_item()
    gold = {label.strip().upper(): text for label, text in raw.choices}.get(raw.answer.strip().upper())
    return Unit(record_id, data.lang, raw.question, gold)


def released_row(record: StageResult[CultureRecord], item: MCItem) -> dict[str, Any]:
    """An item in Putri et al.'s released shape, plus ``lang``."""
    return {
        "id": item.id,
        "category": item.category,
        "question_concept": item.question_concept,
        "question": item.question,
        "choices": {"label": [c.label for c in item.choices], "text": [c.text for c in item.choices]},
        "answer_creator": item.answer,
        "lang": item.lang,
    }


def _categories(done: Finished[CultureRecord], lang: str) -> list[Figure]:
    """Items per category out of the first stage after the source and the last (none without categories)."""
    counted = outcomes_by(done.run, [row.stage for row in done.stages[1:]], _place, CultureRecord)
    ours = {category: per for (group, category), per in sorted(counted.items()) if group == lang}
    if not ours:
        return []
    stages = list(dict.fromkeys(stage for per in ours.values() for stage in per))
    first, last = stages[0], stages[-1]
    return [
        Table(
            name="categories",
            title="Per category",
            rows=list(ours),
            columns=[first, f"after {last}"],
            values=[
                [per[first]["ok"] if first in per else 0, per[last]["ok"] if last in per else 0]
                for per in ours.values()
            ],
            unit="items",
            caption=f"{lang}: items per category out of the first ({first}) and the last ({last}) stage.",
        )
    ]


def _place(record: StageResult[CultureRecord]) -> tuple[str, str]:
    return record.data.lang, record.data.category


@dataclass
class CultureGen:
    """Putri et al.'s LLM_Gen (its moderator replaceable, like mCSQA's)."""

    moderator: Moderator = field(default_factory=default_moderator)

    name = "culture-gen"
    summary = "Concepts of a culture → LM-written questions in its language, checked (Putri et al.'s LLM_Gen)."
    config_model = CultureGenConfig
    record: type[Record] = CultureRecord
    flags: ClassVar[Mapping[str, Flag]] = MappingProxyType(
        {"concepts": Flag(path=True, help="Concept table (CSV or JSONL); default: ours.")}
    )
    authors: ClassVar[Mapping[str, Any]] = MappingProxyType({"culture-gen-author": culture_gen_author})

    def default_run_dir(self, config: CultureGenConfig) -> Path:
        return Path("runs") / f"culture-gen-{'-'.join(config.langs)}"

    def source(self, config: CultureGenConfig) -> ConceptBatches:
        return ConceptBatches()

    def stages(self, config: CultureGenConfig) -> list[Stage]:
        return [
            Generate(
                "generate",
                config.model_for("generate"),
                style=config.style_for("generate"),
                prompt_language=config.prompt_language,
                temperature=config.temperature,
                max_tokens=config.max_tokens,
                seed=config.seed,
            ),
            Check("check", match=config.concept_match, worked_example=config.style_for("generate") == "completion"),
            Dedup("dedup", by=config.dedup),
            *gate(config, culture_unit, CONTAMINATION_DEFAULT),
            FlagLanguage("language"),
            Moderate("moderate", moderator=self.moderator),
            *CultureVerify.configured(config, config.langs),
            *self._review(config),
        ]

    @staticmethod
    def _review(config: CultureGenConfig) -> list[Stage]:
        """The review stage, only when LM judges or a verification panel are named (LLM_Gen had no review): after
        a panel, people review the items it sends on (``--reviewers`` first)."""
        if not config.review.judges and not config.panel:
            return []
        return [CultureReview.configured("review", REVIEW_TASK, config)]

    def splitting(self) -> frozenset[str]:
        return frozenset({"generate"})

    def manifest(self, config: CultureGenConfig) -> dict[str, Any]:
        style = config.style_for("generate")
        return {
            "seeds": {"split": config.seed, "sampling.generate": config.seed},
            "sampling": {"generate": {"temperature": config.temperature, "max_tokens": config.max_tokens}},
            "templates": template_hashes(config.langs, style, config.prompt_language),
            **contamination_facts(config, CONTAMINATION_DEFAULT),
        }

    def release(self, config: CultureGenConfig) -> Release[CultureRecord]:
        """Per language a folder: the kept items in Putri et al.'s shape, split by ``--split`` (else test only)."""
        style, model = config.style_for("generate"), config.model_for("generate")
        hashes = template_hashes(config.langs, style, config.prompt_language)

        def slots(done: Finished[CultureRecord], lang: str) -> int:
            return int(done.facts.get("slots", {}).get(lang, 0))

        def language(done: Finished[CultureRecord], lang: str) -> list[Figure]:
            other = sum(1 for r in done.in_group(lang) if r.data.lang_detected not in (lang, None))
            values = {"slots": slots(done, lang), "kept": len(done.items[lang]), "other_language": other}
            shown = [*_categories(done, lang), Counts(name="language", title="Language", values=values, draw=False)]
            return [*shown, *panel_figures(done, lang)] if config.panel else shown

        def kept_of_slots(done: Finished[CultureRecord]) -> list[Figure]:
            return [
                Table(
                    name="kept-of-slots",
                    title="Kept of the concept slots",
                    rows=list(config.langs),
                    columns=["kept", "slots"],
                    values=[[len(done.items[lang]), slots(done, lang)] for lang in config.langs],
                    draw=False,
                    summary=True,
                )
            ]

        return Release(
            kept="review" if config.review.judges or config.panel else "moderate",
            record=CultureRecord,
            item=lambda record, _lang: to_item(record, model, hashes[f"generate/{record.data.lang}/{style}"]),
            row=released_row,
            split=Splitting(None if config.split is None else Ratios.of(config.split), config.seed),
            groups=config.langs,
            group_by="lang",
            group_of=_lang,
            folders=True,
            group_cost=True,
            figures=kept_of_slots,
            group_figures=language,
            groups_title=GROUPS_TITLE,
        )


CULTURE_GEN = CultureGen()
"""The recipe with the shipped moderation word lists."""
