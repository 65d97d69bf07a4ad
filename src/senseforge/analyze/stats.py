"""mCSQA's statistics of a built dataset (§3.4, Tables 4–5): sizes, difficulty, refinement, lengths, answers.

Per language and split: items, Easy and Hard (Table 5's columns, the Easy/Hard ratio), the
share of questions the refinement step changed (Table 4: ``metadata.refined``), the
question and choice lengths in characters (NFC; characters, because Japanese and Chinese
write no spaces: mean, median, 10th and 90th percentiles), and how the right answers sit
among the option positions, with a chi-square test against an even spread (a generator
that favours one position gives a model a free hint). The p-value needs SciPy (the
``report`` extra); without it the statistic alone is given.

A run directory is read from ``items/<split>.jsonl`` (the full items, with difficulty and
refinement); any other input through :func:`senseforge.analyze.inputs.read_side`, its
split taken from the file name.
"""

from __future__ import annotations

import statistics
import unicodedata
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from senseforge.analyze.inputs import data_files, split_spec
from senseforge.data.loaders import load_dataset
from senseforge.data.schema import MCItem
from senseforge.errors import ConfigError

SPLITS = ("train", "validation", "test")


def _split_of(path: Path) -> str:
    stem = path.stem.lower()
    for name, aliases in (("train", ("train",)), ("validation", ("validation", "dev", "val")), ("test", ("test",))):
        if any(alias in stem for alias in aliases):
            return name
    return "all"


def read_split_items(spec: str) -> list[tuple[str, MCItem]]:
    """(split, item) for every item ``spec`` names (a run directory's ``items/`` when it has one).

    Raises:
        ConfigError: nothing to read.
    """
    out: list[tuple[str, MCItem]] = []
    for part in split_spec(spec):
        path = Path(part).expanduser()
        full = sorted((path / "items").glob("*.jsonl")) if path.is_dir() else []
        files = full or data_files(path)
        for file in files:
            split = _split_of(file)
            out += [(split, item) for item in load_dataset(file).items]
    if not out:
        raise ConfigError(f"{spec}: no items")
    return out


@dataclass(frozen=True)
class Lengths:
    mean: float
    median: float
    p10: float
    p90: float

    @classmethod
    def of(cls, values: Sequence[int]) -> Lengths | None:
        if not values:
            return None
        ordered = sorted(values)

        def at(q: float) -> float:
            return float(ordered[min(len(ordered) - 1, int(q * (len(ordered) - 1) + 0.5))])

        return cls(statistics.fmean(ordered), float(statistics.median(ordered)), at(0.1), at(0.9))


@dataclass(frozen=True)
class Group:
    """The statistics of one (language, split)."""

    lang: str
    split: str
    items: int
    easy: int
    hard: int
    refined: int | None
    """Questions the refinement step changed (``None``: the items do not say)."""
    question_chars: Lengths | None
    choice_chars: Lengths | None
    answer_positions: dict[str, int]
    chi_square: float | None
    """Against an even spread of answers over the positions (``None``: fewer than two positions)."""
    p_value: float | None

    @property
    def easy_hard_ratio(self) -> float | None:
        return self.easy / self.hard if self.hard else None

    def row(self) -> dict[str, Any]:
        return {
            "lang": self.lang,
            "split": self.split,
            "items": self.items,
            "easy": self.easy,
            "hard": self.hard,
            "easy_hard_ratio": None if self.easy_hard_ratio is None else round(self.easy_hard_ratio, 4),
            "refined": self.refined,
            "refined_share": None if self.refined is None or not self.items else round(self.refined / self.items, 4),
            "question_chars_mean": None if self.question_chars is None else round(self.question_chars.mean, 2),
            "question_chars_median": None if self.question_chars is None else self.question_chars.median,
            "choice_chars_mean": None if self.choice_chars is None else round(self.choice_chars.mean, 2),
            "answer_positions": self.answer_positions,
            "chi_square": None if self.chi_square is None else round(self.chi_square, 4),
            "p_value": None if self.p_value is None else round(self.p_value, 6),
        }


@dataclass(frozen=True)
class Stats:
    groups: list[Group]

    def rows(self) -> list[dict[str, Any]]:
        return [g.row() for g in self.groups]

    def to_json(self) -> dict[str, Any]:
        return {
            "study": "stats",
            "groups": [
                {
                    **g.row(),
                    "question_chars": None if g.question_chars is None else vars(g.question_chars),
                    "choice_chars": None if g.choice_chars is None else vars(g.choice_chars),
                }
                for g in self.groups
            ],
        }


def _chars(text: str) -> int:
    return len(unicodedata.normalize("NFC", text))


def _chi_square(counts: Sequence[int]) -> tuple[float | None, float | None]:
    total = sum(counts)
    if len(counts) < 2 or not total:
        return None, None
    expected = total / len(counts)
    stat = sum((c - expected) ** 2 / expected for c in counts)
    try:
        from scipy.stats import chi2
    except ImportError:
        return stat, None
    return stat, float(chi2.sf(stat, len(counts) - 1))


def dataset_stats(items: Sequence[tuple[str, MCItem]]) -> Stats:
    """The statistics per (language, split), splits in train/validation/test order, then ``all``."""
    groups: dict[tuple[str, str], list[MCItem]] = {}
    for split, item in items:
        groups.setdefault((item.lang, split), []).append(item)
    order = {name: i for i, name in enumerate((*SPLITS, "all"))}
    out = []
    for (lang, split), members in sorted(groups.items(), key=lambda kv: (kv[0][0], order.get(kv[0][1], 9))):
        labels = sorted({c.label for item in members for c in item.choices})
        positions = Counter(item.answer for item in members if item.answer is not None)
        counts = {label: positions.get(label, 0) for label in labels}
        flags = [item.metadata.get("refined") for item in members]
        refined = sum(1 for f in flags if f is True) if any(isinstance(f, bool) for f in flags) else None
        stat, p = _chi_square(list(counts.values()))
        out.append(
            Group(
                lang=lang,
                split=split,
                items=len(members),
                easy=sum(1 for item in members if item.difficulty == "easy"),
                hard=sum(1 for item in members if item.difficulty == "hard"),
                refined=refined,
                question_chars=Lengths.of([_chars(item.question) for item in members]),
                choice_chars=Lengths.of([_chars(c.text) for item in members for c in item.choices]),
                answer_positions=counts,
                chi_square=stat,
                p_value=p,
            )
        )
    return Stats(out)
