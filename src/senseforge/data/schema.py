"""The record vocabulary every part of senseforge speaks.

Raw formats are converted to these models once, at the edge (see
:mod:`senseforge.data.adapters`); nothing deeper passes untyped row dicts around.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from senseforge.data.lang import normalize_tag

LangTag = Annotated[str, AfterValidator(normalize_tag)]
"""A BCP-47 language tag, stored in canonical casing."""

Difficulty = Literal["easy", "hard"]
ReviewKind = Literal["none", "human", "lm"]
Direction = Literal["forward", "backward"]

JsonValue = Any
"""Anything that serialises to JSON (kept loose on purpose for metadata)."""


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=False, validate_assignment=True)


class Triple(_Record):
    """A piece of knowledge: ``(head, relation, tail)``."""

    head: str = Field(min_length=1)
    """Head concept text, e.g. ``revolving door``."""
    relation: str = Field(min_length=1)
    """Relation name without URI prefix, e.g. ``AtLocation``."""
    tail: str = Field(min_length=1)
    """Tail concept text."""
    lang: LangTag | None = None
    """Language of the concepts, when known."""
    dimension: str | None = None
    """Commonsense dimension (CRoW: attributional, physical/spatial, temporal, causal, social, comparative)."""
    weight: float | None = None
    """Source weight (ConceptNet edge weight), when the source gives one."""
    source: str | None = None
    """Where the triple came from, e.g. a ConceptNet assertion URI."""


class QuestionSet(_Record):
    """An anchor concept, a relation and three distinct target concepts (mCSQA §3.1)."""

    id: str = Field(min_length=1)
    """Stable identifier."""
    lang: LangTag
    """Language of the concepts (BCP-47)."""
    anchor: str = Field(min_length=1)
    """The concept the question is about (becomes ``question_concept``)."""
    relation: str = Field(min_length=1)
    """The relation shared by the anchor and every target."""
    direction: Direction
    """``forward`` for ``(anchor, r, ?)`` groups, ``backward`` for ``(?, r, anchor)``."""
    targets: list[str] = Field(min_length=3, max_length=3)
    """The three target concepts; each may serve as the answer of one question."""
    source_uris: list[str] = Field(default_factory=list)
    """Assertion URIs the set was built from."""
    source_lang: str | None = None
    """The language code used by the source when it differs from ``lang`` (e.g. ConceptNet 5.7 ``ms``)."""

    @model_validator(mode="after")
    def _distinct_targets(self) -> QuestionSet:
        if len(set(self.targets)) != 3:
            raise ValueError("targets must be three distinct concepts")
        return self


class Choice(_Record):
    """One answer option."""

    label: str = Field(min_length=1)
    """Option label, e.g. ``A``."""
    text: str
    """Option text."""


class Provenance(_Record):
    """Where an item came from and who touched it."""

    recipe: str | None = None
    """Recipe or source dataset that produced the item (``mcsqa``, ``commonsenseqa`` …)."""
    source_ids: list[str] = Field(default_factory=list)
    """Identifiers of the records the item was built from (question sets, source items)."""
    model_ids: list[str] = Field(default_factory=list)
    """``provider/model`` strings of the models that wrote or changed the item."""
    review: ReviewKind | None = None
    """Who verified the item: nobody, humans, or an LM panel."""


class MCItem(_Record):
    """A multiple-choice question."""

    id: str = Field(min_length=1)
    """Stable identifier."""
    lang: LangTag
    """Language of the item (BCP-47)."""
    question: str
    """The question text."""
    question_concept: str | None = None
    """The concept the question is about (the question set's anchor)."""
    choices: list[Choice] = Field(min_length=2)
    """Answer options in display order."""
    answer: str | None = None
    """Label of the correct choice, or ``None`` when withheld (e.g. a hidden test split)."""
    difficulty: Difficulty | None = None
    """``easy`` (an LM answered it) or ``hard`` (only humans verified it)."""
    category: str | None = None
    """Kind of commonsense or topic category."""
    provenance: Provenance = Field(default_factory=Provenance)
    """Where the item came from."""
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    """Anything else a source carries (annotator answers, flags …)."""

    @model_validator(mode="after")
    def _answer_is_a_label(self) -> MCItem:
        labels = [c.label for c in self.choices]
        if len(set(labels)) != len(labels):
            raise ValueError(f"choice labels must be unique, got {labels}")
        if self.answer is not None and self.answer not in labels:
            raise ValueError(f"answer {self.answer!r} is not one of the choice labels {labels}")
        return self

    def answer_text(self) -> str | None:
        """Text of the correct choice, or ``None`` when the answer is withheld."""
        for choice in self.choices:
            if choice.label == self.answer:
                return choice.text
        return None


class BinaryExample(_Record):
    """A (context, target) pair judged valid or invalid (CRoW-style tasks)."""

    id: str = Field(min_length=1)
    """Identifier of this pair."""
    context_id: str = Field(min_length=1)
    """Identifier shared by every target of one context (for Situational Accuracy)."""
    context: str
    """The unchanged part of the task example."""
    target: str
    """The candidate (original or perturbed) that is judged."""
    label: bool
    """Whether the target is valid for the context."""
    task: str = Field(min_length=1)
    """Task name, e.g. ``dialogue`` or ``mt-zh-en``."""
    lang: LangTag | None = None
    """Language of the example, when one applies."""
    knowledge: list[Triple] = Field(default_factory=list)
    """Knowledge linking context and target, with relation and dimension."""
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    """Anything else the source carries."""


class Judgement(_Record):
    """One person's (or one LM reviewer's) decision about one item."""

    item_id: str = Field(min_length=1)
    """The judged item."""
    annotator: str = Field(min_length=1)
    """Who judged: an annotator name or a ``provider/model`` string."""
    task: str = Field(min_length=1)
    """Task type, e.g. ``verify`` or ``answer``."""
    accept: bool | None = None
    """For verification: whether the marked answer follows and is the only right one."""
    choice: str | None = None
    """For answering: the chosen label."""
    certain: bool | None = None
    """Whether the annotator was sure."""
    flags: list[str] = Field(default_factory=list)
    """Problems flagged (e.g. ``ambiguous-question``, ``ambiguous-option:B``)."""
    comment: str | None = None
    """Free text."""
    created_at: datetime | None = None
    """When the judgement was made (UTC)."""
