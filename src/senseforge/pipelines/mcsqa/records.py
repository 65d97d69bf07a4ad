"""The record of the mCSQA recipe: what one question carries from stage to stage.

A record starts as a question set and the target chosen as its answer; the stages add the
question (and the first version of it), whether refinement changed it, the distractors,
the shuffled and labelled item, the verifier's verdict, the difficulty and the split. The
LM calls each stage made, and who accepted the item in review, are the engine's fields of
the result (:attr:`~senseforge.pipelines.runstore.StageResult.calls`,
:attr:`~senseforge.pipelines.runstore.StageResult.review`), not the record's.

Field names are the keys of the payloads stored before records were typed, so those runs
read back and resume.
"""

from __future__ import annotations

from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, SerializerFunctionWrapHandler, model_serializer

from senseforge.data.schema import Difficulty, MCItem, QuestionSet
from senseforge.errors import SenseforgeError
from senseforge.pipelines.runstore import Record

T = TypeVar("T")

VerifyOutcome = Literal["correct", "wrong", "unparsed"]
"""What became of the verifier's answer: right (the item is Easy), wrong, or no label found (both go to review)."""


class Verdict(BaseModel):
    """What the verifier made of an item."""

    model_config = ConfigDict(extra="forbid")

    method: Literal["loglik", "generate"]
    """How the verifier answered: by log-likelihood of each choice, or by writing a letter."""
    prediction: str | None
    """The label the verifier chose (``None``: its reply named none)."""
    outcome: VerifyOutcome
    """Right, wrong, or unparsed."""
    scores: list[float] | None = None
    """``loglik``: the log-likelihood of each choice, rounded to six places."""

    @model_serializer(mode="wrap")
    def _no_scores(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        shown: dict[str, Any] = handler(self)
        if shown.get("scores", 0) is None:  # a generated answer has none: stored without the key, as always
            del shown["scores"]
        return shown


class McsqaRecord(Record):
    """One question of an mCSQA run, as far as the stages have taken it."""

    qs: QuestionSet
    """The question set the question is written for."""
    answer: str
    """The target that is the question's answer (one of the set's three)."""
    question: str | None = None
    """The question as it stands: written by ``generate``, replaced by ``refine``."""
    generated: str | None = None
    """The question as ``generate`` first wrote it."""
    refined_changed: bool | None = None
    """Whether ``refine`` changed the question (beyond spacing and Unicode form)."""
    distractors: list[str] | None = None
    """The two wrong choices ``distractors`` added."""
    distractors_offered: int | None = None
    """How many wrong choices the model offered (the first two are kept)."""
    item: MCItem | None = None
    """The five-choice item, shuffled and labelled A–E (``shuffle``; ``split`` adds difficulty and review)."""
    verify: Verdict | None = None
    """What the verifier made of the item."""
    difficulty: Difficulty | None = None
    """``easy`` when the verifier answered right, ``hard`` when reviewers accepted it."""
    split: str | None = None
    """The split the item went to (``train``, ``validation`` or ``test``)."""

    def shown_question(self) -> str | None:
        """The question, or the item's once there is no question of its own."""
        if self.question is not None:
            return self.question
        return self.item.question if self.item is not None else None

    def shown_checked(self) -> dict[str, Any]:
        """The item's choices (``"A. …"``) and answer once it has them, else the distractors when there are some."""
        if self.item is not None:
            return {"choices": [f"{c.label}. {c.text}" for c in self.item.choices], "answer": self.item.answer}
        if self.distractors is not None:
            return {"distractors": list(self.distractors)}
        return {}


def have(value: T | None, field: str) -> T:
    """``value``, a record's ``field``, which a stage before this one set.

    Raises:
        SenseforgeError: the field is not set (the record skipped the stage that sets it).
    """
    if value is None:
        raise SenseforgeError(f"an mCSQA record without its {field}: the stage that sets it did not run")
    return value
