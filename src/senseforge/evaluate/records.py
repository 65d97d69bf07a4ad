"""The evaluation's records: one :class:`MCSample` or :class:`BinarySample` per scored item, and
:class:`EvalResults`, the content of ``results.json``.

Both serialise exactly as the files have always looked: a sample line holds only the fields
its formulation sets (``scores`` for log-likelihood, ``response`` for generation, ``error``
for a failed call), and metric keys follow lm-evaluation-harness (``"acc,none"``,
``"acc_stderr,none"``, with the 95% bootstrap interval as ``"acc_ci95,none"``). Readers use
attributes (``metrics.acc``, ``results.model.name``), never string keys.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from senseforge.errors import DataValidationError


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    def to_json(self) -> dict[str, Any]:
        """The record as written: only the fields that were set, metric keys in lm-eval style."""
        return self.model_dump(mode="python", by_alias=True, exclude_unset=True)


# --------------------------------------------------------------------------- samples


class MCSample(_Record):
    """One multiple-choice item as scored (a line of ``samples.jsonl``)."""

    id: str
    lang: str
    difficulty: str | None
    category: str | None
    recipe: str | None
    review: str | None
    variant: str | None = None
    """The prompt variant, written only when one run scores several (``--variant putri-all``)."""
    prompt: str
    choices: list[str]
    """The choice texts, as in the item."""
    labels: list[str]
    continuations: list[str]
    """What was scored after the prompt: the choice texts or letters, with their delimiter."""
    gold: str | None
    scores: list[float] | None = None
    """Summed log-likelihood of each continuation."""
    is_greedy: list[bool] | None = None
    response: str | None = None
    """Generation: the model's text."""
    sent: dict[str, Any] | None = None
    """Generation: exactly what the model was sent (:func:`senseforge.llm.prompting.sent`): ``kind: completion``
    with the text and stop sequences, or ``kind: chat`` with the messages and the template's name."""
    finish_reason: str | None = None
    """Generation: why the reply ended (``stop``, ``length`` …), as the backend said."""
    label_probs: dict[str, float] | None = None
    """Generation with :attr:`~senseforge.evaluate.run.EvalConfig.top_logprobs`: the probability of each choice's
    label where the reply writes its answer letter, read from the endpoint's top log-probabilities
    (:func:`senseforge.llm.base.letter_probabilities`); written only where the endpoint gave them."""
    error: str | None = None
    """The failed call (``kind: message``); such a sample has no prediction."""
    prediction: str | None = None
    prediction_norm: str | None = None
    """The choice with the best log-likelihood per character of its text (lm-eval's ``acc_norm``)."""
    prediction_bytes: str | None = None
    """The choice with the best log-likelihood per UTF-8 byte of its text (lm-eval's ``acc_bytes``)."""
    prediction_strict: str | None = None
    parsed: bool | None = None
    parsed_strict: bool | None = None
    correct: bool | None = None
    correct_norm: bool | None = None
    correct_bytes: bool | None = None
    correct_strict: bool | None = None
    judge: str | None = None
    """``open``: the judge model (``provider/model``) that compared :attr:`response` with the gold."""
    judge_verdict: str | None = None
    """``open``: ``correct`` or ``incorrect``; unset when the judge's reply could not be read (then
    :attr:`parsed` is false, :attr:`judge_response` holds the reply and the answer counts as wrong)."""
    judge_reason: str | None = None
    """``open``: the judge's stated reason."""
    judge_response: str | None = None
    """``open``: the judge's reply as it came."""
    judge_sent: dict[str, Any] | None = None
    """``open``: exactly what the judge was sent (as :attr:`sent`)."""


