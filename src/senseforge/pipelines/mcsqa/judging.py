"""The judging stages of the mCSQA recipe: LM verification, review, split (the engine's, on its items).

Verification asks a model (by default the one that wrote the question) to answer each
item through the evaluation harness: by log-likelihood of each choice for base models,
by generating a letter for chat models. Right → **Easy**. Wrong or unparsed → review.

Review is the engine's review stage (:mod:`senseforge.pipelines.review`) with the task
``verify``: people are the default, ``review_k`` of them (paper: two), and all must
accept an item for it to become **Hard**; one rejection removes it. An LM panel
(``reviewers``) judges first when given: an item the panel rejects is removed; the items
it accepts become Hard with ``lm_review_as_hard`` (and say ``review: lm`` in their
provenance), else they go on to people.

An LM reviewer sees the question, the choices and the marked answer, and says whether the
answer follows by common sense and is the only right one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from senseforge.data.schema import MCItem
from senseforge.evaluate.run import EvalConfig, score_mc
from senseforge.pipelines.calls import PENDING, Recorder
from senseforge.pipelines.mcsqa.config import McsqaConfig
from senseforge.pipelines.mcsqa.records import McsqaRecord, Verdict, VerifyOutcome, have
from senseforge.pipelines.outcomes import Outcome, StageOutput, ok, rejected, spent
from senseforge.pipelines.review import Review
from senseforge.pipelines.runstore import JudgementSource, StageResult
from senseforge.pipelines.split import Split
from senseforge.pipelines.stage import ModelStage, StageContext

REVIEW_TASK = "verify"
"""The judgement task of review decisions (the annotation app's *verify* task)."""
REVIEW_QUESTION = "Does the marked answer follow from common sense, and is it the only right choice? Answer yes or no."


def item_of(record: StageResult[McsqaRecord]) -> MCItem:
    """The labelled item of a record (after the shuffle stage)."""
    return have(record.data.item, "item")


def review_prompt(item: MCItem) -> str:
    """What an LM reviewer reads (English cue words, the item's own text)."""
    lines = [f"Question: {item.question}"]
    lines += [f"{c.label}. {c.text}" for c in item.choices]
    lines.append(f"Marked answer: {item.answer}. {item.answer_text()}")
    lines.append(REVIEW_QUESTION)
    return "\n".join(lines) + "\nAnswer:"


@dataclass
class LMVerify(ModelStage[McsqaRecord]):
    """The LM answers each item; right → Easy, else → the review queue."""

    config: McsqaConfig

    def _run(self, records: Sequence[StageResult[McsqaRecord]], ctx: StageContext) -> StageOutput:
        method = self.config.verify_method()
        items = [item_of(r) for r in records]
        recording = Recorder(ctx.llm(self.spec), self.name)
        samples = score_mc(items, recording, EvalConfig(formulation=method, seed=self.config.seed))
        asked = recording.sliced([1 if method == "generate" else len(item.choices) for item in items])
        outcomes: list[Outcome] = []
        for record, sample, got in zip(records, samples, asked, strict=True):
            if got.status is PENDING:
                outcomes.append(PENDING)
                continue
            if isinstance(got.status, str):
                outcomes.append(rejected(record, got.status, prompt=sample.prompt))
                continue
            parsed = method == "loglik" or bool(sample.parsed)
            outcome: VerifyOutcome = "correct" if sample.correct else ("wrong" if parsed else "unparsed")
            scores = [round(float(s), 6) for s in sample.scores or []] if method == "loglik" else None
            verdict = Verdict(method=method, prediction=sample.prediction, outcome=outcome, scores=scores)
            verified = record.data.with_(verify=verdict)
            if outcome == "correct":
                verified = verified.with_(difficulty="easy")
            response = sample.response if method == "generate" else None
            paid = spent(record, self.name, got.calls)
            outcomes.append(ok(paid, verified, prompt=sample.prompt, response=response))
        return StageOutput(outcomes)


@dataclass
class McsqaReview(Review[McsqaRecord]):
    """The engine's review stage over the queue verification left: wrong or unparsed items."""

    def applies(self, record: StageResult[McsqaRecord]) -> bool:
        return record.data.difficulty != "easy"

    def judge_prompt(self, record: StageResult[McsqaRecord]) -> str:
        return review_prompt(item_of(record))

    def task_item(self, record: StageResult[McsqaRecord]) -> MCItem:
        return item_of(record)

    def accepted(self, record: StageResult[McsqaRecord], by: JudgementSource) -> McsqaRecord:
        """An accepted item is Hard (the stage records who accepted it, ``by``, as the result's ``review``)."""
        return record.data.with_(difficulty="hard")


@dataclass
class McsqaSplit(Split[McsqaRecord]):
    """80/10/10 (by default), seeded and stratified by Easy/Hard; each item says who accepted it."""

    def item(self, record: StageResult[McsqaRecord]) -> MCItem:
        item = item_of(record)
        provenance = item.provenance.model_copy(update={"review": record.review or "none"})
        return item.model_copy(update={"difficulty": record.data.difficulty, "provenance": provenance})

    def placed(self, record: StageResult[McsqaRecord], item: MCItem, split: str) -> McsqaRecord:
        return record.data.with_(item=item, split=split)
