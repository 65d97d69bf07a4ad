"""The writing stages of the mCSQA recipe: generate, filter, refine, distractors, shuffle, moderate.

A record's payload grows as it moves on: ``qs`` and ``answer`` (from the question set),
``question`` (and ``generated``, the first version), ``refined_changed``, ``distractors``,
``item`` (the shuffled, labelled :class:`~senseforge.data.schema.MCItem`), and ``calls``
(the LM calls each stage made, for the cost report).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from senseforge.data.schema import Choice, MCItem, Provenance, QuestionSet
from senseforge.data.splits import shuffle_choices
from senseforge.llm.base import GenerateRequest
from senseforge.pipelines.mcsqa.config import McsqaConfig
from senseforge.pipelines.mcsqa.filters import check_distractors, check_question
from senseforge.pipelines.mcsqa.parse import parse_distractor_items, parse_distractor_json, parse_question
from senseforge.pipelines.mcsqa.templates import build_distractors, build_generate, build_refine, resolve_language
from senseforge.pipelines.moderation import Moderator
from senseforge.pipelines.runstore import StageResult
from senseforge.pipelines.stage import (
    MALFORMED,
    CheckStage,
    LMStage,
    Outcome,
    Parsed,
    Reject,
    StageContext,
    StageOutput,
    ok,
)

INAPPROPRIATE = "inappropriate"


def question_set(payload: dict[str, Any]) -> QuestionSet:
    """The question set a record was built from."""
    return QuestionSet.model_validate(payload["qs"])


def _same_text(a: str, b: str) -> bool:
    return " ".join(unicodedata.normalize("NFKC", a).split()) == " ".join(unicodedata.normalize("NFKC", b).split())


@dataclass
class _Writing(LMStage):
    """An LM stage of the recipe: one generation request per record."""

    config: McsqaConfig


@dataclass
class Generate(_Writing):
    """One question per (question set, chosen answer)."""

    def requests(self, records: Sequence[StageResult]) -> list[GenerateRequest]:
        style = self.config.style_for("generate")
        lang = resolve_language(self.config.lang)
        return [build_generate(question_set(r.payload), r.payload["answer"], lang, style) for r in records]

    def parse(self, record: StageResult, text: str) -> Parsed:
        question = parse_question(text, self.config.lang)
        if question is None:
            return Reject(MALFORMED)
        return {**record.payload, "question": question, "generated": question}


@dataclass
class Refine(_Writing):
    """Repeat a natural question or rewrite an unnatural one; record whether it changed."""

    def requests(self, records: Sequence[StageResult]) -> list[GenerateRequest]:
        style = self.config.style_for("refine")
        lang = resolve_language(self.config.lang)
        return [
            build_refine(r.payload["question"], r.payload["answer"], question_set(r.payload).targets, lang, style)
            for r in records
        ]

    def parse(self, record: StageResult, text: str) -> Parsed:
        question = parse_question(text, self.config.lang)
        if question is None:
            return Reject(MALFORMED)
        changed = not _same_text(question, record.payload["question"])
        return {**record.payload, "question": question, "refined_changed": changed}


@dataclass
class Distractors(_Writing):
    """Two more choices from the three targets alone (one call per question set: the request is the same)."""

    moderator: Moderator

    def requests(self, records: Sequence[StageResult]) -> list[GenerateRequest]:
        style = self.config.style_for("distractors")
        lang = resolve_language(self.config.lang)
        return [build_distractors(question_set(r.payload).targets, lang, style) for r in records]

    def parse(self, record: StageResult, text: str) -> Parsed:
        chat = self.config.style_for("distractors") == "chat"
        items = parse_distractor_json(text) if chat else parse_distractor_items(text)
        if items is None:
            return Reject(MALFORMED)
        new = items[:2]
        targets = question_set(record.payload).targets
        reason = check_distractors(new, targets, self.config.lang, moderator=self.moderator)
        if reason is not None:
            return Reject(reason)
        return {**record.payload, "distractors": new, "distractors_offered": len(items)}


@dataclass
class _Check(CheckStage):
    """A rule stage of the recipe."""

    config: McsqaConfig
    moderator: Moderator


@dataclass
class Filter(_Check):
    """The rule-based question filter (run after generation and again after refinement)."""

    def reason(self, payload: dict[str, Any]) -> str | None:
        targets = question_set(payload).targets
        return check_question(payload["question"], targets, self.config.lang, moderator=self.moderator)


@dataclass
class Shuffle(CheckStage):
    """Build the five-choice item, shuffle its choices seeded by the item id, label A–E."""

    config: McsqaConfig

    def run(self, records: Sequence[StageResult], ctx: StageContext) -> StageOutput:
        outcomes: list[Outcome] = []
        for record in records:
            payload = record.payload
            qs = question_set(payload)
            texts = [*qs.targets, *payload["distractors"]]
            labels = "ABCDE"
            answer = labels[qs.targets.index(payload["answer"])]
            models = sorted({call["model"] for calls in payload.get("calls", {}).values() for call in calls})
            item = MCItem(
                id=record.record_id,
                lang=qs.lang,
                question=payload["question"],
                question_concept=qs.anchor,
                choices=[Choice(label=labels[i], text=text) for i, text in enumerate(texts)],
                answer=answer,
                category=qs.relation,
                provenance=Provenance(recipe="mcsqa", source_ids=[qs.id], model_ids=models),
                metadata={
                    "relation": qs.relation,
                    "direction": qs.direction,
                    "generated_question": payload["generated"],
                    "refined": bool(payload.get("refined_changed", False)),
                },
            )
            shuffled = shuffle_choices(item, seed=self.config.seed)
            outcomes.append(ok(record, {**payload, "item": shuffled.model_dump(mode="json")}))
        return StageOutput(outcomes)


@dataclass
class Moderate(_Check):
    """The moderation filter over the question and every choice (pluggable; word lists by default)."""

    def reason(self, payload: dict[str, Any]) -> str | None:
        item = MCItem.model_validate(payload["item"])
        texts = [item.question, *(c.text for c in item.choices)]
        flagged = any(self.moderator.check(text, self.config.lang) is not None for text in texts)
        return INAPPROPRIATE if flagged else None
