"""Lexical diversity of two datasets: their unique tokens and how much of each the other shares (Putri et al. §5.2).

For each side, the unique unigrams and bigrams of the chosen text fields are collected
(tokens as :mod:`senseforge.analyze.tokens` defines them: NFKC, case-folded, letters/digits/
marks with word-internal hyphens and apostrophes kept, fugashi for Japanese and jieba for
Chinese; bigrams inside one text only). The overlap is measured in both directions::

    overlap(A) = |unique(A) ∩ unique(B)| / |unique(A)|
    overlap(B) = |unique(A) ∩ unique(B)| / |unique(B)|

A side whose overlap is low has many words the other never uses: it is the more diverse one
*relative to the other*. The default fields are the question and the choices; the concept
can be added (``fields``).

The paper's figures
-------------------
Putri et al. report, for Human_Gen against LLM_Gen (Indonesian and Sundanese test files
pooled), 8,596 vs 6,677 unique tokens, unigram overlaps of 39.75% (Human_Gen) and 65.48%
(LLM_Gen), and bigram overlaps of 12.41% and 15.98%. They are shown beside ours, labelled as
the paper's, only when the sides are those subsets: with ``paper="auto"`` (the default), when
every id of one side starts with ``orig_h_`` (the release's Human_Gen ids) and every id of
the other with ``orig_m_`` (LLM_Gen), in either order; ``paper="putri"`` shows them anyway
(side A taken as Human_Gen unless the ids say otherwise) and ``"none"`` never.

How close we land, and the reading we use
-----------------------------------------
On the released test files, Human_Gen = ``human_gen/{ind,sun}/filtered_test.json`` (2,997
items) against LLM_Gen = ``llm_gen/{ind,sun}/filtered_test.json`` (2,246 items), question
and choices, our tokens give **38.91%** (Human_Gen) and **64.86%** (LLM_Gen) unigram
overlap (paper 39.75% / 65.48%: 0.84 and 0.62 points below), with 9,915 vs 5,948 unique
tokens (3,858 shared), and bigram overlaps of 15.06% / 18.33% (paper 12.41% / 15.98%).

What we tried, all on the same files (unigram overlap Human_Gen / LLM_Gen):

* plain ``\\w+`` runs (reduplications split: ``anak-anak`` → ``anak anak``): 39.35% / 65.79%,
  9,814 vs 5,870 tokens — as close, but ``kupu`` alone is not a word, so we keep the
  hyphenated word whole;
* our rule without case folding: 36.00% / 60.46% — a sentence-initial ``Apa`` and ``apa`` are one
  word, so we fold case;
* whitespace-split tokens (punctuation left on the word): 35.12% / 55.61%;
* the question only: 43.40% / 72.86%; question, choices and concept: 39.24% / 65.74%;
* ``llm_gen/*/filtered_test_clean.json`` (the 300-per-language sample the paper checked by
  hand) instead of the full filtered files: 24.59% / 75.06% — far off, so the paper's
  numbers come from the full ``filtered_test.json``;
* one language at a time: Indonesian 41.61% / 66.95%, Sundanese 35.55% / 58.67% — the paper's
  figures are for the two languages pooled, and so are ours.

Two things we cannot match. First, the paper's unique-token counts do not fit its own
overlaps: one shared set gives ``|H| / |L| = 65.48 / 39.75 = 1.65``, while 8,596 / 6,677 is
1.29; our counts give 1.67, consistent with the overlaps, so the paper's counts probably come
from another pass. Second, the bigrams: ours are within one text; joining a question and
its options into one sequence gives 10.82% / 14.59%, nearer the paper's, but its extra pairs
(the question's last word followed by an option's first) are not text anyone wrote, so we
do not count them.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from senseforge.analyze.inputs import Side, split_spec
from senseforge.analyze.tokens import DEFAULT_FIELDS, Vocabulary, parse_fields, vocabulary
from senseforge.data.schema import MCItem
from senseforge.errors import ConfigError

PaperChoice = Literal["auto", "putri", "none"]
PAPER_CHOICES: tuple[str, ...] = ("auto", "putri", "none")

TOKENIZATION = (
    "NFKC + casefold; tokens = runs of letters, digits and combining marks, joined across an inner hyphen or "
    "apostrophe (and . or , between digits); punctuation dropped; fugashi (ja) and jieba (zh); "
    "bigrams within one text (the question, each choice, the concept)"
)
"""The reading, in one line, for the JSON and the CLI."""

HUMAN_PREFIX = "orig_h_"
LLM_PREFIX = "orig_m_"


@dataclass(frozen=True)
class PaperSide:
    """What Putri et al. report for one of their two subsets (§5.2)."""

    label: str
    unique_tokens: int
    unigram_overlap: float
    bigram_overlap: float


PUTRI_HUMAN_GEN = PaperSide("Human_Gen", 8596, 0.3975, 0.1241)
PUTRI_LLM_GEN = PaperSide("LLM_Gen", 6677, 0.6548, 0.1598)
PAPER_SOURCE = "Putri et al. (2024), §5.2: Human_Gen vs LLM_Gen, Indonesian and Sundanese test files pooled"


@dataclass(frozen=True)
class SideSummary:
    """One side's size and vocabulary."""

    name: str
    items: int
    langs: list[str]
    texts: int
    tokens: int
    unique_unigrams: int
    unique_bigrams: int
    files: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Overlap:
    """Shared unique n-grams of the two sides, and the share of each side's own."""

    ngram: str
    shared: int
    unique_a: int
    unique_b: int

    @property
    def share_a(self) -> float | None:
        """Shared ÷ A's unique (``None`` when A has none)."""
        return self.shared / self.unique_a if self.unique_a else None

    @property
    def share_b(self) -> float | None:
        """Shared ÷ B's unique (``None`` when B has none)."""
        return self.shared / self.unique_b if self.unique_b else None

    def to_json(self) -> dict[str, Any]:
        return {
            "ngram": self.ngram,
            "shared": self.shared,
            "unique_a": self.unique_a,
            "unique_b": self.unique_b,
            "share_a": self.share_a,
            "share_b": self.share_b,
        }


