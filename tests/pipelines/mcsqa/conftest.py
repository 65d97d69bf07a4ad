"""Fixtures for the mCSQA recipe tests: the demo knowledge base, imported once."""

from __future__ import annotations

from pathlib import Path

import pytest

from senseforge.kb.conceptnet import import_dump

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


@pytest.fixture(scope="session")
def demo_kb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Our demo knowledge base (bundled, ConceptNet dump format) as a knowledge store."""
    folder = tmp_path_factory.mktemp("kb") / "demo"
    import_dump("demo", folder)
    return folder


def read_jsonl(path: Path) -> list[dict[str, object]]:
    import json

    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
