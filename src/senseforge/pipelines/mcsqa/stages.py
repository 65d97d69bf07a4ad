"""The writing stages of the mCSQA recipe: generate, filter, refine, distractors, shuffle, moderate.

A record (:class:`~senseforge.pipelines.mcsqa.records.McsqaRecord`) grows as it moves on:
``qs`` and ``answer`` (from the question set), ``question`` (and ``generated``, the first
version), ``refined_changed``, ``distractors``, and ``item`` (the shuffled, labelled
:class:`~senseforge.data.schema.MCItem`); the result keeps the LM calls each stage made, for
the cost report.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from senseforge.data.schema import Choice, MCItem, Provenance
from senseforge.data.splits import shuffle_choices
from senseforge.llm.base import GenerateRequest
from senseforge.pipelines.dedup import CopyIndex
from senseforge.pipelines.mcsqa.config import McsqaConfig, generate_template_hash
from senseforge.pipelines.mcsqa.filters import (
    COPIED_EXAMPLE,
    SHORT_OPTION,
    TARGET_IN_QUESTION,
    check_distractors,
    check_question,
    copied_example,
    short_options,
    target_found,
)
from senseforge.pipelines.mcsqa.parse import parse_distractor_items, parse_distractor_json, parse_question
from senseforge.pipelines.mcsqa.records import McsqaRecord, have
from senseforge.pipelines.mcsqa.templates import (
    build_distractors,
    build_generate,
    build_refine,
    resolve_language,
    templates,
)
from senseforge.pipelines.moderation import INAPPROPRIATE, Moderator
from senseforge.pipelines.outcomes import MALFORMED, Outcome, Parsed, Reject, StageOutput, ok, rejected
from senseforge.pipelines.runstore import StageResult
from senseforge.pipelines.stage import CheckStage, LMStage, StageContext

DUPLICATE_QUESTION = "duplicate_question"
"""Rejection reason: the question repeats (after :func:`~senseforge.pipelines.dedup.normalise`) an earlier
question of its question set or of the run; the evidence names the kept one."""
NEAR_DUPLICATE_QUESTION = "near_duplicate_question"
"""Rejection reason: the question nearly repeats an earlier one (:func:`~senseforge.pipelines.dedup.near_duplicate`)."""


def example_questions(lang: str) -> tuple[str, ...]:
    """The questions of the language's worked examples (generate and refine prompts)."""
    t = templates(resolve_language(lang))
    found = [e.question for e in t.generate.examples]
    found += [text for e in t.refine.examples for text in (e.question, e.natural)]
    return tuple(dict.fromkeys(found))


def example_distractors(lang: str) -> tuple[tuple[str, str], ...]:
    """The distractor pairs of the language's worked examples."""
    return tuple(tuple(e.distractors) for e in templates(resolve_language(lang)).distractors.examples)  # type: ignore[misc]


def _same_text(a: str, b: str) -> bool:
    return " ".join(unicodedata.normalize("NFKC", a).split()) == " ".join(unicodedata.normalize("NFKC", b).split())


@dataclass
class _Writing(LMStage[McsqaRecord]):
    """An LM stage of the recipe: one generation request per record."""

    config: McsqaConfig


@dataclass
class Generate(_Writing):
    """One question per (question set, chosen answer)."""

    def requests(self, records: Sequence[StageResult[McsqaRecord]]) -> list[GenerateRequest]:
        style = self.config.style_for("generate")
        lang = resolve_language(self.config.lang)
        written = [r.data for r in records]
        return [build_generate(w.qs, w.answer, lang, style) for w in written]

    def parse(self, record: StageResult[McsqaRecord], text: str) -> Parsed:
        question = parse_question(text, self.config.lang)
        if question is None:
            return Reject(MALFORMED)
        return record.data.with_(question=question, generated=question)


@dataclass
class Refine(_Writing):
    """Repeat a natural question or rewrite an unnatural one; record whether it changed."""

    def requests(self, records: Sequence[StageResult[McsqaRecord]]) -> list[GenerateRequest]:
        style = self.config.style_for("refine")
        lang = resolve_language(self.config.lang)
        written = [r.data for r in records]
        return [build_refine(have(w.question, "question"), w.answer, w.qs.targets, lang, style) for w in written]

    def parse(self, record: StageResult[McsqaRecord], text: str) -> Parsed:
        question = parse_question(text, self.config.lang)
        if question is None:
            return Reject(MALFORMED)
        written = record.data
        changed = not _same_text(question, have(written.question, "question"))
        return written.with_(question=question, refined_changed=changed)


@dataclass
class Distractors(_Writing):
    """Two more choices from the three targets alone (one call per question set: the request is the same)."""

    moderator: Moderator

    def requests(self, records: Sequence[StageResult[McsqaRecord]]) -> list[GenerateRequest]:
        style = self.config.style_for("distractors")
        lang = resolve_language(self.config.lang)
        return [build_distractors(r.data.qs.targets, lang, style) for r in records]

    def parse(self, record: StageResult[McsqaRecord], text: str) -> Parsed:
        chat = self.config.style_for("distractors") == "chat"
        items = parse_distractor_json(text) if chat else parse_distractor_items(text)
        if items is None:
            return Reject(MALFORMED)
        new = items[:2]
        targets = record.data.qs.targets
        shown = example_distractors(self.config.lang)
        reason = check_distractors(new, targets, self.config.lang, moderator=self.moderator, examples=shown)
        if reason is not None:
            found: dict[str, Any] = {"distractors": new, "choices": list(targets)}
            if reason == SHORT_OPTION:
                found["short"] = short_options(new, self.config.lang)
            elif reason == COPIED_EXAMPLE:
                found["examples"] = [list(pair) for pair in shown]
            return Reject(reason, evidence=found)
        return record.data.with_(distractors=new, distractors_offered=len(items))


