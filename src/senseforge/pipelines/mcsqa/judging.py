"""The judging stages of the mCSQA recipe: LM verification, review, split (the engine's, on its items).

Verification asks a model (by default the one that wrote the question) to answer each
item through the evaluation harness: by log-likelihood of each choice for base models,
by generating a letter for chat models. Right → **Easy**. Wrong or unparsed → review.
With ``--panel`` several models answer, and the verification panel's decision table
(:mod:`senseforge.pipelines.verification`, ``--hard-when``, ``--skip-review-when``)
makes each item Easy, sends it to review, or rejects it.

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
from typing import Literal

from senseforge.data.schema import MCItem
from senseforge.evaluate.records import MCSample
from senseforge.pipelines.mcsqa.config import McsqaConfig
from senseforge.pipelines.mcsqa.records import McsqaRecord, Verdict, VerifyOutcome, have
from senseforge.pipelines.panel import AnswerMethod, Member, PanelVerdict
from senseforge.pipelines.review import Review
from senseforge.pipelines.runstore import JudgementSource, Record, StageResult
from senseforge.pipelines.split import Split
from senseforge.pipelines.verification import TOP_LOGPROBS, PanelVerify, chat_methods

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
class McsqaVerify(PanelVerify[McsqaRecord]):
    """Verification: the verify model alone (the paper's: right → Easy, else → review), or the verification
    panel (``--panel``) by its decision table (:mod:`senseforge.pipelines.verification`)."""

    @classmethod
    def configured(cls, name: str, config: McsqaConfig) -> McsqaVerify:
        """The stage a run's settings describe: the panel when one is named, else the verify model alone."""
        panel = config.verification_panel()
        writer = config.model_for("verify")
        if not panel.members:
            alone = Member.parse(writer)
            return cls(name, writer, members=(alone,), methods=(config.verify_method(),), seed=config.seed)
        members = panel.parsed()
        methods = chat_methods(config, members, None if config.verify_by == "auto" else config.verify_by)
        verifier = (writer, config.verify_method())  # how the flow without a panel verifies
        return cls(
            name,
            members[0].spec,
            members=members,
            methods=methods,
            hard_when=panel.hard(),
            skip=panel.skip(),
            writer=next((m.given for m, how in zip(members, methods, strict=True) if (m.spec, how) == verifier), None),
            seed=config.seed,
            top_logprobs=TOP_LOGPROBS,
            recorded=True,
        )

    def item(self, record: StageResult[McsqaRecord]) -> MCItem:
        return item_of(record)

    def decided(self, record: StageResult[McsqaRecord], verdict: PanelVerdict, samples: Sequence[MCSample]) -> Record:
        if self.recorded:
            kept = record.data.with_(panel=verdict)
            return kept.with_(difficulty="easy") if verdict.decision == "easy" else kept
        sample, method = samples[0], self.methods[0]
        parsed = method != "generate" or bool(sample.parsed)
        outcome: VerifyOutcome = "correct" if sample.correct else ("wrong" if parsed else "unparsed")
        scores = [round(float(s), 6) for s in sample.scores or []] if method != "generate" else None
        verdict_of = Verdict(
            method=_verdict_method(method), prediction=sample.prediction, outcome=outcome, scores=scores
        )
        verified = record.data.with_(verify=verdict_of)
        return verified.with_(difficulty="easy") if outcome == "correct" else verified


def _verdict_method(method: AnswerMethod) -> Literal["loglik", "generate"]:
    return "generate" if method == "generate" else "loglik"


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
