"""Items written in another language than the one they declare (Putri et al. §5.1.2: Indonesian in Sundanese data).

Each text of an item — its question, and each of its choices (pooled as the field
``choices``) — goes through the offline identifier the culture recipes flag their items
with (:func:`senseforge.data.langid.detect`, Google's CLD3, which knows Sundanese). A text
is *judged* when it is at least ``min_chars`` characters long (stripped) and CLD3 names a
language with enough confidence; it is *other* when that language is not the item's
declared one (primary subtags compared: ``su-ID`` is ``su``).

Short texts are not judged: CLD3 needs context, and the choices of a commonsense item are
often one or two words. On Putri et al.'s released Human_Gen data, CLD3 names another
language than the declared one for about 70% of the texts of 5–9 characters, still 40–60%
at 15–19, and only from about 35 characters does the rate level off (≈4% for Indonesian,
≈10–12% for Sundanese): :data:`DEFAULT_MIN_CHARS` is 35. Choices below it are counted as
``too_short``; ``--min-chars 0`` judges everything.

CLD3 splits standard Indonesian between ``id`` and ``ms`` (Malay): on the released
Indonesian questions it answers ``ms`` for about a third. By default ``ms`` therefore
counts as Indonesian (:data:`SAME_LANGUAGE`); ``strict=True`` counts it as another language.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from senseforge.data.lang import primary_language
from senseforge.data.langid import detect
from senseforge.data.schema import MCItem
from senseforge.errors import ConfigError

FIELDS: tuple[str, ...] = ("question", "choices")
"""The fields judged: the question, and every choice pooled."""
DEFAULT_MIN_CHARS = 35
"""Texts shorter than this (stripped) are not judged (see the module docstring)."""
SAME_LANGUAGE: Mapping[str, frozenset[str]] = {"id": frozenset({"ms"})}
"""Per declared language, the other tags CLD3 gives it that still count as it."""

Detector = Callable[[str], str | None]


@dataclass(frozen=True)
class Flagged:
    """One text identified as another language than its item declares."""

    id: str
    field: str
    declared: str
    detected: str
    text: str
    label: str | None = None
    """The choice's label (``None`` for the question)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "field": self.field,
            "label": self.label,
            "declared": self.declared,
            "detected": self.detected,
            "text": self.text,
        }


@dataclass
class FieldTally:
    """One (declared language, field): texts seen, judged, and identified as another language."""

    lang: str
    field: str
    texts: int = 0
    too_short: int = 0
    undetermined: int = 0
    """Long enough, but CLD3 could not tell."""
    other: int = 0
    items: int = 0
    items_judged: int = 0
    """Items with at least one judged text in this field."""
    items_other: int = 0
    """Items with at least one text of this field in another language."""
    detected: Counter[str] = dataclasses.field(default_factory=Counter)
    """The languages CLD3 named for the judged texts."""

    @property
    def judged(self) -> int:
        return self.texts - self.too_short - self.undetermined

    @property
    def share(self) -> float | None:
        """Of the judged texts, the share in another language."""
        return self.other / self.judged if self.judged else None

    @property
    def items_share(self) -> float | None:
        return self.items_other / self.items_judged if self.items_judged else None

    def row(self) -> dict[str, Any]:
        return {
            "lang": self.lang,
            "field": self.field,
            "texts": self.texts,
            "too_short": self.too_short,
            "undetermined": self.undetermined,
            "judged": self.judged,
            "other": self.other,
            "share": None if self.share is None else round(self.share, 6),
            "items": self.items,
            "items_judged": self.items_judged,
            "items_other": self.items_other,
            "items_share": None if self.items_share is None else round(self.items_share, 6),
        }


@dataclass
class LanguageResult:
    """The tallies per (language, field) and every flagged text."""

    spec: str
    min_chars: int
    same: Mapping[str, frozenset[str]]
    tallies: list[FieldTally]
    flagged: list[Flagged]

    def rows(self) -> list[dict[str, Any]]:
        return [tally.row() for tally in self.tallies]

    def accepted(self, lang: str) -> frozenset[str]:
        """The detected tags that count as ``lang``."""
        return _accepted(lang, self.same)

    def others(self, tally: FieldTally) -> list[tuple[str, int]]:
        """The other languages CLD3 named in one tally, most frequent first."""
        accepted = self.accepted(tally.lang)
        return [(tag, n) for tag, n in tally.detected.most_common() if tag not in accepted]

    def tally(self, lang: str, field: str) -> FieldTally | None:
        for entry in self.tallies:
            if (entry.lang, entry.field) == (lang, field):
                return entry
        return None

    def to_json(self) -> dict[str, Any]:
        return {
            "analysis": "language",
            "data": self.spec,
            "identifier": "CLD3 (senseforge.data.langid.detect)",
            "min_chars": self.min_chars,
            "same_language": {lang: sorted(tags) for lang, tags in self.same.items()},
            "tallies": [{**t.row(), "detected": dict(t.detected.most_common())} for t in self.tallies],
            "flagged": [f.to_json() for f in self.flagged],
        }


def parse_fields(text: str) -> tuple[str, ...]:
    """``question,choices`` as a tuple of fields.

    Raises:
        ConfigError: an unknown or no field.
    """
    fields = tuple(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))
    unknown = [f for f in fields if f not in FIELDS]
    if unknown or not fields:
        raise ConfigError(f"--fields {text!r}: a comma list of {', '.join(FIELDS)}")
    return fields


def _accepted(lang: str, same: Mapping[str, frozenset[str]]) -> frozenset[str]:
    declared = primary_language(lang)
    return frozenset({declared, *same.get(declared, frozenset())})


def _texts(item: MCItem, field: str) -> list[tuple[str | None, str]]:
    if field == "question":
        return [(None, item.question)]
    return [(choice.label, choice.text) for choice in item.choices]


def wrong_language(
    items: Iterable[MCItem],
    *,
    fields: Sequence[str] = FIELDS,
    min_chars: int = DEFAULT_MIN_CHARS,
    strict: bool = False,
    detector: Detector = detect,
    spec: str = "",
) -> LanguageResult:
    """The share of texts (and items) identified as another language than declared, per language and field.

    Raises:
        ConfigError: an unknown field, a negative ``min_chars``, or no item.
        MissingDependencyError: ``cld3-py`` is not installed.
    """
    unknown = [f for f in fields if f not in FIELDS]
    if unknown:
        raise ConfigError(f"fields {unknown}: one of {', '.join(FIELDS)}")
    if min_chars < 0:
        raise ConfigError(f"--min-chars {min_chars}: must be 0 or more")
    same: Mapping[str, frozenset[str]] = {} if strict else SAME_LANGUAGE
    tallies: dict[tuple[str, str], FieldTally] = {}
    flagged: list[Flagged] = []
    for item in items:
        accepted = _accepted(item.lang, same)
        for name in fields:
            tally = tallies.setdefault((item.lang, name), FieldTally(item.lang, name))
            tally.items += 1
            judged = other = False
            for label, text in _texts(item, name):
                tally.texts += 1
                if len(text.strip()) < min_chars:
                    tally.too_short += 1
                    continue
                found = detector(text)
                if found is None:
                    tally.undetermined += 1
                    continue
                judged = True
                tally.detected[found] += 1
                if found not in accepted:
                    other = True
                    tally.other += 1
                    flagged.append(Flagged(item.id, name, item.lang, found, text, label))
            tally.items_judged += judged
            tally.items_other += other
    if not tallies:
        raise ConfigError(f"{spec or 'the data'}: no multiple-choice items to judge")
    return LanguageResult(spec, min_chars, same, list(tallies.values()), flagged)
