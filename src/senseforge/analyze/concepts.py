"""Concept skew: which ``question_concept`` s a dataset asks about, and how unevenly (Putri et al. Figure 2).

Per dataset and language (and over the languages pooled, when there are several) this counts
the question concepts and reports the most frequent ones (count and share), and how skewed
the spread is:

* ``top1_share`` and ``top10_share``: the share of the items with a concept that the most
  frequent concept, and the ten most frequent, cover (the measure behind the paper's remark
  that LLM-adapted concepts lean towards *komodo*);
* ``distinct`` and ``distinct_per_item``: how many different concepts there are, per item
  with a concept (1.0 = every item has its own);
* ``singletons``: concepts asked about once.

Concepts are compared after NFKC, case folding and collapsing white space, so ``Komodo`` and
``komodo`` are one concept; a concept is shown in its most frequent spelling (the spellings
merged are kept in ``forms``). Items without a concept are counted (``items`` −
``with_concept``) and left out of the shares. When items carry a ``category``, the category
mix (category → count and share of all items) is given as well.

On Putri et al.'s released LLM_Adapt files (``llm_adapt/{ind,sun}/filtered_{validation,
test}.json``; their Figure 2 also counts the train split, which is not released), *komodo* is
the most frequent concept in both languages: 12 of the 349 items each (3.44%), with the ten
most frequent concepts covering 13.47% (Indonesian) and 13.75% (Sundanese) of the items. In
Human_Gen the top ten cover 2.80% and in LLM_Gen (``filtered_test.json``) 3.95% / 3.55%.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from senseforge.analyze.inputs import Side
from senseforge.analyze.lexical import side_label
from senseforge.analyze.tokens import normalize
from senseforge.data.schema import MCItem
from senseforge.errors import ConfigError

SKEW_TOP = 10
"""The skew measure's cut: the share covered by this many most frequent concepts."""

ALL_LANGS = "all"
"""The ``lang`` of a group that pools a dataset's languages."""


def concept_key(text: str) -> str:
    """What two spellings of one concept share: NFKC, case-folded, single spaces.

    >>> concept_key("  Komodo  Island ")
    'komodo island'
    """
    return " ".join(normalize(text).split())


@dataclass(frozen=True)
class Count:
    """A concept or category, how many items have it, and their share."""

    name: str
    count: int
    share: float
    forms: list[str] = field(default_factory=list)
    """The spellings merged into ``name`` (only when more than one)."""

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"name": self.name, "count": self.count, "share": self.share}
        if self.forms:
            doc["forms"] = self.forms
        return doc


@dataclass(frozen=True)
class ConceptGroup:
    """The concepts (and categories) of one dataset in one language, or in all its languages pooled."""

    dataset: str
    lang: str
    items: int
    with_concept: int
    distinct: int
    singletons: int
    top: list[Count]
    top1_share: float | None
    top10_share: float | None
    categories: list[Count] = field(default_factory=list)
    with_category: int = 0

    @property
    def distinct_per_item(self) -> float | None:
        """Distinct concepts ÷ items with a concept."""
        return self.distinct / self.with_concept if self.with_concept else None

    def summary(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "lang": self.lang,
            "items": self.items,
            "with_concept": self.with_concept,
            "distinct": self.distinct,
            "distinct_per_item": self.distinct_per_item,
            "singletons": self.singletons,
            "top1": self.top[0].name if self.top else None,
            "top1_share": self.top1_share,
            "top10_share": self.top10_share,
            "with_category": self.with_category,
        }

    def to_json(self) -> dict[str, Any]:
        return {
            **self.summary(),
            "top": [c.to_json() for c in self.top],
            "categories": [c.to_json() for c in self.categories],
        }


