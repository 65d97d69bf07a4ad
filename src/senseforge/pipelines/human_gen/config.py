"""The settings of ``build human-gen`` (hashed into the manifest, like every recipe's)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from senseforge.data.lang import normalize_tag
from senseforge.pipelines.config import RecipeConfig
from senseforge.pipelines.panel import Panel

DEFAULT_POOL: tuple[str, ...] = ("W1", "W2", "W3", "W4", "W5", "W6")
"""Six annotators, named as in Putri et al.'s release."""


def _names(value: tuple[str, ...], what: str) -> tuple[str, ...]:
    names = tuple(name.strip() for name in value if name.strip())
    if len(set(names)) != len(names):
        raise ValueError(f"{what}: a name is given twice ({', '.join(names)})")
    for name in names:
        if len(name) > 128 or "@" in name:
            raise ValueError(f"{what}: {name[:40]!r} is not a usable annotator name (1-128 characters, no '@')")
    return names


class HumanGenConfig(RecipeConfig):
    """Everything that decides what a human-gen build asks of people and keeps."""

    unused: ClassVar[tuple[str, ...]] = (
        "model",
        "stage_models",
        "model_options",
        "style",
    )
    unused_hint: ClassVar[str] = "people write, check and answer every item; no model is called"
    panel_settings: ClassVar[tuple[str, ...]] = ("answers", "max_ambiguity_flags", "adjudicate")

    recipe: Literal["human-gen"] = "human-gen"
    lang: str = "id"
    """The language people write and answer in (BCP-47)."""
    concepts: str | None = None
    """The concept table (CSV or JSONL: category, concept[, lang]); by default our bundled example table.
    A row given twice counts once."""
    pool: tuple[str, ...] = DEFAULT_POOL
    """The annotators who write and answer (invite each with ``senseforge annotate invite``)."""
    assignment: Literal["pairs", "each", "one"] = "pairs"
    """Who writes from which concept: ``pairs`` (Putri et al.: the pool in consecutive pairs, each pair
    writing from its own share of every category, both members from the same concepts), ``each``
    (everyone from every concept) or ``one`` (each concept to one creator, in turn)."""
    checkers: tuple[str, ...] = ()
    """Who does quality control; empty: any pool member but the item's creator."""
    answers: int | None = Field(default=None, ge=1)
    """Blind answers per item; by default every pool member but the creator (pool − 1; Putri et al.: 5)."""
    max_ambiguity_flags: int = Field(default=3, ge=0)
    """Exclude an item more than this many answerers flag as ambiguous (question or any option)."""
    max_qc_rounds: int = Field(default=3, ge=1)
    """Give up on an item QC has sent back this many times (rejected ``qc_unresolved``)."""
    options: int = Field(default=5, ge=2, le=10)
    """Options per question (Putri et al.: five, one right and one hard distractor)."""
    adjudicate: bool = False
    """Items people split on wait for an admin's adjudication (in the app) instead of the policy's verdict."""

    @field_validator("lang")
    @classmethod
    def _lang(cls, value: str) -> str:
        return normalize_tag(value)

    @field_validator("pool")
    @classmethod
    def _pool(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        names = _names(value, "pool")
        if len(names) < 2:
            raise ValueError("pool: at least two annotators (one writes, another answers)")
        return names

    @field_validator("checkers")
    @classmethod
    def _checkers(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return _names(value, "checkers")

    @model_validator(mode="after")
    def _fits_the_pool(self) -> HumanGenConfig:
        if self.assignment == "pairs" and len(self.pool) % 2:
            raise ValueError(
                f"assignment pairs needs an even pool, got {len(self.pool)} annotators ({', '.join(self.pool)}): "
                "add or drop one, or use --assignment one (each concept to one writer in turn) or --assignment each "
                "(everyone writes from every concept)"
            )
        if self.answers is not None and self.answers > len(self.pool) - 1:
            raise ValueError(
                f"answers: at most pool − 1 = {len(self.pool) - 1} (the creator never answers); "
                f"lower --answers or add people to --pool"
            )
        if self.checkers and len(self.checkers) == 1 and self.checkers[0] in self.pool:
            raise ValueError(
                "checkers: a lone checker from the pool could not check their own items; add another to --checkers, "
                "or leave --checkers out (any pool member but the item's writer checks)"
            )
        return self

    @property
    def k(self) -> int:
        """Answers per item."""
        return self.answers if self.answers is not None else len(self.pool) - 1

    def panels(self) -> dict[str, Panel]:
        """The blind answers' panel: ``answers`` people of the pool (``None``: all but the item's creator, who never
        answers); the majority decides,
        an item more than ``max_ambiguity_flags`` answerers flag is excluded, a tie waits for an admin when
        ``adjudicate``."""
        policy = f"majority,exclude-ambiguous:{self.max_ambiguity_flags}"
        return {"answer": Panel(k=self.answers, policy=policy, adjudicate=self.adjudicate)}
