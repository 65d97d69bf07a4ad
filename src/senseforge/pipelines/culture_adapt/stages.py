"""The stages of culture-adapt, in order: screen → extract → relevance → adapt → check → localize →
translate → back_translate → keep.

A record's data (:class:`~senseforge.pipelines.culture_adapt.records.AdaptRecord`) grows as it goes:
``split``, ``source_id``, ``source_lang``, ``source`` (the item as read); ``names`` and ``places``
(the spans found, and by which extractor); ``relevance`` (per element its value, the five votes and
the verdict), ``irrelevant`` and ``mode`` (``full``: adapt the whole item; ``names``: only person
names are foreign, so a name-only rewrite; ``none``: the item passes unchanged); ``draft`` and
``draft_lang`` (the item after adapting, in the adaptation language for ``full``, still in the
source language otherwise); ``items`` (the item per language: the adaptation language first, then
each translation); ``back`` (each translation back-translated into the adaptation language);
``similarity`` and ``lang_detected`` (the keep stage's measurements).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from senseforge.data.langid import detect
from senseforge.data.matching import concept_appears
from senseforge.llm.base import Completion, GenerateRequest, PromptStyle
from senseforge.pipelines.calls import Reply, Said, YesNo, request_text
from senseforge.pipelines.choices import RawItem, check_choices
from senseforge.pipelines.culture_adapt import parse, templates
from senseforge.pipelines.culture_adapt.copies import (
    NAMES_NOT_REPLACED,
    UNTRANSLATED,
    replaced_names_left,
    untranslated_evidence,
)
from senseforge.pipelines.culture_adapt.item import Fields
from senseforge.pipelines.culture_adapt.records import (
    AdaptRecord,
    Faithfulness,
    Mode,
    Scores,
    Untranslated,
    Verdict,
)
from senseforge.pipelines.culture_adapt.screen import screen, screen_evidence
from senseforge.pipelines.culture_adapt.similarity import similarity_for
from senseforge.pipelines.moderation import Moderator
from senseforge.pipelines.outcomes import MALFORMED, Outcome, Parsed, Reject, StageOutput, ok, rejected
from senseforge.pipelines.runstore import StageResult
from senseforge.pipelines.stage import CheckStage, FanOutStage, LMStage, Route, StageContext, YesNoStage
from senseforge.pipelines.taskqueue import QueuedTask

NO_ANSWER = "no_answer"
"""Rejection reason: the source item has no answer (e.g. CommonsenseQA's test split)."""
NO_CONCEPT = "no_concept"
"""Rejection reason: the source item names no concept (e.g. JCommonsenseQA), so nothing can be kept track of."""
CONCEPT_LOST = "concept_lost"
"""Rejection reason: in some language the concept no longer appears in the question."""
LOW_SIMILARITY = "low_similarity"
"""Rejection reason: a translation is not faithful (neither direct nor back-translated similarity is high enough)."""


def draft_of(data: AdaptRecord) -> Fields:
    """The item after adapting.

    Raises:
        ValueError: the record has not been through the adapt stage.
    """
    if data.draft is None:
        raise ValueError("the record has no draft yet (the adapt stage makes it)")
    return data.draft


def item_in(data: AdaptRecord, lang: str) -> Fields:
    """The item in ``lang``.

    Raises:
        KeyError: the record has no item in ``lang`` yet (localize and translate make them).
    """
    if data.items is None or lang not in data.items:
        raise KeyError(f"the record has no item in {lang!r} yet")
    return data.items[lang]


def back_in(data: AdaptRecord, lang: str) -> Fields:
    """The item in ``lang`` translated back into the adaptation language.

    Raises:
        KeyError: the record has no back-translation from ``lang`` (back_translate makes them).
    """
    if data.back is None or lang not in data.back:
        raise KeyError(f"the record has no back-translation from {lang!r}")
    return data.back[lang]


@dataclass
class Screen(CheckStage[AdaptRecord]):
    """Drop, before any call, an item with no answer or no concept, offensive words or ambiguous options."""

    moderator: Moderator | None = None

    def reason(self, data: AdaptRecord) -> str | None:
        item = data.source
        if not item.answer or item.answer not in item.labels:
            return NO_ANSWER
        if not item.concept.strip():
            return NO_CONCEPT
        return screen(item.question, item.concept, item.options, data.source_lang, self.moderator)

    def evidence(self, data: AdaptRecord, reason: str) -> dict[str, Any] | None:
        item = data.source
        if reason in (NO_ANSWER, NO_CONCEPT):
            return {"answer": item.answer, "labels": list(item.labels), "concept": item.concept}
        return screen_evidence(reason, item.question, item.concept, item.options, data.source_lang, self.moderator)


@dataclass
class Extract(LMStage[AdaptRecord]):
    """The LM extractor: the person names and places of the question and options, as spans of the text."""

    style: PromptStyle = "chat"
    seed: int = 0

    def requests(self, records: Sequence[StageResult[AdaptRecord]]) -> list[GenerateRequest]:
        return [templates.extract_request(r.data.source, self.style, seed=self.seed) for r in records]

    def parse(self, record: StageResult[AdaptRecord], text: str) -> Parsed:
        prefix = templates.EXTRACT_PREFIX if self.style == "completion" else ""
        data = record.data
        spans = parse.parse_spans(text, data.source.display(), prefix)
        if spans is None:
            return Reject(MALFORMED)
        names, places = spans
        return data.with_(names=names, places=places, extractor="lm")


@dataclass
class SpacyExtract(CheckStage[AdaptRecord]):
    """Names (``PERSON``) and places (``GPE``, ``LOC``, ``FAC``) found by an installed spaCy pipeline."""

    model: str = ""
    replayable = False  # the spaCy pipeline's version is not in the package's digest: it always runs

    def run(self, records: Sequence[StageResult[AdaptRecord]], ctx: StageContext) -> StageOutput:
        from senseforge.pipelines.culture_adapt.spans import spacy_spans

        outcomes: list[Outcome] = []
        for record in records:
            data = record.data
            names, places = spacy_spans(self.model, data.source.display())
            outcomes.append(ok(record, data.with_(names=names, places=places, extractor=self.model)))
        return StageOutput(outcomes)


def elements(data: AdaptRecord) -> list[tuple[str, str]]:
    """The elements to judge: the concept always, names and places when any were found."""
    out = [("concept", data.source.concept)]
    if data.names:
        out.append(("names", ", ".join(data.names)))
    if data.places:
        out.append(("places", ", ".join(data.places)))
    return out


def adapt_mode(irrelevant: Sequence[str]) -> Mode:
    """``full`` when the concept or a place is foreign, ``names`` when only names are, else ``none``."""
    if "concept" in irrelevant or "places" in irrelevant:
        return "full"
    return "names" if irrelevant else "none"


@dataclass
class Relevance(YesNoStage[AdaptRecord]):
    """Each element judged by five differently worded prompts; irrelevant when ``votes`` of them say so.

    Each prompt is a yes/no question (:class:`~senseforge.pipelines.calls.YesNo`): a chat
    model's answer in text that says neither is no vote; a base model's is calibrated by the
    same prompt with the item and the element blanked out (contextual calibration, Zhao et
    al. 2021): small base models prefer " yes" to any question, and without it every
    element would be judged alike.
    """

    culture: str = "Indonesia"
    votes: int = 3
    seed: int = 0

    def _plan(self, record: StageResult[AdaptRecord]) -> list[tuple[str, str, list[tuple[str, bool]]]]:
        """Per element: its name, its value and its prompts (each with whether "yes" means relevant)."""
        source = record.data.source
        return [
            (element, value, templates.relevance_prompts(element, value, source, self.culture))
            for element, value in elements(record.data)
        ]

    def questions(self, record: StageResult[AdaptRecord]) -> list[YesNo]:
        return [
            YesNo(text, blank=blank, cue="\nAnswer:", seed=self.seed, words=parse.RELEVANCE_WORDS)
            for element, _, prompts in self._plan(record)
            for (text, _), (blank, _) in zip(prompts, self._blank(element, record), strict=True)
        ]

    def decide(self, record: StageResult[AdaptRecord], said: Sequence[Said]) -> Parsed:
        plan = self._plan(record)
        polarity = [yes_relevant for _, _, prompts in plan for _, yes_relevant in prompts]
        votes = [
            None if s.yes is None else s.yes != yes_relevant for s, yes_relevant in zip(said, polarity, strict=True)
        ]
        return self._judged(record.data, plan, votes)

    def _blank(self, element: str, record: StageResult[AdaptRecord]) -> list[tuple[str, bool]]:
        """The prompts with nothing to judge: the element and every text of the item replaced by ``N/A``."""
        item = record.data.source
        blank = Fields("N/A", "N/A", tuple((label, "N/A") for label in item.labels), item.answer)
        return templates.relevance_prompts(element, "N/A", blank, self.culture)

    def _judged(
        self, data: AdaptRecord, plan: list[tuple[str, str, list[tuple[str, bool]]]], votes: Sequence[bool | None]
    ) -> AdaptRecord:
        verdicts: dict[str, Verdict] = {}
        at = 0
        for element, value, asked in plan:
            mine = list(votes[at : at + len(asked)])
            at += len(asked)
            said = sum(1 for v in mine if v is True)
            verdicts[element] = Verdict(value=value, votes=mine, irrelevant=said >= self.votes)
        irrelevant = [e for e in templates.ELEMENTS if e in verdicts and verdicts[e].irrelevant]
        return data.with_(relevance=verdicts, irrelevant=irrelevant, mode=adapt_mode(irrelevant))


def to_replace(data: AdaptRecord, kind: str) -> list[str]:
    """The spans an adaptation must not keep: the names (name-only rewrite), or the names and places judged
    foreign (full rewrite)."""
    irrelevant = data.irrelevant or []
    spans: list[str] = []
    if kind == "names" or "names" in irrelevant:
        spans += data.names or []
    if kind == "full" and "places" in irrelevant:
        spans += data.places or []
    return list(dict.fromkeys(spans))


@dataclass
class Rewrite(LMStage[AdaptRecord]):
    """One JSON call per item: the full adaptation (question, concept and options rewritten for the culture, in
    the adaptation language, the answer label kept) or the name-only rewrite (person names replaced by names of
    the culture, nothing else changed, in the source language)."""

    kind: Literal["full", "names"] = "full"
    style: PromptStyle = "chat"
    target_lang: str = "id"
    culture: str = "Indonesia"
    temperature: float = 0.2
    max_tokens: int = 512
    seed: int = 0

    @property
    def tag(self) -> str:
        return "rename" if self.kind == "names" else self.name

    def applies(self, record: StageResult[AdaptRecord]) -> bool:
        return record.data.mode == self.kind

    def skipped(self, record: StageResult[AdaptRecord]) -> Outcome:
        """An item with nothing foreign passes as its own draft."""
        data = record.data
        return ok(record, data.with_(draft=data.source, adapted=False, draft_lang=data.source_lang))

    def requests(self, records: Sequence[StageResult[AdaptRecord]]) -> list[GenerateRequest]:
        out: list[GenerateRequest] = []
        for record in records:
            data = record.data
            item, lang = data.source, data.source_lang
            if self.kind == "full":
                request = templates.adapt_request(
                    item, lang, self.target_lang, self.culture, self.style, max_tokens=self.max_tokens,
                    temperature=self.temperature, seed=self.seed,
                )  # fmt: skip
            else:
                request = templates.rename_request(
                    item, lang, self.culture, self.style, temperature=self.temperature, seed=self.seed
                )
            out.append(request)
        return out

    def parse(self, record: StageResult[AdaptRecord], text: str) -> Parsed:
        full = self.kind == "full"
        prefix = (templates.ADAPT_PREFIX if full else templates.RENAME_PREFIX) if self.style == "completion" else ""
        read = parse.parse_adapted if full else parse.parse_rename
        data = record.data
        draft = read(text, data.source, prefix)
        if draft is None:
            return Reject(MALFORMED)
        lang = self.target_lang if full else data.source_lang
        left = replaced_names_left(draft.display(), to_replace(data, self.kind))
        if left:
            found = {"name": left[0], "left": left, "draft": draft.to_json()}
            return Reject(NAMES_NOT_REPLACED, evidence=found)
        return data.with_(draft=draft, draft_lang=lang, adapted=True)


def _adapts_fully(record: StageResult[AdaptRecord]) -> bool:
    return record.data.mode == "full"


def adapt(name: str, full: Rewrite, names: Rewrite) -> Route:
    """Adapt what the relevance stage flagged: a full rewrite, a name-only rewrite, or nothing (see
    :meth:`Rewrite.skipped`)."""
    return Route(name, _adapts_fully, full, names)


@dataclass
class Check(CheckStage[AdaptRecord]):
    """culture-gen's multiple-choice checks again: five choices A–E, the answer among them, distinct choices."""

    def reason(self, data: AdaptRecord) -> str | None:
        draft = draft_of(data)
        return check_choices(RawItem(draft.question, draft.choices, draft.answer, draft.concept))

    def evidence(self, data: AdaptRecord, reason: str) -> dict[str, Any] | None:
        draft = draft_of(data)
        return {"choices": [list(pair) for pair in draft.choices], "answer": draft.answer}


Job = tuple[str, str, str, str, str]
"""One translation: ``(language key, field key, text, from, to)``."""


@dataclass
class _Translating(FanOutStage[AdaptRecord]):
    """Field-by-field translation (question, concept, each option), every field its own call."""

    style: PromptStyle = "chat"
    seed: int = 0

    def jobs(self, data: AdaptRecord) -> list[Job]:
        """The translations the record needs."""
        raise NotImplementedError

    def store(self, data: AdaptRecord, done: dict[str, dict[str, str]]) -> AdaptRecord:
        """The record with its translations (``done``: per language key, the text of each field key)."""
        raise NotImplementedError

    def requests(self, record: StageResult[AdaptRecord]) -> list[GenerateRequest]:
        return [
            templates.translate_request(text, key, source, target, self.style, seed=self.seed)
            for _, key, text, source, target in self.jobs(record.data)
        ]

    def parse(self, record: StageResult[AdaptRecord], replies: Sequence[Reply]) -> Parsed:
        done: dict[str, dict[str, str]] = {}
        for (lang, key, *_), request, reply in zip(self.jobs(record.data), self.requests(record), replies, strict=True):
            said = reply.text if isinstance(reply, Completion) else ""
            text = parse.parse_translation(said)
            if text is None:
                return Reject(MALFORMED, prompt=request_text(request), response=said)
            done.setdefault(lang, {})[key] = text
        return self.store(record.data, done)


def _jobs(lang: str, item: Fields, source: str, target: str) -> list[Job]:
    return [(lang, key, text, source, target) for key, text in item.texts().items()]


@dataclass
class Localize(_Translating):
    """The item in the adaptation language: a draft still in the source language is translated into it."""

    target: str = "id"

    def jobs(self, data: AdaptRecord) -> list[Job]:
        draft, lang = draft_of(data), data.draft_lang
        if lang is None or lang == self.target:  # (the adapt stage sets a draft and its language together)
            return []
        return _jobs(self.target, draft, lang, self.target)

    def store(self, data: AdaptRecord, done: dict[str, dict[str, str]]) -> AdaptRecord:
        draft = draft_of(data)
        item = draft.with_texts(done[self.target]) if self.target in done else draft
        return data.with_(items={self.target: item})


@dataclass
class Translate(_Translating):
    """The adapted item translated into each further language."""

    source: str = "id"
    targets: tuple[str, ...] = ()

    def jobs(self, data: AdaptRecord) -> list[Job]:
        item = item_in(data, self.source)
        return [job for lang in self.targets for job in _jobs(lang, item, self.source, lang)]

    def store(self, data: AdaptRecord, done: dict[str, dict[str, str]]) -> AdaptRecord:
        item = item_in(data, self.source)
        items = dict(data.items or {})
        for lang in self.targets:
            items[lang] = item.with_texts(done[lang])
        return data.with_(items=items)


@dataclass
class BackTranslate(_Translating):
    """Each translation back into the adaptation language (the faithfulness check compares it with the original)."""

    target: str = "id"
    sources: tuple[str, ...] = ()

    def jobs(self, data: AdaptRecord) -> list[Job]:
        return [job for lang in self.sources for job in _jobs(lang, item_in(data, lang), lang, self.target)]

    def store(self, data: AdaptRecord, done: dict[str, dict[str, str]]) -> AdaptRecord:
        return data.with_(back={lang: item_in(data, lang).with_texts(done[lang]) for lang in self.sources})


def _concept_kept(data: AdaptRecord, lang: str) -> bool:
    item = item_in(data, lang)
    return concept_appears(item.question, item.concept, lang)


@dataclass
class Keep:
    """Keep an item, in every language or in none: its concept still in its question everywhere, and every
    translation faithful (direct or back-translated similarity at least the threshold)."""

    name: str
    langs: tuple[str, ...]
    measure: Literal["auto", "embedding", "chrf"] = "auto"
    min_similarity: float = 0.9
    min_chrf: float = 0.5
    flag_language: bool = True
    untranslated: Literal["reject", "flag"] = "reject"
    """What to do with a translation that copies its source (:mod:`.copies`): reject it (before the similarity
    check, which a copy passes), or only record it under ``untranslated`` (the scripted stand-in models
    "translate" by returning the text, so that a dry run shows every later stage)."""
    check: Callable[[StageResult[AdaptRecord]], QueuedTask | None] | None = None
    """The task people check a kept item in (``adapt-check``), if any: nobody waits for it."""
    barrier = False
    people_tasks = ()
    pauses_run = False

    @property
    def specs(self) -> tuple[str, ...]:
        return ()

    def run(self, records: Sequence[StageResult[AdaptRecord]], ctx: StageContext) -> StageOutput:
        output = self._keep(records)
        if self.check is not None:
            kept: list[StageResult[Any]] = [
                o for o in output.outcomes if isinstance(o, StageResult) and o.status == "ok"
            ]
            output.tasks = [task for record in kept if (task := self.check(record)) is not None]
        return output

    def _keep(self, records: Sequence[StageResult[AdaptRecord]]) -> StageOutput:
        similarity = similarity_for(self.measure)
        threshold = self.min_chrf if similarity.name == "chrf" else self.min_similarity
        first, further = self.langs[0], self.langs[1:]
        pairs: list[tuple[str, str]] = []
        for record in records:
            data = record.data
            original = item_in(data, first).display()
            for lang in further:
                pairs.append((original, item_in(data, lang).display()))
                pairs.append((original, back_in(data, lang).display()))
        scores = similarity.scores(pairs) if pairs else []
        outcomes: list[Outcome] = []
        at = 0
        for record in records:
            data = record.data
            measured: dict[str, Scores] = {}
            for lang in further:
                measured[lang] = Scores(direct=round(scores[at], 6), back=round(scores[at + 1], 6))
                at += 2
            lost = [lang for lang in self.langs if not _concept_kept(data, lang)]
            made = data.with_(
                similarity=Faithfulness(measure=similarity.identity(), threshold=threshold, scores=measured),
                concept_lost_in=lost,
            )
            if self.flag_language:
                made = made.with_(lang_detected={lang: detect(item_in(data, lang).question) for lang in self.langs})
            copy = self._untranslated(made)
            if copy is not None and self.untranslated == "flag":
                made = made.with_(untranslated=copy)
            if copy is not None and self.untranslated == "reject":
                outcomes.append(rejected(record, UNTRANSLATED, payload=made, evidence=copy.model_dump(mode="json")))
            elif lost:
                concepts = {lang: item_in(data, lang).concept for lang in lost}
                outcomes.append(rejected(record, CONCEPT_LOST, payload=made, evidence={"concepts": concepts}))
            elif any(max(s.direct, s.back) < threshold for s in measured.values()):
                low = {
                    lang: s.model_dump(mode="json") for lang, s in measured.items() if max(s.direct, s.back) < threshold
                }
                found = {"scores": low, "threshold": threshold, "measure": similarity.name}
                outcomes.append(rejected(record, LOW_SIMILARITY, payload=made, evidence=found))
            else:
                outcomes.append(ok(record, made))
        return StageOutput(outcomes)

    def _untranslated(self, data: AdaptRecord) -> Untranslated | None:
        """The first translation that copies its source (the adaptation-language item its draft, when the
        draft was in another language; every other language the adaptation-language item), or ``None``."""
        first = self.langs[0]
        pairs: list[tuple[str, Fields, str]] = []
        if data.draft is not None and data.draft_lang is not None and data.draft_lang != first:
            pairs.append((first, data.draft, data.draft_lang))
        pairs += [(lang, item_in(data, first), first) for lang in self.langs[1:]]
        for lang, source, source_lang in pairs:
            text = item_in(data, lang)
            detected = (data.lang_detected or {}).get(lang)
            found = untranslated_evidence(text.display(), source.display(), detected, source_lang)
            if found is not None:
                return Untranslated.model_validate({"lang": lang, "source_lang": source_lang, **found})
        return None
