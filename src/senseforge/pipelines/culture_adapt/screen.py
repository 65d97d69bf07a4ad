"""Screening of a source item before any model call: culture-adapt drops it with a named rejection.

Putri et al. removed CommonsenseQA items that carry offensive words or whose options are
ambiguous before adapting anything. :func:`screen` applies the two rules in order and names
the first one that fails:

1. :data:`OFFENSIVE` — the question, the concept or an option holds a profane word. English
   text (primary subtag ``en``) is checked against the default word list of the
   ``better-profanity`` package; any language is also checked by the ``moderator`` when one
   is passed (:func:`senseforge.pipelines.moderation.default_moderator` gives the shipped
   per-language word lists). Without a moderator a non-English item is not checked for
   offensive words at all.
2. :data:`AMBIGUOUS_OPTIONS` — two options are the same text, or an option is the concept
   itself, once case, width and spacing are ignored (:func:`fold`).

``better-profanity`` compares whole words (it splits on characters that are not letters,
digits, ``@``, ``$``, ``*`` and a few more), so a listed word inside a longer one does not
count: ``Scunthorpe``, ``assassin``, ``bass`` and ``cocktail`` pass. It also catches common
character swaps (``h3ll``). Its default list is broad: besides swear words it holds ``kill``,
``murder``, ``god``, ``hell``, ``weed``, ``gay`` and ``naked``, so real CommonsenseQA items
such as "What do people aim to do at work?" (option "kill animals") are dropped as offensive.
The list is used as published, with no word removed.

>>> screen("Where would you find a fork?", "fork", ["kitchen", "Kitchen ", "desk"], "en", None)
'ambiguous_options'
>>> screen("Where would you find a fork?", "fork", ["kitchen", "drawer", "desk"], "en", None) is None
True
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any, Final

from senseforge.data.lang import primary_language
from senseforge.data.text import fold
from senseforge.errors import MissingDependencyError
from senseforge.pipelines.moderation import Moderator

OFFENSIVE: Final = "offensive"
"""Rejection: the question, the concept or an option holds an offensive word."""

AMBIGUOUS_OPTIONS: Final = "ambiguous_options"
"""Rejection: two options are equal after normalisation, or an option equals the concept."""

_INSTALL_HINT: Final = "pip install 'senseforge[langid]'"


@cache
def _profanity() -> Any:
    """The ``better-profanity`` checker with its default word list, loaded once per process."""
    try:
        from better_profanity import profanity
    except ImportError as exc:
        raise MissingDependencyError(f"screening English items needs better-profanity: {_INSTALL_HINT}") from exc
    return profanity


def _profane_english(text: str) -> bool:
    return bool(_profanity().contains_profanity(fold(text)))


def _offensive(texts: Sequence[str], lang: str, moderator: Moderator | None) -> bool:
    english = primary_language(lang) == "en"
    for text in texts:
        if english and _profane_english(text):
            return True
        if moderator is not None and moderator.check(text, lang) is not None:
            return True
    return False


def _ambiguous(concept: str, options: Sequence[str]) -> bool:
    folded = [fold(option) for option in options]
    return len(set(folded)) < len(folded) or fold(concept) in folded


def screen_evidence(
    reason: str, question: str, concept: str, options: Sequence[str], lang: str, moderator: Moderator | None
) -> dict[str, Any]:
    """What :func:`screen` found for ``reason``: the offending text and word, or the options that collide."""
    if reason == OFFENSIVE:
        english = primary_language(lang) == "en"
        for field, text in [("question", question), ("concept", concept), *(("option", o) for o in options)]:
            if english and _profane_english(text):
                words = [w for w in fold(text).split() if _profane_english(w)]
                return {"field": field, "text": text, "matched": words[0] if words else text}
            verdict = moderator.check(text, lang) if moderator is not None else None
            if verdict is not None:
                return {"field": field, "text": text, "matched": verdict}
    if reason == AMBIGUOUS_OPTIONS:
        folded = [fold(option) for option in options]
        same = [o for o, f in zip(options, folded, strict=True) if folded.count(f) > 1 or f == fold(concept)]
        return {"options": same, "concept": concept}
    return {}


def screen(question: str, concept: str, options: Sequence[str], lang: str, moderator: Moderator | None) -> str | None:
    """The rejection that drops an item before any model call, or ``None`` when it passes.

    Args:
        question: the question text.
        concept: the item's question concept.
        options: the option texts, in order.
        lang: the BCP-47 tag of the texts; ``en`` (any region) turns on ``better-profanity``.
        moderator: also asked about every text, in any language; ``None`` asks no moderator.

    Returns:
        :data:`OFFENSIVE`, else :data:`AMBIGUOUS_OPTIONS`, else ``None``.

    Raises:
        MissingDependencyError: for English text when ``better-profanity`` is not installed.
        ValueError: when ``lang`` is not a BCP-47 tag.
    """
    if _offensive([question, concept, *options], lang, moderator):
        return OFFENSIVE
    if _ambiguous(concept, options):
        return AMBIGUOUS_OPTIONS
    return None
