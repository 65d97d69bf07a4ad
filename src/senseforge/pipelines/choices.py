"""A multiple-choice item as a model wrote it, and the checks every recipe that reads such items makes.

culture-gen reads items out of a model's reply; culture-adapt reads them out of a source
dataset and out of its translations. Both hold them as :class:`RawItem` and check their
choices the same way (:func:`check_choices`) before any recipe-specific check.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict

from senseforge.data.text import fold

LABELS = ("A", "B", "C", "D", "E")
"""The five choice labels of a CommonsenseQA-style item."""

Label = Literal["A", "B", "C", "D", "E"]
"""One of :data:`LABELS`, as a reply's shape names the answer."""


class FiveOptions(BaseModel):
    """A reply's five options, by label (``{"A": "…", …, "E": "…"}``): part of the shapes the recipes that write
    items declare for their replies."""

    model_config = ConfigDict(extra="forbid")

    A: str
    B: str
    C: str
    D: str
    E: str


@dataclass(frozen=True)
class RawItem:
    """One item as the model wrote it (labels and texts as given, nothing judged yet)."""

    question: str
    choices: tuple[tuple[str, str], ...]
    """``(label, text)`` pairs in the given order."""
    answer: str
    concept: str | None


def check_choices(item: RawItem) -> str | None:
    """The first multiple-choice check the item fails (count, labels, answer, distinct choices), or ``None``."""
    labels = [label.strip().upper() for label, _ in item.choices]
    if len(item.choices) != len(LABELS):
        return "choice_count"
    if sorted(labels) != list(LABELS):
        return "labels"
    if item.answer not in labels:
        return "answer_not_in_choices"
    texts = [fold(text) for _, text in item.choices]
    if len(set(texts)) != len(texts) or any(not t for t in texts):
        return "duplicate_choices"
    return None
