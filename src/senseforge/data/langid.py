"""Which language a text is in: Google's CLD3 (PyPI ``cld3-py``, Apache-2.0), offline.

CLD3 covers Sundanese, Javanese, Indonesian and Malay among its 107 languages (several
popular identifiers do not know Sundanese). A text too short or too mixed to tell is
``None``, never a guess. Shared by the culture recipes (items flagged, not rejected) and
the analyses (wrong-language rate).

>>> detect("Naon anu biasana dianggo ku urang Sunda pikeun ngadamel sangu liwet?")  # doctest: +SKIP
'su'
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from functools import cache
from typing import Any

from senseforge.errors import MissingDependencyError

MIN_PROBABILITY = 0.5
"""Below this CLD3 probability the language is unknown (``None``)."""
RELIABLE = 0.9
"""In a set of texts (:func:`detect_set`), a language found at this probability or above is kept however rare."""
MIN_SHARE = 0.2
"""In a set of texts, a language found for fewer than this share of them (and below :data:`RELIABLE`) is taken
for a misreading of the set's most common language."""


@cache
def _identifier() -> Any:
    try:
        import gcld3
    except ImportError as exc:
        raise MissingDependencyError("language identification needs cld3-py: pip install 'senseforge[langid]'") from exc
    return gcld3.NNetLanguageIdentifier(min_num_bytes=0, max_num_bytes=4096)


def _find(text: str) -> tuple[str | None, float]:
    if not text.strip():
        return None, 0.0
    result = _identifier().FindLanguage(text=text)
    if result.language in ("und", "") or result.probability < MIN_PROBABILITY:
        return None, float(result.probability)
    return str(result.language).split("-")[0], float(result.probability)


def detect(text: str) -> str | None:
    """The BCP-47 primary tag CLD3 finds for ``text``, or ``None`` when it cannot tell.

    Raises:
        MissingDependencyError: ``cld3-py`` is not installed.
    """
    return _find(text)[0]


def detect_set(texts: Sequence[str]) -> list[str | None]:
    """Each text's language, read as one set's (a file's items): :func:`detect` for each, except that in a set in
    one language (only one found for :data:`MIN_SHARE` of it or more), another language found below
    :data:`RELIABLE` probability is taken for that one. On short questions CLD3 reads about one English question
    in a hundred, and one Indonesian in six, as another language (Shona, Malay); in a set of several languages
    each text keeps what was found for it.

    Raises:
        MissingDependencyError: ``cld3-py`` is not installed.
    """
    found = [_find(text) for text in texts]
    counts = Counter(lang for lang, _ in found if lang is not None)
    if not counts:
        return [lang for lang, _ in found]
    total = sum(counts.values())
    major = [lang for lang, count in counts.items() if count >= MIN_SHARE * total]
    if len(major) != 1:
        return [lang for lang, _ in found]
    return [major[0] if lang is not None and probability < RELIABLE else lang for lang, probability in found]
