"""Scoring a submission file against gold labels, with no model: ``senseforge eval score``.

A submission is CRoW's leaderboard form: JSON Lines (or a JSON array) of
``{"task": …, "example_id": …, "prediction": 0|1}``; the prediction may also be
``true``/``false`` or a label word :func:`~senseforge.data.crow.parse_label` reads. Each
prediction is matched to the gold example of the same ``example_id`` (the task must agree),
turned into the :class:`~senseforge.evaluate.records.BinarySample` ``eval run`` would have
written, and scored by the same report: Macro-F1, Situational Accuracy, per-dimension
Macro-F1 and the CRoW score, with the baselines. A gold example without a prediction counts
as wrong (like an unparsed answer) and the number missing is reported in
``breakdowns["submission"]``.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from senseforge.data._rows import RowError, convert, iter_json_records, require
from senseforge.data.crow import normalize_task, parse_label
from senseforge.errors import ConfigError, DataValidationError
from senseforge.evaluate.harness import load_for_eval, results_payload, write_outputs
from senseforge.evaluate.records import BinarySample, EvalResults, ModelInfo
from senseforge.evaluate.report import baseline_report, binary_report
from senseforge.evaluate.run import EvalConfig, binary_sample_fields

__all__ = ["Prediction", "iter_predictions", "read_predictions", "score_submission"]

MISSING = "missing: the submission has no prediction for this example"
"""The ``error`` of a sample whose gold example has no prediction (it counts as wrong)."""


@dataclass(frozen=True)
class Prediction:
    """One row of a submission, with where it came from."""

    where: str
    """The line (JSON Lines) or ``[index]`` (JSON array) of the row."""
    example_id: str
    task: str
    """In senseforge's spelling (``mt_zh_en`` → ``mt-zh-en``)."""
    prediction: bool


def _task_key(value: str) -> str:
    try:
        return normalize_task(value)
    except RowError:  # a binary dataset that is not CRoW: compare the names as written
        return value.strip()


def _row(row: dict[str, Any], where: str) -> Prediction:
    task = require(row, "task")
    if not isinstance(task, str) or not task.strip():
        raise RowError(f"task: expected a task name, got {task!r}")
    example_id = require(row, "example_id")
    if isinstance(example_id, bool) or not isinstance(example_id, str | int) or not str(example_id).strip():
        raise RowError(f"example_id: expected a string or a number, got {example_id!r}")
    if "prediction" not in row:
        raise RowError("prediction: missing")
    return Prediction(where, str(example_id), _task_key(task), parse_label(row["prediction"], "prediction"))


def iter_predictions(path: Path) -> Iterator[Prediction]:
    """The rows of a submission file, in order.

    Raises:
        DataValidationError: a malformed row or a repeated ``example_id``
            (``file:line: field: problem``).
    """
    seen: dict[str, str] = {}
    for where, row in iter_json_records(path):
        prediction = convert(path, where, partial(_row, row, where))
        first = seen.setdefault(prediction.example_id, where)
        if first != where:
            raise DataValidationError(
                f"{path}:{where}: example_id: {prediction.example_id!r} repeats the prediction at {first}"
            )
        yield prediction


def read_predictions(path: Path) -> dict[str, tuple[str, bool]]:
    """``example_id`` → ``(task, prediction)`` of a submission file (errors as :func:`iter_predictions`)."""
    return {p.example_id: (p.task, p.prediction) for p in iter_predictions(path)}


def submission_samples(examples: list[Any], predictions: list[Prediction], path: Path) -> list[BinarySample]:
    """One sample per gold example, in gold order; a missing prediction counts as wrong.

    Raises:
        DataValidationError: a prediction whose ``example_id`` is not in the gold, or whose
            task differs from the gold example's (located in the submission).
    """
    gold = {example.id: example for example in examples}
    by_id: dict[str, Prediction] = {}
    for prediction in predictions:
        example = gold.get(prediction.example_id)
        if example is None:
            raise DataValidationError(
                f"{path}:{prediction.where}: example_id: {prediction.example_id!r} is not in the gold data"
            )
        if prediction.task != _task_key(example.task):
            raise DataValidationError(
                f"{path}:{prediction.where}: task: is {prediction.task!r}, but gold example "
                f"{prediction.example_id!r} is task {example.task!r}"
            )
        by_id[prediction.example_id] = prediction
    samples: list[BinarySample] = []
    for example in examples:
        fields = binary_sample_fields(example, "")
        found = by_id.get(example.id)
        if found is None:
            fields.update(error=MISSING, prediction=None, correct=False)
        else:
            fields.update(prediction=found.prediction, parsed=True, correct=found.prediction == example.label)
        samples.append(BinarySample.model_validate(fields))
    return samples


def score_submission(
    gold_path: Path,
    predictions_path: Path,
    config: EvalConfig,
    out_dir: Path,
    *,
    fmt: str | None = None,
    lang: str | None = None,
    split: str = "test",
) -> EvalResults:
    """Score ``predictions_path`` against the binary gold data at ``gold_path``; write ``results.json``
    and ``samples.jsonl`` to ``out_dir``.

    ``gold_path`` is anything :func:`~senseforge.evaluate.harness.load_for_eval` reads (a file
    such as ``release/private.jsonl``, or a run directory). The model is recorded as
    ``submission:<file name>`` with the file's SHA-256; ``breakdowns["submission"]`` holds the
    counts of predictions, scored examples and missing predictions.

    Raises:
        ConfigError: the gold data is not binary, or a file is missing.
        DataValidationError: a bad submission row, an unknown id, a repeat or a task mismatch.
    """
    started = time.perf_counter()
    for flag, given in (("--gold", gold_path), ("--predictions", predictions_path)):
        if not given.exists():
            raise ConfigError(f"{flag}: no such file or folder: {given}")
    dataset = load_for_eval(gold_path, fmt, lang, split)
    if dataset.kind != "binary":
        raise ConfigError(f"{gold_path}: is multiple choice; eval score scores binary (CRoW-style) gold data")
    if not dataset.examples:
        raise DataValidationError(f"{gold_path}: no examples to score")
    predictions = list(iter_predictions(predictions_path))
    samples = submission_samples(dataset.examples, predictions, predictions_path)
    missing = sum(sample.error == MISSING for sample in samples)
    per_task, summary = binary_report(samples, config)
    results = {**per_task, "crow": summary}
    breakdowns = {
        "baselines": baseline_report(samples, config),
        "submission": {"predictions": len(predictions), "examples": len(samples), "missing": missing},
    }
    model = ModelInfo(
        name=f"submission:{predictions_path.name}",
        identity={"predictions": hashlib.sha256(predictions_path.read_bytes()).hexdigest()},
    )
    payload = results_payload(results, breakdowns, config, gold_path, dataset, split, model, {}, len(samples), started)
    write_outputs(out_dir, payload, samples)
    return payload


def missing_count(results: EvalResults) -> int:
    """How many gold examples a scored submission had no prediction for (0 for other results)."""
    info = results.breakdowns.get("submission")
    return int(info.get("missing", 0)) if isinstance(info, dict) else 0
