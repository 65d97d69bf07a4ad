"""Per-dimension Macro-F1 under our convention and under CRoW's own (``parity`` / ``missing_as_zero``).

Our convention: within a task an example counts once per distinct dimension of its triples (no
triples, ``None`` or ``""``: ``other``), and a cross-task mean skips the tasks without the
dimension. CRoW's ``evaluation/report_metrics.py`` appends an example once per triple and leaves
examples without triples out of every dimension; ``report_agg_metrics_across_tasks.py`` averages
over the tasks that have the dimension, while the published leaderboard scores a missing
dimension 0 and divides by the number of tasks.

Every case below is worked out by hand; ``F1(c)`` is the F1 of class ``c`` and ``M`` the Macro-F1.
"""

from __future__ import annotations

import json
import math
import random
import warnings
from pathlib import Path
from typing import Any

import pytest

from senseforge.evaluate import crow_metrics
from senseforge.evaluate.crow_metrics import DimensionCell, dimension_means, per_dimension_cells

CROW = Path(__file__).parents[1] / "fixtures" / "crow"
T, F = True, False


def _scores(cells: dict[str, dict[str, DimensionCell]]) -> dict[str, dict[str, tuple[Any, int]]]:
    return {task: {dim: (cell.macro_f1, cell.n) for dim, cell in row.items()} for task, row in cells.items()}


def _approx(means: dict[str, tuple[float, int]]) -> dict[str, tuple[Any, int]]:
    return {dim: (pytest.approx(value, abs=1e-12), n) for dim, (value, n) in means.items()}


# --------------------------------------------------------------------------- per task


def test_two_triples_of_one_dimension_weigh_double_only_with_parity() -> None:
    tasks = ["stance"] * 3
    dims: list[list[str | None]] = [["causal", "causal"], ["causal"], ["causal"]]
    golds = [T, F, F]
    preds = [T, T, F]
    # ours: causal = examples 0, 1, 2: golds T F F, preds T T F
    #   F1(T): tp 1, fp 1, fn 0 -> 2/3;  F1(F): tp 1, fp 0, fn 1 -> 2/3;  M = 2/3, n = 3
    ours = per_dimension_cells(tasks, dims, golds, preds)
    assert _scores(ours) == {"stance": {"causal": (pytest.approx(2 / 3, abs=1e-12), 3)}}
    # parity: entries 0, 0, 1, 2: golds T T F F, preds T T T F
    #   F1(T): tp 2, fp 1 -> 4/5;  F1(F): tp 1, fn 1 -> 2/3;  M = (4/5 + 2/3) / 2 = 11/15, n = 4
    crow = per_dimension_cells(tasks, dims, golds, preds, parity=True)
    assert _scores(crow) == {"stance": {"causal": (pytest.approx(11 / 15, abs=1e-12), 4)}}


def test_example_without_triples_is_other_by_default_and_in_no_dimension_with_parity() -> None:
    tasks = ["intent"] * 3
    dims: list[list[str | None]] = [[], ["other"], ["social"]]
    golds = [T, T, F]
    preds = [F, T, F]
    # ours: other = examples 0, 1: golds T T, preds F T
    #   F1(T): tp 1, fn 1 -> 2/3;  F1(F): tp 0, fp 1 -> 0;  M = 1/3, n = 2
    # social = example 2: F vs F, perfect -> 1.0, n = 1
    ours = per_dimension_cells(tasks, dims, golds, preds)
    assert _scores(ours) == {"intent": {"social": (1.0, 1), "other": (pytest.approx(1 / 3, abs=1e-12), 2)}}
    # parity: example 0 has no triple and is nowhere; other = example 1 only: T vs T -> 1.0, n = 1
    crow = per_dimension_cells(tasks, dims, golds, preds, parity=True)
    assert _scores(crow) == {"intent": {"social": (1.0, 1), "other": (1.0, 1)}}


def test_triples_without_a_dimension_go_to_other_by_default_and_are_refused_with_parity() -> None:
    tasks = ["safety"] * 2
    dims: list[list[str | None]] = [["physical", None], [" "]]
    golds = [T, F]
    preds = [T, T]
    # ours: physical = example 0: T vs T -> 1.0, n = 1
    # other = examples 0 (None) and 1 (blank): golds T F, preds T T
    #   F1(T): tp 1, fp 1 -> 2/3;  F1(F): tp 0, fn 1 -> 0;  M = 1/3, n = 2
    ours = per_dimension_cells(tasks, dims, golds, preds)
    assert _scores(ours) == {"safety": {"physical": (1.0, 1), "other": (pytest.approx(1 / 3, abs=1e-12), 2)}}
    # CRoW's script looks every triple's dimension up among its seven and fails on None
    with pytest.raises(ValueError, match=r"dimensions\[0\]\[1\] is None"):
        per_dimension_cells(tasks, dims, golds, preds, parity=True)


