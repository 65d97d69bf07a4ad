"""The record vocabulary every part of senseforge speaks.

Raw formats are converted to these models once, at the edge (see
:mod:`senseforge.data.adapters`); nothing deeper passes untyped row dicts around.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from senseforge.data.judgements import JudgementRegistry
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


ACCEPT_VOTE = "accept"
"""The vote of a judgement that accepts (verify ``accept=True``, QC ``complete``)."""
REJECT_VOTE = "reject"
"""The vote of a judgement that rejects."""
VoteKind = Literal["choice", "accept"]

_LEGACY_KEYS = ("accept", "choice", "certain", "flags", "comment")
"""The fields every judgement had before bodies were typed per task (old run stores hold them, mostly empty)."""


class _Judgement(_Record):
    """What every judgement carries: who judged which item, for which task type, and when.

    The rest is the task type's body (the subclasses below, each registered in
    :data:`JUDGEMENTS`), told apart by ``task``. A body says how it counts for the shared aggregation
    policies (:mod:`senseforge.evaluate.policies`): :attr:`vote_kind` and :meth:`vote`,
    and whether it flags the item as ambiguous (:meth:`ambiguous`).
    """

    vote_kind: ClassVar[VoteKind | None] = None
    """How this body votes: by a ``choice`` label, by ``accept``/``reject``, or not at all."""

    item_id: str = Field(min_length=1)
    """The judged item (for a task repeated per round, ``<item>@<round>``)."""
    annotator: str = Field(min_length=1)
    """Who judged: an annotator name or an ``lm:<provider/model>#<i>`` string."""
    task: str
    """Task type, e.g. ``verify`` or ``answer``."""
    created_at: datetime | None = None
    """When the judgement was made (UTC)."""
    adjudication: bool = False
    """An admin's ruling on an item people split on: it decides the item (see ``policies.ruling``)."""

    @model_validator(mode="before")
    @classmethod
    def _drop_empty_legacy(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        empty = [k for k in _LEGACY_KEYS if k in data and k not in cls.model_fields and data[k] in (None, [])]
        return {k: v for k, v in data.items() if k not in empty} if empty else data

    def vote(self) -> str | None:
        """What the judgement votes for, or ``None`` when it casts no vote."""
        return None

    def ambiguous(self) -> bool:
        """Whether the judgement flags the question or an option as ambiguous."""
        return False


JUDGEMENTS: JudgementRegistry[_Judgement] = JudgementRegistry()
"""The judgement bodies by task type (:mod:`senseforge.data.judgements`): each body below registers into it."""


def _is_ambiguity(flag: str) -> bool:
    return flag.startswith("ambiguous")


@JUDGEMENTS.register
class VerifyJudgement(_Judgement):
    """Does the marked answer follow from common sense, and is it the only right one (mCSQA's review)?"""

    vote_kind: ClassVar[VoteKind | None] = "accept"
    task: Literal["verify"] = "verify"
    accept: bool | None = None
    """Whether the marked answer follows and is the only right one; ``None``: no verdict (flags only)."""
    flags: list[str] = Field(default_factory=list)
    """Problems flagged (``ambiguous-question``, ``several-right``, ``offensive``, ``wrong-language``)."""
    comment: str | None = None
    """Free text."""

    def vote(self) -> str | None:
        return None if self.accept is None else ACCEPT_VOTE if self.accept else REJECT_VOTE

    def ambiguous(self) -> bool:
        return any(_is_ambiguity(f) for f in self.flags)


@JUDGEMENTS.register
class AnswerJudgement(_Judgement):
    """A blind answer with what Putri et al. collected beside it: certainty, ambiguity, a reason."""

    vote_kind: ClassVar[VoteKind | None] = "choice"
    task: Literal["answer"] = "answer"
    choice: str | None = None
    """The chosen label."""
    certain: bool | None = None
    """Whether the annotator was sure."""
    flags: list[str] = Field(default_factory=list)
    """``ambiguous-question`` (the question is unclear) and ``ambiguous-option:<label>`` per unclear option."""
    reason: str | None = None
    """Why (asked for an uncertain answer or a flag; optional)."""

    @model_validator(mode="before")
    @classmethod
    def _comment_is_reason(cls, data: Any) -> Any:
        if isinstance(data, dict) and "comment" in data:
            data = dict(data)
            comment = data.pop("comment")
            data.setdefault("reason", comment)
        return data

    def vote(self) -> str | None:
        return self.choice

    def ambiguous(self) -> bool:
        return any(_is_ambiguity(f) for f in self.flags)

    @property
    def question_ambiguous(self) -> bool:
        return "ambiguous-question" in self.flags

    def option_ambiguous(self, label: str) -> bool:
        return f"ambiguous-option:{label}" in self.flags


class Draft(_Record):
    """A question a person wrote: five options, the answer and one hard distractor."""

    question: str = Field(min_length=1)
    choices: list[Choice] = Field(min_length=2)
    answer: str = Field(min_length=1)
    """Label of the right option."""
    distractor: str = Field(min_length=1)
    """Label of the option that could pass for the answer."""
    concept_form: str | None = None
    """The form of the concept the question uses, when it is not the concept as given (``kunjungan``)."""

    @model_validator(mode="after")
    def _labels(self) -> Draft:
        labels = [c.label for c in self.choices]
        if len(set(labels)) != len(labels):
            raise ValueError(f"choice labels must be unique, got {labels}")
        for name in ("answer", "distractor"):
            if getattr(self, name) not in labels:
                raise ValueError(f"{name} {getattr(self, name)!r} is not one of the labels {labels}")
        if self.answer == self.distractor:
            raise ValueError("the distractor must be another option than the answer")
        return self


@JUDGEMENTS.register
class CreateJudgement(_Judgement):
    """A question written from (category, concept): Putri et al.'s Human_Gen creation."""

    task: Literal["create"] = "create"
    draft: Draft
    comment: str | None = None


@JUDGEMENTS.register
class ReviseJudgement(_Judgement):
    """The creator's edit of an item QC sent back (``item_id`` is ``<item>@<round>``)."""

    task: Literal["revise"] = "revise"
    draft: Draft
    comment: str | None = None
    """What the creator says of the change."""


QCVerdict = Literal["complete", "needs_revision"]


@JUDGEMENTS.register
class QCJudgement(_Judgement):
    """A checker's verdict on a created or revised item (``item_id`` is ``<item>@<round>``)."""

    vote_kind: ClassVar[VoteKind | None] = "accept"
    task: Literal["qc"] = "qc"
    verdict: QCVerdict
    comment: str | None = None
    """What to change (required when the item goes back)."""

    def vote(self) -> str | None:
        return ACCEPT_VOTE if self.verdict == "complete" else REJECT_VOTE


AdaptVerdict = Literal["correct-major", "correct-minor", "wrong"]
AdaptError = Literal["translation", "phrase-structure", "typo-mechanics"]


@JUDGEMENTS.register
class AdaptCheckJudgement(_Judgement):
    """An adapted item checked against its source (Putri et al.'s Tables 2, 8 and 9)."""

    vote_kind: ClassVar[VoteKind | None] = "choice"
    task: Literal["adapt-check"] = "adapt-check"
    verdict: AdaptVerdict
    """Right with a change that fits the culture, right with little more than a translation, or wrong."""
    error: AdaptError | None = None
    """The error of a wrong adaptation."""
    comment: str | None = None

    @model_validator(mode="after")
    def _error_iff_wrong(self) -> AdaptCheckJudgement:
        if (self.verdict == "wrong") != (self.error is not None):
            raise ValueError("a wrong adaptation names its error, and only a wrong one")
        return self

    def vote(self) -> str | None:
        return self.verdict

    @property
    def accept(self) -> bool:
        return self.verdict != "wrong"


QuestionError = Literal[
    "none", "translation", "sentence-structure", "fluency", "context", "subjectivity", "typo-mechanics"
]
OptionsError = Literal["none", "translation", "fluency", "context", "invalid-options", "typo-mechanics"]


@JUDGEMENTS.register
class LabelErrorsJudgement(_Judgement):
    """The primary error of a question and of its options (Putri et al.'s Tables 3–6)."""

    vote_kind: ClassVar[VoteKind | None] = "choice"
    task: Literal["label-errors"] = "label-errors"
    question_error: QuestionError
    options_error: OptionsError
    comment: str | None = None

    def vote(self) -> str | None:
        return f"{self.question_error}/{self.options_error}"

    @property
    def accept(self) -> bool:
        return self.question_error == "none" and self.options_error == "none"


OpenVerdict = Literal["correct", "incorrect"]


@JUDGEMENTS.register
class OpenJudgeJudgement(_Judgement):
    """A person's verdict on a model's free answer (the ``open`` formulation), beside the LM judge's."""

    vote_kind: ClassVar[VoteKind | None] = "accept"
    task: Literal["open-judge"] = "open-judge"
    verdict: OpenVerdict
    """Whether the free answer means the reference answer."""
    comment: str | None = None

    def vote(self) -> str | None:
        return ACCEPT_VOTE if self.verdict == "correct" else REJECT_VOTE


@JUDGEMENTS.register
class KnowledgeCheckJudgement(_Judgement):
    """Does a knowledge triple hold, and does it link the example's context with its target (CRoW's CKV)?"""

    vote_kind: ClassVar[VoteKind | None] = "accept"
    task: Literal["ckv"] = "ckv"
    accept: bool
    """Whether the triple holds and is relevant (a tick)."""
    comment: str | None = None

    def vote(self) -> str | None:
        return ACCEPT_VOTE if self.accept else REJECT_VOTE


SCHEMA_CONDITIONS: tuple[str, ...] = ("minimal", "violates", "flips", "on_topic")
"""CRoW's four conditions on a rewrite: few words changed, against the knowledge, the label flipped, on topic."""


@JUDGEMENTS.register
class SchemaCheckJudgement(_Judgement):
    """Does a Winograd-style rewrite meet CRoW's four conditions (its WSV)?"""

    vote_kind: ClassVar[VoteKind | None] = "accept"
    task: Literal["wsv"] = "wsv"
    accept: bool
    """Whether the rewrite meets every condition."""
    conditions: dict[str, bool] | None = None
    """The verdict per condition of :data:`SCHEMA_CONDITIONS`, when the judge gave one each."""
    comment: str | None = None

    @field_validator("conditions")
    @classmethod
    def _known(cls, value: dict[str, bool] | None) -> dict[str, bool] | None:
        unknown = sorted(set(value or {}) - set(SCHEMA_CONDITIONS))
        if unknown:
            raise ValueError(f"unknown conditions {unknown}; known: {list(SCHEMA_CONDITIONS)}")
        return value

    def vote(self) -> str | None:
        return ACCEPT_VOTE if self.accept else REJECT_VOTE


class KnowledgeTriple(_Record):
    """A CRoW knowledge triple as people are shown it: its parts, its dimension and a sentence of it."""

    head: str = Field(min_length=1)
    relation: str = Field(min_length=1)
    tail: str = Field(min_length=1)
    dimension: str | None = None
    verbalized: str | None = None


@JUDGEMENTS.register
class KnowledgeAnnotationJudgement(_Judgement):
    """A person's knowledge for a CRoW pair (CKA): one to five triples, or none found."""

    vote_kind: ClassVar[VoteKind | None] = None
    task: Literal["cka"] = "cka"
    triples: list[KnowledgeTriple] = Field(default_factory=list)
    no_knowledge: bool = False
    """No everyday knowledge links the pair."""
    comment: str | None = None

    @model_validator(mode="after")
    def _one_or_other(self) -> KnowledgeAnnotationJudgement:
        if self.no_knowledge == bool(self.triples):
            raise ValueError("give triples, or no_knowledge, not both and not neither")
        return self


@JUDGEMENTS.register
class RewriteJudgement(_Judgement):
    """A person's Winograd-style rewrite of a CRoW target (WSG), or "no alternative"."""

    vote_kind: ClassVar[VoteKind | None] = None
    task: Literal["wsg"] = "wsg"
    rewrite: str | None = None
    violates: list[int] = Field(default_factory=list)
    """Which of the shown triples the rewrite goes against (their indexes)."""
    no_alternative: bool = False
    comment: str | None = None

    @model_validator(mode="after")
    def _one_or_other(self) -> RewriteJudgement:
        if self.no_alternative == bool(self.rewrite):
            raise ValueError("give a rewrite, or no_alternative, not both and not neither")
        return self


Judgement = _Judgement
"""One person's (or one LM judge's) decision about one item: the body of its task type (each registers itself
into :data:`JUDGEMENTS`), told apart by ``task``."""

JUDGEMENT: JudgementRegistry[Judgement] = JUDGEMENTS
"""Validates any registered judgement (``JUDGEMENT.validate_python(row)``, ``JUDGEMENT.validate_json(text)``)."""


def judgement(**fields: Any) -> Judgement:
    """A judgement of the body its ``task`` names.

    >>> judgement(item_id="q1", annotator="ana", task="verify", accept=True).vote()
    'accept'
    """
    return JUDGEMENT.validate_python(fields)


# --- what people are shown -------------------------------------------------------------


class ConceptSlot(_Record):
    """A (category, concept) given to one creator: the input of a ``create`` task."""

    id: str = Field(min_length=1)
    """The id the written item will have."""
    lang: LangTag
    category: str = Field(min_length=1)
    concept: str = Field(min_length=1)
    creator: str = Field(min_length=1)
    """Who writes it (nobody else is offered the slot)."""
    options: int = Field(default=5, ge=2, le=10)
    """How many options to write."""


class QCEvent(_Record):
    """One step of a created item's history."""

    status: Literal["submitted", "needs_revision", "revised", "complete"]
    by: str
    round: int = Field(ge=0)
    """0 for the first version; the ``n``-th QC verdict and the revision that answers it have round ``n``."""
    comment: str | None = None
    at: datetime | None = None


class DraftItem(_Record):
    """A written item on its way through QC: the input of ``qc`` and ``revise`` tasks."""

    id: str = Field(min_length=1)
    """``<item>@<round>``: the round this task belongs to."""
    item_id: str = Field(min_length=1)
    lang: LangTag
    category: str
    concept: str
    creator: str
    draft: Draft
    history: list[QCEvent] = Field(default_factory=list)
    """What happened so far; a revise task's last event is the verdict that sent it back."""


class OpenAnswer(_Record):
    """A model's free answer to one item of an ``open`` evaluation: the input of an ``open-judge`` task."""

    id: str = Field(min_length=1)
    """``<item id>::<model spec>``: one task per (item, model)."""
    item_id: str = Field(min_length=1)
    model: str = Field(min_length=1)
    """The evaluated model (``provider/model``)."""
    lang: LangTag
    question: str
    """What the model was asked (the prompt of the sample)."""
    gold: str
    """The text of the gold option."""
    answer: str
    """The model's free answer."""
