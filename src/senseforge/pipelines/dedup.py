"""Copies among generated texts: one normalisation, one near-duplicate test, one run-wide index.

Recipes use it to drop a question that repeats a sibling of its question set or any earlier
question of the run, and to catch options copied from a prompt's worked example; a
contamination gate can reuse it against a benchmark's published items.

* :func:`normalise` — NFKC, case-folded, punctuation and symbols made spaces, whitespace
  collapsed: ``"What is a HOUSE made of ?"`` and ``"what is a house made of"`` are one text.
* :func:`shingle_jaccard` — the Jaccard similarity of the two texts' character
  :data:`SHINGLE`-grams (of the normalised text), which works the same with and without
  spaces between words (Japanese, Chinese).
* :func:`near_duplicate` — the same numbers in both (``"… puzzle number 12?"`` and ``"…
  puzzle number 13?"`` ask different things, however alike their letters), a shingle
  Jaccard of at least :data:`NEAR_DUPLICATE_JACCARD`, and — in text with spaces — no
  content word of one missing from the other: the words that differ are short function
  words (at most :data:`FUNCTION_WORD_CHARS` letters, never a negation) or variants of a
  word on the other side (an edit ratio of at least :data:`WORD_VARIANT_RATIO`: ``fork`` /
  ``forks``). Text without spaces (Japanese, Chinese) needs a Jaccard of
  :data:`UNSPACED_NEAR_JACCARD`. Character overlap alone cannot tell a copy from a sibling
  about another thing: "Where would you find a fork?" and "… a spoon?" share 70% of
  their shingles.
* :class:`CopyIndex` — texts seen so far, each under the id of the record that holds it:
  :meth:`CopyIndex.match` names the first kept text a new one copies.

>>> normalise("  What is a HOUSE made of?! ")
'what is a house made of'
>>> near_duplicate("What is a house made of?", "What is the house made of?")
True
>>> near_duplicate("Which option fits puzzle 12?", "Which option fits puzzle 13?")
False
>>> near_duplicate("Where would you find a fork?", "Where would you find a spoon?")
False
"""

from __future__ import annotations

import functools
import re
import unicodedata
from array import array
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from typing import Any, Final, Literal

import numpy as np

SHINGLE: Final = 3
"""Characters per shingle: short enough for short questions and for scripts without spaces."""

NEAR_DUPLICATE_JACCARD: Final = 0.6
"""Fewest shared character shingles (Jaccard) for a near-duplicate in text with spaces (the word test decides).

One changed function word in a short question ("a house" → "the house") keeps it near 0.7;
two questions that only share a frame ("What is a house made of?" / "What is a bridge made
of?") fall near 0.5, below the bar."""

UNSPACED_NEAR_JACCARD: Final = 0.85
"""Fewest shared shingles for a near-duplicate in text without spaces (no word test there): high, so
that a changed noun of one or two characters keeps two questions apart."""

FUNCTION_WORD_CHARS: Final = 3
"""A differing word this short (``a``, ``the``, ``of``, ``nu``) may differ between near-duplicates."""

WORD_VARIANT_RATIO: Final = 0.8
"""Two differing words at least this alike (difflib ratio) are variants of one word (``fork`` / ``forks``)."""

NEGATIONS: Final = frozenset(
    {"not", "no", "nor", "never", "tidak", "tak", "bukan", "teu", "henteu", "lain", "nicht", "kein", "keine"}
    | {"pas", "non", "ne", "niet", "geen", "não", "nem", "не", "нет", "ни"}
)
"""Short words that are never mere function words: dropping one turns a question around."""

_LEAST_NEAR_JACCARD: Final = min(NEAR_DUPLICATE_JACCARD, UNSPACED_NEAR_JACCARD)
"""Below this shingle Jaccard no text is a near-duplicate, spaced or not: the index looks no further."""

_SEARCH_COST: Final = 8
"""About what one binary search of a posting costs against counting one of its entries (numpy): the index looks a
few candidates up, and counts whole postings once candidates are many."""

_UNSPACED_RUN: Final = 12
"""A 'word' longer than this without a space marks text written without spaces."""

DUPLICATE: Final = "duplicate"
NEAR_DUPLICATE: Final = "near_duplicate"

_NUMBER = re.compile(r"\d+")


