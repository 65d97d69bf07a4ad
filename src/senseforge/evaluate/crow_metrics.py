"""CRoW's binary metrics: plain functions from labels and predictions to a number.

Split from :mod:`senseforge.evaluate.metrics`. Nothing here reads files or keeps state; inputs that
make a metric undefined raise :class:`ValueError` with a message that says which argument is wrong.

These follow Ismayilzada et al. (2023) and the CRoW evaluation scripts:

- :func:`macro_f1`: F1 of the valid class and of the invalid class, averaged;
- :func:`situational_accuracy`: share of contexts whose targets are *all* classified right
  (the leaderboard calls it ``exact_match``);
- :func:`per_dimension_macro_f1`: Macro-F1 over the examples whose knowledge belongs to a
  commonsense dimension;
- :func:`per_dimension_cells` and :func:`dimension_means`: the same per task, with the size of
  every cell, and averaged across tasks. ``parity=True`` (per task) counts as CRoW's script
  does, once per knowledge triple; ``missing_as_zero=True`` (across tasks) averages as CRoW's
  leaderboard does, a dimension a task lacks scoring 0 there;
- :func:`crow_score`: unweighted mean of per-task scores, each MT language pair its own
  task. CRoW reports it for Macro-F1 *and* for Situational Accuracy (Table 2, and the
  ``metrics``/``non_mt_metrics``/``mt_metrics`` blocks of its leaderboard): it is the same
  plain mean applied to either per-task number;
- :func:`majority_predictions` and :func:`random_predictions`: CRoW's baselines.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

MT_TASKS: frozenset[str] = frozenset({"mt_zh_en", "mt_en_fr", "mt_en_de", "mt_en_ru"})
"""CRoW's machine-translation tasks, as its leaderboard names them (one per language pair)."""

CROW_LEADERBOARD_DIMENSIONS: tuple[str, ...] = (
    "attribution",
    "physical",
    "temporal",
    "causal",
    "social",
    "comparison",
    "other",
)
"""CRoW's commonsense dimensions as its leaderboard and scoring script name them, in the leaderboard's order
(records name them as :data:`senseforge.data.relations.DIMENSIONS` does; :data:`senseforge.evaluate.report.CROW_NAMES`
maps those to these)."""

OTHER_DIMENSION = "other"
"""Where an example goes when its knowledge names no dimension."""


# --------------------------------------------------------------------------- helpers


def _bool_array(values: Sequence[bool], name: str) -> NDArray[np.bool_]:
    """``values`` as a 1-d boolean array; 0/1 integers are accepted, anything else is refused."""
    arr = np.asarray(values)
    if arr.size == 0:
        return np.zeros(0, dtype=np.bool_)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a flat sequence of booleans, got shape {arr.shape}")
    if arr.dtype == np.bool_:
        return arr
    if arr.dtype.kind in "iu" and bool(np.all((arr == 0) | (arr == 1))):
        return arr.astype(np.bool_)
    raise ValueError(f"{name} must hold booleans (True/False or 0/1), got values of dtype {arr.dtype}")


def _paired(golds: Sequence[bool], preds: Sequence[bool]) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
    gold = _bool_array(golds, "golds")
    pred = _bool_array(preds, "preds")
    if len(gold) != len(pred):
        raise ValueError(f"golds and preds differ in length: {len(gold)} != {len(pred)}")
    if len(gold) == 0:
        raise ValueError("no examples: the metric is undefined on empty input")
    return gold, pred


def _f1(tp: int, fp: int, fn: int) -> float:
    denominator = 2 * tp + fp + fn
    return 1.0 if denominator == 0 else 2 * tp / denominator


# --------------------------------------------------------------------------- binary (CRoW)


