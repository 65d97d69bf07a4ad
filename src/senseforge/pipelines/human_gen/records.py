"""The records of human-gen, as the run store holds them between stages.

A slot (one creator, one concept) holds ``lang``, ``category``, ``concept`` and ``creator``;
``create`` adds the creator's ``draft``, when it came (``created_at``) and what they said with it
(``create_comment``, when they said anything); ``qc`` the draft as
revised and the ``qc_history``; ``answer`` the blind ``answers``, their majority and, for an
excluded item, why.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from senseforge.data.schema import Draft, QCEvent
from senseforge.pipelines.runstore import Record, as_stored


class BlindAnswer(BaseModel):
    """One answerer's blind answer, as the dataset keeps it."""

    model_config = ConfigDict(extra="forbid")

    annotator: str
    choice: str | None
    """The label picked (``None``: no answer)."""
    certain: bool | None
    """Whether the answerer was sure (``None``: not asked)."""
    flags: list[str]
    """The answerer's ambiguity flags (``ambiguous-question``, ``ambiguous-option:<label>``)."""
    reason: str | None
    """Why, when the answerer said."""


class HumanGenRecord(Record):
    """One creator's item from one concept, from its slot to its answers."""

    lang: str
    """The run's language (BCP-47)."""
    category: str
    concept: str
    creator: str
    """The pool member who writes the item (and revises it)."""
    draft: Draft | None = None
    """The item as written, then as revised in QC."""
    created_at: str | None = None
    """When the creator submitted it (ISO 8601; ``None``: not known)."""
    create_comment: str | None = None
    """What the creator said with the item when they submitted it (QC sees it in the history's first event);
    unset without one."""
    qc_history: list[QCEvent] | None = None
    """Submission, QC verdicts and revisions, in order."""
    answers: list[BlindAnswer] | None = None
    """The answers that decided the item, in pool order."""
    answer_majority: str | None = None
    """The answerers' majority choice (``None``: none, e.g. an excluded item)."""
    excluded: str | None = None
    """Why the answerers' flags excluded the item."""

    def current_draft(self) -> Draft:
        """The item as it stands.

        Raises:
            ValueError: the record holds no draft yet (a slot).
        """
        if self.draft is None:
            raise ValueError("a human-gen record without a draft reached a stage that reads one")
        return self.draft

    def shown_checked(self) -> dict[str, Any]:
        return {"draft": as_stored(self.draft.model_dump(mode="json"))} if self.draft is not None else {}