def normalise(text: str) -> str:
    """The form texts are compared in: NFKC, case-folded, punctuation and symbols as spaces, spaces collapsed."""
    return _normalised(text)


@functools.lru_cache(maxsize=1 << 16)
def _normalised(text: str) -> str:
    """:func:`normalise`, remembered (a text is compared with many others)."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    spaced = "".join(" " if unicodedata.category(ch)[0] in "PSZC" else ch for ch in folded)
    return " ".join(spaced.split())


def shingles(text: str, size: int = SHINGLE) -> frozenset[str]:
    """The character ``size``-grams of the normalised text (the whole text when it is shorter)."""
    norm = normalise(text)
    if len(norm) <= size:
        return frozenset({norm}) if norm else frozenset()
    return frozenset(norm[i : i + size] for i in range(len(norm) - size + 1))


def shingle_jaccard(a: str, b: str) -> float:
    """How alike two texts are: the Jaccard similarity of their :func:`shingles` (1.0 for two empty texts)."""
    left, right = shingles(a), shingles(b)
    if not left and not right:
        return 1.0
    return len(left & right) / len(left | right)


def _numbers(text: str) -> Counter[str]:
    return Counter(m.lstrip("0") or "0" for m in _NUMBER.findall(normalise(text)))


def _number_key(norm: str) -> tuple[str, ...]:
    """The numbers of a normalised text, sorted: equal exactly when :func:`_numbers` of the texts are."""
    return tuple(sorted(m.lstrip("0") or "0" for m in _NUMBER.findall(norm)))


def _unspaced(words: list[str]) -> bool:
    return any(len(word) > _UNSPACED_RUN for word in words) or len(words) == 1


def _variants(word: str, other: str) -> bool:
    """Whether two words are variants of one (difflib's ratio, after its cheaper upper bounds)."""
    matcher = SequenceMatcher(None, word, other)
    return (
        matcher.real_quick_ratio() >= WORD_VARIANT_RATIO
        and matcher.quick_ratio() >= WORD_VARIANT_RATIO
        and matcher.ratio() >= WORD_VARIANT_RATIO
    )


def _words_differ(left: set[str], right: set[str]) -> bool:
    """Whether a content word of one text's words is missing from the other's (no variant of it there)."""
    only_left, only_right = left - right, right - left

    def unmatched(word: str, others: set[str]) -> bool:
        if len(word) <= FUNCTION_WORD_CHARS and word not in NEGATIONS:
            return False
        return not any(_variants(word, other) for other in others)

    return any(unmatched(w, only_right) for w in only_left) or any(unmatched(w, only_left) for w in only_right)


def _near(norm_a: str, norm_b: str, jaccard: float) -> bool:
    """The near test past the numbers, on the two texts' normalised forms and their shingle Jaccard."""
    words_a, words_b = norm_a.split(), norm_b.split()
    if _unspaced(words_a) or _unspaced(words_b):
        return jaccard >= UNSPACED_NEAR_JACCARD
    return (
        bool(words_a or words_b) and jaccard >= NEAR_DUPLICATE_JACCARD and not _words_differ(set(words_a), set(words_b))
    )


def near_duplicate(a: str, b: str) -> bool:
    """Whether ``b`` copies ``a``, exactly or nearly (see the module notes)."""
    if normalise(a) == normalise(b):
        return True
    return _numbers(a) == _numbers(b) and _near(normalise(a), normalise(b), shingle_jaccard(a, b))


@dataclass(frozen=True)
class Copy:
    """A text found to copy an earlier one."""

    kind: Literal["duplicate", "near_duplicate"]
    kept_id: str
    """The id of the record that holds the earlier text (the one kept)."""
    kept_text: str
    similarity: float
    """The shingle Jaccard of the two texts (1.0 for a duplicate)."""

    def evidence(self) -> dict[str, object]:
        """The copy as a reject's evidence."""
        return {"copy_of": self.kept_id, "copied_text": self.kept_text, "similarity": round(self.similarity, 4)}


@dataclass
class _Shelf:
    """The kept texts of one number key (only texts with the same numbers can be near-duplicates)."""

    texts: list[tuple[str, str, str]] = field(default_factory=list)
    """Per kept text: its record id, the text, its normalised form."""
    sizes: array[int] = field(default_factory=lambda: array("i"))
    """Per kept text, its number of shingles."""
    postings: dict[str, array[int]] = field(default_factory=dict)
    """Per shingle, the kept texts holding it (their indexes on this shelf, ascending)."""

    def near(self, mine: frozenset[str]) -> Iterator[tuple[int, float]]:
        """The kept texts (indexes, ascending) sharing enough shingles with ``mine`` to be near, with the Jaccard."""
        lists = sorted((np.frombuffer(self.postings[g], dtype=np.int32) for g in mine if g in self.postings), key=len)
        if not lists:
            return
        # a kept text of Jaccard ≥ t shares at least t·|mine| shingles with the new one (the union is at least
        # |mine|), so it holds one of the new text's rarest |mine| - ⌊t·|mine|⌋ + 1 shingles: only the texts of
        # those postings are candidates
        rare = lists[: len(mine) - int(_LEAST_NEAR_JACCARD * len(mine)) + 1]
        everything = sum(len(posting) for posting in lists)
        candidates: np.ndarray[Any, np.dtype[np.int64]] | None = None
        if sum(len(posting) for posting in rare) * 2 < everything:
            candidates = np.unique(np.concatenate(rare)).astype(np.int64)
        if candidates is not None and len(candidates) * len(lists) * _SEARCH_COST < everything:
            shared = np.zeros(len(candidates), dtype=np.int64)  # few candidates: each looked up in every posting
            for held in lists:
                shared += held[np.minimum(np.searchsorted(held, candidates), len(held) - 1)] == candidates
        else:  # many: every posting counted at once
            shared = np.bincount(np.concatenate(lists), minlength=len(self.texts))
            if candidates is not None:
                shared = shared[candidates]
        sizes = np.frombuffer(self.sizes, dtype=np.int32)
        union = len(mine) + (sizes if candidates is None else sizes[candidates]) - shared
        # below the least Jaccard the word test never runs: too few shingles shared
        for place in np.flatnonzero(shared / union >= _LEAST_NEAR_JACCARD).tolist():
            index = place if candidates is None else int(candidates[place])
            yield index, int(shared[place]) / int(union[place])

    def add(self, record_id: str, text: str, norm: str, grams: frozenset[str]) -> None:
        index = len(self.texts)
        self.texts.append((record_id, text, norm))
        self.sizes.append(len(grams))
        for gram in grams:
            self.postings.setdefault(gram, array("i")).append(index)


@dataclass
class CopyIndex:
    """Texts kept so far (each under its record's id), and which of them a new text copies.

    The exact test is a dictionary look-up. Near-duplicates have the same numbers, so the kept texts are shelved
    by their numbers and a new text is compared with its own shelf only. There an inverted index counts the
    shingles each kept text shares with the new one (numpy, over each shingle's postings), probing only the
    postings of the new text's rarest shingles for candidates (a text near it must hold one of them), and only
    the kept texts that reach :data:`_LEAST_NEAR_JACCARD` get the word test, in the order kept.
    """

    _exact: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    _shelves: dict[tuple[str, ...], _Shelf] = field(default_factory=dict)
    """Per number key (:func:`_number_key`), the kept texts with those numbers."""

    def match(self, text: str) -> Copy | None:
        """The first kept text that ``text`` duplicates (or else nearly duplicates), or ``None``."""
        return next(self.matches(text), None)

    def matches(self, text: str) -> Iterator[Copy]:
        """Every kept text that ``text`` copies: exact copies first, then near ones, each in the order kept."""
        norm = normalise(text)
        for record_id, kept in self._exact.get(norm, ()):
            yield Copy(DUPLICATE, record_id, kept, 1.0)
        shelf = self._shelves.get(_number_key(norm))
        if shelf is None:
            return
        for index, jaccard in shelf.near(shingles(text)):
            record_id, kept, kept_norm = shelf.texts[index]
            if kept_norm != norm and _near(norm, kept_norm, jaccard):
                yield Copy(NEAR_DUPLICATE, record_id, kept, jaccard)

    def add(self, record_id: str, text: str) -> None:
        """Keep ``text`` (held by ``record_id``) for later matches."""
        norm = normalise(text)
        self._exact.setdefault(norm, []).append((record_id, text))
        self._shelves.setdefault(_number_key(norm), _Shelf()).add(record_id, text, norm, shingles(text))