@dataclass(frozen=True)
class ConceptsResult:
    """Every group of every dataset; ``top`` is how many concepts each lists."""

    groups: list[ConceptGroup]
    top: int

    def rows(self) -> list[dict[str, Any]]:
        """The long table: one row per listed concept and per category of each group (``kind`` tells which)."""
        rows: list[dict[str, Any]] = []
        for group in self.groups:
            for kind, counts in (("concept", group.top), ("category", group.categories)):
                for rank, c in enumerate(counts, 1):
                    rows.append(
                        {
                            "dataset": group.dataset,
                            "lang": group.lang,
                            "kind": kind,
                            "rank": rank,
                            "name": c.name,
                            "count": c.count,
                            "share": c.share,
                        }
                    )
        return rows

    def to_json(self) -> dict[str, Any]:
        return {
            "study": "concepts",
            "top": self.top,
            "skew_top": SKEW_TOP,
            "normalization": "NFKC + casefold + single spaces; shown in the most frequent spelling",
            "groups": [g.to_json() for g in self.groups],
        }


def _ranked(counts: Counter[str], label: dict[str, str], total: int, forms: dict[str, Counter[str]]) -> list[Count]:
    if not total:
        return []
    order = sorted(counts.items(), key=lambda kv: (-kv[1], label[kv[0]]))
    return [Count(label[key], n, n / total, sorted(forms[key]) if len(forms[key]) > 1 else []) for key, n in order]


def concept_group(items: Sequence[MCItem], *, dataset: str, lang: str, top: int = 20) -> ConceptGroup:
    """The concept counts and skew of ``items`` (one group)."""
    counts: Counter[str] = Counter()
    forms: dict[str, Counter[str]] = defaultdict(Counter)
    for item in items:
        if item.question_concept and item.question_concept.strip():
            key = concept_key(item.question_concept)
            counts[key] += 1
            forms[key][" ".join(item.question_concept.split())] += 1
    # the most frequent spelling names the concept (ties: the first met)
    label = {key: spellings.most_common(1)[0][0] for key, spellings in forms.items()}
    with_concept = sum(counts.values())
    ranked = _ranked(counts, label, with_concept, forms)
    categories: Counter[str] = Counter(item.category for item in items if item.category)
    with_category = sum(categories.values())
    cats = sorted(categories.items(), key=lambda kv: (-kv[1], kv[0]))
    return ConceptGroup(
        dataset=dataset,
        lang=lang,
        items=len(items),
        with_concept=with_concept,
        distinct=len(counts),
        singletons=sum(1 for n in counts.values() if n == 1),
        top=ranked[:top],
        top1_share=ranked[0].share if ranked else None,
        top10_share=sum(c.count for c in ranked[:SKEW_TOP]) / with_concept if with_concept else None,
        categories=[Count(name, n, n / len(items)) for name, n in cats],
        with_category=with_category,
    )


def concepts(datasets: Sequence[tuple[str, Sequence[MCItem]]], *, top: int = 20) -> ConceptsResult:
    """Concept skew of each ``(name, items)`` dataset: a group per language, and one pooled when there are several.

    Raises:
        ConfigError: ``top`` below 1, no dataset, or a dataset without multiple-choice items.
    """
    if top < 1:
        raise ConfigError(f"--top {top}: give at least 1")
    if not datasets:
        raise ConfigError("give at least one dataset")
    groups: list[ConceptGroup] = []
    for name, items in datasets:
        if not items:
            raise ConfigError(f"{name}: no multiple-choice items")
        by_lang: dict[str, list[MCItem]] = defaultdict(list)
        for item in items:
            by_lang[item.lang].append(item)
        groups += [concept_group(part, dataset=name, lang=lang, top=top) for lang, part in by_lang.items()]
        if len(by_lang) > 1:
            groups.append(concept_group(items, dataset=name, lang=ALL_LANGS, top=top))
    return ConceptsResult(groups, top)


def concepts_of_sides(sides: Sequence[Side], *, top: int = 20) -> ConceptsResult:
    """:func:`concepts` of datasets read by :func:`senseforge.analyze.inputs.read_side`."""
    return concepts([(side_label(side), side.items) for side in sides], top=top)