@dataclass
class _Check(CheckStage[McsqaRecord]):
    """A rule stage of the recipe."""

    config: McsqaConfig
    moderator: Moderator


@dataclass
class Filter(_Check):
    """The rule-based question filter (run after generation and again after refinement)."""

    def reason(self, written: McsqaRecord) -> str | None:
        question = have(written.question, "question")
        examples = example_questions(self.config.lang)
        return check_question(
            question, written.qs.targets, self.config.lang, moderator=self.moderator, examples=examples
        )

    def evidence(self, written: McsqaRecord, reason: str) -> dict[str, Any] | None:
        question = have(written.question, "question")
        found: dict[str, Any] = {"targets": list(written.qs.targets)}
        if reason == TARGET_IN_QUESTION:
            found["target"] = target_found(question, written.qs.targets, self.config.lang)
        elif reason == COPIED_EXAMPLE:
            found["example"] = copied_example(question, example_questions(self.config.lang))
        elif reason == INAPPROPRIATE:
            found["matched"] = self.moderator.check(question, self.config.lang)
        return found


@dataclass
class FilterCopies(Filter):
    """The rule filter after refinement, which also drops copies of earlier questions.

    In record-id order (the siblings of a question set first, then the next set), a question
    that repeats or nearly repeats an earlier kept one is rejected as
    :data:`DUPLICATE_QUESTION` / :data:`NEAR_DUPLICATE_QUESTION`, naming it. The stage decides
    records in order (:class:`~senseforge.pipelines.stage.InOrder`): it remembers the questions
    it kept, across batches and, through :meth:`recall`, across passes.
    """

    _kept: CopyIndex = field(default_factory=CopyIndex, init=False, repr=False, compare=False)

    def recall(self, earlier: Sequence[StageResult[McsqaRecord]]) -> None:
        self._kept = CopyIndex()
        for record in sorted(earlier, key=lambda r: r.record_id):
            self._kept.add(record.record_id, have(record.data.question, "question"))

    def run(self, records: Sequence[StageResult[McsqaRecord]], ctx: StageContext) -> StageOutput:
        checked = super().run(records, ctx).outcomes
        verdicts: dict[str, Outcome] = {}
        passed = [(r, o) for r, o in zip(records, checked, strict=True) if isinstance(o, StageResult)]
        for record, outcome in sorted(passed, key=lambda pair: pair[0].record_id):
            if outcome.status != "ok":
                continue
            question = have(record.data.question, "question")
            copy = self._kept.match(question)
            if copy is None:
                self._kept.add(record.record_id, question)
                continue
            reason = DUPLICATE_QUESTION if copy.kind == "duplicate" else NEAR_DUPLICATE_QUESTION
            verdicts[record.record_id] = rejected(record, reason, evidence=copy.evidence())
        return StageOutput([verdicts.get(r.record_id, o) for r, o in zip(records, checked, strict=True)])


@dataclass
class Shuffle(CheckStage[McsqaRecord]):
    """Build the five-choice item, shuffle its choices seeded by the item id, label A–E."""

    config: McsqaConfig

    def run(self, records: Sequence[StageResult[McsqaRecord]], ctx: StageContext) -> StageOutput:
        outcomes: list[Outcome] = []
        for record in records:
            written = record.data
            qs = written.qs
            texts = [*qs.targets, *have(written.distractors, "distractors")]
            labels = "ABCDE"
            answer = labels[qs.targets.index(written.answer)]
            models = sorted({call.model for calls in record.calls.values() for call in calls})
            item = MCItem(
                id=record.record_id,
                lang=qs.lang,
                question=have(written.question, "question"),
                question_concept=qs.anchor,
                choices=[Choice(label=labels[i], text=text) for i, text in enumerate(texts)],
                answer=answer,
                category=qs.relation,
                provenance=Provenance(recipe="mcsqa", source_ids=[qs.id], model_ids=models),
                metadata={
                    "relation": qs.relation,
                    "direction": qs.direction,
                    "generated_question": have(written.generated, "generated question"),
                    "refined": bool(written.refined_changed),
                    "generate_template_hash": generate_template_hash(self.config),
                },
            )
            shuffled = shuffle_choices(item, seed=self.config.seed)
            outcomes.append(ok(record, written.with_(item=shuffled)))
        return StageOutput(outcomes)


@dataclass
class Moderate(_Check):
    """The moderation filter over the question and every choice (pluggable; word lists by default)."""

    def reason(self, written: McsqaRecord) -> str | None:
        item = have(written.item, "item")
        texts = [item.question, *(c.text for c in item.choices)]
        flagged = any(self.moderator.check(text, self.config.lang) is not None for text in texts)
        return INAPPROPRIATE if flagged else None

    def evidence(self, written: McsqaRecord, reason: str) -> dict[str, Any] | None:
        item = have(written.item, "item")
        for text in [item.question, *(c.text for c in item.choices)]:
            verdict = self.moderator.check(text, self.config.lang)
            if verdict is not None:
                return {"text": text, "matched": verdict}
        return None
