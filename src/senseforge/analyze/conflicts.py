"""Answer conflicts between annotators in Human_Gen-shaped data (Putri et al., Appendix F, Figures 5–6).

In Human_Gen every item is written by one annotator (its *creator*, whose answer is the
item's answer) and answered blind by the other members of the pool. Per annotator and per
language this counts:

* the answers they gave, and how many of them differ from the creator's answer
  (``answers[W] != answer_creator``): how often they disagree with other people's items;
* the items they created, how many of those drew at least one answer that differs from
  theirs, and how many such differing answers their items drew in all: how often other
  people disagree with their items.

The raw rows are read (not :class:`~senseforge.data.schema.MCItem`), so the study runs on
Putri et al.'s JSON arrays and on senseforge's human-gen output (``<run>/<lang>/dataset/
*.jsonl``) alike, and a row the strict loaders would refuse is counted instead of fatal.

Who created an item: the row's ``creator`` key when it has one (senseforge's output);
otherwise the one member of the file's pool who is not among the answerers. The pool is
inferred, per file, as the union of the annotator keys of every row's ``answers`` (and of
the ``creator`` values): in Putri et al.'s release each file has six annotators, W1–W6,
and every row is answered by the five who did not write it.

The language of a row: its ``lang`` key, else an ``ind``/``sun`` folder of its path, else
its id (``…_ind_…``, ``…_sun_…``). Languages are counted apart; when there are several,
pooled rows (``lang`` ``all``) add them up per annotator key — the keys are only labels,
so in Putri et al.'s data W1 of the Indonesian team and W1 of the Sundanese one are not the
same person.

Anomalies never stop the study; they are counted per language, with the first few
locations (``file:[index]: field: problem``), and reported:

* ``uncertainty-value``: an ``answers_uncertainty`` value other than ``certain`` /
  ``uncertain`` (Putri et al.'s Sundanese file holds ``clear`` and ``ambiguous`` there);
* ``question-ambiguity-value``, ``option-flag-value``: an ambiguity flag other than
  ``clear`` / ``ambiguous``; ``option-flag-empty``: an empty string among an annotator's
  option flags; ``option-flags-length``: fewer or more flags than options;
* ``missing-key``: a row without one of the annotation keys; ``missing-annotator``: an
  answerer absent from one of the other annotation keys;
* ``no-answers`` / ``no-creator-answer``: a row that cannot be counted (skipped);
  ``empty-answer``: an answer that is blank (not counted); ``answer-not-a-label``: an answer
  or creator answer that is not one of the item's labels (still compared);
* ``creator-unknown``: no ``creator`` key and not exactly one pool member missing from the
  answerers (the item's answers still count; it is credited to nobody);
  ``creator-answered``: the creator is among the answerers (that answer is left out).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from senseforge.analyze.inputs import data_files, split_spec
from senseforge.data._rows import iter_json_records
from senseforge.data.lang import normalize_tag
from senseforge.data.putri import putri_lang_from_path
from senseforge.errors import ConfigError

ANNOTATION_KEYS = ("answers", "answers_uncertainty", "question_ambiguity", "option_ambiguity", "reason")
"""The per-annotator keys of a Human_Gen row."""
UNCERTAINTY_VALUES = ("certain", "uncertain")
AMBIGUITY_VALUES = ("clear", "ambiguous")
POOLED = "all"
"""The ``lang`` of the rows that add up every language."""
EXAMPLES_KEPT = 5
"""Locations kept per anomaly kind (the count is always complete)."""

_ID_LANGS = {"_ind_": "id", "_sun_": "su"}


@dataclass
class AnnotatorConflicts:
    """One annotator's counts in one language (or pooled)."""

    lang: str
    annotator: str
    answers: int = 0
    """Answers they gave (to items others created)."""
    differing: int = 0
    """Of those, answers that differ from the item creator's answer."""
    created: int = 0
    """Items they created (credited to them)."""
    conflicted_created: int = 0
    """Of those, items with at least one answer that differs from theirs."""
    answers_on_created: int = 0
    """Answers others gave to their items."""
    differing_on_created: int = 0
    """Of those, answers that differ from theirs."""

    def add(self, other: AnnotatorConflicts) -> None:
        self.answers += other.answers
        self.differing += other.differing
        self.created += other.created
        self.conflicted_created += other.conflicted_created
        self.answers_on_created += other.answers_on_created
        self.differing_on_created += other.differing_on_created

    @property
    def differing_share(self) -> float | None:
        return self.differing / self.answers if self.answers else None

    @property
    def conflicted_share(self) -> float | None:
        return self.conflicted_created / self.created if self.created else None

    def row(self) -> dict[str, Any]:
        return {
            "lang": self.lang,
            "annotator": self.annotator,
            "answers": self.answers,
            "differing": self.differing,
            "differing_share": _round(self.differing_share),
            "created": self.created,
            "conflicted_created": self.conflicted_created,
            "conflicted_share": _round(self.conflicted_share),
            "answers_on_created": self.answers_on_created,
            "differing_on_created": self.differing_on_created,
        }


