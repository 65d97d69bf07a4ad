"""Concept rows in languages a run does not ask for are left out with a warning, never silently."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from senseforge.pipelines.recipes import recipes


def _table(tmp_path: Path) -> Path:
    table = tmp_path / "concepts.csv"
    table.write_text(
        "category,concept,lang\nculinary,rendang,id\nculinary,gudeg,jv\nplace,Borobudur,jv\nplace,Citarum,\n",
        encoding="utf-8",
    )
    return table


@pytest.mark.parametrize(("recipe", "settings"), [("culture-gen", {"langs": ["id"]}), ("human-gen", {"lang": "id"})])
def test_rows_of_other_languages_are_named(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, recipe: str, settings: dict[str, object]
) -> None:
    chosen = recipes()[recipe]
    config = chosen.config_model.model_validate({"concepts": str(_table(tmp_path)), **settings})
    with caplog.at_level(logging.WARNING):
        records, _ = chosen.source(config).records(config)
    assert records
    [message] = [r.getMessage() for r in caplog.records if "left out" in r.getMessage()]
    assert "2 row(s)" in message and "jv" in message
