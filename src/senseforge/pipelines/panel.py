"""One vocabulary for every panel that judges a recipe's items: who judges, how many, the policy, adjudication.

A :class:`Panel` is what a judging stage runs with, whichever recipe it belongs to:

* **who judges**: LM judges (:attr:`Panel.judges`, model specs; each is its own annotator
  ``lm:<spec>#<i>`` with the run's seed plus ``i``, so one model named three times is
  three judges), people through the annotation app, or LM judges first and people after
  them (unless the LM judges' word is :attr:`~Panel.final`);
* **how many**: the LM judges are as many as named; people are :attr:`~Panel.k` per item;
* **the policy**: how the votes decide, in the grammar of
  :func:`senseforge.evaluate.policies.parse_policy` (``unanimous``, ``at-least:2/3``,
  ``majority,exclude-ambiguous:3`` …), one for the LM judges and one for people;
* **adjudication**: whether an item people split on waits for an admin.

Each recipe gives its panels under its own names, as it always has (mCSQA's and culture-gen's
``--reviewers``/``--review-k``, CRoW's ``--validators``/``--k``/``--ckv-min``, human-gen's
``--answers``/``--adjudicate``): a config says once, in
:meth:`~senseforge.pipelines.config.RecipeConfig.panels`, which panel each of its judging
stages runs with, and the stages are built from those panels.
"""

from __future__ import annotations

from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from senseforge.errors import ConfigError
from senseforge.evaluate.policies import (
    AtLeast,
    AtMost,
    ExcludeAmbiguous,
    HardWhen,
    Policy,
    SkipReview,
    Unanimous,
    parse_hard_when,
    parse_policy,
    parse_skip_review,
)

__all__ = ["Member", "Panel", "PanelAnswer", "PanelVerdict", "VerificationPanel"]


class Panel(BaseModel):
    """Who judges a stage's items, how many, how their votes decide, and whether splits wait for an admin."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    judges: tuple[str, ...] = ()
    """LM judges (model specs; repeat one to ask it several times, each with its own seed); empty: people."""
    judges_policy: str | None = None
    """How the LM judges' votes decide (``unanimous``, ``at-least:2/3`` …); ``None``: all must accept."""
    final: bool = False
    """Items the LM judges accept are accepted without people (labelled ``review: lm``); else people follow."""
    policy: str = "unanimous"
    """How people's votes decide, over ``k`` of them."""
    k: int | None = Field(default=2, ge=1)
    """People per item; ``None``: every person who may judge the item (the recipe says who)."""
    adjudicate: bool = False
    """Items people split on wait for an admin's adjudication (in the app) instead of the policy's verdict."""
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    """Sampling temperature of chat judges (each has its own seed: the run's seed plus its index)."""

    @field_validator("judges_policy", "policy")
    @classmethod
    def _policy(cls, value: str | None) -> str | None:
        if value is not None:
            parse_policy(value)
        return value

    @model_validator(mode="after")
    def _judges_can_decide(self) -> Self:
        if self.judges_policy is None or not self.judges:
            return self
        rule = _rule(parse_policy(self.judges_policy))
        if isinstance(rule, Unanimous | AtLeast) and rule.k > len(self.judges):
            raise ValueError(
                f"{self.given_as('judges_policy')} {self.judges_policy!r} needs {rule.k} LM judges, "
                f"but {self.given_as('judges')} names {len(self.judges)} (repeat a model to ask it again)"
            )
        return self

    @classmethod
    def given_as(cls, name: str) -> str:
        """The name a field is given by in messages (a recipe's panel names it its own way)."""
        return name


def _rule(policy: Policy) -> Policy:
    return policy.inner if isinstance(policy, ExcludeAmbiguous) else policy


AnswerMethod = Literal["loglik", "letter", "generate"]
"""How a panel member answers: log-likelihood of each choice's text, of each choice's letter, or by writing a
letter (the evaluation harness's formulations)."""

METHODS: dict[str, AnswerMethod] = {"loglik": "loglik", "letter": "letter", "generate": "generate"}
"""The method suffixes a member may carry (``spec@letter``)."""