@dataclass
class Anomalies:
    """What did not fit the Human_Gen shape in one language: counts per kind, unexpected values, locations."""

    counts: Counter[str] = field(default_factory=Counter)
    values: dict[str, Counter[str]] = field(default_factory=dict)
    """Per kind, the unexpected values seen (``uncertainty-value``: ``{"clear": 668, …}``)."""
    examples: dict[str, list[str]] = field(default_factory=dict)

    def note(self, kind: str, where: str, value: Any = None) -> None:
        self.counts[kind] += 1
        if value is not None:
            self.values.setdefault(kind, Counter())[str(value)] += 1
        kept = self.examples.setdefault(kind, [])
        if len(kept) < EXAMPLES_KEPT:
            kept.append(where if value is None else f"{where}: {value!r}")

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def to_json(self) -> dict[str, Any]:
        return {
            "total": self.total,
            "counts": dict(sorted(self.counts.items())),
            "values": {kind: dict(found.most_common()) for kind, found in sorted(self.values.items())},
            "examples": {kind: self.examples[kind] for kind in sorted(self.examples)},
        }


@dataclass
class LangSummary:
    """What was read for one language."""

    lang: str
    files: list[str] = field(default_factory=list)
    pools: dict[str, list[str]] = field(default_factory=dict)
    """Per file, the inferred pool of annotators."""
    rows: int = 0
    counted: int = 0
    """Rows whose answers were counted."""
    items_with_conflict: int = 0
    """Counted rows with at least one answer that differs from the creator's."""
    anomalies: Anomalies = field(default_factory=Anomalies)

    def to_json(self) -> dict[str, Any]:
        return {
            "lang": self.lang,
            "files": self.files,
            "pools": self.pools,
            "rows": self.rows,
            "counted": self.counted,
            "items_with_conflict": self.items_with_conflict,
            "anomalies": self.anomalies.to_json(),
        }


@dataclass
class ConflictsResult:
    """The counts per (language, annotator), pooled rows when there are several languages, and what was read."""

    spec: str
    annotators: list[AnnotatorConflicts]
    langs: list[LangSummary]

    def rows(self) -> list[dict[str, Any]]:
        """One row per (language, annotator), the pooled rows last."""
        return [a.row() for a in self.annotators]

    def of(self, lang: str, annotator: str) -> AnnotatorConflicts | None:
        for entry in self.annotators:
            if entry.lang == lang and entry.annotator == annotator:
                return entry
        return None

    def to_json(self) -> dict[str, Any]:
        return {
            "analysis": "conflicts",
            "data": self.spec,
            "definition": {
                "differing": "answers[W] != answer_creator, over the answers W gave",
                "conflicted_created": "items W created with at least one answer != W's answer",
                "creator": "the row's 'creator' key, else the one pool member missing from 'answers'",
                "pool": "per file, the union of the annotator keys of 'answers' (and 'creator' values)",
            },
            "langs": [summary.to_json() for summary in self.langs],
            "annotators": self.rows(),
        }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


