"""Word tokens of an item's text, per language, for the lexical studies.

What a token is
---------------
Every text is first normalised with NFKC (full-width letters and digits become their usual
forms, ligatures are split, accents compose) and then case-folded (``str.casefold``), so
``Komodo``, ``KOMODO`` and ``ｋｏｍｏｄｏ`` are one token. Then:

* **Japanese** (``ja``) is split by fugashi with the unidic-lite dictionary (MeCab's
  short-unit words) and **Chinese** (``zh``) by jieba's precise mode: both write no spaces
  between words. They are imported lazily, the way the knowledge layer uses them
  (:mod:`senseforge.kb.words`); without them a :class:`MissingDependencyError` names the
  extra (``pip install 'senseforge[kb]'``).
* **every other language** is split by one rule: a token is a run of letters, digits and
  combining marks (Unicode categories L, N and M; so the underscore is not a word
  character, and Devanagari or Thai vowel signs stay inside their word), where a hyphen or
  an apostrophe *between* two such runs joins them, and so does a ``.`` or ``,`` between
  two digits. That keeps Indonesian and Sundanese reduplications as the single words they
  are (``anak-anak`` "children", ``kupu-kupu`` "butterfly", ``sehari-hari``), elisions
  and names whole (``al-qur'an``, ``don't``), and numbers whole (``3,5``, ``10.00``); a
  quote around a word (``'air mancur'``) is not inside a word and is dropped.

Punctuation and symbols are never tokens (a tokenizer token without a letter, digit or mark
is dropped too). Numbers are tokens: a year or a price is part of what a text says.

Bigrams are pairs of consecutive tokens *within one text*: the question is one text and each
choice is another, so no bigram spans the end of a question and the start of an option, or
two options.

Fields
------
Which texts of an item count is chosen by name (:data:`FIELDS`): ``question``, ``choices``
(each option's text) and ``concept`` (the ``question_concept``). The default is the question
and the choices (:data:`DEFAULT_FIELDS`).

>>> tokenize("Apa fungsi utama 'angkot' di Indonesia?", "id")
['apa', 'fungsi', 'utama', 'angkot', 'di', 'indonesia']
>>> tokenize("Anak-anak makan 3,5 kg ＫＯＭＯＤＯ!", "id")
['anak-anak', 'makan', '3,5', 'kg', 'komodo']
>>> bigrams(["a", "b", "c"])
[('a', 'b'), ('b', 'c')]
"""

from __future__ import annotations

import functools
import itertools
import re
import sys
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from senseforge.data.schema import MCItem
from senseforge.errors import ConfigError
from senseforge.kb.words import chinese_words, japanese_words

FIELDS: tuple[str, ...] = ("question", "choices", "concept")
"""The text fields an item has, by the names the studies take."""

DEFAULT_FIELDS: tuple[str, ...] = ("question", "choices")
"""What counts unless told otherwise: the question and the options' texts."""

Bigram = tuple[str, str]
Tokenizer = Callable[[str], list[str]]

TOKENIZED_LANGS = frozenset({"ja", "zh"})
"""Languages (primary subtags) split by a morphological tokenizer rather than by :func:`word_pattern`."""


def normalize(text: str) -> str:
    """NFKC, then case-folded.

    >>> normalize("Ｄｉ  MANA")
    'di  mana'
    """
    return unicodedata.normalize("NFKC", text).casefold()


def _mark_class() -> str:
    """A regex character class of every combining mark (Unicode category M)."""
    ranges: list[str] = []
    start: int | None = None
    for cp in range(sys.maxunicode + 2):
        is_mark = cp <= sys.maxunicode and unicodedata.category(chr(cp)).startswith("M")
        if is_mark and start is None:
            start = cp
        elif not is_mark and start is not None:
            end = cp - 1
            ranges.append(re.escape(chr(start)) + ("" if end == start else "-" + re.escape(chr(end))))
            start = None
    return "[" + "".join(ranges) + "]"