def macro_f1(golds: Sequence[bool], preds: Sequence[bool]) -> float:
    """Binary Macro-F1: the F1 of the ``True`` class and of the ``False`` class, averaged.

    Both classes always count. A class that is neither in ``golds`` nor in ``preds`` scores
    1.0 (nothing to find, nothing wrongly claimed). That only happens when every label and
    every prediction is the other class, so the predictions are perfect and the result is
    1.0 — the same as scikit-learn's ``f1_score(average="macro")``, which CRoW used and
    which averages over the labels present. A class present in ``golds`` but never
    predicted, or predicted but never gold, scores 0.

    A constant predictor right on a share ``p < 1`` of the examples scores ``p / (1 + p)``
    (``2p / (1 + p)`` for its class, 0 for the other); on balanced data that is 1/3.

    >>> macro_f1([True, True, False, False], [True, False, False, False])
    0.7333333333333334
    >>> macro_f1([True, False], [True, True])
    0.3333333333333333
    """
    gold, pred = _paired(golds, preds)
    tp = int(np.count_nonzero(gold & pred))
    fp = int(np.count_nonzero(~gold & pred))
    fn = int(np.count_nonzero(gold & ~pred))
    tn = len(gold) - tp - fp - fn
    return (_f1(tp, fp, fn) + _f1(tn, fn, fp)) / 2


def context_outcomes(context_ids: Sequence[str], golds: Sequence[bool], preds: Sequence[bool]) -> dict[str, bool]:
    """For each context (in order of first appearance): whether all its targets are right.

    Targets of one context need not be adjacent. Use this to bootstrap Situational
    Accuracy: resampling these outcomes is resampling whole contexts.

    >>> context_outcomes(["a", "a", "b"], [True, False, True], [True, False, False])
    {'a': True, 'b': False}
    """
    gold, pred = _paired(golds, preds)
    if len(context_ids) != len(gold):
        raise ValueError(f"context_ids and golds differ in length: {len(context_ids)} != {len(gold)}")
    right = (gold == pred).tolist()
    outcomes: dict[str, bool] = {}
    for context, ok in zip(context_ids, right, strict=True):
        outcomes[context] = outcomes.get(context, True) and ok
    return outcomes


def situational_accuracy(context_ids: Sequence[str], golds: Sequence[bool], preds: Sequence[bool]) -> float:
    """Share of contexts whose targets are all classified right (CRoW; ``exact_match``).

    Each distinct context id counts once, whatever its number of targets.

    >>> situational_accuracy(["a", "a", "b", "b"], [True, False, True, False], [True, False, True, True])
    0.5
    """
    outcomes = context_outcomes(context_ids, golds, preds)
    return sum(outcomes.values()) / len(outcomes)


def _dimensions_of(entry: str | Sequence[str | None] | None) -> set[str]:
    if entry is None or isinstance(entry, str):
        entry = [entry]
    dims = {d.strip() if d and d.strip() else OTHER_DIMENSION for d in entry}
    return dims or {OTHER_DIMENSION}


def per_dimension_macro_f1(
    dimensions: Sequence[str | Sequence[str | None] | None],
    golds: Sequence[bool],
    preds: Sequence[bool],
) -> dict[str, float]:
    """Macro-F1 of each commonsense dimension, over the examples whose knowledge has it.

    ``dimensions[i]`` is example ``i``'s dimension, or the dimensions of all its knowledge
    triples (a list). An example counts once in each distinct dimension it lists: twice
    ``physical`` is one ``physical``. ``None``, ``""`` and an empty list mean
    :data:`OTHER_DIMENSION` (``other``), CRoW's bucket for relations outside its six
    dimensions. Names are used as given (apart from surrounding spaces).

    Only dimensions with at least one example appear, CRoW's dimensions first in
    :data:`CROW_LEADERBOARD_DIMENSIONS` order, then any others alphabetically.

    Note: CRoW's script appends an example once per knowledge *triple*, so an example with
    two triples of one dimension weighs double there, and an example without triples is in
    no dimension at all; pass its list as is to us and it counts once. For CRoW's counting,
    per task, use :func:`per_dimension_cells` with ``parity=True``; for cross-task means,
    :func:`dimension_means`.

    >>> per_dimension_macro_f1([["social", "causal"], "social", None], [True, False, True], [True, False, False])
    {'causal': 1.0, 'social': 1.0, 'other': 0.0}
    """
    gold, pred = _paired(golds, preds)
    if len(dimensions) != len(gold):
        raise ValueError(f"dimensions and golds differ in length: {len(dimensions)} != {len(gold)}")
    members: dict[str, list[int]] = {}
    for i, entry in enumerate(dimensions):
        for dim in _dimensions_of(entry):
            members.setdefault(dim, []).append(i)
    return {
        dim: macro_f1(gold[members[dim]].tolist(), pred[members[dim]].tolist()) for dim in _dimension_order(members)
    }