class BinarySample(_Record):
    """One (context, target) pair as judged (a line of ``samples.jsonl``)."""

    id: str
    context_id: str
    task: str
    lang: str | None
    dimensions: list[str]
    """The distinct commonsense dimensions of the target's knowledge (``other`` when none)."""
    triple_dimensions: list[str | None] = Field(default_factory=list)
    """The dimension of each knowledge triple, repeats kept (for ``--crow-parity``)."""
    prompt: str
    target: str
    gold: bool
    scores: list[float] | None = None
    """Log-likelihood of yes, then of no."""
    response: str | None = None
    sent: dict[str, Any] | None = None
    """Generation: exactly what the model was sent (as :attr:`MCSample.sent`)."""
    finish_reason: str | None = None
    error: str | None = None
    prediction: bool | None = None
    parsed: bool | None = None
    correct: bool | None = None


Sample = MCSample | BinarySample


def write_samples_lines(samples: list[MCSample] | list[BinarySample]) -> Iterator[str]:
    """``samples.jsonl`` lines."""
    for sample in samples:
        yield json.dumps(sample.to_json(), ensure_ascii=False) + "\n"


def read_samples(path: Path) -> list[Sample]:
    """The records of a ``samples.jsonl`` (or the folder holding one), each error located by line."""
    file = path / "samples.jsonl" if path.is_dir() else path
    out: list[Sample] = []
    try:
        lines = file.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise DataValidationError(f"{file}: not readable ({exc})") from exc
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            model: type[_Record] = BinarySample if isinstance(row, dict) and "context_id" in row else MCSample
            out.append(model.model_validate(row))  # type: ignore[arg-type]
        except (ValueError, ValidationError) as exc:
            raise DataValidationError(f"{file}:{number}: not a senseforge sample ({exc})") from exc
    return out


# --------------------------------------------------------------------------- metrics

Interval = list[float]


class MCMetrics(_Record):
    """Headline metrics of multiple-choice samples (one task, variant or breakdown group).

    Each accuracy has two 95% intervals: ``*_ci95``, the percentile bootstrap over items
    (``None`` with fewer than two items, where resampling has nothing to vary), and
    ``*_wilson95``, the Wilson score interval, which stays honest when every item agrees
    (0 of 10 right: about ``[0, 0.278]``, where the bootstrap gives ``[0, 0]``).
    """

    n: int
    """Items with a gold answer."""
    n_withheld: int
    failed_rate: float = Field(alias="failed_rate,none")
    acc: float | None = Field(default=None, alias="acc,none")
    """Accuracy; a failed or unparsed answer counts as wrong."""
    acc_stderr: float | None = Field(default=None, alias="acc_stderr,none")
    acc_ci95: Interval | None = Field(default=None, alias="acc_ci95,none")
    acc_wilson95: Interval | None = Field(default=None, alias="acc_wilson95,none")
    acc_norm: float | None = Field(default=None, alias="acc_norm,none")
    acc_norm_stderr: float | None = Field(default=None, alias="acc_norm_stderr,none")
    acc_norm_ci95: Interval | None = Field(default=None, alias="acc_norm_ci95,none")
    acc_norm_wilson95: Interval | None = Field(default=None, alias="acc_norm_wilson95,none")
    acc_bytes: float | None = Field(default=None, alias="acc_bytes,none")
    acc_bytes_stderr: float | None = Field(default=None, alias="acc_bytes_stderr,none")
    acc_bytes_ci95: Interval | None = Field(default=None, alias="acc_bytes_ci95,none")
    acc_bytes_wilson95: Interval | None = Field(default=None, alias="acc_bytes_wilson95,none")
    acc_strict: float | None = Field(default=None, alias="acc_strict,none")
    acc_strict_stderr: float | None = Field(default=None, alias="acc_strict_stderr,none")
    acc_strict_ci95: Interval | None = Field(default=None, alias="acc_strict_ci95,none")
    acc_strict_wilson95: Interval | None = Field(default=None, alias="acc_strict_wilson95,none")
    unparsed_rate: float | None = Field(default=None, alias="unparsed_rate,none")
    unparsed_rate_strict: float | None = Field(default=None, alias="unparsed_rate_strict,none")
    acc_parsed: float | None = Field(default=None, alias="acc_parsed,none")
    """Accuracy over the parsed answers only (shown beside ``acc``, never instead of it)."""
    variants: int | None = None
    """For the mean over prompt variants: how many were averaged."""
    ci_unit: str | None = None
    """What the bootstrap intervals resample: ``item`` (all of an item's prompt variants together);
    absent in older files."""

    def resampling_units(self) -> int:
        """How many units the bootstrap intervals resample: the items."""
        return self.n


