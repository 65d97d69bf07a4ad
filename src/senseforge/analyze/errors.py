"""The error taxonomy of generated items and the concept-adaptation check (Putri et al., Tables 2–6, 8, 9).

People give each reviewed item one primary error label for its question and one for its
options (the ``label-errors`` task; the label sets are
:data:`~senseforge.data.schema.QuestionError` and :data:`~senseforge.data.schema.OptionsError`),
and check each adapted item against its source (``adapt-check``: ``correct-major``,
``correct-minor`` or ``wrong``, and the error of a wrong one,
:data:`~senseforge.data.schema.AdaptError`). This study turns those labels into the share of
each label per dataset, language and *target* — one column per (dataset, lang, target),
each summing to 100%:

``question`` / ``options``
    The primary error of the questions / of the options (Tables 3–6; ``none`` is the share
    of clean ones, Tables 3 and 5).
``adapt``
    The verdicts of the adaptation check (Tables 2 and 8); a column read from a counts table
    may give ``correct`` when major and minor changes were not told apart (Table 8).
``adapt-error``
    The error types of the wrong adaptations (Table 9), over the wrong ones only.

Where the labels come from:

* run stores (``--run``): the ``label-errors`` and ``adapt-check`` judgements of each run.
  People's judgements by default (``source="lm"`` or ``"any"`` for LM judges'); gold tasks
  and the judgements of annotators below the run's accuracy bar are left out, as every
  other decision of a run does. When several people labelled an item, the item's label is
  the most frequent one, per target, and a tie goes to the label of the annotator who
  judged first; an adjudication (an admin's ruling) decides the item outright. A wrong
  item's error is the most frequent error among the judgements that said wrong (the same
  tie rule). The dataset is the run directory's name (its path when two runs share a
  name); an item's language is the one of the item queued for the task, else of the run's
  dataset files, else ``und``.
* a CSV of labels, one row per item (several rows for one item are voted as above, the
  first row winning ties) — columns ``dataset, lang, item_id, question_error,
  options_error``; a blank cell means the target was not labelled. Optional columns
  ``adapt_verdict`` and ``adapt_error`` give the adaptation check.
* a CSV of counts — columns ``dataset, lang, target, label, count``: the counts behind a
  published table, to rebuild its percentages (``tests/fixtures/analyze/
  putri_error_counts.csv`` holds Putri et al.'s).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

import sqlalchemy as sa

from senseforge.analyze.inputs import data_files
from senseforge.data._rows import iter_csv_rows
from senseforge.data.loaders import load_dataset
from senseforge.data.schema import (
    AdaptCheckJudgement,
    AdaptError,
    AdaptVerdict,
    LabelErrorsJudgement,
    OptionsError,
    QuestionError,
)
from senseforge.errors import ConfigError, DataValidationError, SenseforgeError
from senseforge.pipelines.quality import counted, excluded_annotators, gold_item_ids
from senseforge.pipelines.rundir import store_url_of
from senseforge.pipelines.runstore import RunStore, StoredJudgement
from senseforge.pipelines.tables import tasks

QUESTION_LABELS: tuple[str, ...] = get_args(QuestionError)
OPTION_LABELS: tuple[str, ...] = get_args(OptionsError)
ADAPT_LABELS: tuple[str, ...] = get_args(AdaptVerdict)
ADAPT_ERROR_LABELS: tuple[str, ...] = get_args(AdaptError)
CORRECT = "correct"
"""An ``adapt`` label of counts tables only: right, major and minor changes not told apart."""

TARGETS: dict[str, tuple[str, ...]] = {
    "question": QUESTION_LABELS,
    "options": OPTION_LABELS,
    "adapt": ADAPT_LABELS,
    "adapt-error": ADAPT_ERROR_LABELS,
}
"""Each target and its labels, in the order the tables list them."""
TARGET_TITLES = {
    "question": "questions: primary error",
    "options": "options: primary error",
    "adapt": "concept adaptation",
    "adapt-error": "errors of wrong adaptations",
}
LABEL_COLUMNS = ("dataset", "lang", "item_id", "question_error", "options_error")
COUNT_COLUMNS = ("dataset", "lang", "target", "label", "count")
UNKNOWN_LANG = "und"

Source = Literal["human", "lm", "any"]
SOURCES: tuple[str, ...] = get_args(Source)


@dataclass
class Column:
    """The labels of one (dataset, lang, target): counts per label, in the target's order."""

    dataset: str
    lang: str
    target: str
    counts: dict[str, int]

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def share(self, label: str) -> float | None:
        total = self.total
        return self.counts.get(label, 0) / total if total else None

    @property
    def correct_share(self) -> float | None:
        """``adapt`` only: right adaptations, with a major or a minor change."""
        if self.target != "adapt" or not self.total:
            return None
        right = sum(n for label, n in self.counts.items() if label != "wrong")
        return right / self.total

    def to_json(self) -> dict[str, Any]:
        shares = {label: self.share(label) for label in self.counts}
        out: dict[str, Any] = {
            "dataset": self.dataset,
            "lang": self.lang,
            "target": self.target,
            "total": self.total,
            "counts": self.counts,
            "shares": shares,
        }
        if self.target == "adapt":
            out["correct_share"] = self.correct_share
        return out


