"""One review stage for every recipe: (task type, aggregation policy, judges, k).

Judges are LM judges, people through the annotation app, or both (LM judges first):

* each LM judge is its own annotator, ``lm:<spec>#<i>`` with its own seed (the run's seed
  plus ``i``), so "two of three LM validators" is the policy ``at-least:2/3`` over three
  judges — the same model named three times, or three models. Each is asked a yes/no
  question (:class:`~senseforge.pipelines.calls.YesNo`): a chat model answers in text
  (anything but a clear yes is a no); a base model compares the log-likelihoods of " yes"
  and " no" after the prompt;
* people are ``k`` distinct annotators; while fewer than ``k`` have judged an item, the
  run waits for them (the runner queues the item in the app and stops, awaiting review).
  This part is the engine's people stage (:class:`~senseforge.pipelines.stage.PeopleStage`),
  over the items the LM judges pass on, with :attr:`~Review.pauses_run` set.

The policies (:mod:`senseforge.evaluate.policies`) decide: the LM judges' (``unanimous``
over all of them unless given) rejects an item or passes it on — to people, or straight
to acceptance when the LM judges' word is final (those items say ``review: lm``). The
people's policy, over the first ``k`` people, accepts or rejects. The judgements the LM
judges make go back to the runner, which stores them with the batch.

A recipe subclasses :class:`Review` with what only it knows: which records need review,
the judge's prompt, the item people see, and the payload of an accepted record.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Self

from pydantic import BaseModel

from senseforge.data.schema import Judgement, judgement
from senseforge.errors import ConfigError, SenseforgeError
from senseforge.evaluate.policies import AtLeast, Decision, Policy, Unanimous, parse_policy, ruling, split
from senseforge.pipelines.calls import AWAITING, PENDING, YesNo, ask_yes_no
from senseforge.pipelines.config import ReviewedConfig
from senseforge.pipelines.outcomes import Data, Outcome, StageOutput, ok, rejected, spent
from senseforge.pipelines.panel import Panel
from senseforge.pipelines.runstore import CallEntry, JudgementSource, StageResult
from senseforge.pipelines.stage import PeopleStage, R, StageContext
from senseforge.pipelines.taskqueue import QueuedTask, creator_of

REVIEW_REJECTED = "review_rejected"
"""Rejection reason: people rejected the item."""
LM_REVIEW_REJECTED = "lm_review_rejected"
"""Rejection reason: the LM judges rejected the item."""
EXCLUDED = "review_excluded"
"""Rejection reason: too many judges flagged the item as ambiguous."""


def lm_annotator(spec: str, index: int) -> str:
    """The annotator name of the ``index``-th LM judge."""
    return f"lm:{spec}#{index}"


def people_policy(spec: str, k: int) -> Policy:
    """People's policy over ``k`` of them: plain ``unanimous`` means all ``k``."""
    policy = parse_policy(spec)
    if isinstance(policy, Unanimous) and ":" not in spec:
        return Unanimous(k)
    return policy


def judges_policy(spec: str | None, judges: int) -> Policy:
    """The LM judges' policy: all of them must accept unless a policy is given."""
    return Unanimous(judges) if spec is None else parse_policy(spec)