class DimensionCell(_Record):
    """Macro-F1 of one commonsense dimension within one task."""

    macro_f1: float
    n: int
    """Examples in the cell (``--crow-parity``: one entry per knowledge triple)."""


class BinaryMetrics(_Record):
    """Headline metrics of one binary (CRoW) task.

    The ``*_ci95`` intervals are percentile bootstraps over contexts (``None`` with fewer
    than two contexts); the proportions also have a Wilson score interval, ``*_wilson95``:
    over examples for ``acc``, over contexts for ``situational_acc``.
    """

    n: int
    n_contexts: int
    macro_f1: float | None = Field(default=None, alias="macro_f1,none")
    macro_f1_ci95: Interval | None = Field(default=None, alias="macro_f1_ci95,none")
    situational_acc: float | None = Field(default=None, alias="situational_acc,none")
    situational_acc_ci95: Interval | None = Field(default=None, alias="situational_acc_ci95,none")
    situational_acc_wilson95: Interval | None = Field(default=None, alias="situational_acc_wilson95,none")
    acc: float | None = Field(default=None, alias="acc,none")
    acc_ci95: Interval | None = Field(default=None, alias="acc_ci95,none")
    acc_wilson95: Interval | None = Field(default=None, alias="acc_wilson95,none")
    unparsed_rate: float | None = Field(default=None, alias="unparsed_rate,none")
    per_dimension_macro_f1: dict[str, float] | None = None
    per_dimension: dict[str, DimensionCell] | None = None
    """Each dimension's Macro-F1 with its ``n``."""
    ci_unit: str | None = None
    """What the bootstrap intervals resample: ``context`` (all targets of a context together);
    absent in older files."""

    def resampling_units(self) -> int:
        """How many units the bootstrap intervals resample: the contexts."""
        return self.n_contexts


class DimensionMean(_Record):
    """A dimension's Macro-F1 averaged over tasks."""

    macro_f1: float
    tasks: int
    """Tasks averaged (for the leaderboard mean: every task, those without the dimension counting 0)."""


class CrowSummary(_Record):
    """The CRoW score over tasks (with and without the MT tasks) and per-dimension means."""

    crow_score_macro_f1: float = Field(alias="crow_score_macro_f1,none")
    crow_score_situational_acc: float = Field(alias="crow_score_situational_acc,none")
    crow_score_macro_f1_no_mt: float = Field(alias="crow_score_macro_f1_no_mt,none")
    crow_score_situational_acc_no_mt: float = Field(alias="crow_score_situational_acc_no_mt,none")
    per_dimension_macro_f1: dict[str, DimensionMean] | None = None
    """Each dimension's Macro-F1 averaged over the tasks that have it."""
    per_dimension_macro_f1_no_mt: dict[str, DimensionMean] | None = None
    """The same over the non-MT tasks."""
    per_dimension_macro_f1_leaderboard: dict[str, DimensionMean] | None = None
    """``--crow-parity`` only: CRoW's published leaderboard, where a task without a dimension counts 0."""
    convention: str | None = None
    """How dimensions were counted: ``senseforge`` (default) or ``crow-parity``."""


Metrics = MCMetrics | BinaryMetrics | CrowSummary


# --------------------------------------------------------------------------- results.json


class DataInfo(_Record):
    path: str
    name: str
    format: str
    kind: str
    split: str | None = None


class ModelInfo(_Record):
    name: str
    identity: dict[str, str]


