"""The checks of culture-gen, in order; the first that fails names the reason.

``choice_count`` (not exactly five options), ``labels`` (five, but not A–E),
``answer_not_in_choices``, ``duplicate_choices`` (equal after case and space
normalisation), ``short_option`` (a one-letter option such as "d" in a language written with
spaces: a label, not a choice; digits such as "2" are real answers), ``degenerate_question``
(a single word, fewer than :data:`MIN_QUESTION_WORDS` words — :data:`MIN_QUESTION_CHARS_UNSPACED`
characters without spaces — or no question form: no question mark, no cloze ellipsis and
none of the language's :data:`QUESTION_WORDS`), ``copied_example`` (the question copies the
prompt's worked example, or at least :data:`COPIED_OPTIONS_MIN` options are the example's
options word for word; checked only when the prompt showed one), ``concept_missing`` (the
concept not in the question: case-insensitive substring, Putri et al.'s only coded filter;
``lenient`` also accepts a morphological variant, see :func:`lenient_contains`; stems by Sastrawi,
the Indonesian stemmer).
Duplicate items are a later, run-wide check. An
option equal to the concept is allowed (the released data has one).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final, Literal

from senseforge.data.literals import MissingLiteralError, lookup
from senseforge.data.stems import stem
from senseforge.data.text import fold
from senseforge.pipelines.choices import RawItem, check_choices
from senseforge.pipelines.dedup import near_duplicate, normalise

ConceptMatch = Literal["strict", "lenient"]
_WORD = re.compile(r"\w+")
_MIN_STEM = 4
"""Shortest shared beginning that makes two words variants of each other (lenient matching)."""


SHORT_OPTION: Final = "short_option"
DEGENERATE_QUESTION: Final = "degenerate_question"
COPIED_EXAMPLE: Final = "copied_example"

MIN_OPTION_LETTERS: Final = 2
"""Fewest letters an option may have in a language written with spaces (a lone "d" is a label; numbers pass)."""

MIN_QUESTION_WORDS: Final = 3
"""Fewest words a question may have in a language written with spaces (the shortest released LLM_Gen and
Human_Gen questions have three or more; "Pajajaran" alone is a concept, not a question)."""

MIN_QUESTION_CHARS_UNSPACED: Final = 4
"""Fewest letters a question may have in a language written without spaces."""

COPIED_OPTIONS_MIN: Final = 3
"""Options equal to the worked example's options (a majority of five) that make an item a copy of it; one or
two shared everyday options ("sambel terasi") can be chance."""

QUESTION_WORDS: Final[Mapping[str, frozenset[str]]] = {
    "id": frozenset(
        {"apa", "apakah", "siapa", "siapakah", "mana", "manakah", "dimana", "kapan", "kapankah", "mengapa"}
        | {"kenapa", "bagaimana", "bagaimanakah", "berapa", "berapakah", "sebutkan"}
    ),
    "su": frozenset({"naon", "naha", "saha", "mana", "dimana", "iraha", "kumaha", "sabaraha", "sebutkeun"}),
    "en": frozenset({"what", "which", "who", "whom", "whose", "where", "when", "why", "how", "name"}),
}
"""Words that make a question without a question mark, per language (released Putri items without ``?``
start with ``Siapakah`` or say ``Sebutkan``); a language not listed needs the mark (or a cloze ``...``)."""

_QUESTION_MARKS: Final = ("?", "？", "؟", "...", "…")


def space_separated(lang: str) -> bool:
    """Whether the language writes spaces between words (``True`` when the literals table does not know it)."""
    try:
        return bool(lookup(lang, "space_separated"))
    except (MissingLiteralError, ValueError):
        return True


def short_options(item: RawItem, lang: str) -> list[str]:
    """The options too short to be choices (one letter, in a language with spaces)."""
    if not space_separated(lang):
        return []
    short = []
    for _, text in item.choices:
        letters = "".join(ch for ch in text if ch.isalnum())
        if len(letters) < MIN_OPTION_LETTERS and not letters.isdigit():
            short.append(text)
    return short


def degenerate_question(question: str, lang: str) -> str | None:
    """What makes ``question`` no question (``single_word``, ``too_short``, ``no_question_form``), or ``None``."""
    words = normalise(question).split()
    if space_separated(lang):
        if len(words) <= 1:
            return "single_word"
        if len(words) < MIN_QUESTION_WORDS:
            return "too_short"
    elif len("".join(words)) < MIN_QUESTION_CHARS_UNSPACED:
        return "too_short"
    if question.rstrip().rstrip("\"'”’»)）").endswith(_QUESTION_MARKS):
        return None
    asking = QUESTION_WORDS.get(lang.split("-")[0].lower())
    if asking is None:
        return "no_question_form"
    return None if asking & set(words) else "no_question_form"


def copied_example(item: RawItem, example: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """What ``item`` copies of the prompt's worked example (its question, or its options), or ``None``."""
    if example is None:
        return None
    if near_duplicate(str(example["question"]), item.question):
        return {"example_question": example["question"]}
    shown = {normalise(str(text)) for text in example["choices"].values()}
    copied = [text for _, text in item.choices if normalise(text) in shown]
    if len(copied) >= COPIED_OPTIONS_MIN:
        return {"copied_options": copied}
    return None


def item_evidence(
    item: RawItem, reason: str, concept: str, lang: str, example: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """What the check that rejected ``item`` for ``reason`` found."""
    if reason == SHORT_OPTION:
        return {"short": short_options(item, lang), "min_letters": MIN_OPTION_LETTERS}
    if reason == DEGENERATE_QUESTION:
        return {"problem": degenerate_question(item.question, lang)}
    if reason == COPIED_EXAMPLE:
        return copied_example(item, example) or {}
    if reason == "concept_missing":
        return {"concept": concept}
    if reason == "duplicate_choices":
        folded = [fold(text) for _, text in item.choices]
        return {
            "same": sorted(
                {text for (_, text), f in zip(item.choices, folded, strict=True) if folded.count(f) > 1 or not f}
            )
        }
    return {"labels": [label for label, _ in item.choices], "answer": item.answer}


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


def check_item(
    item: RawItem,
    concept: str,
    *,
    match: ConceptMatch = "strict",
    lang: str | None = None,
    example: Mapping[str, Any] | None = None,
) -> str | None:
    """The first check the item fails, or ``None`` (the question and option checks need ``lang``)."""
    reason = check_choices(item)
    if reason is not None:
        return reason
    if lang is not None:
        if short_options(item, lang):
            return SHORT_OPTION
        if degenerate_question(item.question, lang) is not None:
            return DEGENERATE_QUESTION
    if copied_example(item, example) is not None:
        return COPIED_EXAMPLE
    found = fold(concept) in fold(item.question) if match == "strict" else lenient_contains(item.question, concept)
    if not found:
        return "concept_missing"
    return None
