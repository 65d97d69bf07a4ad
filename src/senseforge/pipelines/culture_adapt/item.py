"""The item as culture-adapt carries it between stages: question, concept, options and answer label.

Records hold it (:class:`~senseforge.pipelines.culture_adapt.records.AdaptRecord`), stored in its
JSON form (:meth:`Fields.to_json`). Labels and texts are kept as written (case preserved).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

FIELD_NAMES: tuple[str, ...] = ("question", "concept")
"""The item's text fields besides its options (translated one by one, like each option)."""


@dataclass(frozen=True)
class Fields:
    """One multiple-choice item's texts."""

    question: str
    concept: str
    choices: tuple[tuple[str, str], ...]
    """``(label, text)`` pairs in display order."""
    answer: str
    """The label of the right option."""

    @property
    def options(self) -> tuple[str, ...]:
        """The option texts, in order."""
        return tuple(text for _, text in self.choices)

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(label for label, _ in self.choices)

    def answer_text(self) -> str | None:
        """The text of the answer option (``None`` when the label is not among the choices)."""
        return dict(self.choices).get(self.answer)

    def texts(self) -> dict[str, str]:
        """Every text to translate, by field key: ``question``, ``concept``, ``option:<label>``."""
        out = {"question": self.question, "concept": self.concept}
        out.update({f"option:{label}": text for label, text in self.choices})
        return out

    def with_texts(self, texts: Mapping[str, str]) -> Fields:
        """The item with its texts replaced by ``texts`` (keys as in :meth:`texts`)."""
        return replace(
            self,
            question=texts.get("question", self.question),
            concept=texts.get("concept", self.concept),
            choices=tuple((label, texts.get(f"option:{label}", text)) for label, text in self.choices),
        )

    def display(self) -> str:
        """The item as one text: the question, then each option on its own line."""
        return "\n".join([self.question, *(f"{label}. {text}" for label, text in self.choices)])

    def to_json(self) -> dict[str, Any]:
        """The item as JSON, as records store it (options as ``[label, text]`` pairs)."""
        return {
            "question": self.question,
            "concept": self.concept,
            "choices": [[label, text] for label, text in self.choices],
            "answer": self.answer,
        }