class EvalResults(_Record):
    """The content of ``results.json``."""

    results: dict[str, Metrics]
    """Task (or ``task/variant``) → metrics; binary runs add ``crow`` (the summary)."""
    breakdowns: dict[str, Any]
    """Field → group → metrics (multiple choice), or the baselines (binary)."""
    config: dict[str, Any]
    data: DataInfo
    model: ModelInfo
    seeds: dict[str, int]
    prompt_hashes: dict[str, str]
    versions: dict[str, str]
    timing: dict[str, float | None]
    identity: dict[str, Any] | None = None
    """What makes this evaluation this one (see :func:`evaluation_identity`); absent in older files."""
    identity_hash: str | None = None
    """SHA-256 of :attr:`identity` as canonical JSON."""
    diagnosis: str | None = None
    """One line when the replies look wrong as a whole (all hit the token limit, or echo a chat template)."""

    def setting(self) -> str:
        """How the model was asked, in a few words: ``loglik``, ``generate/putri-all · 5-shot``, ``binary/loglik``."""
        config = self.config
        if self.data.kind == "binary":
            mode = "cot" if config.get("chain_of_thought") else str(config.get("binary_mode", "loglik"))
            text = f"binary/{mode}" + (" · oracle knowledge" if config.get("oracle_knowledge") else "")
        else:
            text = str(config.get("formulation", "loglik"))
            variant = config.get("variant", "plain")
            if variant and variant != "plain":
                text += f"/{variant}"
            shots = int(config.get("shots") or 0)
            if shots:
                text += f" · {shots}-shot"
        if config.get("prompt_language", "en") != "en":
            text += f" · {config.get('prompt_language')} cues"
        return text

    def n(self) -> int | None:
        """Items (or examples) scored: the first task's ``n``."""
        for metrics in self.results.values():
            value = getattr(metrics, "n", None)
            if isinstance(value, int):
                return value
        return None

    def label(self) -> str:
        """The evaluation in one line: ``llamacpp/gemma-3-270m · letter · n=30``."""
        n = self.n()
        return f"{self.model.name} · {self.setting()}" + (f" · n={n}" if n is not None else "")

    def headline(self) -> Iterator[tuple[str, str, float, Interval | None, int | None]]:
        """``(task, metric, value, 95% interval, n)`` for every headline number."""
        for task, metrics in self.results.items():
            dumped = metrics.to_json()
            n = dumped.get("n")
            for key, value in dumped.items():
                if "," not in key or "stderr" in key or key.endswith("_ci95,none"):
                    continue
                if isinstance(value, int | float):
                    ci = dumped.get(key.replace(",none", "_ci95,none"))
                    yield task, key.split(",")[0], float(value), ci, n

    def accuracy_rows(self) -> Iterator[tuple[str, MCMetrics]]:
        """Every multiple-choice task's metrics with its name."""
        for task, metrics in self.results.items():
            if isinstance(metrics, MCMetrics):
                yield task, metrics

    def group_metrics(self) -> Iterator[tuple[str, str, MCMetrics]]:
        """``(field, group, metrics)`` of every multiple-choice breakdown (language, difficulty, category …)."""
        if self.data.kind != "mc":
            return
        for field, groups in self.breakdowns.items():
            if not isinstance(groups, dict):
                continue
            for group, metrics in groups.items():
                yield field, str(group), MCMetrics.model_validate(metrics)


def read_results(path: Path) -> EvalResults:
    """A ``results.json`` (or the folder holding one)."""
    file = path / "results.json" if path.is_dir() else path
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise DataValidationError(f"{file}: not a readable results.json ({exc})") from exc
    if not isinstance(data, dict) or "results" not in data:
        raise DataValidationError(f"{file}: has no 'results' section; is it a senseforge results.json?")
    try:
        return EvalResults.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise DataValidationError(f"{file}: {where}: {first['msg']}") from exc
