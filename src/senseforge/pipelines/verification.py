"""The verification panel: several models answer each item, and a written decision table makes it Easy, sends it
to review, or rejects it.

mCSQA makes an item Easy when *one* model (the verify stage's; by default the writer) answers it right, and
sends the rest to review. A :class:`~senseforge.pipelines.panel.VerificationPanel` asks several members
instead: each answers every item through the evaluation harness (:func:`~senseforge.evaluate.run.score_mc`), by
log-likelihood of each choice, of each choice's letter, or by writing a letter (a member's ``@method``, else as
its chat template says, else the recipe's own setting), and each answer is kept with its confidence
(:class:`~senseforge.pipelines.panel.PanelAnswer`).

**The decision table** (:func:`decide`). With ``n`` members, ``r`` of them right, ``--hard-when`` H and
``--skip-review-when`` S:

======================================================  ==================  ==================================
panel outcome                                           S = ``never``       S = ``confident:P``
======================================================  ==================  ==================================
H does not make it Hard (e.g. ``none`` and r ≥ 1)        Easy                Easy
Hard; all wrong, every member chose the *same* other    review              review (a likely wrong key: people
option with probability ≥ P (``never``: ≥ 0.5)                               always see it)
Hard; r ≥ 1 and every right member gave the answer      review              **Easy** (``confident-right``)
probability ≥ P
Hard; all wrong (not as above) and every member gave    review              **rejected**, ``panel_rejected``
the answer probability ≤ 1 − P                                              (``confident-wrong``)
Hard; otherwise                                         review              review
======================================================  ==================  ==================================

A confidence the member could not give (a generated answer without top log-probabilities) is never
confident. Review (LM judges, then people, as ``--reviewers``/``--lm-review-as-hard`` say) keeps an item
(Hard) or rejects it; it never changes a difficulty.

**Saved judgements.** The flow without a panel sends to review the items its one verifier (mCSQA: the
verify model, the *writer* here) answers wrong; where the writer is not a member, the items ``--hard-when``
makes Hard; in a recipe whose review reads every item (culture-gen), every item. An item that flow would have
queued and the panel does not is :attr:`~senseforge.pipelines.panel.PanelVerdict.saved`: ``review_k``
judgements each, which ``cost.json`` counts and prices (:func:`saved_review`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Self

from senseforge.data.io import atomic_open
from senseforge.data.schema import MCItem, judgement
from senseforge.evaluate.policies import AtMost, HardWhen, Minority, NoneRight, SkipReview, agreement
from senseforge.evaluate.records import MCSample
from senseforge.evaluate.run import EvalConfig, score_mc
from senseforge.pipelines.calls import PENDING, Asked, Recorder
from senseforge.pipelines.config import RecipeConfig, is_chat
from senseforge.pipelines.outcomes import Outcome, StageOutput, ok, rejected, spent
from senseforge.pipelines.panel import AnswerMethod, Member, PanelAnswer, PanelDecision, PanelVerdict, VerificationPanel
from senseforge.pipelines.runstore import CallEntry, Record, RunStore, StageResult
from senseforge.pipelines.stage import ModelStage, R, StageContext
from senseforge.runfolder import files
from senseforge.runfolder.cost import ReviewSaved
from senseforge.runfolder.figures import Agreement, Figure, Rated, Table

PANEL_REJECTED = "panel_rejected"
"""Rejection reason: every member of the verification panel answered the item wrong, confidently."""
KEY_CONFIDENCE = 0.5
"""Without ``confident:P``, how sure each member must be of the same wrong option for the key to look wrong."""
TOP_LOGPROBS = 5
"""Top log-probabilities a generating member asks for (to read its answer letter's probability)."""


def decide(
    answers: Sequence[PanelAnswer], hard_when: HardWhen, skip: SkipReview, *, queued_without: bool
) -> PanelVerdict:
    """The decision table's row for one item (see the module's table).

    ``queued_without``: whether the flow without a panel would have sent the item to review.

    >>> from senseforge.evaluate.policies import NoneRight, SkipReview
    >>> right = PanelAnswer(member="a", method="loglik", prediction="A", correct=True, confidence=0.9, chosen=0.9)
    >>> wrong = PanelAnswer(member="b", method="loglik", prediction="B", correct=False, confidence=0.1, chosen=0.8)
    >>> decide([right, wrong], NoneRight(), SkipReview(), queued_without=True).decision
    'easy'
    >>> decide([wrong], NoneRight(), SkipReview(0.8), queued_without=True).rule
    'wrong-key'
    """
    n, r = len(answers), sum(a.correct for a in answers)
    hard = hard_when.hard(r, n)
    decision: PanelDecision
    if not hard:
        decision, rule = "easy", "easy"
    else:
        p = skip.confidence
        threshold = KEY_CONFIDENCE if p is None else p
        predictions = {a.prediction for a in answers}
        if (
            r == 0
            and None not in predictions
            and len(predictions) == 1
            and all(_at_least(a.chosen, threshold) for a in answers)
        ):
            decision, rule = "review", "wrong-key"
        elif p is None:
            decision, rule = "review", "hard"
        elif r > 0 and all(_at_least(a.confidence, p) for a in answers if a.correct):
            decision, rule = "easy", "confident-right"
        elif r == 0 and all(a.confidence is not None and a.confidence <= 1.0 - p for a in answers):
            decision, rule = "rejected", "confident-wrong"
        else:
            decision, rule = "review", "hard"
    saved = queued_without and decision != "review"
    return PanelVerdict(answers=tuple(answers), right=r, hard=hard, decision=decision, rule=rule, saved=saved)


def _at_least(value: float | None, threshold: float) -> bool:
    return value is not None and value >= threshold


def softmax_at(scores: Sequence[float], index: int) -> float:
    """The softmax mass of ``scores[index]`` over ``scores`` (``-inf`` scores get none).

    >>> round(softmax_at([0.0, 0.0], 1), 3)
    0.5
    """
    top = max(scores)
    if top == -math.inf:
        return 1.0 / len(scores)
    weights = [math.exp(s - top) for s in scores]
    return weights[index] / sum(weights)


def answer_of(member: Member, method: AnswerMethod, sample: MCSample, item: MCItem) -> PanelAnswer:
    """A member's :class:`PanelAnswer` from its harness sample."""
    labels = [c.label for c in item.choices]
    confidence = chosen = None
    if method != "generate" and sample.scores:
        scores = [float(s) for s in sample.scores]
        if item.answer in labels:
            confidence = softmax_at(scores, labels.index(item.answer))
        if sample.prediction in labels:
            chosen = softmax_at(scores, labels.index(str(sample.prediction)))
    elif method == "generate":
        probs = sample.label_probs
        if probs is not None:
            confidence = probs.get(str(item.answer), 0.0)
            chosen = probs.get(str(sample.prediction), 0.0) if sample.prediction is not None else None
    return PanelAnswer(
        member=member.given,
        method=method,
        prediction=sample.prediction,
        correct=bool(sample.correct),
        confidence=None if confidence is None else round(confidence, 6),
        chosen=None if chosen is None else round(chosen, 6),
    )


Reference = Literal["verifier", "all", "none"]
"""What the flow without a panel sends to review (:attr:`PanelVerify.reference`)."""

Placed = tuple[str, str, PanelVerdict]
"""Where a verdict belongs: the folder of its ``panel.jsonl`` (relative to the run folder; ``""``: the run folder
itself), the id its rows carry (the item's, as ``items/`` has it), and the verdict."""


@dataclass
class PanelVerify(ModelStage[R]):
    """The verification panel as an engine stage: every member answers every item the stage applies to; the
    decision table (:func:`decide`) makes each Easy, sends it to review, or rejects it.

    A recipe subclasses it with :meth:`item` (the item the members answer) and :meth:`decided` (the record once
    the panel has decided; by default with :attr:`~senseforge.pipelines.runstore.Record.panel` set). The first
    member is :attr:`spec`; :attr:`specs` are all of them.

    A record may carry several items (culture-adapt: one per language): such a recipe overrides :meth:`items`
    (each item with the folder its verdict belongs to), :meth:`settled` (the record once every item is decided)
    and :meth:`placed` (a stored record's verdicts, each with its folder and item id). A record is rejected when
    the panel rejects any of its items (its items are kept together or not at all).
    """

    members: tuple[Member, ...] = ()
    """The panel (see :class:`~senseforge.pipelines.panel.VerificationPanel`); empty: :attr:`spec` alone."""
    methods: tuple[AnswerMethod, ...] = ()
    """How each member answers (resolved by the recipe: :meth:`Member.method`, the chat template, its setting)."""
    hard_when: HardWhen | None = None
    skip: SkipReview | None = None
    writer: str | None = None
    """The member whose wrong answers the flow without a panel sends to review (:attr:`reference` ``verifier``);
    ``None``: the items ``hard_when`` makes Hard stand in for them."""
    reference: Reference = "verifier"
    """What the flow without a panel sends to review, against which :attr:`~PanelVerdict.saved` is counted: the
    items its one verifier answers wrong (mCSQA; see :attr:`writer`), every item (a review that reads them all:
    culture-gen with ``--reviewers``), or none (no review without the panel)."""
    seed: int = 0
    top_logprobs: int = 0
    """Top log-probabilities a generating member asks for (0: none; then its confidence is unknown)."""
    recorded: bool = False
    """Whether the records keep the panel's answers (:attr:`~senseforge.pipelines.runstore.Record.panel`; a named
    panel), which ``panel.jsonl``, the figures and ``cost.json`` read."""
    folders: tuple[str, ...] = ("",)
    """The folders a ``panel.jsonl`` is written in (relative to the run folder; each beside a dataset folder),
    every one of them even when no verdict belongs there; the first is where a one-item record's goes."""

    @property
    def specs(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(member.spec for member in self.members)) or (self.spec,)

    @classmethod
    def of_panel(cls, name: str, config: RecipeConfig, panel: VerificationPanel, **extra: Any) -> Self:
        """The stage of a named panel (its members answering as :func:`chat_methods` says, their answers recorded);
        ``extra``: the reference flow and the fields of the recipe's subclass."""
        members = panel.parsed()
        return cls(
            name,
            members[0].spec,
            members=members,
            methods=chat_methods(config, members),
            hard_when=panel.hard(),
            skip=panel.skip(),
            seed=config.seed,
            top_logprobs=TOP_LOGPROBS,
            recorded=True,
            **extra,
        )

    def item(self, record: StageResult[R]) -> MCItem:
        """The item the members answer."""
        raise NotImplementedError

    def decided(self, record: StageResult[R], verdict: PanelVerdict, samples: Sequence[MCSample]) -> Record:
        """The record once the panel has decided (``samples``: each member's, in order)."""
        return record.data.with_(panel=verdict)

    def items(self, record: StageResult[R]) -> list[tuple[str, MCItem]]:
        """The items the members answer, each with the folder its verdict belongs to (by default one,
        :meth:`item`, in the first of :attr:`folders`)."""
        return [(self.folders[0], self.item(record))]

    def settled(
        self,
        record: StageResult[R],
        verdicts: Sequence[tuple[str, PanelVerdict]],
        samples: Sequence[Sequence[MCSample]],
    ) -> Record:
        """The record once the panel has decided each of its :meth:`items` (``samples``: per item, each member's);
        by default, for one item, :meth:`decided`."""
        return self.decided(record, verdicts[0][1], samples[0])

    def placed(self, record: StageResult[Any]) -> list[Placed]:
        """A stored record's verdicts (none where the panel did not answer it), each with its folder and id (by
        default :attr:`~senseforge.pipelines.runstore.Record.panel`, in the first folder, under the record's id)."""
        verdict = record.data.panel
        return [] if verdict is None else [(self.folders[0], record.record_id, verdict)]

    def rejection(self, verdicts: Sequence[tuple[str, PanelVerdict]]) -> dict[str, Any] | None:
        """The evidence of a record the panel rejects (default: none; a one-item record's verdict says it all)."""
        return None

    def _run(self, records: Sequence[StageResult[Any]], ctx: StageContext) -> StageOutput:
        placed = [self.items(record) for record in records]
        items = [item for found in placed for _, item in found]
        members = self.members or (Member.parse(self.spec),)
        per_member: list[tuple[list[MCSample], list[Asked]]] = []
        for member, method in zip(members, self.methods, strict=True):
            recording = Recorder(ctx.llm(member.spec), self.name)
            top = self.top_logprobs if method == "generate" else 0
            config = EvalConfig(formulation=method, seed=self.seed, **({"top_logprobs": top} if top else {}))
            samples = score_mc(items, recording, config, letter_shape=True) if items else []
            sizes = [1 if method == "generate" else len(item.choices) for item in items]
            per_member.append((samples, recording.sliced(sizes)))
        outcomes: list[Outcome] = []
        at = 0
        for record, found in zip(records, placed, strict=True):
            span = range(at, at + len(found))
            at += len(found)
            if not found:  # nothing to answer: it passes as it is
                outcomes.append(ok(record))
                continue
            asked = [got[index] for _, got in per_member for index in span]
            by_item = [[scored[index] for scored, _ in per_member] for index in span]
            calls: list[CallEntry] = [entry for got in asked for entry in got.calls]
            if any(got.status is PENDING for got in asked):
                outcomes.append(PENDING)
                continue
            failure = next((got.status for got in asked if isinstance(got.status, str)), None)
            if failure is not None:
                outcomes.append(rejected(record, failure, prompt=by_item[0][0].prompt))
                continue
            verdicts: list[tuple[str, PanelVerdict]] = []
            for (folder, item), samples in zip(found, by_item, strict=True):
                answers = [
                    answer_of(member, method, sample, item)
                    for member, method, sample in zip(members, self.methods, samples, strict=True)
                ]
                verdict = decide(answers, self._hard(), self.skip or SkipReview(), queued_without=self._queued(answers))
                verdicts.append((folder, verdict))
            paid = spent(record, self.name, calls)
            data = self.settled(paid, verdicts, by_item)
            prompt = by_item[0][0].prompt
            response = by_item[0][0].response if self.methods[0] == "generate" else None
            if any(verdict.decision == "rejected" for _, verdict in verdicts):
                evidence = self.rejection(verdicts)
                outcomes.append(
                    rejected(paid, PANEL_REJECTED, payload=data, prompt=prompt, response=response, evidence=evidence)
                )
            else:
                outcomes.append(ok(paid, data, prompt=prompt, response=response))
        return StageOutput(outcomes)

    def _hard(self) -> HardWhen:
        return self.hard_when or NoneRight()

    def _queued(self, answers: Sequence[PanelAnswer]) -> bool:
        if self.reference != "verifier":
            return self.reference == "all"
        mine = [a for a in answers if a.member == self.writer]
        if mine:
            return not mine[0].correct
        return self._hard().hard(sum(a.correct for a in answers), len(answers))


def chat_methods(
    config: RecipeConfig, members: Sequence[Member], by: AnswerMethod | None = None
) -> tuple[AnswerMethod, ...]:
    """How each member answers: its ``@method``, else the recipe's own setting ``by`` (mCSQA's ``--verify-by``),
    else as its chat template says (generation for chat models, log-likelihood of each choice for base models)."""
    return tuple(
        member.method or by or ("generate" if is_chat(member.spec, config.options_for(member.spec)) else "loglik")
        for member in members
    )


def panel_rows(record_id: str, verdict: PanelVerdict) -> list[dict[str, Any]]:
    """``panel.jsonl``'s rows of one item: ``id, member, method, prediction, correct, confidence``."""
    return [
        {
            "id": record_id,
            "member": a.member,
            "method": a.method,
            "prediction": a.prediction,
            "correct": a.correct,
            "confidence": a.confidence,
        }
        for a in verdict.answers
    ]


def saved_review(
    answered: Sequence[StageResult[Any]], k: int, rate: float | Mapping[str, float] | None, task: str
) -> ReviewSaved:
    """The review judgements the panel saved: ``k`` for each item the flow without a panel would have sent to
    review and the panel did not, priced at the review task's rate (``null`` without one)."""
    items = sum(1 for record in answered if record.data.panel.saved)
    price = rate.get(task) if isinstance(rate, Mapping) else rate
    judgements = items * k
    return ReviewSaved(
        items=items,
        per_item=k,
        judgements=judgements,
        rate_usd=price,
        cost_usd=None if price is None else round(judgements * price, 8),
    )


def answered(run: RunStore, stage: str, record: type[Record]) -> list[StageResult[Any]]:
    """The records a recorded panel answered at ``stage`` (kept on or rejected by it), in record-id order."""
    found = [r for status in ("ok", "rejected") for r in run.results(stage, status, record) if r.data.panel]
    return sorted(found, key=lambda r: r.record_id)


def answered_by(run: RunStore, stage: PanelVerify[Any], record: type[Record]) -> list[StageResult[Any]]:
    """The records ``stage`` answered (kept on or rejected by it; :meth:`PanelVerify.placed` has verdicts for
    them), in record-id order."""
    found = [r for status in ("ok", "rejected") for r in run.results(stage.name, status, record) if stage.placed(r)]
    return sorted(found, key=lambda r: r.record_id)


def write_panel(path: Path, records: Sequence[StageResult[Any]]) -> None:
    """``panel.jsonl``: each member's answer to each item the panel answered (:func:`panel_rows`), atomically."""
    write_rows(path, [(record.record_id, record.data.panel) for record in records])


def write_rows(path: Path, verdicts: Sequence[tuple[str, PanelVerdict]]) -> None:
    """``panel.jsonl`` of ``(item id, verdict)`` pairs, in order (:func:`panel_rows`), atomically."""
    with atomic_open(path) as handle:
        for item_id, verdict in verdicts:
            for row in panel_rows(item_id, verdict):
                handle.write(json.dumps(row, ensure_ascii=False) + "\n")


def write_panels(run_dir: Path, stage: PanelVerify[Any], records: Sequence[StageResult[Any]]) -> None:
    """Every ``panel.jsonl`` of ``stage`` (one per folder of :attr:`PanelVerify.folders`, beside its dataset), each
    with the verdicts :meth:`PanelVerify.placed` puts there, in the records' order."""
    placed = [entry for record in records for entry in stage.placed(record)]
    for folder in dict.fromkeys([*stage.folders, *(where for where, _, _ in placed)]):
        rows = [(item_id, verdict) for where, item_id, verdict in placed if where == folder]
        write_rows(run_dir / folder / files.PANEL, rows)


def panel_figures(answered: Sequence[StageResult[Any]], kept: Sequence[str]) -> list[Figure]:
    """The panel's figures (:func:`verdict_figures`) of the records it answered (each its
    :attr:`~senseforge.pipelines.runstore.Record.panel`), ``kept`` the ids of those kept."""
    return verdict_figures([(r.record_id, r.data.panel) for r in answered], kept)


def verdict_figures(answered: Sequence[tuple[str, PanelVerdict]], kept: Collection[str]) -> list[Figure]:
    """The panel's figures: each member's accuracy on the kept items, how often each pair of members gave the same
    answer, Fleiss' κ over them, and the Easy/Hard counts each ``--hard-when`` would make of every answered item
    (``answered``: ``(item id, verdict)`` pairs; ``kept``: the ids of the kept ones)."""
    if not answered:
        return []
    members = [a.member for a in answered[0][1].answers]
    n = len(members)
    keep = set(kept)
    on_kept = [verdict for item_id, verdict in answered if item_id in keep]
    accuracy = [
        [
            _mean([float(v.answers[i].correct) for v in on_kept]),
            _mean([c for v in on_kept if (c := v.answers[i].confidence) is not None]),
        ]
        for i in range(n)
    ]
    verdicts = [verdict for _, verdict in answered]
    same = [
        [_mean([float(v.answers[i].prediction == v.answers[j].prediction) for v in verdicts]) for j in range(n)]
        for i in range(n)
    ]
    votes = {
        item_id: [
            judgement(item_id=item_id, annotator=a.member, task="answer", choice=a.prediction or "-")
            for a in verdict.answers
        ]
        for item_id, verdict in answered
    }
    agreed = agreement(votes, "answer", panel=True)
    rules: list[HardWhen] = [NoneRight(), Minority(), *(AtMost(k) for k in range(1, n))]
    counts = [
        [sum(not rule.hard(v.right, n) for v in verdicts), sum(rule.hard(v.right, n) for v in verdicts)]
        for rule in rules
    ]
    unit = "questions"
    return [
        Table(
            name="panel-accuracy",
            title="Verification panel: accuracy on the kept items",
            rows=members,
            columns=["accuracy", "confidence"],
            values=[[_round(a), _round(c)] for a, c in accuracy],
            caption="Each member's share of the kept items it answered right, and the mean probability it gave the "
            "marked answer (where it could give one).",
            summary=True,
        ),
        Table(
            name="panel-pairwise",
            title="Verification panel: pairwise agreement",
            rows=members,
            columns=members,
            values=[[_round(x) for x in row] for row in same],
            caption="How often two members chose the same option, over every item the panel answered.",
            draw=False,
        ),
        Agreement(
            name="panel-agreement",
            title="Verification panel: agreement beyond chance",
            groups=[
                Rated(
                    label="panel",
                    items=agreed.items,
                    raters=n,
                    ratings=agreed.ratings,
                    fleiss_kappa=_round(agreed.fleiss_kappa),
                    krippendorff_alpha=_round(agreed.krippendorff_alpha),
                )
            ],
            caption="Fleiss' κ and Krippendorff's α over the members' chosen options (an unreadable answer counts "
            "as its own option).",
            draw=False,
        ),
        Table(
            name="panel-policies",
            title="Easy and Hard under each --hard-when",
            rows=[rule.spec for rule in rules],
            columns=["Easy", "Hard"],
            values=[list(row) for row in counts],
            stacked=True,
            unit=unit,
            caption="Of every item the panel answered, how many each Hard policy would make Easy and Hard (before "
            "review and the skip rule).",
            summary=True,
        ),
    ]


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)