@functools.cache
def word_pattern() -> re.Pattern[str]:
    """The token rule for languages written with spaces (see the module docstring); built once."""
    char = rf"(?:[^\W_]|{_mark_class()})"
    joiner = r"(?:[-\u2010'\u2019]|(?<=\d)[.,](?=\d))"
    return re.compile(rf"{char}+(?:{joiner}{char}+)*")


def _is_word(token: str) -> bool:
    return word_pattern().search(token) is not None


def _words(text: str) -> list[str]:
    return word_pattern().findall(text)


@functools.cache
def _japanese() -> Tokenizer:
    words = japanese_words()  # the knowledge layer's fugashi segmenter
    return lambda text: [word for word in words(text) if _is_word(word)]


@functools.cache
def _chinese() -> Tokenizer:
    words = chinese_words()  # the knowledge layer's jieba segmenter
    return lambda text: [word for word in words(text) if _is_word(word)]


def primary_lang(lang: str) -> str:
    """The primary subtag of a BCP-47 tag, lower-cased (``zh-Hant`` → ``zh``)."""
    return lang.split("-", 1)[0].split("_", 1)[0].lower()


def tokenizer(lang: str) -> Tokenizer:
    """The function that splits *normalised* text of language ``lang`` into tokens.

    Raises:
        MissingDependencyError: ``ja`` or ``zh`` without the ``kb`` extra.
    """
    primary = primary_lang(lang)
    if primary == "ja":
        return _japanese()
    if primary == "zh":
        return _chinese()
    return _words


def tokenize(text: str, lang: str = "und") -> list[str]:
    """The tokens of one text: normalised (:func:`normalize`), then split the way ``lang`` is."""
    return tokenizer(lang)(normalize(text))


def bigrams(tokens: Sequence[str]) -> list[Bigram]:
    """Consecutive pairs of one text's tokens."""
    return list(itertools.pairwise(tokens))


def parse_fields(spec: str | Iterable[str]) -> tuple[str, ...]:
    """Field names from ``question,choices`` (or a list of names), checked, de-duplicated, in order.

    Raises:
        ConfigError: an unknown field, or none at all.
    """
    names = spec.split(",") if isinstance(spec, str) else list(spec)
    chosen = tuple(dict.fromkeys(name.strip().lower() for name in names if name.strip()))
    unknown = [name for name in chosen if name not in FIELDS]
    if unknown or not chosen:
        raise ConfigError(f"--fields {','.join(names)!r}: choose from {', '.join(FIELDS)} (comma-separated)")
    return chosen


def item_texts(item: MCItem, fields: Sequence[str] = DEFAULT_FIELDS) -> list[str]:
    """The texts of ``item`` that ``fields`` name, one string per text (each choice is its own text)."""
    texts: list[str] = []
    for name in fields:
        if name == "question":
            texts.append(item.question)
        elif name == "choices":
            texts += [choice.text for choice in item.choices]
        elif name == "concept":
            if item.question_concept:
                texts.append(item.question_concept)
        else:
            raise ConfigError(f"unknown field {name!r}: choose from {', '.join(FIELDS)}")
    return texts


@dataclass
class Vocabulary:
    """Token and bigram counts over some items."""

    unigrams: Counter[str] = field(default_factory=Counter)
    bigrams: Counter[Bigram] = field(default_factory=Counter)
    texts: int = 0
    """How many texts were tokenized."""

    @property
    def tokens(self) -> int:
        """Running tokens (every occurrence)."""
        return sum(self.unigrams.values())

    def add(self, tokens: Sequence[str]) -> None:
        """Count one text's tokens and its bigrams."""
        self.texts += 1
        self.unigrams.update(tokens)
        self.bigrams.update(bigrams(tokens))


def vocabulary(items: Iterable[MCItem], fields: Sequence[str] = DEFAULT_FIELDS) -> Vocabulary:
    """Unigram and bigram counts over the ``fields`` of ``items``, each item split the way its language is.

    Raises:
        MissingDependencyError: Japanese or Chinese items without the ``kb`` extra.
    """
    vocab = Vocabulary()
    for item in items:
        split = tokenizer(item.lang)
        for text in item_texts(item, fields):
            vocab.add(split(normalize(text)))
    return vocab
