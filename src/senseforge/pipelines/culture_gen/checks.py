"""The checks of culture-gen, in order; the first that fails names the reason.

``choice_count`` (not exactly five options), ``labels`` (five, but not A–E),
``answer_not_in_choices``, ``duplicate_choices`` (equal after case and space
normalisation), ``concept_missing`` (the concept not in the question: case-insensitive
substring, Putri et al.'s only coded filter; ``lenient`` also accepts a morphological
variant, see :func:`lenient_contains`; stems by Sastrawi, the Indonesian stemmer).
Duplicate items are a later, run-wide check. An
option equal to the concept is allowed (the released data has one).
"""

from __future__ import annotations

import re
from typing import Literal

from senseforge.data.stems import stem
from senseforge.pipelines.culture_gen.parse import RawItem, fold

LABELS = ("A", "B", "C", "D", "E")
ConceptMatch = Literal["strict", "lenient"]
_WORD = re.compile(r"\w+")
_MIN_STEM = 4
"""Shortest shared beginning that makes two words variants of each other (lenient matching)."""


def lenient_contains(question: str, concept: str) -> bool:
    """Whether the question holds the concept or, word by word, a variant of each of its words.

    A variant has the same Sastrawi stem (``menari`` → ``tari``), or shares a beginning of
    at least four letters with the concept's word and adds no more than a few letters
    (suffixes: ``-nya``, ``-an``, ``-na`` …), or holds the concept's word after a prefix
    (``di-``, ``ber-``, ``nga-`` …).
    """
    text = fold(question)
    if fold(concept) in text:
        return True
    words = _WORD.findall(text)
    wanted = [w for w in _WORD.findall(fold(concept)) if len(w) >= 3]
    if not wanted:
        return False

    def variant(word: str, target: str) -> bool:
        if stem(word, "id") == stem(target, "id"):
            return True
        if len(target) >= _MIN_STEM and word.startswith(target[:_MIN_STEM]) and len(word) - len(target) <= 4:
            return word[: len(target) - 1] == target[: len(target) - 1]
        return len(target) >= _MIN_STEM and target in word and len(word) - len(target) <= 5

    return all(any(variant(word, target) for word in words) for target in wanted)


def check_item(item: RawItem, concept: str, *, match: ConceptMatch = "strict") -> str | None:
    """The first check the item fails, or ``None``."""
    reason = check_choices(item)
    if reason is not None:
        return reason
    found = fold(concept) in fold(item.question) if match == "strict" else lenient_contains(item.question, concept)
    if not found:
        return "concept_missing"
    return None


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