def test_dimensions_outside_crows_seven_are_kept_last_by_default_and_refused_with_parity() -> None:
    tasks = ["dialogue"] * 4
    dims: list[list[str | None]] = [["numerical"], ["social"], ["causal"], ["attribution"]]
    golds = [T, F, T, F]
    ours = per_dimension_cells(tasks, dims, golds, golds)
    # CRoW's order (attribution, physical, temporal, causal, social, comparison, other), then others
    assert list(ours["dialogue"]) == ["attribution", "causal", "social", "numerical"]
    assert all(cell == DimensionCell(1.0, 1) for cell in ours["dialogue"].values())
    with pytest.raises(ValueError, match=r"dimensions\[0\]\[0\] is 'numerical'"):
        per_dimension_cells(tasks, dims, golds, golds, parity=True)


def test_every_task_appears_in_order_even_without_cells() -> None:
    tasks = ["mt_en_de", "stance", "mt_en_de"]
    dims: list[list[str | None]] = [[], ["social"], []]
    golds = [T, F, F]
    preds = [T, F, F]
    crow = per_dimension_cells(tasks, dims, golds, preds, parity=True)
    # mt_en_de has no triple at all: an empty row, still a task for the leaderboard's divisor
    assert list(crow) == ["mt_en_de", "stance"]
    assert crow["mt_en_de"] == {}
    assert crow["stance"] == {"social": DimensionCell(1.0, 1)}
    # ours puts both mt_en_de examples in other: golds T F, preds T F -> 1.0, n = 2
    assert per_dimension_cells(tasks, dims, golds, preds)["mt_en_de"] == {"other": DimensionCell(1.0, 2)}


# --------------------------------------------------------------------------- across tasks

# Two tasks; stance has no temporal triple.
#   dialogue  d0 [temporal, social] T/T   d1 [social] F/T   d2 [temporal] F/F
#   stance    s0 [social] T/F             s1 [social, social] F/F
MISSING_TASKS = ["dialogue"] * 3 + ["stance"] * 2
MISSING_DIMS: list[list[str | None]] = [
    ["temporal", "social"],
    ["social"],
    ["temporal"],
    ["social"],
    ["social", "social"],
]
MISSING_GOLDS = [T, F, F, T, F]
MISSING_PREDS = [T, T, F, F, F]


def test_cells_of_two_tasks_one_lacking_a_dimension() -> None:
    ours = per_dimension_cells(MISSING_TASKS, MISSING_DIMS, MISSING_GOLDS, MISSING_PREDS)
    third = pytest.approx(1 / 3, abs=1e-12)
    # dialogue temporal = d0, d2: golds T F, preds T F -> 1.0, n = 2
    # dialogue social = d0, d1: golds T F, preds T T -> F1(T) 2/3, F1(F) 0 -> 1/3, n = 2
    # stance social = s0, s1: golds T F, preds F F -> F1(T) 0, F1(F) 2/3 -> 1/3, n = 2
    assert _scores(ours) == {"dialogue": {"temporal": (1.0, 2), "social": (third, 2)}, "stance": {"social": (third, 2)}}
    crow = per_dimension_cells(MISSING_TASKS, MISSING_DIMS, MISSING_GOLDS, MISSING_PREDS, parity=True)
    # stance social = s0, s1, s1: golds T F F, preds F F F -> F1(T) 0, F1(F): tp 2, fn 1 -> 4/5; M = 2/5, n = 3
    assert _scores(crow) == {
        "dialogue": {"temporal": (1.0, 2), "social": (third, 2)},
        "stance": {"social": (pytest.approx(2 / 5, abs=1e-12), 3)},
    }


