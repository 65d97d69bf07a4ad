"""Putri et al.'s published accuracies: each overall number is the item-weighted mean of its categories.

``reference_results_0shot_raw_cat.csv`` gives, per model, dataset, language and prompt, the
overall accuracy and the accuracy in each of five categories, but no item counts. The
counts come from the released test files (see ``category_counts.json`` and SOURCES.md).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from senseforge.evaluate import metrics

RESULTS = Path(__file__).parents[1] / "fixtures" / "id-csqa-results"
CATEGORIES = ("history", "culture", "activity", "culinary", "place")

COUNTS: dict[str, dict[str, dict[str, int]]] = json.loads(
    (RESULTS / "category_counts.json").read_text(encoding="utf-8")
)
with (RESULTS / "reference_results_0shot_raw_cat.csv").open(encoding="utf-8", newline="") as _handle:
    ROWS = list(csv.DictReader(_handle))


def _row_id(row: dict[str, str]) -> str:
    return f"{row['Model']}/{row['Dataset Name']}/{row['Lang']}/prompt{row['Prompt']}"


def test_the_table_has_all_runs() -> None:
    assert len(ROWS) == 180  # 15 models x 2 datasets x 2 languages x 3 prompts
    assert {(r["Dataset Name"], r["Lang"]) for r in ROWS} == {
        (dataset, lang) for dataset in COUNTS if not dataset.startswith("_") for lang in COUNTS[dataset]
    }


@pytest.mark.parametrize("row", ROWS, ids=_row_id)
def test_overall_accuracy_is_the_item_weighted_mean_of_the_categories(row: dict[str, str]) -> None:
    counts = COUNTS[row["Dataset Name"]][row["Lang"]]
    per_category = [float(row[f"Accuracy_{c.capitalize()}"]) for c in CATEGORIES]
    weights = [counts[c] for c in CATEGORIES]
    assert metrics.weighted_mean(per_category, weights) == pytest.approx(float(row["Accuracy"]), abs=1e-9)
    # the counts are the real denominators: every accuracy is a whole number of items right
    for accuracy, n in [*zip(per_category, weights, strict=True), (float(row["Accuracy"]), sum(weights))]:
        right = accuracy * n / 100
        assert right == pytest.approx(round(right), abs=1e-6)


def test_an_unweighted_mean_would_not_do() -> None:
    # on the unbalanced LLM-generated sets the plain mean of categories misses the published number
    misses = 0
    for row in ROWS:
        if row["Dataset Name"] != "v3_llm_gen":
            continue
        plain = sum(float(row[f"Accuracy_{c.capitalize()}"]) for c in CATEGORIES) / len(CATEGORIES)
        misses += abs(plain - float(row["Accuracy"])) > 1e-6
    assert misses > 80  # of 90 rows