@dataclass
class ErrorsResult:
    """Every column, and what each input contributed."""

    columns: list[Column]
    inputs: list[dict[str, Any]] = field(default_factory=list)

    def rows(self) -> list[dict[str, Any]]:
        """One row per (dataset, lang, target, label): the count, the column's total and the share."""
        out = []
        for column in self.columns:
            for label, n in column.counts.items():
                share = column.share(label)
                out.append(
                    {
                        "dataset": column.dataset,
                        "lang": column.lang,
                        "target": column.target,
                        "label": label,
                        "count": n,
                        "total": column.total,
                        "share": None if share is None else round(share, 6),
                        "percent": "n/a" if share is None else f"{100 * share:.2f}%",
                    }
                )
        return out

    def column(self, dataset: str, lang: str, target: str) -> Column | None:
        for column in self.columns:
            if (column.dataset, column.lang, column.target) == (dataset, lang, target):
                return column
        return None

    def percents(self, dataset: str, lang: str, target: str) -> dict[str, str]:
        """``{label: "NN.NN"}`` of one column (what the paper's tables print)."""
        column = self.column(dataset, lang, target)
        if column is None:
            return {}
        return {label: f"{100 * (column.share(label) or 0.0):.2f}" for label in column.counts}

    def to_json(self) -> dict[str, Any]:
        return {
            "analysis": "errors",
            "inputs": self.inputs,
            "targets": {target: list(labels) for target, labels in TARGETS.items()},
            "columns": [column.to_json() for column in self.columns],
        }


Labelled = tuple[str, str, str, str]
"""(dataset, lang, target, label) of one item."""


def majority(labels: Sequence[str]) -> str:
    """The most frequent label; a tie goes to the tied label that comes first.

    >>> majority(["fluency", "none", "none"])
    'none'
    >>> majority(["fluency", "none"])
    'fluency'
    """
    if not labels:
        raise ValueError("no labels to vote on")
    counts = Counter(labels)
    best = max(counts.values())
    return next(label for label in labels if counts[label] == best)


def _label_set(target: str, labels: Iterable[str]) -> tuple[str, ...]:
    if target == "adapt" and CORRECT in labels:
        return (CORRECT, "wrong")
    return TARGETS[target]


def tally(labelled: Iterable[Labelled]) -> list[Column]:
    """Columns from one label per item, in first-seen order (every label of the target listed, zeros too)."""
    counts: dict[tuple[str, str, str], Counter[str]] = {}
    for dataset, lang, target, label in labelled:
        counts.setdefault((dataset, lang, target), Counter())[label] += 1
    return _columns(counts)


def _columns(counts: Mapping[tuple[str, str, str], Counter[str]]) -> list[Column]:
    order = list(TARGETS)
    keys = sorted(counts, key=lambda key: order.index(key[2]))  # stable: datasets and languages as first seen
    out = []
    for dataset, lang, target in keys:
        found = counts[(dataset, lang, target)]
        labels = _label_set(target, found)
        out.append(Column(dataset, lang, target, {label: found.get(label, 0) for label in labels}))
    return out


# --- CSV inputs ---------------------------------------------------------------------------


def _check_label(path: Path, line: int, column: str, target: str, label: str, *, counts: bool = False) -> None:
    allowed = TARGETS[target] + ((CORRECT,) if counts and target == "adapt" else ())
    if label not in allowed:
        raise DataValidationError(f"{path}:{line}: {column}: {label!r} is not one of {', '.join(allowed)}")


def _header(path: Path) -> list[str]:
    try:
        with path.open("r", encoding="utf-8-sig", newline="") as handle:
            first = handle.readline()
    except UnicodeDecodeError as exc:
        raise DataValidationError(f"{path}: not UTF-8 ({exc.reason})") from exc
    except OSError as exc:
        raise DataValidationError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    return [cell.strip() for cell in first.strip().split(",")]


