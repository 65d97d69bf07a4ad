"""Adaptations and translations that copy what they were to change: culture-adapt rejects them by name.

* :data:`NAMES_NOT_REPLACED` — an adaptation meant to replace person names (a name-only
  rewrite, or a full one with names or places judged foreign) still holds one of them, as
  a whole word, case ignored. The evidence names it. (A full adaptation may transliterate
  a place, "Mexico" → "Meksiko"; only a verbatim copy is caught here.)
* :data:`UNTRANSLATED` — a translation that is its source text: equal or nearly equal to
  it (:func:`senseforge.pipelines.dedup.near_duplicate`, or a character-shingle Jaccard of at
  least :data:`UNTRANSLATED_JACCARD`), or identified as the source language by the
  language identifier while still sharing at least :data:`LANGID_COPY_JACCARD` of its
  shingles with the source. Checked before the faithfulness similarity, which a copy
  passes with a score near 1.

>>> replaced_names_left("Where would James keep his bike?", ["James"])
['James']
>>> untranslated("Di mana biasana cai mancur kapanggih?", "Di mana biasanya air mancur ditemukan?", None, "id")
False
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Final

from senseforge.pipelines.dedup import near_duplicate, shingle_jaccard

NAMES_NOT_REPLACED: Final = "names_not_replaced"
"""Rejection: the adaptation still holds a person name (or place) it was to replace."""

UNTRANSLATED: Final = "untranslated"
"""Rejection: a translation equal or nearly equal to its source, or still in the source language."""

UNTRANSLATED_JACCARD: Final = 0.8
"""Shingle Jaccard with the source at or above which a 'translation' is a copy. Indonesian and Sundanese share
many words, yet a real Sundanese translation of an Indonesian question shares well under this (the released
LLM_Adapt id/su question pairs: median 0.22, 99th percentile 0.51, highest 0.68); a copy with a word or two
changed sits above it."""

LANGID_COPY_JACCARD: Final = 0.5
"""With the language identifier naming the source language, shingle Jaccard at or above which the text is
taken as untranslated. The identifier alone is not enough: it often calls short Sundanese text Indonesian,
and Sundanese items legitimately hold Indonesian words."""


def replaced_names_left(text: str, names: Sequence[str]) -> list[str]:
    """The ``names`` still in ``text`` (whole words, case ignored), in the order given."""
    left = []
    for name in names:
        if name.strip() and re.search(rf"(?<!\w){re.escape(name.strip())}(?!\w)", text, flags=re.IGNORECASE):
            left.append(name)
    return left


def untranslated(translation: str, source: str, detected: str | None, source_lang: str) -> bool:
    """Whether ``translation`` is ``source`` untranslated (see the module notes)."""
    return bool(untranslated_evidence(translation, source, detected, source_lang))


def untranslated_evidence(
    translation: str, source: str, detected: str | None, source_lang: str
) -> dict[str, Any] | None:
    """Why ``translation`` counts as untranslated (similarity, detected language), or ``None`` when it does not."""
    jaccard = shingle_jaccard(source, translation)
    same_lang = detected is not None and detected.split("-")[0] == source_lang.split("-")[0]
    if near_duplicate(source, translation) or jaccard >= UNTRANSLATED_JACCARD:
        return {"similarity": round(jaccard, 4), "detected": detected, "source": source}
    if same_lang and jaccard >= LANGID_COPY_JACCARD:
        return {"similarity": round(jaccard, 4), "detected": detected, "source": source}
    return None