def test_means_skip_a_missing_dimension_by_default_and_count_it_as_zero_on_the_leaderboard() -> None:
    ours = per_dimension_cells(MISSING_TASKS, MISSING_DIMS, MISSING_GOLDS, MISSING_PREDS)
    crow = per_dimension_cells(MISSING_TASKS, MISSING_DIMS, MISSING_GOLDS, MISSING_PREDS, parity=True)
    # ours: temporal = 1.0 over dialogue only; social = (1/3 + 1/3) / 2 = 1/3 over both
    assert dimension_means(ours) == _approx({"temporal": (1.0, 1), "social": (1 / 3, 2)})
    # CRoW's report_agg_metrics_across_tasks.py: per-triple cells, tasks without a dimension skipped:
    # social = (1/3 + 2/5) / 2 = 11/30
    assert dimension_means(crow) == _approx({"temporal": (1.0, 1), "social": (11 / 30, 2)})
    # CRoW's leaderboard: stance's temporal is 0, so temporal = (1.0 + 0) / 2 = 1/2; all seven dimensions
    # appear, those no task has at 0 / 2
    assert dimension_means(crow, missing_as_zero=True) == _approx(
        {
            "attribution": (0.0, 2),
            "physical": (0.0, 2),
            "temporal": (0.5, 2),
            "causal": (0.0, 2),
            "social": (11 / 30, 2),
            "comparison": (0.0, 2),
            "other": (0.0, 2),
        }
    )


# Three tasks, two of them MT; in MT only the wrong translation carries knowledge.
#   dialogue  x0 [social] T/T     x1 [social] F/T
#   mt_zh_en  m0 [] T/T           m1 [physical] F/T
#   mt_en_de  e0 [] T/F           e1 [] F/F
MT_TASKS = ["dialogue", "dialogue", "mt_zh_en", "mt_zh_en", "mt_en_de", "mt_en_de"]
MT_DIMS: list[list[str | None]] = [["social"], ["social"], [], ["physical"], [], []]
MT_GOLDS = [T, F, T, F, T, F]
MT_PREDS = [T, T, T, T, F, F]


def test_mt_tasks_under_both_conventions() -> None:
    ours = per_dimension_cells(MT_TASKS, MT_DIMS, MT_GOLDS, MT_PREDS)
    crow = per_dimension_cells(MT_TASKS, MT_DIMS, MT_GOLDS, MT_PREDS, parity=True)
    third = pytest.approx(1 / 3, abs=1e-12)
    # dialogue social = x0, x1: golds T F, preds T T -> 1/3 (both conventions)
    # mt_zh_en physical = m1: gold F, pred T -> F1(T) 0, F1(F) 0 -> 0.0
    # ours only: mt_zh_en other = m0: T vs T -> 1.0; mt_en_de other = e0, e1: golds T F, preds F F
    #   -> F1(T) 0, F1(F): tp 1, fp 1 -> 2/3 -> 1/3
    assert _scores(ours) == {
        "dialogue": {"social": (third, 2)},
        "mt_zh_en": {"physical": (0.0, 1), "other": (1.0, 1)},
        "mt_en_de": {"other": (third, 2)},
    }
    assert _scores(crow) == {"dialogue": {"social": (third, 2)}, "mt_zh_en": {"physical": (0.0, 1)}, "mt_en_de": {}}

    # ours, all tasks: social 1/3 (1 task), physical 0.0 (1 task), other = (1.0 + 1/3) / 2 = 2/3 (2 tasks)
    assert dimension_means(ours) == _approx({"physical": (0.0, 1), "social": (1 / 3, 1), "other": (2 / 3, 2)})
    # ours without MT: only dialogue, so only social
    assert dimension_means(ours, include_mt=False) == _approx({"social": (1 / 3, 1)})
    # leaderboard, all tasks: divisor 3 (the empty mt_en_de counts): social = 1/3 / 3 = 1/9
    lb: dict[str, tuple[Any, int]] = dimension_means(crow, missing_as_zero=True)
    assert lb["social"] == (pytest.approx(1 / 9, abs=1e-12), 3)
    assert lb["physical"] == (0.0, 3)
    # leaderboard without MT (non_mt_metrics): dialogue alone, physical 0 there
    lb_non_mt: dict[str, tuple[Any, int]] = dimension_means(crow, missing_as_zero=True, include_mt=False)
    assert lb_non_mt["social"] == (pytest.approx(1 / 3, abs=1e-12), 1)
    assert lb_non_mt["physical"] == (0.0, 1)
    # leaderboard MT only (mt_metrics): the two MT rows, social 0 in both
    mt_only = {task: row for task, row in crow.items() if crow_metrics.is_mt_task(task)}
    lb_mt = dimension_means(mt_only, missing_as_zero=True)
    assert lb_mt["social"] == (0.0, 2)
    assert lb_mt["physical"] == (0.0, 2)