def read_counts_csv(path: Path) -> list[Column]:
    """Columns from a counts table (``dataset, lang, target, label, count``; a repeated label adds up).

    Raises:
        DataValidationError: a missing column, an unknown target or label, a count that is
            not a whole number ≥ 0, or ``correct`` beside ``correct-major``/``-minor`` (located).
    """
    counts: dict[tuple[str, str, str], Counter[str]] = {}
    lines: dict[tuple[str, str, str], int] = {}
    for line, row in iter_csv_rows(path, COUNT_COLUMNS):
        dataset, lang, target, label = (row[name].strip() for name in COUNT_COLUMNS[:4])
        if not dataset or not lang:
            raise DataValidationError(f"{path}:{line}: dataset and lang: required")
        if target not in TARGETS:
            raise DataValidationError(f"{path}:{line}: target: {target!r} is not one of {', '.join(TARGETS)}")
        _check_label(path, line, "label", target, label, counts=True)
        try:
            n = int(row["count"].strip())
        except ValueError:
            n = -1
        if n < 0:
            raise DataValidationError(f"{path}:{line}: count: {row['count']!r} is not a whole number ≥ 0")
        key = (dataset, lang, target)
        found = counts.setdefault(key, Counter())
        found[label] += n
        lines.setdefault(key, line)
        if CORRECT in found and ({"correct-major", "correct-minor"} & set(found)):
            raise DataValidationError(
                f"{path}:{line}: label: a column gives either 'correct' or 'correct-major'/'correct-minor', not both"
            )
    if not counts:
        raise DataValidationError(f"{path}: no rows")
    return _columns(counts)


def read_labels_csv(path: Path) -> list[Column]:
    """Columns from a CSV of item labels (see the module docstring); items voted when repeated.

    Raises:
        DataValidationError: a missing column, an unknown label, an item without any label (located).
    """
    votes: dict[tuple[str, str, str, str], list[str]] = {}
    for line, row in iter_csv_rows(path, LABEL_COLUMNS):
        dataset, lang, item_id = (row[name].strip() for name in LABEL_COLUMNS[:3])
        if not dataset or not lang or not item_id:
            raise DataValidationError(f"{path}:{line}: dataset, lang and item_id: required")
        given = 0
        for column, target in (
            ("question_error", "question"),
            ("options_error", "options"),
            ("adapt_verdict", "adapt"),
            ("adapt_error", "adapt-error"),
        ):
            label = (row.get(column) or "").strip()
            if not label:
                continue
            _check_label(path, line, column, target, label)
            votes.setdefault((dataset, lang, item_id, target), []).append(label)
            given += 1
        if not given:
            raise DataValidationError(f"{path}:{line}: no label: give question_error and/or options_error")
    if not votes:
        raise DataValidationError(f"{path}: no rows")
    return tally((dataset, lang, target, majority(labels)) for (dataset, lang, _, target), labels in votes.items())


def read_csv(path: Path) -> tuple[str, list[Column]]:
    """A labels CSV or a counts CSV, told apart by the header: ``("labels" | "counts", columns)``.

    Raises:
        ConfigError: no such file.
        DataValidationError: a header that is neither, or a bad row (located).
    """
    if not path.is_file():
        raise ConfigError(f"--labels {path}: no such file")
    header = _header(path)
    if "item_id" in header:
        return "labels", read_labels_csv(path)
    if "count" in header or "target" in header:
        return "counts", read_counts_csv(path)
    raise DataValidationError(
        f"{path}:1: header: expected item labels ({', '.join(LABEL_COLUMNS)}) or counts "
        f"({', '.join(COUNT_COLUMNS)}), found {header}"
    )


# --- run stores ---------------------------------------------------------------------------


def _queued_langs(store: RunStore, task: str) -> dict[str, str]:
    query = sa.select(tasks.c.item_id, tasks.c.item).where(tasks.c.type == task)
    out: dict[str, str] = {}
    with store.engine.connect() as conn:
        for item_id, body in conn.execute(query):
            try:
                lang = json.loads(body).get("lang")
            except (ValueError, AttributeError):
                continue
            if isinstance(lang, str) and lang:
                out[str(item_id)] = lang
    return out


