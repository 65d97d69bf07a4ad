"""The words evaluation prompts are made of.

By default prompts are written in English whatever the item's language, as mCSQA's,
Putri et al.'s and CRoW's evaluations do; the answer letters and whether a space goes
before a continuation still follow the item's language. With
``prompt_language="item"`` the cue words and yes/no come from the item's language (the
per-language table in :mod:`senseforge.data.literals`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

PromptLanguage = Literal["en", "item"]


@dataclass(frozen=True)
class Literals:
    """Words and symbols of one prompt language."""

    letters: tuple[str, ...]
    question: str
    answer: str
    choices: str
    header: str
    context: str
    target: str
    knowledge: str
    binary_question: str
    think_then_tag: str
    yes: str
    no: str
    space_separated: bool


ENGLISH = Literals(
    letters=("A", "B", "C", "D", "E", "F", "G", "H"),
    question="Question",
    answer="Answer",
    choices="Options",
    header='Multiple-choice questions about "{concept}", each followed by its answer.',
    context="Context",
    target="Target",
    knowledge="Relevant knowledge",
    binary_question="Is the target a sensible, commonsense-consistent continuation of the context?",
    think_then_tag="Reason step by step, then give your final answer, {yes} or {no}, as <Answer>{yes}</Answer> "
    "or <Answer>{no}</Answer>.",
    yes="yes",
    no="no",
    space_separated=True,
)


def literals(lang: str, prompt_language: PromptLanguage = "en") -> Literals:
    """The prompt words for items in ``lang``.

    Raises:
        ConfigError: ``prompt_language="item"`` and the language table lacks a word.
    """
    from senseforge.data.lang import primary_language
    from senseforge.data.literals import lookup, lookup_text

    code = primary_language(lang)
    letters = lookup(code, "letters")
    if not isinstance(letters, tuple):  # pragma: no cover - the table's own test guards this
        raise TypeError(f"literal 'letters' for {code!r} is not a tuple")
    base = replace(ENGLISH, space_separated=bool(lookup(code, "space_separated")), letters=letters)
    if prompt_language == "en":
        return base
    return replace(
        base,
        question=lookup_text(code, "question"),
        answer=lookup_text(code, "answer"),
        yes=lookup_text(code, "yes"),
        no=lookup_text(code, "no"),
    )


def copa_connector(lang: str, question: str, prompt_language: PromptLanguage = "en") -> str:
    """The COPA connector (``because`` / ``therefore``) in the prompt language."""
    from senseforge.data.literals import copa_connector as table_connector

    return table_connector("en" if prompt_language == "en" else lang, question)
