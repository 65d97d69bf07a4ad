"""Lenient concept matching: does an item's concept still appear in its question?

Putri et al. kept an adapted item only if its concept still appeared in its question in
every language. Adaptation and translation bend words (a concept ``tari`` "dance" comes back
as ``menari`` "to dance"; ``lubang besar`` "big hole" as ``liang gedé``), so the test is
lenient. Texts are compared folded (NFKC, case-folded, spacing collapsed), words are the
``\\w+`` runs of the folded text, and the concept appears when any of these holds:

(a) the whole folded concept is a substring of the folded question (so it also matches
    inside a longer word: ``kota`` is found in ``kotak``);
(b) a concept word that is not a stopword of the language is a word of the question;
(c) a concept word that is not a stopword has the same stem as a word of the question —
    Sastrawi stems for Indonesian (``id``), Porter stems (NLTK) for English (``en``).

Languages without a stemmer (:mod:`senseforge.data.stems`; Sundanese ``su`` among them)
use (a) and (b) only, so a Sundanese concept that shows up only in an affixed or nasalised
form (``sapu`` as ``nyapu``) is not found. Stopwords come from the ``stop-words`` package for
English and Indonesian and from our own list for Sundanese (``data/lexicon/su_stopwords.txt``);
other languages have none. A concept made only of stopwords can match by (a) alone, and an
empty concept never matches.

>>> concept_appears("Di mana para penari biasanya menari?", "tari", "id")
True
>>> concept_appears("Budi hariwang nalika aya liang gedé di pakaranganna.", "badag liang", "su")
True
>>> concept_appears("Budi pergi ke pantai untuk melihat laut.", "di rumah", "id")
False
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources
from typing import Final

from senseforge.data.lang import primary_language
from senseforge.data.stems import stem, stemmer_name
from senseforge.data.text import fold, parse_terms
from senseforge.errors import MissingDependencyError

_WORD: Final = re.compile(r"\w+")

_INSTALL_HINT: Final = "pip install 'senseforge[langid]'"

_STOP_WORDS_LANGUAGES: Final = {"en": "en", "id": "id"}
"""Primary subtag → the ``stop-words`` package's code for it."""

_OWN_STOPWORD_FILES: Final = {"su": "su_stopwords.txt"}
"""Primary subtag → a stopword list shipped in ``data/lexicon/``."""


def _words(text: str) -> list[str]:
    return _WORD.findall(fold(text))


@cache
def stopwords(lang: str) -> frozenset[str]:
    """The folded stopwords of ``lang`` (its primary subtag: ``id-ID`` reads ``id``); empty when none are known.

    Args:
        lang: a BCP-47 tag.

    Returns:
        English and Indonesian from the ``stop-words`` package, Sundanese from
        ``data/su_stopwords.txt``, nothing for other languages.

    Raises:
        MissingDependencyError: for English or Indonesian when ``stop-words`` is not installed.
        ValueError: when ``lang`` is not a BCP-47 tag.

    >>> {"dan", "yang"} <= stopwords("id")
    True
    >>> {"téh", "teh", "jeung"} <= stopwords("su")
    True
    >>> stopwords("ja")
    frozenset()
    """
    primary = primary_language(lang)
    if primary in _STOP_WORDS_LANGUAGES:
        try:
            from stop_words import get_stop_words
        except ImportError as exc:
            raise MissingDependencyError(f"stopwords for {primary!r} need stop-words: {_INSTALL_HINT}") from exc
        words: list[str] = get_stop_words(_STOP_WORDS_LANGUAGES[primary])
    elif primary in _OWN_STOPWORD_FILES:
        path = resources.files("senseforge.data").joinpath("lexicon", _OWN_STOPWORD_FILES[primary])
        words = list(parse_terms(path.read_text(encoding="utf-8")))
    else:
        words = []
    return frozenset(fold(word) for word in words if fold(word))


def concept_appears(question: str, concept: str, lang: str) -> bool:
    """Whether ``concept`` appears in ``question`` by the lenient rule of the module docstring.

    Args:
        question: the question text.
        concept: the concept, one word or several.
        lang: the BCP-47 tag of both texts; it picks the stopwords and the stemmer.

    Returns:
        ``True`` when the concept is a substring of the question, shares a non-stopword word
        with it, or (with a stemmer) shares a stem of a non-stopword word with it.

    Raises:
        MissingDependencyError: when the language's stopword package or stemmer is not installed.
        ValueError: when ``lang`` is not a BCP-47 tag.
    """
    folded_concept, folded_question = fold(concept), fold(question)
    if not folded_concept:
        return False
    if folded_concept in folded_question:
        return True
    ignored = stopwords(lang)
    content = {word for word in _words(concept) if word not in ignored}
    if not content:
        return False
    question_words = set(_words(question))
    if content & question_words:
        return True
    if stemmer_name(lang) is None:
        return False
    concept_stems = {stem(word, lang) for word in content}
    return any(stem(word, lang) in concept_stems for word in question_words)