def _dataset_langs(run_dir: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    try:
        for path in data_files(run_dir):
            for item in load_dataset(path).items:
                out.setdefault(item.id, item.lang)
    except SenseforgeError:
        return out
    return out


def _wanted(stored: Sequence[StoredJudgement], source: Source) -> list[StoredJudgement]:
    return [s for s in stored if source == "any" or s.source == source]


def _decide_label_errors(stored: Sequence[StoredJudgement]) -> tuple[str, str]:
    bodies = [s.judgement for s in stored if isinstance(s.judgement, LabelErrorsJudgement)]
    ruled = [b for b in bodies if b.adjudication]
    if ruled:
        return ruled[-1].question_error, ruled[-1].options_error
    return majority([b.question_error for b in bodies]), majority([b.options_error for b in bodies])


def _decide_adapt(stored: Sequence[StoredJudgement]) -> tuple[str, str | None]:
    bodies = [s.judgement for s in stored if isinstance(s.judgement, AdaptCheckJudgement)]
    ruled = [b for b in bodies if b.adjudication]
    if ruled:
        return ruled[-1].verdict, ruled[-1].error
    verdict = majority([b.verdict for b in bodies])
    if verdict != "wrong":
        return verdict, None
    return verdict, majority([b.error for b in bodies if b.error is not None])


def labels_from_run(
    run_dir: Path, *, store_url: str | None = None, source: Source = "human", dataset: str | None = None
) -> tuple[list[Labelled], dict[str, Any]]:
    """One label per item and target from a run's ``label-errors`` and ``adapt-check`` judgements.

    ``dataset`` names the run's columns (default: the run directory's name).

    Raises:
        ConfigError: no such run directory, no run store in it, or a store elsewhere without ``store_url``.
    """
    url = store_url_of(run_dir, store_url)
    if store_url is None and not (run_dir / "run.db").is_file():
        raise ConfigError(f"--run {run_dir}: no run store (run.db) in this folder")
    store = RunStore(url)
    dataset = dataset or run_dir.resolve().name
    info: dict[str, Any] = {"run": str(run_dir), "dataset": dataset, "source": source}
    labelled: list[Labelled] = []
    try:
        excluded = excluded_annotators(store)
        gold = gold_item_ids(store)
        fallback: dict[str, str] | None = None
        for task in ("label-errors", "adapt-check"):
            stored = counted(store.judgements_for(task), excluded)
            langs = _queued_langs(store, task)
            items = judged = ignored = 0
            for item_id, entries in stored.items():
                if item_id in gold.get(task, set()):
                    continue
                chosen = _wanted(entries, source)
                ignored += len(entries) - len(chosen)
                if not chosen:
                    continue
                items += 1
                judged += len(chosen)
                lang = langs.get(item_id)
                if lang is None:
                    fallback = _dataset_langs(run_dir) if fallback is None else fallback
                    lang = fallback.get(item_id, UNKNOWN_LANG)
                if task == "label-errors":
                    question, options = _decide_label_errors(chosen)
                    labelled += [(dataset, lang, "question", question), (dataset, lang, "options", options)]
                else:
                    verdict, error = _decide_adapt(chosen)
                    labelled.append((dataset, lang, "adapt", verdict))
                    if error is not None:
                        labelled.append((dataset, lang, "adapt-error", error))
            info[task] = {"items": items, "judgements": judged, "other_source_ignored": ignored}
    finally:
        store.close()
    return labelled, info


def error_tables(
    runs: Sequence[Path] = (),
    labels: Sequence[Path] = (),
    *,
    source: Source = "human",
    store_url: str | None = None,
) -> ErrorsResult:
    """Every column from the runs' judgements and the CSV files, in that order.

    Raises:
        ConfigError: nothing given, a bad ``source``, a missing run or file, ``store_url``
            with other than one run, or no label anywhere.
        DataValidationError: a malformed CSV (located).
    """
    if source not in SOURCES:
        raise ConfigError(f"--source {source!r}: one of {', '.join(SOURCES)}")
    if not runs and not labels:
        raise ConfigError("give --run RUN_DIR (its label-errors / adapt-check judgements) or --labels FILE.csv")
    if store_url is not None and len(runs) != 1:
        raise ConfigError("--run-store goes with exactly one --run")
    labelled: list[Labelled] = []
    inputs: list[dict[str, Any]] = []
    names = [run_dir.resolve().name for run_dir in runs]
    for run_dir, name in zip(runs, names, strict=True):
        dataset = name if names.count(name) == 1 else str(run_dir)
        found, info = labels_from_run(run_dir, store_url=store_url, source=source, dataset=dataset)
        labelled += found
        inputs.append(info)
    columns = tally(labelled)
    for path in labels:
        kind, read = read_csv(path)
        have = {(c.dataset, c.lang, c.target) for c in columns}
        for column in read:
            if (column.dataset, column.lang, column.target) in have:
                raise ConfigError(
                    f"--labels {path}: dataset {column.dataset!r}, lang {column.lang!r}, target {column.target!r} "
                    "is given twice (by another input too)"
                )
        columns += read
        inputs.append({"labels": str(path), "kind": kind, "columns": len(read)})
    if not columns:
        hint = " (LM judges' labels are left out by default: --source lm or any)" if source == "human" else ""
        raise ConfigError(f"no label-errors or adapt-check judgements of source {source!r} in the runs{hint}")
    return ErrorsResult(columns, inputs)
