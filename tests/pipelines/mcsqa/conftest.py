"""Fixtures for the mCSQA recipe tests: the demo knowledge base, imported once."""

from __future__ import annotations

from pathlib import Path

STAGES = (
    "select",
    "generate",
    "filter",
    "refine",
    "filter_refined",
    "distractors",
    "shuffle",
    "verify",
    "review",
    "moderate",
    "split",
)
"""The recipe's stages, in the order its funnel lists them."""


def read_jsonl(path: Path) -> list[dict[str, object]]:
    import json

    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