@dataclass(frozen=True)
class LexicalResult:
    """The lexical comparison of two sides; ``paper`` is the paper's figures in our A, B order, when shown."""

    a: SideSummary
    b: SideSummary
    fields: tuple[str, ...]
    unigram: Overlap
    bigram: Overlap
    paper: tuple[PaperSide, PaperSide] | None = None
    only_a: list[tuple[str, int]] = field(default_factory=list)
    """A's most frequent tokens that B never uses."""
    only_b: list[tuple[str, int]] = field(default_factory=list)

    def rows(self) -> list[dict[str, Any]]:
        """The table: one row per measure; ``unit`` says whether a value is a count or a share (0–1).

        An overlap is shared unique ÷ the side's own unique; ``paper_a``/``paper_b`` only when the paper is shown.
        """
        pa, pb = self.paper if self.paper else (None, None)

        def row(measure: str, unit: str, a: Any, b: Any, paper_a: Any = None, paper_b: Any = None) -> dict[str, Any]:
            line: dict[str, Any] = {"measure": measure, "unit": unit, "a": a, "b": b}
            if self.paper:
                line |= {"paper_a": paper_a, "paper_b": paper_b}
            return line

        return [
            row("items", "count", self.a.items, self.b.items),
            row("running tokens", "count", self.a.tokens, self.b.tokens),
            row(
                "unique unigrams",
                "count",
                self.a.unique_unigrams,
                self.b.unique_unigrams,
                pa and pa.unique_tokens,
                pb and pb.unique_tokens,
            ),
            row("shared unigrams", "count", self.unigram.shared, self.unigram.shared),
            row(
                "unigram overlap",
                "share",
                self.unigram.share_a,
                self.unigram.share_b,
                pa and pa.unigram_overlap,
                pb and pb.unigram_overlap,
            ),
            row("unique bigrams", "count", self.a.unique_bigrams, self.b.unique_bigrams),
            row("shared bigrams", "count", self.bigram.shared, self.bigram.shared),
            row(
                "bigram overlap",
                "share",
                self.bigram.share_a,
                self.bigram.share_b,
                pa and pa.bigram_overlap,
                pb and pb.bigram_overlap,
            ),
        ]

    def to_json(self) -> dict[str, Any]:
        return {
            "study": "lexical",
            "fields": list(self.fields),
            "tokenization": TOKENIZATION,
            "a": _side_json(self.a),
            "b": _side_json(self.b),
            "unigram": self.unigram.to_json(),
            "bigram": self.bigram.to_json(),
            "paper": None
            if self.paper is None
            else {
                "source": PAPER_SOURCE,
                "a": vars(self.paper[0]).copy(),
                "b": vars(self.paper[1]).copy(),
            },
            "only_a": [[token, count] for token, count in self.only_a],
            "only_b": [[token, count] for token, count in self.only_b],
            "rows": self.rows(),
        }


def _side_json(side: SideSummary) -> dict[str, Any]:
    return {
        "name": side.name,
        "items": side.items,
        "langs": side.langs,
        "texts": side.texts,
        "tokens": side.tokens,
        "unique_unigrams": side.unique_unigrams,
        "unique_bigrams": side.unique_bigrams,
        "files": side.files,
    }


def side_label(side: Side) -> str:
    """A readable name for a side: ``human_gen/ind/filtered_test.json``, or ``human_gen/{ind/…,sun/…}`` for a list."""
    parts = [Path(part).expanduser().absolute() for part in split_spec(side.spec)]
    if not parts:
        return side.spec
    if len(parts) == 1:
        return "/".join(parts[0].parts[-3:]) if parts[0].is_file() else parts[0].name or str(parts[0])
    common = Path(os.path.commonpath(parts))
    rels = [os.path.relpath(part, common) for part in parts]
    return f"{common.name}/{{{','.join(rels)}}}" if common.name else ",".join(str(p) for p in parts)


