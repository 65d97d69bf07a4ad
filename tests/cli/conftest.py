"""Fixtures the CLI tests share."""

from __future__ import annotations

from pathlib import Path

import pytest

from senseforge.kb.conceptnet import import_dump


@pytest.fixture
def kb(tmp_path: Path) -> Path:
    """Our demo knowledge base, imported into a store of the test's own."""
    folder = tmp_path / "kb"
    import_dump("demo", folder)
    return folder