# --------------------------------------------------------------------------- CRoW's published numbers

TASK_ROWS: list[dict[str, Any]] = json.loads((CROW / "task_leaderboard.json").read_text(encoding="utf-8"))
SYSTEMS: list[dict[str, Any]] = json.loads((CROW / "leaderboard.json").read_text(encoding="utf-8"))
WITH_DIMENSIONS = [s for s in SYSTEMS if "dimensions" in s["metrics"]]


def _published_cells(submission_id: str) -> dict[str, dict[str, DimensionCell]]:
    """A system's per-task dimension scores from the leaderboard; its integer 0 marks a dimension the task lacks.

    The leaderboard does not publish cell sizes: n = 1 stands in (the means do not use it).
    """
    cells = {}
    for row in TASK_ROWS:
        if row["submission_id"] == submission_id:
            dims = row["metrics"]["dimensions"]
            cells[row["task"]] = {d: DimensionCell(float(v), 1) for d, v in dims.items() if type(v) is not int}
    return cells


def test_leaderboard_marks_missing_dimensions_with_integer_zero() -> None:
    lacking = {
        (row["task"], dim)
        for row in TASK_ROWS
        if "dimensions" in row["metrics"]
        for dim, v in row["metrics"]["dimensions"].items()
        if type(v) is int
    }
    assert lacking == {("summarization", "other"), ("dialogue", "other"), ("stance", "temporal")}


@pytest.mark.parametrize("system", WITH_DIMENSIONS, ids=lambda s: f"{s['model_name']}-{s['submission_id']}")
def test_missing_as_zero_rebuilds_the_leaderboards_dimension_blocks(system: dict[str, Any]) -> None:
    cells = _published_cells(system["submission_id"])
    assert set(cells) == set(system["tasks"])
    mt_only = {task: row for task, row in cells.items() if crow_metrics.is_mt_task(task)}
    # every system has the five non-MT tasks; some only zh-en of the four MT pairs
    blocks: dict[str, tuple[dict[str, tuple[Any, int]], int]] = {
        "metrics": (dimension_means(cells, missing_as_zero=True), 5 + len(mt_only)),
        "non_mt_metrics": (dimension_means(cells, missing_as_zero=True, include_mt=False), 5),
        "mt_metrics": (dimension_means(mt_only, missing_as_zero=True), len(mt_only)),
    }
    for block, (means, n_tasks) in blocks.items():
        published = system[block]["dimensions"]
        assert list(means) == list(crow_metrics.CROW_LEADERBOARD_DIMENSIONS)
        assert means == {dim: (pytest.approx(value, abs=1e-12), n_tasks) for dim, value in published.items()}, block
    # our rule leaves summarization and dialogue out of other: two tasks fewer, and not the published number
    n_tasks = len(cells)
    other, n_other = dimension_means(cells)["other"]
    assert n_other == n_tasks - 2
    assert other == pytest.approx(system["metrics"]["dimensions"]["other"] * n_tasks / (n_tasks - 2), abs=1e-12)


# CRoW paper, Table 3 (Macro-F1 per dimension, %, all tasks). GPT-4-CoT's row is the leaderboard's per-task
# numbers averaged over the tasks that have the dimension (report_agg_metrics_across_tasks.py); GPT-3.5's row
# counts stance's missing temporal as 0, as the leaderboard does. The other rows come from other runs.
PAPER_TABLE_3 = {
    "GPT-4-CoT": ((73.4, 72.0, 69.0, 71.7, 73.1, 74.0), False),
    "GPT-3": ((65.3, 64.1, 56.6, 64.3, 65.8, 70.1), True),
}


@pytest.mark.parametrize("name", sorted(PAPER_TABLE_3))
def test_paper_table_3_rows_and_the_convention_each_follows(name: str) -> None:
    (system,) = [s for s in WITH_DIMENSIONS if s["model_name"] == name]
    cells = _published_cells(system["submission_id"])
    row, missing_as_zero = PAPER_TABLE_3[name]
    six = crow_metrics.CROW_LEADERBOARD_DIMENSIONS[:6]
    means = dimension_means(cells, missing_as_zero=missing_as_zero)
    for dim, value in zip(six, row, strict=True):
        assert 100 * means[dim][0] == pytest.approx(value, abs=0.05 + 1e-9), dim
    # the other convention misses temporal (stance lacks it) by several points
    other_means = dimension_means(cells, missing_as_zero=not missing_as_zero)
    assert abs(100 * other_means["temporal"][0] - row[2]) > 5


