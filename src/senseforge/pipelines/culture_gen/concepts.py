"""The batches of culture-gen: a concept table (:mod:`senseforge.data.concepts`) cut into calls.

Putri et al. wrote one call per batch of at most five concepts of one category, in input
order; the source of the recipe cuts the table the same way, per language (:func:`batches`).
Their concept lists hold each concept twice: a batch that recurs with the same concepts gets
its occurrence number, which goes into the request's seed, so the cache never replays the
first reply for the second copy.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from senseforge.data.concepts import Concept


@dataclass(frozen=True)
class Batch:
    """The concepts of one call: one language, one category, at most ``size`` concepts, in input order."""

    lang: str
    category: str
    concepts: tuple[str, ...]
    occurrence: int = 0
    """How many earlier batches of this language had the very same category and concepts."""


def batches(rows: Sequence[Concept], langs: Sequence[str], size: int = 5) -> list[Batch]:
    """Per language (in the order given), consecutive runs of one category cut into batches of at most ``size``.

    A category's run ends where the table moves to another category, so batches never mix
    categories and keep the table's order.
    """
    out: list[Batch] = []
    for lang in langs:
        seen: Counter[tuple[str, tuple[str, ...]]] = Counter()
        runs: list[tuple[str, list[str]]] = []
        for row in rows:
            if row.lang not in (None, lang):
                continue
            if not runs or runs[-1][0] != row.category or len(runs[-1][1]) == size:
                runs.append((row.category, []))
            runs[-1][1].append(row.concept)
        for category, concepts in runs:
            key = (category, tuple(concepts))
            out.append(Batch(lang, category, tuple(concepts), occurrence=seen[key]))
            seen[key] += 1
    return out