class Member(BaseModel):
    """One member of a verification panel: a model spec and, if named, how it answers."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    given: str
    """The member as given (``llamacpp/gemma-3-270m@letter``): its name in ``panel.jsonl``."""
    spec: str
    """The model it asks (the same spec in two members is the same model)."""
    method: AnswerMethod | None
    """How it answers; ``None``: as the model's chat template says (generation for chat models, else
    log-likelihood), or as the recipe's own setting (mCSQA's ``--verify-by``) says."""

    @classmethod
    def parse(cls, given: str) -> Member:
        """``spec`` or ``spec@loglik|letter|generate``.

        >>> Member.parse("llamacpp/gemma-3-270m@letter").method, Member.parse("openai/gpt-4o").method
        ('letter', None)
        """
        spec, at, suffix = given.strip().rpartition("@")
        if at and suffix in METHODS:
            return cls(given=given.strip(), spec=spec, method=METHODS[suffix])
        return cls(given=given.strip(), spec=given.strip(), method=None)


class VerificationPanel(BaseModel):
    """Models that answer each item (who), the policy that makes an item Hard from how many answered right, and
    which items the panel settles without review. Empty :attr:`members`: no panel (mCSQA: its verify model
    alone, as the paper has it)."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    members: tuple[str, ...] = ()
    """Model specs, each optionally ``@loglik``, ``@letter`` or ``@generate``; each answers every item."""
    hard_when: str = "none"
    """``none`` (no member right), ``minority`` (fewer than half right) or ``at-most:N``: when an item is Hard."""
    skip_review_when: str = "never"
    """``never`` or ``confident:P``: which Hard candidates the panel settles without review (see
    :func:`senseforge.pipelines.verification.decide`)."""

    @field_validator("hard_when")
    @classmethod
    def _hard_when(cls, value: str) -> str:
        return parse_hard_when(value).spec

    @field_validator("skip_review_when")
    @classmethod
    def _skip(cls, value: str) -> str:
        return parse_skip_review(value).spec

    @field_validator("members")
    @classmethod
    def _members(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        members = tuple(Member.parse(given).given for given in value if given.strip())
        twice = sorted({given for given in members if members.count(given) > 1})
        if twice:
            raise ConfigError(
                f"--panel names {', '.join(twice)} twice: a member answers the same way each time it is asked; "
                "give another method (spec@loglik, spec@letter, spec@generate) for a second member of one model"
            )
        return members

    @model_validator(mode="after")
    def _policy_fits(self) -> Self:
        rule = self.hard()
        if isinstance(rule, AtMost) and self.members and rule.n >= len(self.members):
            raise ValueError(
                f"--hard-when {self.hard_when} would make every item Hard: the panel has {len(self.members)} "
                f"member(s); N must be below that"
            )
        return self

    def hard(self) -> HardWhen:
        """The Hard policy."""
        return parse_hard_when(self.hard_when)

    def skip(self) -> SkipReview:
        """The skip-review policy."""
        return parse_skip_review(self.skip_review_when)

    def parsed(self) -> tuple[Member, ...]:
        """The members, parsed."""
        return tuple(Member.parse(given) for given in self.members)


class PanelAnswer(BaseModel):
    """What one member answered for one item."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    member: str
    """The member as given."""
    method: AnswerMethod
    """How it answered."""
    prediction: str | None
    """The label it chose (``None``: its reply named none)."""
    correct: bool
    """Whether that is the item's answer (an unreadable reply is wrong)."""
    confidence: float | None
    """The probability it gave the item's answer: log-likelihood methods, the softmax over the choices' scores;
    generation, the answer letter's probability from the endpoint's top log-probabilities (``None`` where it
    gives none)."""
    chosen: float | None = None
    """The probability it gave its own prediction (as :attr:`confidence`)."""


PanelDecision = Literal["easy", "review", "rejected"]
"""What the panel made of an item: Easy, on to review (Hard if the review accepts it), or rejected."""


class PanelVerdict(BaseModel):
    """What a verification panel made of one item: each member's answer, and the decision table's row."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    answers: tuple[PanelAnswer, ...]
    """Each member's answer, in the panel's order."""
    right: int
    """How many members answered right."""
    hard: bool
    """Whether ``--hard-when`` makes the item a Hard candidate."""
    decision: PanelDecision
    """Easy, review, or rejected."""
    rule: str
    """The decision table's row that decided (``easy``, ``hard``, ``wrong-key``, ``confident-right``,
    ``confident-wrong``)."""
    saved: bool
    """The flow without a panel would have sent the item to review, and this one does not."""
