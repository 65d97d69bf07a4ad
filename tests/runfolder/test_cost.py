"""A cost file reads into :class:`Cost` and writes back as it was, its per-kept key named after what was kept."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from senseforge.runfolder.cost import Cost
from senseforge.runfolder.folder import read_cost

GOLDEN = Path(__file__).parents[1] / "fixtures" / "golden"


@pytest.mark.parametrize(
    ("folder", "unit"),
    [
        ("demo/crow", "example"),
        ("demo/mcsqa-ja", "question"),
        ("demo/culture-gen/id", "item"),
        ("human-gen-people", "item"),
    ],
)
def test_a_golden_cost_reads_and_writes_back_byte_for_byte(folder: str, unit: str) -> None:
    path = GOLDEN / folder / "cost.json"
    text = path.read_text(encoding="utf-8")
    cost = read_cost(path)
    assert cost is not None and cost.kept_unit == unit
    document = json.loads(text)
    assert cost.cost_per_kept_item_usd == document[f"cost_per_kept_{unit}_usd"]
    assert cost.model_dump(mode="json") == document and list(cost.model_dump(mode="json")) == list(document)


def test_no_cost_file_is_none(tmp_path: Path) -> None:
    assert read_cost(tmp_path / "cost.json") is None


def test_batched_calls_are_written_only_when_some_were() -> None:
    stage = {"models": ["m"], "calls": 4, "tokens_in": 1, "tokens_out": 1, "cost_usd": None}
    cost = Cost.model_validate(
        {
            "stages": {"a": stage, "b": {**stage, "batched_calls": 2}},
            "human": {"judgements": 0, "rate_usd": None, "cost_usd": None},
            "unpriced_models": ["m"],
            "total_usd": None,
            "kept": 0,
            "cost_per_kept_item_usd": None,
        }
    )
    dumped = cost.model_dump(mode="json")
    assert "batched_calls" not in dumped["stages"]["a"] and dumped["stages"]["b"]["batched_calls"] == 2
