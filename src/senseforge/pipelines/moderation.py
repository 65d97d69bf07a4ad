"""Moderation: does a generated text contain something a benchmark must not carry?

A moderator is anything with ``check(text, lang) -> str | None``: ``None`` when the text is
acceptable, otherwise a short, human-readable reason (what was found). The pipelines only
ever call that one method, so other moderators plug in without changes here — an API
moderator (for example OpenAI's moderation endpoint behind the ``llm`` layer) is a small
class with the same method, and :func:`chain` runs several in order.

The default, :class:`WordListModerator`, needs no network: it matches small per-language
word lists shipped as package data (``moderation_lists/<lang>.txt``: one term per line,
``#`` comments) plus any extra terms the caller passes. Matching is case- and
width-insensitive (NFKC, then case folding). In languages written with spaces a term
matches whole words only; in languages without spaces (Japanese, Chinese, Thai, per
:mod:`senseforge.data.literals`) it matches anywhere. Languages without a shipped list
are checked against the extra terms only (:func:`bundled_languages` says which have one).

>>> moderator = WordListModerator()
>>> moderator.check("What do you eat soup with?", "en") is None
True
>>> moderator.check("What the fuck is a spoon for?", "en")
"listed term 'fuck'"
>>> WordListModerator({"en": ["spork"]}).check("Is a spork a spoon?", "en")
"listed term 'spork'"
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from importlib import resources
from typing import Final, Protocol, runtime_checkable

from senseforge.data.lang import primary_language
from senseforge.data.literals import MissingLiteralError, lookup
from senseforge.data.text import fold, parse_terms

ALL_LANGUAGES: Final = "*"
"""Key of ``extra_terms`` whose terms apply to every language."""

INAPPROPRIATE: Final = "inappropriate"
"""Rejection reason of every recipe: a moderator flagged the text."""

_LIST_DIR: Final = "moderation_lists"


@runtime_checkable
class Moderator(Protocol):
    """Decides whether a text is fit for a benchmark."""

    def check(self, text: str, lang: str) -> str | None:
        """``None`` when ``text`` (in language ``lang``) is acceptable, else a short reason."""
        ...


def space_separated(lang: str) -> bool:
    """Whether ``lang`` separates words with spaces; languages missing from the literals table are assumed to."""
    try:
        return bool(lookup(lang, "space_separated"))
    except MissingLiteralError:
        return True


def _list_key(lang: str) -> str:
    try:
        return primary_language(lang)
    except ValueError:
        return lang.strip().lower()


@functools.cache
def bundled_terms(lang: str) -> tuple[str, ...]:
    """The terms shipped for ``lang`` (its primary subtag: ``pt-BR`` reads ``pt.txt``); empty when none ship."""
    path = resources.files("senseforge.pipelines").joinpath(_LIST_DIR, f"{_list_key(lang)}.txt")
    if not path.is_file():
        return ()
    return parse_terms(path.read_text(encoding="utf-8"))


def bundled_languages() -> tuple[str, ...]:
    """Languages with a shipped word list.

    >>> bundled_languages()
    ('de', 'en', 'fr', 'id', 'ja', 'nl', 'pt', 'ru', 'su', 'zh')
    """
    folder = resources.files("senseforge.pipelines").joinpath(_LIST_DIR)
    return tuple(sorted(item.name[: -len(".txt")] for item in folder.iterdir() if item.name.endswith(".txt")))


class _Matcher:
    """Finds the first listed term in a text of one language."""

    def __init__(self, terms: Iterable[str], *, by_word: bool) -> None:
        folded: dict[str, str] = {}
        for term in terms:
            key = fold(term)
            if key:
                folded.setdefault(key, term)
        self._terms = folded
        self._pattern: re.Pattern[str] | None = None
        if folded:
            # longest first, so a phrase wins over a word it contains
            alternatives = [r"\s+".join(map(re.escape, key.split())) for key in sorted(folded, key=len, reverse=True)]
            body = "|".join(alternatives)
            self._pattern = re.compile(rf"(?<!\w)(?:{body})(?!\w)" if by_word else f"(?:{body})")

    def find(self, text: str) -> str | None:
        if self._pattern is None:
            return None
        match = self._pattern.search(fold(text))
        if match is None:
            return None
        found = " ".join(match.group(0).split())
        return self._terms.get(found, found)


class WordListModerator:
    """Flags texts that contain a term from a per-language word list.

    Args:
        extra_terms: more terms per language (a primary tag such as ``en``), added to the
            shipped lists; terms under ``"*"`` apply to every language.
        bundled: whether to use the lists shipped with senseforge (``False``: extra terms only).
    """

    def __init__(self, extra_terms: Mapping[str, Iterable[str]] | None = None, *, bundled: bool = True) -> None:
        self._extra = {
            _list_key(lang) if lang != ALL_LANGUAGES else lang: tuple(terms)
            for lang, terms in (extra_terms or {}).items()
        }
        self._bundled = bundled
        self._matchers: dict[tuple[str, bool], _Matcher] = {}

    def __replay__(self) -> dict[str, object]:
        """What decides its verdicts besides the shipped lists (:func:`senseforge.pipelines.replay.plain`)."""
        return {"extra": self._extra, "bundled": self._bundled}

    def terms(self, lang: str) -> tuple[str, ...]:
        """Every term checked for ``lang``: shipped, then extra for it, then extra for all languages."""
        key = _list_key(lang)
        shipped = bundled_terms(key) if self._bundled else ()
        return shipped + self._extra.get(key, ()) + self._extra.get(ALL_LANGUAGES, ())

    def check(self, text: str, lang: str) -> str | None:
        """``None`` when no listed term occurs in ``text``, else ``"listed term '<term>'"``."""
        by_word = space_separated(lang)
        cache_key = (_list_key(lang), by_word)
        matcher = self._matchers.get(cache_key)
        if matcher is None:
            matcher = self._matchers[cache_key] = _Matcher(self.terms(lang), by_word=by_word)
        found = matcher.find(text)
        return None if found is None else f"listed term {found!r}"


class _Chain:
    def __init__(self, moderators: tuple[Moderator, ...]) -> None:
        self.moderators = moderators

    def check(self, text: str, lang: str) -> str | None:
        for moderator in self.moderators:
            reason = moderator.check(text, lang)
            if reason is not None:
                return reason
        return None


def chain(*moderators: Moderator) -> Moderator:
    """A moderator that asks each in turn and returns the first reason (word lists first, an API after).

    >>> both = chain(WordListModerator(), WordListModerator({"*": ["spork"]}, bundled=False))
    >>> both.check("Where is the spork?", "de")
    "listed term 'spork'"
    """
    return _Chain(moderators)


@functools.cache
def default_moderator() -> WordListModerator:
    """The shared moderator the filters use when none is given: the shipped lists only."""
    return WordListModerator()