# --------------------------------------------------------------------------- against scikit-learn


def test_parity_cells_match_a_per_triple_sklearn_computation() -> None:
    sklearn_metrics = pytest.importorskip("sklearn.metrics")
    rng = random.Random(7)
    task_names = ["dialogue", "stance", "mt_zh_en"]
    tasks = [rng.choice(task_names) for _ in range(300)]
    dims: list[list[str | None]] = [
        [rng.choice(crow_metrics.CROW_LEADERBOARD_DIMENSIONS) for _ in range(rng.choice([0, 1, 1, 2, 3]))]
        for _ in tasks
    ]
    golds = [rng.random() < 0.5 for _ in tasks]
    preds = [rng.random() < 0.6 for _ in tasks]
    # the script's procedure, independently: one (ref, pred) pair per triple into its dimension's lists
    pairs: dict[str, dict[str, tuple[list[int], list[int]]]] = {}
    for task, entry, gold, pred in zip(tasks, dims, golds, preds, strict=True):
        for dim in entry:
            refs, hyps = pairs.setdefault(task, {}).setdefault(str(dim), ([], []))
            refs.append(int(gold))
            hyps.append(int(pred))
    crow = per_dimension_cells(tasks, dims, golds, preds, parity=True)
    assert set(crow) == set(task_names) == set(pairs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # single-class cells: sklearn warns, then scores the absent class 0
        for task, by_dim in pairs.items():
            assert set(crow[task]) == set(by_dim)
            for dim, (refs, hyps) in by_dim.items():
                expected = float(sklearn_metrics.f1_score(refs, hyps, average="macro"))
                assert crow[task][dim].macro_f1 == pytest.approx(expected, abs=1e-12), (task, dim)
                assert crow[task][dim].n == len(refs), (task, dim)
    # a double triple really occurs in this sample, so the two conventions differ somewhere
    assert any(len(set(entry)) < len(entry) for entry in dims)
    assert _scores(crow) != _scores(per_dimension_cells(tasks, dims, golds, preds))


# --------------------------------------------------------------------------- refusals


@pytest.mark.parametrize(
    ("tasks", "dims", "golds", "preds", "message"),
    [
        (["a"], [["social"], ["social"]], [T, F], [T, F], "tasks and golds differ in length: 1 != 2"),
        (["a", "a"], [["social"]], [T, F], [T, F], "dimensions and golds differ in length: 1 != 2"),
        (["a", "a"], [["social"], []], [T, F], [T], "golds and preds differ in length"),
        ([], [], [], [], "no examples"),
        (["a"], ["social"], [T], [T], r"dimensions\[0\] must be a list"),
        (["a"], [None], [T], [T], r"dimensions\[0\] must be a list"),
        ([" "], [["social"]], [T], [T], r"tasks\[0\] must be a non-empty task name"),
    ],
)
def test_per_dimension_cells_refuses_bad_input(
    tasks: list[Any], dims: list[Any], golds: list[bool], preds: list[bool], message: str
) -> None:
    for parity in (False, True):
        with pytest.raises(ValueError, match=message):
            per_dimension_cells(tasks, dims, golds, preds, parity=parity)


def test_dimension_means_refuses_bad_input() -> None:
    with pytest.raises(ValueError, match="no tasks to average"):
        dimension_means({})
    with pytest.raises(ValueError, match="no non-MT tasks to average"):
        dimension_means({"mt_zh_en": {"social": DimensionCell(0.5, 2)}}, include_mt=False)
    with pytest.raises(ValueError, match="must be a DimensionCell"):
        dimension_means({"dialogue": {"social": 0.5}})  # type: ignore[dict-item]


@pytest.mark.parametrize(("score", "n"), [(1.5, 1), (-0.1, 1), (math.nan, 1), (0.5, 0), (0.5, True), (0.5, 2.0)])
def test_dimension_cell_refuses_impossible_values(score: float, n: Any) -> None:
    with pytest.raises(ValueError):
        DimensionCell(score, n)
