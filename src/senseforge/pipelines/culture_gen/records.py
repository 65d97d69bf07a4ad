"""The records of culture-gen, as the run store holds them between stages.

A batch record (one call) holds ``lang``, ``category``, ``concepts`` and ``occurrence``. Each
concept record made of its reply (``<batch>/<index>``) holds the same but ``concepts``, with
``batch_concepts`` and ``concept`` instead, and ``item`` once an item came back for it; the
language stage adds ``lang_detected``.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import BaseModel, ConfigDict

from senseforge.data.schema import Difficulty
from senseforge.pipelines.choices import RawItem
from senseforge.pipelines.runstore import Record


def item_id(lang: str, concept: str, question: str, choices: list[tuple[str, str]]) -> str:
    """``gen_<lang>_<hash>`` of what the item says."""
    text = json.dumps([lang, concept, question, choices], ensure_ascii=False)
    return f"gen_{lang}_{hashlib.sha256(text.encode('utf-8')).hexdigest()[:32]}"


class CultureItem(BaseModel):
    """An item as the model wrote it (labels and answer not yet checked)."""

    model_config = ConfigDict(extra="forbid")

    question: str
    choices: list[tuple[str, str]]
    """``(label, text)`` pairs in the reply's order (stored as two-element lists)."""
    answer: str
    """The label the model marked as the answer."""
    concept: str | None = None
    """The concept the item named, if it named one."""

    @classmethod
    def of(cls, item: RawItem) -> CultureItem:
        """The stored form of a parsed item."""
        return cls(question=item.question, choices=list(item.choices), answer=item.answer, concept=item.concept)

    def raw(self) -> RawItem:
        """The item as the checks read it."""
        return RawItem(self.question, tuple(self.choices), self.answer, self.concept)


class CultureRecord(Record):
    """A batch of concepts (one call), or one concept of a batch and the item written for it."""

    lang: str
    """The language the items are written in (BCP-47)."""
    category: str
    """The concepts' category."""
    concepts: list[str] | None = None
    """A batch's concepts, in table order (a batch record only)."""
    occurrence: int | None = None
    """Which repeat of the same concepts the batch is (0 for the first)."""
    batch_concepts: list[str] | None = None
    """The concepts of the batch a concept record came from."""
    concept: str | None = None
    """The concept the record is for (``None``: an item that named no concept of its batch)."""
    item: CultureItem | None = None
    """The item the reply gave the concept."""
    lang_detected: str | None = None
    """The language CLD3 found in the question (``None``: it could not tell)."""
    difficulty: Difficulty | None = None
    """With a verification panel (``--panel``): ``easy`` when the panel settled it, ``hard`` when review accepted
    it; unset without one."""

    def for_concept(self, concept: str | None, item: RawItem | None = None) -> CultureRecord:
        """The record of one concept of this batch (with the item written for it, if any)."""
        values = {name: getattr(self, name) for name in self.model_fields_set if name != "concepts"}
        values.update(batch_concepts=list(self.concepts or ()), concept=concept)
        if item is not None:
            values["item"] = CultureItem.of(item)
        return CultureRecord.model_validate(values)

    def raw_item(self) -> RawItem:
        """The item the record carries.

        Raises:
            ValueError: the record holds no item (a batch, or a concept the reply missed).
        """
        if self.item is None:
            raise ValueError("a culture-gen record without an item reached a stage that reads one")
        return self.item.raw()

    def released_id(self) -> str:
        """The id of the item the record releases (:func:`item_id` of it, its labels sorted A–E)."""
        raw = self.raw_item()
        choices = sorted((label.strip().upper(), text) for label, text in raw.choices)
        return item_id(self.lang, self.named_concept(), raw.question, choices)

    def named_concept(self) -> str:
        """The concept of a concept record.

        Raises:
            ValueError: the record names no concept.
        """
        if self.concept is None:
            raise ValueError("a culture-gen record without a concept reached a stage that reads one")
        return self.concept

    def shown_question(self) -> str | None:
        return self.item.question if self.item is not None else None

    def shown_checked(self) -> dict[str, Any]:
        if self.item is None:
            return {}
        return {"choices": [f"{label}. {text}" for label, text in self.item.choices], "answer": self.item.answer}