def _row_lang(row: Mapping[str, Any], path_lang: str | None) -> str:
    value = row.get("lang")
    if isinstance(value, str) and value.strip():
        try:
            return normalize_tag(value)
        except ValueError:
            return value.strip()
    if path_lang is not None:
        return path_lang
    item_id = row.get("id")
    if isinstance(item_id, str):
        for marker, lang in _ID_LANGS.items():
            if marker in item_id:
                return lang
    return "und"


def _labels(row: Mapping[str, Any]) -> list[str] | None:
    choices = row.get("choices")
    if isinstance(choices, Mapping) and isinstance(choices.get("label"), list):
        return [str(label) for label in choices["label"]]
    if isinstance(choices, list):
        labels = [c.get("label") for c in choices if isinstance(c, Mapping)]
        return [str(label) for label in labels if label is not None]
    return None


def infer_pool(rows: Iterable[Mapping[str, Any]]) -> list[str]:
    """The annotators of a file: every key of any row's ``answers``, and every ``creator`` (sorted)."""
    pool: set[str] = set()
    for row in rows:
        answers = row.get("answers")
        if isinstance(answers, Mapping):
            pool.update(str(key) for key in answers)
        creator = row.get("creator")
        if isinstance(creator, str) and creator:
            pool.add(creator)
    return sorted(pool)


def _check_flags(
    row: Mapping[str, Any], answerers: Sequence[str], n_labels: int | None, where: str, a: Anomalies
) -> None:
    for key in ANNOTATION_KEYS[1:]:
        value = row.get(key)
        if not isinstance(value, Mapping):
            a.note("missing-key", f"{where}: {key}")
            continue
        for who in answerers:
            if who not in value:
                a.note("missing-annotator", f"{where}: {key}.{who}")
    uncertainty = row.get("answers_uncertainty")
    if isinstance(uncertainty, Mapping):
        for who, value in uncertainty.items():
            if value not in UNCERTAINTY_VALUES:
                a.note("uncertainty-value", f"{where}: answers_uncertainty.{who}", value)
    question = row.get("question_ambiguity")
    if isinstance(question, Mapping):
        for who, value in question.items():
            if value not in AMBIGUITY_VALUES:
                a.note("question-ambiguity-value", f"{where}: question_ambiguity.{who}", value)
    options = row.get("option_ambiguity")
    if isinstance(options, Mapping):
        for who, flags in options.items():
            if not isinstance(flags, list):
                a.note("option-flag-value", f"{where}: option_ambiguity.{who}", flags)
                continue
            if n_labels is not None and len(flags) != n_labels:
                a.note("option-flags-length", f"{where}: option_ambiguity.{who}", len(flags))
            for index, flag in enumerate(flags):
                if flag == "":
                    a.note("option-flag-empty", f"{where}: option_ambiguity.{who}[{index}]")
                elif flag not in AMBIGUITY_VALUES:
                    a.note("option-flag-value", f"{where}: option_ambiguity.{who}[{index}]", flag)