def putri_order(a: Sequence[MCItem], b: Sequence[MCItem]) -> Literal["forward", "swapped"] | None:
    """``forward`` when A is Putri's Human_Gen and B their LLM_Gen (by the release's id prefixes), ``swapped`` for
    the reverse, else ``None``."""

    def every(items: Sequence[MCItem], prefix: str) -> bool:
        return bool(items) and all(item.id.startswith(prefix) for item in items)

    if every(a, HUMAN_PREFIX) and every(b, LLM_PREFIX):
        return "forward"
    if every(a, LLM_PREFIX) and every(b, HUMAN_PREFIX):
        return "swapped"
    return None


def paper_figures(a: Sequence[MCItem], b: Sequence[MCItem], paper: str) -> tuple[PaperSide, PaperSide] | None:
    """The paper's figures in A, B order, or ``None`` (see the module docstring).

    Raises:
        ConfigError: ``paper`` is not auto, putri or none.
    """
    if paper not in PAPER_CHOICES:
        raise ConfigError(f"--paper {paper!r}: choose from {', '.join(PAPER_CHOICES)}")
    if paper == "none":
        return None
    order = putri_order(a, b)
    if order is None and paper == "auto":
        return None
    return (PUTRI_LLM_GEN, PUTRI_HUMAN_GEN) if order == "swapped" else (PUTRI_HUMAN_GEN, PUTRI_LLM_GEN)


def _summary(name: str, items: Sequence[MCItem], vocab: Vocabulary, files: Sequence[Path]) -> SideSummary:
    return SideSummary(
        name=name,
        items=len(items),
        langs=list(dict.fromkeys(item.lang for item in items)),
        texts=vocab.texts,
        tokens=vocab.tokens,
        unique_unigrams=len(vocab.unigrams),
        unique_bigrams=len(vocab.bigrams),
        files=[str(path) for path in files],
    )


def _only(mine: Counter[str], theirs: Counter[str], top: int) -> list[tuple[str, int]]:
    ranked = sorted(((token, n) for token, n in mine.items() if token not in theirs), key=lambda kv: (-kv[1], kv[0]))
    return ranked[:top]


def lexical(
    a: Sequence[MCItem],
    b: Sequence[MCItem],
    *,
    fields: Sequence[str] | str = DEFAULT_FIELDS,
    names: tuple[str, str] = ("A", "B"),
    files: tuple[Sequence[Path], Sequence[Path]] = ((), ()),
    paper: str = "auto",
    top: int = 20,
) -> LexicalResult:
    """Unique unigrams and bigrams of two sets of items and their overlap in both directions.

    Args:
        a, b: the two sides' items.
        fields: the texts that count (``question``, ``choices``, ``concept``; names or ``"question,choices"``).
        names: labels for the two sides.
        files: the files each side was read from (recorded in the JSON).
        paper: ``auto`` (Putri's figures when the ids are theirs), ``putri`` or ``none``.
        top: how many of each side's own most frequent tokens (never used by the other) to keep.

    Raises:
        ConfigError: an empty side, an unknown field or ``paper`` value.
        MissingDependencyError: Japanese or Chinese items without the ``kb`` extra.
    """
    chosen = parse_fields(fields)
    for name, items in zip(names, (a, b), strict=True):
        if not items:
            raise ConfigError(f"{name}: no multiple-choice items to compare")
    figures = paper_figures(a, b, paper)
    va, vb = vocabulary(a, chosen), vocabulary(b, chosen)
    unigram = Overlap("unigram", len(va.unigrams.keys() & vb.unigrams.keys()), len(va.unigrams), len(vb.unigrams))
    bigram = Overlap("bigram", len(va.bigrams.keys() & vb.bigrams.keys()), len(va.bigrams), len(vb.bigrams))
    return LexicalResult(
        a=_summary(names[0], a, va, files[0]),
        b=_summary(names[1], b, vb, files[1]),
        fields=chosen,
        unigram=unigram,
        bigram=bigram,
        paper=figures,
        only_a=_only(va.unigrams, vb.unigrams, top),
        only_b=_only(vb.unigrams, va.unigrams, top),
    )


def lexical_sides(
    a: Side, b: Side, *, fields: Sequence[str] | str = DEFAULT_FIELDS, paper: str = "auto", top: int = 20
) -> LexicalResult:
    """:func:`lexical` of two sides read by :func:`senseforge.analyze.inputs.read_side`."""
    return lexical(
        a.items,
        b.items,
        fields=fields,
        names=(side_label(a), side_label(b)),
        files=(a.files, b.files),
        paper=paper,
        top=top,
    )
