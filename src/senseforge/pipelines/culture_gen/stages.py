"""The stages of culture-gen: generate (one call per batch, split into one record per concept), check,
deduplicate, flag the language, moderate.

Their records are :class:`~senseforge.pipelines.culture_gen.records.CultureRecord`: a batch,
then one per concept of it with the item written for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from senseforge.data.langid import detect
from senseforge.data.schema import Choice, MCItem
from senseforge.data.text import fold
from senseforge.llm.base import GenerateRequest, PromptStyle
from senseforge.pipelines.culture_gen.checks import ConceptMatch, check_item, item_evidence
from senseforge.pipelines.culture_gen.concepts import Batch
from senseforge.pipelines.culture_gen.parse import assign, parse_reply
from senseforge.pipelines.culture_gen.records import CultureRecord
from senseforge.pipelines.culture_gen.templates import COMPLETION_PREFIX, build_request, worked_example
from senseforge.pipelines.dedup import CopyIndex
from senseforge.pipelines.moderation import INAPPROPRIATE, Moderator
from senseforge.pipelines.outcomes import MALFORMED, Data, Parsed, Reject, StageOutput, ok, rejected
from senseforge.pipelines.review import Review
from senseforge.pipelines.runstore import JudgementSource, StageResult
from senseforge.pipelines.stage import CheckStage, LMStage, StageContext

NO_ITEM = "no_item"
"""Rejection reason: the reply held no item for this concept."""
EXTRA_ITEM = "extra_item"
"""Rejection reason: a second (or later) item for a concept that already had one."""
UNKNOWN_CONCEPT = "unknown_concept"
"""Rejection reason: an item that names no concept of its batch."""
DUPLICATE_ITEM = "duplicate_item"
DUPLICATE_QUESTION = "duplicate_question"
NEAR_DUPLICATE_QUESTION = "near_duplicate_question"
"""Rejection reason: the question nearly repeats a kept one of its language (with the same options, or — by
``question`` — with any); :func:`~senseforge.pipelines.dedup.near_duplicate` decides."""
REVIEW_TASK = "verify"
"""The judgement task of review (the annotation app's *verify* task)."""
REVIEW_QUESTION = (
    "Is the marked answer the one right choice, by the everyday common sense of this culture? Answer yes or no."
)


def batch_of(data: CultureRecord) -> Batch:
    """The batch a record was made from."""
    return Batch(data.lang, data.category, tuple(data.concepts or ()), data.occurrence or 0)


@dataclass
class Generate(LMStage[CultureRecord]):
    """One call per batch; the reply split into one record per concept (and one per stray item)."""

    style: PromptStyle = "chat"
    prompt_language: Literal["english", "target"] = "english"
    temperature: float = 0.1
    max_tokens: int = 2048
    seed: int = 0

    def requests(self, records: Sequence[StageResult[CultureRecord]]) -> list[GenerateRequest]:
        return [
            build_request(
                batch_of(r.data),
                self.style,
                prompt_language=self.prompt_language,
                temperature=self.temperature,
                max_tokens=self.max_tokens,
                seed=self.seed,
            )
            for r in records
        ]

    def parse(self, record: StageResult[CultureRecord], text: str) -> Parsed:
        batch = record.data
        concepts = list(batch.concepts or ())
        items = parse_reply(text, COMPLETION_PREFIX if self.style == "completion" else "")
        if items is None:
            return [Reject(MALFORMED, batch.for_concept(c)) for c in concepts]
        given, stray = assign(items, concepts)
        parts: list[Data | Reject] = []
        for concept in concepts:
            mine = given[concept]
            if not mine:
                parts.append(Reject(NO_ITEM, batch.for_concept(concept)))
                continue
            parts.append(batch.for_concept(concept, mine[0]))
            parts += [Reject(EXTRA_ITEM, batch.for_concept(concept, x)) for x in mine[1:]]
        parts += [Reject(UNKNOWN_CONCEPT, batch.for_concept(None, x)) for x in stray]
        return parts


@dataclass
class Check(CheckStage[CultureRecord]):
    """Five choices, labels A–E, the answer among them, distinct choices, the concept in the question."""

    match: ConceptMatch = "strict"
    worked_example: bool = False
    """Whether the prompt showed a worked example (completion style): an item copying it is rejected."""

    def _example(self, data: CultureRecord) -> dict[str, Any] | None:
        return worked_example(data.lang) if self.worked_example else None

    def reason(self, data: CultureRecord) -> str | None:
        item, example = data.raw_item(), self._example(data)
        return check_item(item, data.named_concept(), match=self.match, lang=data.lang, example=example)

    def evidence(self, data: CultureRecord, reason: str) -> dict[str, Any] | None:
        return item_evidence(data.raw_item(), reason, data.named_concept(), data.lang, self._example(data))


@dataclass
class Dedup:
    """Drop an item whose question and choices an earlier kept item of its language already has
    (with ``question``, also a repeated question with other options); a question that nearly repeats
    a kept one (:func:`~senseforge.pipelines.dedup.near_duplicate`) is dropped the same way. The
    evidence names the kept item.

    "Earlier" is in record-id order: the stage decides in order
    (:class:`~senseforge.pipelines.stage.InOrder`), remembering what it kept across batches and,
    through :meth:`recall`, across passes.
    """

    name: str
    by: Literal["item", "question"] = "item"
    barrier = False
    people_tasks = ()
    pauses_run = False
    _items: dict[tuple[str, str, tuple[str, ...]], str] = field(default_factory=dict, init=False, repr=False)
    _questions: dict[str, CopyIndex] = field(default_factory=dict, init=False, repr=False)
    _options: dict[str, tuple[str, ...]] = field(default_factory=dict, init=False, repr=False)

    @property
    def specs(self) -> tuple[str, ...]:
        return ()

    def recall(self, earlier: Sequence[StageResult[CultureRecord]]) -> None:
        self._items, self._questions, self._options = {}, {}, {}
        for record in sorted(earlier, key=lambda r: r.record_id):
            self._keep(record)

    def run(self, records: Sequence[StageResult[CultureRecord]], ctx: StageContext) -> StageOutput:
        outcomes: list[StageResult[CultureRecord]] = []
        for record in records:
            item, lang = record.data.raw_item(), record.data.lang
            key = self._key(record)
            seen = self._questions.setdefault(lang, CopyIndex())
            same = (
                c for c in seen.matches(item.question) if self.by == "question" or self._options[c.kept_id] == key[2]
            )
            copy = next(same, None)
            if key in self._items:
                outcomes.append(rejected(record, DUPLICATE_ITEM, evidence={"copy_of": self._items[key]}))
            elif copy is not None:
                reason = DUPLICATE_QUESTION if copy.kind == "duplicate" else NEAR_DUPLICATE_QUESTION
                outcomes.append(rejected(record, reason, evidence=copy.evidence()))
            else:
                self._keep(record)
                outcomes.append(ok(record))
        return StageOutput(outcomes)

    @staticmethod
    def _key(record: StageResult[CultureRecord]) -> tuple[str, str, tuple[str, ...]]:
        item = record.data.raw_item()
        return record.data.lang, fold(item.question), tuple(sorted(fold(text) for _, text in item.choices))

    def _keep(self, record: StageResult[CultureRecord]) -> None:
        key = self._key(record)
        self._items[key] = record.record_id
        self._options[record.record_id] = key[2]
        self._questions.setdefault(key[0], CopyIndex()).add(record.record_id, record.data.raw_item().question)


@dataclass
class FlagLanguage(CheckStage[CultureRecord]):
    """Record the language CLD3 finds in the question (flagged, never rejected)."""

    replayable = False  # the detector's version is not in the package's digest: it always runs

    def run(self, records: Sequence[StageResult[CultureRecord]], ctx: StageContext) -> StageOutput:
        return StageOutput([ok(r, _detected(r.data)) for r in records])


def _detected(data: CultureRecord) -> CultureRecord:
    return data.with_(lang_detected=detect(data.raw_item().question))


@dataclass
class Moderate(CheckStage[CultureRecord]):
    """The moderation filter over the question and every option (the shipped word lists by default)."""

    moderator: Moderator | None = None

    def reason(self, data: CultureRecord) -> str | None:
        if self.moderator is None:
            return None
        item = data.raw_item()
        texts = [item.question, *(text for _, text in item.choices)]
        flagged = any(self.moderator.check(text, data.lang) is not None for text in texts)
        return INAPPROPRIATE if flagged else None

    def evidence(self, data: CultureRecord, reason: str) -> dict[str, Any] | None:
        if self.moderator is None:
            return None
        item = data.raw_item()
        for text in [item.question, *(text for _, text in item.choices)]:
            verdict = self.moderator.check(text, data.lang)
            if verdict is not None:
                return {"text": text, "matched": verdict}
        return None


def review_item(record: StageResult[CultureRecord]) -> MCItem:
    """A kept record's item as people review it and a verification panel answers it (labels as written)."""
    data = record.data
    item = data.raw_item()
    return MCItem(
        id=record.record_id,
        lang=data.lang,
        question=item.question,
        question_concept=data.named_concept(),
        choices=[Choice(label=label.strip().upper(), text=text) for label, text in item.choices],
        answer=item.answer,
        category=data.category,
    )


@dataclass
class CultureReview(Review[CultureRecord]):
    """The engine's review stage over kept items (only when asked for: LLM_Gen had none).

    After a verification panel (``--panel``) it reviews only the items the panel sent on (the Easy ones pass),
    and an item it accepts is Hard.
    """

    def applies(self, record: StageResult[CultureRecord]) -> bool:
        verdict = record.data.panel
        return verdict is None or verdict.decision == "review"

    def accepted(self, record: StageResult[CultureRecord], by: JudgementSource) -> CultureRecord | None:
        return None if record.data.panel is None else record.data.with_(difficulty="hard")

    def judge_prompt(self, record: StageResult[CultureRecord]) -> str:
        item = record.data.raw_item()
        lines = [f"Question: {item.question}", *(f"{label}. {text}" for label, text in item.choices)]
        marked = dict(item.choices).get(item.answer, "")
        lines += [f"Marked answer: {item.answer}. {marked}", REVIEW_QUESTION]
        return "\n".join(lines) + "\nAnswer:"

    def task_item(self, record: StageResult[CultureRecord]) -> MCItem:
        return review_item(record)