def _count_file(
    path: Path,
    records: list[tuple[str, dict[str, Any]]],
    tallies: dict[tuple[str, str], AnnotatorConflicts],
    summaries: dict[str, LangSummary],
) -> None:
    path_lang = putri_lang_from_path(path)
    pool = infer_pool(row for _, row in records)
    seen_langs: list[str] = []

    def entry(lang: str, who: str) -> AnnotatorConflicts:
        key = (lang, who)
        if key not in tallies:
            tallies[key] = AnnotatorConflicts(lang, who)
        return tallies[key]

    for index, row in records:
        lang = _row_lang(row, path_lang)
        summary = summaries.setdefault(lang, LangSummary(lang))
        if lang not in seen_langs:
            seen_langs.append(lang)
            summary.files.append(str(path))
            summary.pools[str(path)] = pool
        summary.rows += 1
        a = summary.anomalies
        where = f"{path}:{index}"
        answers = row.get("answers")
        gold = row.get("answer_creator")
        if not isinstance(answers, Mapping) or not answers:
            a.note("no-answers", where)
            continue
        if not isinstance(gold, str) or not gold.strip():
            a.note("no-creator-answer", where)
            continue
        labels = _labels(row)
        if labels is not None and gold not in labels:
            a.note("answer-not-a-label", f"{where}: answer_creator", gold)
        answerers = [str(who) for who in answers]
        _check_flags(row, answerers, None if labels is None else len(labels), where, a)
        given = row.get("creator")
        creator: str | None
        if isinstance(given, str) and given:
            creator = given
        else:
            missing = [who for who in pool if who not in answers]
            creator = missing[0] if len(missing) == 1 else None
        if creator is None:
            a.note("creator-unknown", f"{where}: answerers {answerers} of pool {pool}")
        summary.counted += 1
        received = differing = 0
        for who, choice in answers.items():
            who = str(who)
            if who == creator:
                a.note("creator-answered", f"{where}: answers.{who}")
                continue
            if not isinstance(choice, str) or not choice.strip():
                a.note("empty-answer", f"{where}: answers.{who}", choice)
                continue
            if labels is not None and choice not in labels:
                a.note("answer-not-a-label", f"{where}: answers.{who}", choice)
            differs = choice != gold
            mine = entry(lang, who)
            mine.answers += 1
            mine.differing += differs
            received += 1
            differing += differs
        if differing:
            summary.items_with_conflict += 1
        if creator is not None:
            theirs = entry(lang, creator)
            theirs.created += 1
            theirs.conflicted_created += differing > 0
            theirs.answers_on_created += received
            theirs.differing_on_created += differing


def _annotator_key(name: str) -> tuple[int, str]:
    digits = "".join(ch for ch in name if ch.isdigit())
    return (int(digits) if digits else 0, name)


def conflicts(files: Sequence[Path], *, spec: str | None = None) -> ConflictsResult:
    """The conflict counts of the rows of ``files`` (each a JSON array or JSON Lines file).

    Raises:
        DataValidationError: a file that is not JSON, or a row that is not an object (located).
        ConfigError: no row of any file has annotators' answers.
    """
    tallies: dict[tuple[str, str], AnnotatorConflicts] = {}
    summaries: dict[str, LangSummary] = {}
    for path in files:
        _count_file(path, list(iter_json_records(path)), tallies, summaries)
    shown = spec if spec is not None else ",".join(str(p) for p in files)
    if not any(s.counted for s in summaries.values()):
        raise ConfigError(
            f"{shown}: no row has annotators' answers; conflicts reads Human_Gen-shaped rows "
            "(answers, answer_creator), e.g. human_gen/ind/filtered_test.json or a human-gen run"
        )
    langs = sorted(summaries)
    ordered = sorted(tallies.values(), key=lambda t: (langs.index(t.lang), _annotator_key(t.annotator)))
    if len(langs) > 1:
        pooled: dict[str, AnnotatorConflicts] = {}
        for entry in ordered:
            pooled.setdefault(entry.annotator, AnnotatorConflicts(POOLED, entry.annotator)).add(entry)
        ordered += sorted(pooled.values(), key=lambda t: _annotator_key(t.annotator))
    return ConflictsResult(shown, ordered, [summaries[lang] for lang in langs])


def read_conflicts(spec: str) -> ConflictsResult:
    """:func:`conflicts` of every data file ``spec`` names (a file, a folder, a run directory, a comma list).

    Raises:
        ConfigError: an empty spec, a missing path, a folder without data, or no annotated row.
        DataValidationError: a file that is not JSON (located).
    """
    parts = split_spec(spec)
    if not parts:
        raise ConfigError("give a file, a folder, or a comma-separated list of them")
    files: list[Path] = []
    for part in parts:
        files += data_files(Path(part).expanduser())
    return conflicts(files, spec=spec)
