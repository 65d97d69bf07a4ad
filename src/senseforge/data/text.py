"""Text compared as people read it: folded forms, and word lists read from files.

Every recipe, the moderation lists and the annotation app compare texts in one form
(:func:`fold`), and read their word lists (stopwords, moderation terms) one way
(:func:`parse_terms`). Sums of money are written one way too (:func:`money`).
"""

from __future__ import annotations

import functools
import unicodedata
from decimal import Decimal


def fold(text: str) -> str:
    """The form texts and terms are compared in: NFKC, case-folded, whitespace collapsed.

    >>> fold("  ＦＵＣＫ\\tScheiße ")
    'fuck scheisse'
    """
    return _fold(text)


@functools.lru_cache(maxsize=1 << 16)
def _fold(text: str) -> str:
    """:func:`fold`, remembered: a build folds the same choices and targets in every check of every record."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def parse_terms(text: str) -> tuple[str, ...]:
    """Terms of a word-list file: one per line; blank lines and ``#`` comments dropped.

    >>> parse_terms("# profanity\\nfoo  # inline note\\n\\n Bar Baz \\n")
    ('foo', 'Bar Baz')
    """
    terms = (line.split("#", 1)[0].strip() for line in text.splitlines())
    return tuple(term for term in terms if term)


def plural(count: int, word: str, many: str | None = None) -> str:
    """``1 item``, ``2 items`` (``many`` for an irregular plural).

    >>> plural(1, "item"), plural(3, "item"), plural(0, "entry", "entries")
    ('1 item', '3 items', '0 entries')
    """
    return f"{count:,} {word if count == 1 else (many or word + 's')}"


def money(usd: float | None) -> str:
    """US dollars as a person reads them: cents from a cent up, three significant digits below, ``$0`` for
    nothing at all and ``unknown`` for an unknown cost.

    >>> money(2.1), money(0.00042), money(0.0001234), money(3.2e-7), money(0.0), money(None), money(12345.678)
    ('$2.10', '$0.00042', '$0.000123', '$0.00000032', '$0', 'unknown', '$12,345.68')
    """
    if usd is None:
        return "unknown"
    if usd == 0:
        return "$0"
    if abs(usd) >= 0.01:
        return f"${usd:,.2f}"
    digits = format(Decimal(f"{abs(usd):.3g}"), "f")
    return f"{'-' if usd < 0 else ''}${digits}"
