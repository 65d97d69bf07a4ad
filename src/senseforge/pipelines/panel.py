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

from typing import Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from senseforge.evaluate.policies import AtLeast, ExcludeAmbiguous, Policy, Unanimous, parse_policy

__all__ = ["Panel"]


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