def _dimension_order(names: Iterable[str]) -> list[str]:
    """CRoW's dimensions first, in :data:`CROW_LEADERBOARD_DIMENSIONS` order, then any others alphabetically."""
    present = set(names)
    return [d for d in CROW_LEADERBOARD_DIMENSIONS if d in present] + sorted(present - set(CROW_LEADERBOARD_DIMENSIONS))


def is_mt_task(task: str) -> bool:
    """Whether a task name is a machine-translation task (each language pair is one task).

    ``mt_zh_en``, ``mt-zh-en``, ``crow/mt-en-fr`` and ``MT_EN_DE`` all are; ``dialogue``,
    ``summarization``, ``stance``, ``safety`` and ``intent`` are not.

    >>> is_mt_task("mt-zh-en"), is_mt_task("dialogue")
    (True, False)
    """
    name = task.rsplit("/", 1)[-1].strip().lower().replace("-", "_")
    return name in MT_TASKS or name == "mt" or name.startswith("mt_")


def crow_score(task_scores: Mapping[str, float], *, include_mt: bool = True) -> float:
    """CRoW score: the unweighted mean of the per-task scores present.

    Apply it to per-task Macro-F1 or to per-task Situational Accuracy (CRoW reports both).
    Every MT language pair is its own task. ``include_mt=False`` gives CRoW's "(-MT)"
    score, the mean over the other tasks.

    >>> crow_score({"mt_zh_en": 0.5, "mt_en_fr": 0.75, "dialogue": 1.0})
    0.75
    >>> crow_score({"mt_zh_en": 0.5, "mt_en_fr": 0.75, "dialogue": 1.0}, include_mt=False)
    1.0
    """
    scores = [float(v) for task, v in task_scores.items() if include_mt or not is_mt_task(task)]
    if not scores:
        which = "tasks" if include_mt else "non-MT tasks"
        raise ValueError(f"no {which} to average: the CRoW score is undefined")
    if any(not math.isfinite(s) for s in scores):
        raise ValueError(f"task scores must be finite numbers, got {dict(task_scores)}")
    return math.fsum(scores) / len(scores)


# --------------------------------------------------------------------------- per-dimension cells (CRoW)


@dataclass(frozen=True)
class DimensionCell:
    """Macro-F1 of one (task, dimension) cell, and what it was computed over.

    ``n`` counts examples (our convention) or entries, one per knowledge triple (CRoW's
    counting, ``parity=True`` in :func:`per_dimension_cells`); it is at least 1.
    """

    macro_f1: float
    n: int

    def __post_init__(self) -> None:
        if not (math.isfinite(self.macro_f1) and 0.0 <= self.macro_f1 <= 1.0):
            raise ValueError(f"macro_f1 must be a number in [0, 1], got {self.macro_f1}")
        if isinstance(self.n, bool) or not isinstance(self.n, int) or self.n < 1:
            raise ValueError(f"n must be a positive integer, got {self.n!r}")


def _triple_dimension(value: str | None, example: int, triple: int) -> str:
    """A triple's dimension as CRoW's script accepts it: one of its seven names, nothing else."""
    name = value.strip() if isinstance(value, str) else value
    if name not in CROW_LEADERBOARD_DIMENSIONS:
        raise ValueError(
            f"dimensions[{example}][{triple}] is {value!r}: with parity=True every knowledge triple needs one of "
            f"CRoW's dimensions {list(CROW_LEADERBOARD_DIMENSIONS)} (CRoW's script cannot score any other)"
        )
    return name