@dataclass
class Review(PeopleStage[R]):
    """The generic review stage; recipes override the four hooks at the bottom."""

    task: str
    """The judgement task (``verify`` …): people's judgements are read, LM judges' are written, under it."""
    judges: tuple[str, ...]
    """LM judge model specs, in order (``lm:<spec>#<i>``)."""
    judges_policy: str | None
    lm_final: bool
    """The LM judges' acceptance is final (no people)."""
    policy: str
    """People's policy."""
    k: int
    """People per item."""
    seed: int = 0
    adjudicate: bool = False
    """An item people split on waits for an admin's adjudication instead of being decided by the policy."""
    judge_temperature: float = 0.0
    """Sampling temperature of chat judges (each has its own seed: the run's seed plus its index)."""
    group: str = "review"
    """The annotation app's group of its tasks (``<recipe>-review``)."""
    pauses_run = True

    @property
    def replayable(self) -> bool:
        """With LM judges whose word is final no record goes to people: the stage's outcome for a record is its
        judges' answers' (:mod:`senseforge.pipelines.replay`)."""
        return self.lm_final and bool(self.judges)

    @classmethod
    def configured(cls, name: str, task: str, config: ReviewedConfig) -> Self:
        """The stage as a run's review settings describe it (judges, their policy, people, k, seed)."""
        return cls.of_panel(name, task, config.review, seed=config.seed, group=f"{config.recipe}-review")

    @classmethod
    def of_panel(cls, name: str, task: str, panel: Panel, *, seed: int, group: str, **extra: Any) -> Self:
        """The stage a :class:`~senseforge.pipelines.panel.Panel` describes: its LM judges (with their policy and
        temperature, their word final or not), then ``k`` people with theirs, adjudicating or not;
        ``extra``: the fields of the recipe's subclass.

        Raises:
            ConfigError: the panel leaves ``k`` to the recipe (``None``), which a review cannot tell.
        """
        if panel.k is None:
            raise ConfigError(f"{name}: its panel names no k (people per item)")
        return cls(
            name,
            task=task,
            judges=panel.judges,
            judges_policy=panel.judges_policy,
            lm_final=panel.final,
            policy=panel.policy,
            k=panel.k,
            seed=seed,
            adjudicate=panel.adjudicate,
            judge_temperature=panel.temperature,
            group=group,
            **extra,
        )

    @property
    def specs(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(self.judges))

    @property
    def people_tasks(self) -> tuple[str, ...]:
        return (self.task,)

    # -- what a recipe says -----------------------------------------------------------------

    def applies(self, record: StageResult[R]) -> bool:
        """Whether the record goes to the judges (the rest pass: :meth:`skipped`)."""
        return True

    def skipped(self, record: StageResult[R]) -> Outcome:
        """What becomes of a record that needs no review (default: it passes as it is)."""
        return ok(record)

    def judge_prompt(self, record: StageResult[R]) -> str:
        """What an LM judge reads; it ends where the judge's yes or no goes."""
        raise NotImplementedError

    def judge_prompt_for(self, record: StageResult[R], judge: int) -> str:
        """What LM judge number ``judge`` reads (default: :meth:`judge_prompt`, the same for every judge)."""
        return self.judge_prompt(record)

    def task_item(self, record: StageResult[R]) -> BaseModel:
        """What people see in the app."""
        raise NotImplementedError

    def accepted(self, record: StageResult[R], by: JudgementSource) -> Data | None:
        """The data of a record the judges accepted (``by`` ``lm`` or ``human``; ``None``: as it is).

        The stage records ``by`` as the result's :attr:`~senseforge.pipelines.runstore.StageResult.review`.
        """
        return None

    # -- the stage --------------------------------------------------------------------------

    def run(self, records: Sequence[StageResult[Any]], ctx: StageContext) -> StageOutput:
        queued = [r for r in records if self.applies(r)]
        queued_ids = {r.record_id for r in queued}
        outcomes: dict[str, Outcome] = {r.record_id: self.skipped(r) for r in records if r.record_id not in queued_ids}
        made: list[tuple[Judgement, JudgementSource]] = []
        to_people: list[StageResult[Any]] = []
        if self.judges and queued:
            verdicts, entries = self._ask_judges(queued, ctx)
            made = [(j, "lm") for judged in verdicts for j in judged if j is not None]
            policy = judges_policy(self.judges_policy, len(self.judges))
            for index, record in enumerate(queued):
                paid = spent(record, self.name, entries[index])
                judged = [verdicts[judge][index] for judge in range(len(self.judges))]
                if any(j is None for j in judged):
                    outcomes[record.record_id] = PENDING
                    continue
                decision = policy([j for j in judged if j is not None])
                if decision.status == "pending":  # the config validator makes this unreachable
                    raise SenseforgeError(f"{self.name}: {decision.reason}: the LM judges cannot decide")
                if decision.status == "accepted":
                    if self.lm_final:
                        outcomes[record.record_id] = ok(paid, self.accepted(paid, "lm"), review="lm")
                    else:
                        to_people.append(paid)
                else:
                    reason = EXCLUDED if decision.status == "excluded" else LM_REVIEW_REJECTED
                    outcomes[record.record_id] = rejected(paid, reason)
        elif queued:
            to_people = list(queued)
        by_people = super().run(to_people, ctx)  # the items the LM judges left to people
        outcomes.update({r.record_id: o for r, o in zip(to_people, by_people.outcomes, strict=True)})
        return StageOutput([outcomes[r.record_id] for r in records], made, by_people.tasks)

    def shown(self, record: StageResult[R]) -> QueuedTask:
        item = self.task_item(record)
        return QueuedTask(self.task, item, k=self.k, group=self.group, creator=creator_of(item))

    def decide(self, record: StageResult[R], judged: Sequence[Judgement]) -> Outcome:
        """People's decision over the first ``k`` distinct people who voted (waiting while fewer).

        An adjudication decides whatever the votes; with :attr:`adjudicate`, an item the first
        ``k`` split on waits until an admin rules.
        """
        decision = self._people(people_policy(self.policy, self.k), judged)
        if decision.status == "pending":
            return AWAITING
        if decision.status == "accepted":
            return ok(record, self.accepted(record, "human"), review="human")
        return rejected(record, EXCLUDED if decision.status == "excluded" else REVIEW_REJECTED)

    def _people(self, policy: Policy, judged: Sequence[Judgement]) -> Decision:
        ruled = ruling(list(judged))
        if ruled is not None:
            return ruled
        seen: set[str] = set()
        voters: list[Judgement] = []
        for given in judged:
            if given.vote() is None or given.annotator in seen:
                continue
            seen.add(given.annotator)
            voters.append(given)
        if len(voters) < self.k:
            return Decision("pending", reason=f"{len(voters)} of {self.k} people so far")
        if self.adjudicate and split(voters[: self.k]):
            return Decision("pending", reason="people split: waiting for an adjudication")
        if isinstance(policy, Unanimous | AtLeast):
            return policy(voters)
        return policy(voters[: self.k])

    def _ask_judges(
        self, records: Sequence[StageResult[Any]], ctx: StageContext
    ) -> tuple[list[list[Judgement | None]], list[list[CallEntry]]]:
        """Per judge, one judgement per record (``None`` while its call failed transiently; a refused call is a
        no), and per record the call entries for the cost report.

        Every pass asks every judge again: calls already made come from the cache, so a
        resumed run records the same calls as an uninterrupted one.
        """
        verdicts: list[list[Judgement | None]] = []
        entries: list[list[CallEntry]] = [[] for _ in records]
        for index, spec in enumerate(self.judges):
            seed = self.seed + index
            questions = [
                [YesNo(self.judge_prompt_for(r, index), seed=seed, temperature=self.judge_temperature)] for r in records
            ]
            annotator = lm_annotator(spec, index)
            judged: list[Judgement | None] = []
            for at, (record, (got, said)) in enumerate(
                zip(records, ask_yes_no(ctx.llm(spec), self.name, questions), strict=True)
            ):
                judged.append(self._judged(record, annotator, got.status, said[0].yes is True, said[0].note))
                entries[at] += got.calls
            verdicts.append(judged)
        return verdicts, entries

    def _judged(
        self, record: StageResult[Any], annotator: str, status: object, accept: bool, note: str
    ) -> Judgement | None:
        if status is PENDING:
            return None
        return judgement(
            item_id=record.record_id, annotator=annotator, task=self.task, accept=accept, comment=note or None
        )
