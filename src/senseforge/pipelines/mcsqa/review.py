"""The judging stages of the mCSQA recipe: LM verification, review, split.

Verification asks a model (by default the one that wrote the question) to answer each
item through the evaluation harness: by log-likelihood of each choice for local base
models, by generating a letter for chat APIs. Right → **Easy**. Wrong or unparsed → the
review queue.

Review decides the queue. Human reviewers are the default: ``review_k`` distinct people
(paper: two) must all accept an item for it to become **Hard**; one rejection removes it.
Their decisions come from the run store (a decisions file now, the annotation app
later); while an item has fewer than ``review_k`` decisions the run stops, awaiting
review. An LM panel (``reviewers``) judges first when given: an item any panel member
rejects is removed; the items it accepts become Hard with ``lm_review_as_hard`` (and say
``review: lm`` in their provenance), else they go on to the humans.

An LM reviewer sees the question, the choices and the marked answer, and says whether the
answer follows by common sense and is the only right one: by comparing the
log-likelihoods of " yes" and " no" after the question (base models), or by answering in
text (chat models; anything but a clear yes counts as no).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from senseforge.data.schema import Judgement, MCItem
from senseforge.data.splits import split_items
from senseforge.evaluate.run import EvalConfig, score_mc
from senseforge.llm.base import (
    LLM,
    Completion,
    GenerateRequest,
    Loglikelihood,
    LoglikelihoodRequest,
    Progress,
)
from senseforge.pipelines.mcsqa.config import McsqaConfig, is_chat
from senseforge.pipelines.runstore import RunStore, StageResult
from senseforge.pipelines.stage import (
    AWAITING,
    PENDING,
    CallLog,
    Outcome,
    add_call,
    failure_outcome,
    ok,
    rejected,
)

REVIEW_TASK = "verify"
"""The judgement task of review decisions (the annotation app's *verify* task)."""
REVIEW_REJECTED = "review_rejected"
LM_REVIEW_REJECTED = "lm_review_rejected"
REVIEW_QUESTION = "Does the marked answer follow from common sense, and is it the only right choice? Answer yes or no."
_YES = re.compile(r"^\W*(yes|y|true|correct)\b", re.IGNORECASE)


def item_of(record: StageResult) -> MCItem:
    """The labelled item of a record (after the shuffle stage)."""
    return MCItem.model_validate(record.payload["item"])


def review_prompt(item: MCItem) -> str:
    """What an LM reviewer reads (English cue words, the item's own text)."""
    lines = [f"Question: {item.question}"]
    lines += [f"{c.label}. {c.text}" for c in item.choices]
    lines.append(f"Marked answer: {item.answer}. {item.answer_text()}")
    lines.append(REVIEW_QUESTION)
    return "\n".join(lines) + "\nAnswer:"


class _Recording:
    """An LLM wrapper that logs every call with its request, for per-record cost entries."""

    def __init__(self, inner: LLM) -> None:
        self.inner = inner
        self.calls: list[tuple[str, GenerateRequest | LoglikelihoodRequest, Completion | Loglikelihood]] = []

    @property
    def name(self) -> str:
        return self.inner.name

    def identity(self) -> dict[str, str]:
        return self.inner.identity()

    def generate(self, requests: Sequence[GenerateRequest], progress: Progress | None = None) -> list[Completion]:
        results = self.inner.generate(requests, progress)
        self.calls += [("generate", q, r) for q, r in zip(requests, results, strict=True)]
        return results

    def loglikelihood(
        self, requests: Sequence[LoglikelihoodRequest], progress: Progress | None = None
    ) -> list[Loglikelihood]:
        results = self.inner.loglikelihood(requests, progress)
        self.calls += [("loglikelihood", q, r) for q, r in zip(requests, results, strict=True)]
        return results

    def close(self) -> None:
        self.inner.close()


@dataclass
class Verify:
    """The LM answers each item; right → Easy, else → the review queue."""

    name: str
    config: McsqaConfig
    llm: LLM
    barrier = False

    def run(self, records: Sequence[StageResult]) -> list[Outcome]:
        method = self.config.verify_method()
        items = [item_of(r) for r in records]
        recording = _Recording(self.llm)
        samples = score_mc(items, recording, EvalConfig(formulation=method, seed=self.config.seed))
        per_item = 1 if method == "generate" else None
        log = CallLog(self.llm.name, self.llm.identity())
        cursor = 0
        outcomes: list[Outcome] = []
        for record, item, sample in zip(records, items, samples, strict=True):
            n = per_item or len(item.choices)
            calls = recording.calls[cursor : cursor + n]
            cursor += n
            statuses = [failure_outcome(result) for _, _, result in calls]
            if PENDING in statuses:
                outcomes.append(PENDING)
                continue
            reasons = [s for s in statuses if isinstance(s, str)]
            if reasons:
                outcomes.append(rejected(record, reasons[0], prompt=sample.get("prompt")))
                continue
            entries = [log.add(kind, request, result) for kind, request, result in calls]
            parsed = method == "loglik" or bool(sample.get("parsed"))
            outcome = "correct" if sample.get("correct") else ("wrong" if parsed else "unparsed")
            verdict: dict[str, Any] = {"method": method, "prediction": sample.get("prediction"), "outcome": outcome}
            if method == "loglik":
                verdict["scores"] = [round(float(s), 6) for s in sample.get("scores", [])]
            payload = {**record.payload, "verify": verdict}
            if outcome == "correct":
                payload["difficulty"] = "easy"
            response = sample.get("response") if method == "generate" else None
            outcomes.append(
                ok(record, add_call(payload, self.name, entries), prompt=sample.get("prompt"), response=response)
            )
        return outcomes


@dataclass
class Review:
    """Decide the review queue: LM panel first when given, then ``review_k`` humans."""

    name: str
    config: McsqaConfig
    store: RunStore
    panel: dict[str, LLM] = field(default_factory=dict)
    barrier = False

    def _panel(
        self, records: Sequence[StageResult]
    ) -> tuple[dict[str, list[Judgement | None]], list[list[dict[str, Any]]]]:
        """Per reviewer, one judgement per record (``None`` while its call failed transiently),
        and per record the call entries for the cost report.

        Every pass asks the whole panel again: calls already made come from the cache, so
        a resumed run records the same calls as an uninterrupted one.
        """
        items = [item_of(r) for r in records]
        prompts = [review_prompt(item) for item in items]
        verdicts: dict[str, list[Judgement | None]] = {}
        entries: list[list[dict[str, Any]]] = [[] for _ in records]
        for spec, llm in self.panel.items():
            log = CallLog(llm.name, llm.identity())
            judged: list[Judgement | None] = []
            if is_chat(spec):
                requests = [GenerateRequest.chat(p, max_tokens=8, temperature=0.0) for p in prompts]
                completions = llm.generate(requests)
                for index, (record, request, completion) in enumerate(zip(records, requests, completions, strict=True)):
                    accept = _YES.match(completion.text) is not None
                    judged.append(_judged(record, spec, [completion], accept, completion.text.strip()))
                    if completion.ok:
                        entries[index].append(log.add("generate", request, completion))
            else:
                pairs = [LoglikelihoodRequest(context=p, continuation=c) for p in prompts for c in (" yes", " no")]
                scores = llm.loglikelihood(pairs)
                for index, record in enumerate(records):
                    yes, no = scores[2 * index], scores[2 * index + 1]
                    accept = yes.ok and no.ok and (yes.logprob or float("-inf")) > (no.logprob or float("-inf"))
                    note = f"loglik yes={yes.logprob:.4f} no={no.logprob:.4f}" if yes.ok and no.ok else ""
                    judged.append(_judged(record, spec, [yes, no], accept, note))
                    for pair, result in zip(pairs[2 * index : 2 * index + 2], (yes, no), strict=True):
                        if result.ok:
                            entries[index].append(log.add("loglikelihood", pair, result))
            verdicts[spec] = judged
        return verdicts, entries

    def run(self, records: Sequence[StageResult]) -> list[Outcome]:
        queued = [r for r in records if r.payload.get("difficulty") != "easy"]
        queued_ids = {r.record_id for r in queued}
        outcomes: dict[str, Outcome] = {
            r.record_id: ok(r, {**r.payload, "review": None}) for r in records if r.record_id not in queued_ids
        }
        to_humans: list[StageResult] = []
        if self.panel and queued:
            verdicts, entries = self._panel(queued)
            fresh = [j for judged in verdicts.values() for j in judged if j is not None]
            self.store.add_judgements(fresh, "lm")
            for index, record in enumerate(queued):
                payload = add_call(record.payload, self.name, entries[index])
                judged = [verdicts[spec][index] for spec in self.panel]
                if any(j is None for j in judged):
                    outcomes[record.record_id] = PENDING
                elif all(j is not None and j.accept for j in judged):
                    if self.config.lm_review_as_hard:
                        outcomes[record.record_id] = ok(record, {**payload, "difficulty": "hard", "review": "lm"})
                    else:
                        to_humans.append(StageResult(record.record_id, "ok", payload))
                else:
                    outcomes[record.record_id] = rejected(record, LM_REVIEW_REJECTED, payload=payload)
        elif queued:
            to_humans = list(queued)
        if to_humans:
            stored = self.store.judgements_for(REVIEW_TASK, [r.record_id for r in to_humans])
            for record in to_humans:
                people = _distinct_people(stored.get(record.record_id, []))
                if len(people) < self.config.review_k:
                    outcomes[record.record_id] = AWAITING
                elif all(j.accept for j in people[: self.config.review_k]):
                    payload = {**record.payload, "difficulty": "hard", "review": "human"}
                    outcomes[record.record_id] = ok(record, payload)
                else:
                    outcomes[record.record_id] = rejected(record, REVIEW_REJECTED)
        return [outcomes[r.record_id] for r in records]


def _judged(
    record: StageResult, spec: str, results: Sequence[Completion | Loglikelihood], accept: bool, note: str
) -> Judgement | None:
    for result in results:
        if failure_outcome(result) is PENDING:
            return None
    return Judgement(item_id=record.record_id, annotator=spec, task=REVIEW_TASK, accept=accept, comment=note or None)


def _distinct_people(stored: Sequence[Any]) -> list[Judgement]:
    seen: set[str] = set()
    out: list[Judgement] = []
    for entry in stored:
        if entry.source != "human" or entry.judgement.accept is None or entry.judgement.annotator in seen:
            continue
        seen.add(entry.judgement.annotator)
        out.append(entry.judgement)
    return out


@dataclass
class Split:
    """80/10/10 (by default), seeded and stratified by difficulty."""

    name: str
    config: McsqaConfig
    barrier = True

    def run(self, records: Sequence[StageResult]) -> list[Outcome]:
        items = []
        for record in records:
            item = item_of(record)
            review = record.payload.get("review")
            provenance = item.provenance.model_copy(update={"review": review or "none"})
            items.append(
                item.model_copy(update={"difficulty": record.payload.get("difficulty"), "provenance": provenance})
            )
        splits = split_items(items, ratios=self.config.ratios, seed=self.config.seed)
        where = {item.id: name for name, members in splits.items() for item in members}
        by_id = {item.id: item for item in items}
        return [
            ok(r, {**r.payload, "item": by_id[r.record_id].model_dump(mode="json"), "split": where[r.record_id]})
            for r in records
        ]