def per_dimension_cells(
    tasks: Sequence[str],
    dimensions: Sequence[Sequence[str | None]],
    golds: Sequence[bool],
    preds: Sequence[bool],
    *,
    parity: bool = False,
) -> dict[str, dict[str, DimensionCell]]:
    """Macro-F1 of every (task, commonsense dimension) cell, with the size of the cell.

    ``tasks[i]`` is example ``i``'s task (names are used as given: each MT language pair is
    its own task) and ``dimensions[i]`` the dimension of each of its knowledge triples, one
    entry per triple, repeats kept; ``None`` for a triple without a dimension and an empty
    list for an example without triples.

    Our convention (the default): within a task, an example counts once in every distinct
    dimension its triples name, as in :func:`per_dimension_macro_f1` (``None``, ``""`` and
    an example without triples mean :data:`OTHER_DIMENSION`); ``n`` is the number of
    examples in the cell.

    ``parity=True`` counts as CRoW's ``evaluation/report_metrics.py`` does: within a task,
    an example enters a dimension once per triple of that dimension (two ``social`` triples:
    it weighs double in ``social``), an example without triples is in no dimension (its
    task's overall Macro-F1 still counts it), and every triple must name one of the seven
    :data:`CROW_LEADERBOARD_DIMENSIONS` (anything else makes CRoW's script fail, so it is refused here).
    ``n`` is then the number of entries. A target's triples are its own: CRoW's optional
    ``post_populate_kg.py`` gives a target without a ``knowledge`` field the triples of the
    other targets of its context; if its numbers were made that way, pass those triples.

    Either way a cell's score is :func:`macro_f1`, which equals the scikit-learn call CRoW
    makes (``f1_score(average="macro")`` over the labels present, unrounded). Every task
    appears, in order of first appearance; within it, only the dimensions with at least
    one entry, ordered as in :func:`per_dimension_macro_f1`. A task can be empty with
    ``parity=True`` (no example has triples); :func:`dimension_means` still counts it.

    >>> tasks = ["stance"] * 3
    >>> dims = [["social", "social"], ["social"], []]
    >>> golds, preds = [True, False, True], [True, True, True]
    >>> per_dimension_cells(tasks, dims, golds, preds)
    {'stance': {'social': DimensionCell(macro_f1=0.3333333333333333, n=2), 'other': DimensionCell(macro_f1=1.0, n=1)}}
    >>> per_dimension_cells(tasks, dims, golds, preds, parity=True)
    {'stance': {'social': DimensionCell(macro_f1=0.4, n=3)}}
    """
    gold, pred = _paired(golds, preds)
    if len(tasks) != len(gold):
        raise ValueError(f"tasks and golds differ in length: {len(tasks)} != {len(gold)}")
    if len(dimensions) != len(gold):
        raise ValueError(f"dimensions and golds differ in length: {len(dimensions)} != {len(gold)}")
    members: dict[str, dict[str, list[int]]] = {}
    for i, (task, entry) in enumerate(zip(tasks, dimensions, strict=True)):
        if not isinstance(task, str) or not task.strip():
            raise ValueError(f"tasks[{i}] must be a non-empty task name, got {task!r}")
        if isinstance(entry, str) or not isinstance(entry, Sequence):
            raise ValueError(
                f"dimensions[{i}] must be a list with the dimension of each knowledge triple "
                f"(an empty list for none), got {entry!r}"
            )
        cells = members.setdefault(task, {})
        if parity:
            for k, value in enumerate(entry):
                cells.setdefault(_triple_dimension(value, i, k), []).append(i)
        else:
            for dim in _dimensions_of(entry):
                cells.setdefault(dim, []).append(i)
    return {
        task: {
            dim: DimensionCell(macro_f1(gold[cells[dim]].tolist(), pred[cells[dim]].tolist()), len(cells[dim]))
            for dim in _dimension_order(cells)
        }
        for task, cells in members.items()
    }


