"""Counting words in concept texts, per language.

Most languages separate words with spaces. Japanese and Chinese do not, so a concept's
word count there comes from a real morphological tokenizer: fugashi with the
unidic-lite dictionary for Japanese (short-unit words, as MeCab splits them) and jieba
for Chinese (its default, precise mode). Both are optional dependencies
(``senseforge[kb]``); asking for ja or zh without them is an error that names the
install command, never a silent fallback.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from senseforge.errors import MissingDependencyError

SEGMENTED_BY_TOKENIZER = frozenset({"ja", "zh"})
"""Languages whose words are found by a tokenizer rather than by spaces."""


@functools.cache
def japanese_words() -> Callable[[str], list[str]]:
    """Japanese text → its words (fugashi, unidic-lite short units; blanks dropped).

    Raises:
        MissingDependencyError: without the ``kb`` extra.
    """
    try:
        import fugashi
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise MissingDependencyError("Japanese words need fugashi: pip install 'senseforge[kb]'") from exc
    try:
        tagger = fugashi.Tagger()
    except RuntimeError as exc:  # pragma: no cover - a broken dictionary install
        raise MissingDependencyError(
            f"fugashi found no dictionary ({exc}): pip install 'senseforge[kb]' (brings unidic-lite)"
        ) from exc
    return lambda text: [w for w in (word.surface.strip() for word in tagger(text)) if w]


@functools.cache
def chinese_words() -> Callable[[str], list[str]]:
    """Chinese text → its words (jieba, precise mode; blanks dropped).

    Raises:
        MissingDependencyError: without the ``kb`` extra.
    """
    try:
        import jieba
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise MissingDependencyError("Chinese words need jieba: pip install 'senseforge[kb]'") from exc
    jieba.setLogLevel(60)  # silence its start-up chatter
    return lambda text: [w for w in (word.strip() for word in jieba.cut(text)) if w]


def _spaces(text: str) -> int:
    return len(text.split())


def word_counter(lang: str) -> Callable[[str], int]:
    """The word-counting function for a ConceptNet language code (``en``, ``ja`` …)."""
    if lang == "ja":
        words = japanese_words()
        return lambda text: len(words(text))
    if lang == "zh":
        words = chinese_words()
        return lambda text: len(words(text))
    return _spaces


def count_words(text: str, lang: str) -> int:
    """How many words ``text`` has in language ``lang``.

    >>> count_words("revolving door", "en")
    2
    """
    return word_counter(lang)(text)
