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
from senseforge.llm.base import LLM, GenerateRequest
from senseforge.pipelines.filters import check_distractors, check_question
from senseforge.pipelines.mcsqa.config import McsqaConfig
from senseforge.pipelines.moderation import Moderator
from senseforge.pipelines.parse import parse_distractor_items, parse_distractor_json, parse_question
from senseforge.pipelines.runstore import StageResult
from senseforge.pipelines.stage import (
    MALFORMED,
    CallLog,
    Outcome,
    add_call,
    failure_outcome,
    ok,
    rejected,
    request_text,
)
from senseforge.pipelines.templates import build_distractors, build_generate, build_refine, resolve_language

INAPPROPRIATE = "inappropriate"


def question_set(payload: dict[str, Any]) -> QuestionSet:
    """The question set a record was built from."""
    return QuestionSet.model_validate(payload["qs"])


def _same_text(a: str, b: str) -> bool:
    return " ".join(unicodedata.normalize("NFKC", a).split()) == " ".join(unicodedata.normalize("NFKC", b).split())


@dataclass
class _LMStage:
    """A stage that sends one generation request per record and parses the reply."""

    name: str
    config: McsqaConfig
    llm: LLM
    barrier = False

    def _log(self) -> CallLog:
        return CallLog(self.llm.name, self.llm.identity())

    def requests(self, records: Sequence[StageResult]) -> list[GenerateRequest]:
        raise NotImplementedError

    def parse(self, record: StageResult, text: str, call: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
        """The new payload, or ``None`` and the rejection reason."""
        raise NotImplementedError

    def run(self, records: Sequence[StageResult]) -> list[Outcome]:
        requests = self.requests(records)
        completions = self.llm.generate(requests)
        log = self._log()
        outcomes: list[Outcome] = []
        for record, request, completion in zip(records, requests, completions, strict=True):
            prompt = request_text(request)
            status = failure_outcome(completion)
            if isinstance(status, str):
                message = completion.failure.message if completion.failure else ""
                outcomes.append(rejected(record, status, prompt=prompt, response=message))
                continue
            if status is not None:
                outcomes.append(status)
                continue
            call = log.add("generate", request, completion)
            payload, reason = self.parse(record, completion.text, call)
            if payload is None:
                spent = add_call(record.payload, self.name, [call])
                outcomes.append(
                    rejected(record, reason or MALFORMED, payload=spent, prompt=prompt, response=completion.text)
                )
            else:
                outcomes.append(
                    ok(record, add_call(payload, self.name, [call]), prompt=prompt, response=completion.text)
                )
        return outcomes


class Generate(_LMStage):
    """One question per (question set, chosen answer)."""

    def requests(self, records: Sequence[StageResult]) -> list[GenerateRequest]:
        style = self.config.style_for("generate")
        lang = resolve_language(self.config.lang)
        return [build_generate(question_set(r.payload), r.payload["answer"], lang, style) for r in records]

    def parse(self, record: StageResult, text: str, call: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
        question = parse_question(text, self.config.lang)
        if question is None:
            return None, MALFORMED
        return {**record.payload, "question": question, "generated": question}, None


class Refine(_LMStage):
    """Repeat a natural question or rewrite an unnatural one; record whether it changed."""

    def requests(self, records: Sequence[StageResult]) -> list[GenerateRequest]:
        style = self.config.style_for("refine")
        lang = resolve_language(self.config.lang)
        return [
            build_refine(r.payload["question"], r.payload["answer"], question_set(r.payload).targets, lang, style)
            for r in records
        ]

    def parse(self, record: StageResult, text: str, call: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
        question = parse_question(text, self.config.lang)
        if question is None:
            return None, MALFORMED
        changed = not _same_text(question, record.payload["question"])
        return {**record.payload, "question": question, "refined_changed": changed}, None


class Distractors(_LMStage):
    """Two more choices from the three targets alone (one call per question set: the request is the same)."""

    def __init__(self, name: str, config: McsqaConfig, llm: LLM, moderator: Moderator) -> None:
        super().__init__(name, config, llm)
        self.moderator = moderator

    def requests(self, records: Sequence[StageResult]) -> list[GenerateRequest]:
        style = self.config.style_for("distractors")
        lang = resolve_language(self.config.lang)
        return [build_distractors(question_set(r.payload).targets, lang, style) for r in records]

    def parse(self, record: StageResult, text: str, call: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
        chat = self.config.style_for("distractors") == "chat"
        items = parse_distractor_json(text) if chat else parse_distractor_items(text)
        if items is None:
            return None, MALFORMED
        new = items[:2]
        targets = question_set(record.payload).targets
        reason = check_distractors(new, targets, self.config.lang, moderator=self.moderator)
        if reason is not None:
            return None, reason
        return {**record.payload, "distractors": new, "distractors_offered": len(items)}, None


@dataclass
class _Check:
    """A stage that keeps a record as it is or rejects it for the reason a rule gives."""

    name: str
    config: McsqaConfig
    moderator: Moderator
    barrier = False

    def reason(self, payload: dict[str, Any]) -> str | None:
        raise NotImplementedError

    def run(self, records: Sequence[StageResult]) -> list[Outcome]:
        outcomes: list[Outcome] = []
        for record in records:
            reason = self.reason(record.payload)
            outcomes.append(ok(record, record.payload) if reason is None else rejected(record, reason))
        return outcomes


class Filter(_Check):
    """The rule-based question filter (run after generation and again after refinement)."""

    def reason(self, payload: dict[str, Any]) -> str | None:
        targets = question_set(payload).targets
        return check_question(payload["question"], targets, self.config.lang, moderator=self.moderator)


@dataclass
class Shuffle:
    """Build the five-choice item, shuffle its choices seeded by the item id, label A–E."""

    name: str
    config: McsqaConfig
    barrier = False

    def run(self, records: Sequence[StageResult]) -> list[Outcome]:
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
        return outcomes


class Moderate(_Check):
    """The moderation filter over the question and every choice (pluggable; word lists by default)."""

    def reason(self, payload: dict[str, Any]) -> str | None:
        item = MCItem.model_validate(payload["item"])
        texts = [item.question, *(c.text for c in item.choices)]
        flagged = any(self.moderator.check(text, self.config.lang) is not None for text in texts)
        return INAPPROPRIATE if flagged else None