def dimension_means(
    cells: Mapping[str, Mapping[str, DimensionCell]],
    *,
    missing_as_zero: bool = False,
    include_mt: bool = True,
) -> dict[str, tuple[float, int]]:
    """Cross-task Macro-F1 of each dimension: ``dimension -> (mean, number of tasks averaged)``.

    ``cells`` is what :func:`per_dimension_cells` returns (task -> dimension -> cell); each
    task weighs the same, whatever the size of its cells.

    By default a dimension's mean is over the tasks that have a cell for it; a task without
    it is left out. That is our convention and also what CRoW's
    ``evaluation/report_agg_metrics_across_tasks.py`` does (its ``dimensions`` block, and
    ``non_mt_dimensions`` with ``include_mt=False``).

    ``missing_as_zero=True`` reproduces CRoW's published leaderboard instead: there every task
    lists all seven :data:`CROW_LEADERBOARD_DIMENSIONS`, a dimension it lacks scored 0, and the mean
    divides by the number of tasks. All seven then appear (0.0 where no task has one), each
    averaged over every task kept.

    ``include_mt=False`` keeps only the non-MT tasks (:func:`is_mt_task`), CRoW's "(-MT)"
    block; for the leaderboard's MT-only block pass only the MT tasks' cells.

    >>> cells = {"dialogue": {"social": DimensionCell(0.5, 4), "temporal": DimensionCell(1.0, 2)},
    ...          "stance": {"social": DimensionCell(1.0, 3)}}
    >>> dimension_means(cells)
    {'temporal': (1.0, 1), 'social': (0.75, 2)}
    >>> dimension_means(cells, missing_as_zero=True)["temporal"]
    (0.5, 2)
    """
    kept = {task: row for task, row in cells.items() if include_mt or not is_mt_task(task)}
    if not kept:
        which = "tasks" if include_mt else "non-MT tasks"
        raise ValueError(f"no {which} to average: the per-dimension means are undefined")
    scores: dict[str, list[float]] = {dim: [] for dim in CROW_LEADERBOARD_DIMENSIONS} if missing_as_zero else {}
    for task, row in kept.items():
        for dim, cell in row.items():
            if not isinstance(cell, DimensionCell):
                raise ValueError(f"cells[{task!r}][{dim!r}] must be a DimensionCell, got {cell!r}")
            scores.setdefault(dim, []).append(cell.macro_f1)
    means: dict[str, tuple[float, int]] = {}
    for dim in _dimension_order(scores):
        divisor = len(kept) if missing_as_zero else len(scores[dim])
        means[dim] = (math.fsum(scores[dim]) / divisor, divisor)
    return means


# --------------------------------------------------------------------------- baselines


def majority_predictions(golds: Sequence[bool]) -> list[bool]:
    """CRoW's majority baseline: the most frequent gold label, predicted for every example.

    A tie goes to ``False`` (CRoW draws the label at random; on data where every context has
    one valid and one invalid target, such as MT, either label scores Macro-F1 1/3 and
    Situational Accuracy 0).

    >>> majority_predictions([True, True, False])
    [True, True, True]
    """
    gold = _bool_array(golds, "golds")
    if len(gold) == 0:
        raise ValueError("no gold labels: the majority label is undefined")
    label = 2 * int(np.count_nonzero(gold)) > len(gold)
    return [label] * len(gold)


def random_predictions(n: int, seed: int) -> list[bool]:
    """CRoW's random baseline: ``n`` fair coin flips, the same for the same seed.

    Uses :class:`random.Random`, whose stream is stable across Python versions.

    >>> random_predictions(5, seed=0) == random_predictions(5, seed=0)
    True
    """
    if n < 0:
        raise ValueError(f"n must be non-negative, got {n}")
    rng = random.Random(seed)
    return [rng.random() < 0.5 for _ in range(n)]
