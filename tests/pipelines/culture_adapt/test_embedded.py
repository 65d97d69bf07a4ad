"""``build culture-adapt`` with the bundled Gemma 3 270M on the first 10 of our 20 CommonsenseQA items, end to end: a
kill -9 mid-run resumes to the bytes an uninterrupted run writes, and a rerun on the same cache makes no backend call.
(Ten are enough for items to reach the last check; the other ten only made the suite slower.)"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from senseforge.pipelines.culture_adapt.config import CultureAdaptConfig
from senseforge.pipelines.culture_adapt.recipe import CULTURE_ADAPT
from senseforge.pipelines.demo import CULTURE_ADAPT_DEMO
from senseforge.pipelines.runner import build
from senseforge.store.db import Store

SAMPLE = Path(__file__).parents[2] / "fixtures" / "csqa" / "adapt_sample.jsonl"
ITEMS = 10
PER_LANG = ("dataset/test.jsonl", "items/test.jsonl", "funnel.json")
OUTPUTS = (
    *(f"{lang}/{name}" for lang in ("id", "su") for name in PER_LANG),
    "funnel.json",
    "cost.json",
    "rejects.jsonl",
)


@pytest.mark.slow
def test_embedded_model_end_to_end_kill_9_and_rerun(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kill_build: Callable[..., None]
) -> None:
    """One cold build, killed with SIGKILL while it translates and resumed; then the same build uninterrupted into
    a new run directory on that cache: every call answered from it, and every output byte the same as the
    resumed run's (so the resume stored exactly what an uninterrupted run stores)."""
    source = tmp_path / "sample.jsonl"
    source.write_text("".join(SAMPLE.read_text(encoding="utf-8").splitlines(keepends=True)[:ITEMS]), encoding="utf-8")
    config = CultureAdaptConfig(source=(str(source),), **CULTURE_ADAPT_DEMO)
    flags = ["--source", str(source), "--max-tokens", str(CULTURE_ADAPT_DEMO["max_tokens"])]
    killed = tmp_path / "killed"
    home = tmp_path / "home"
    kill_build("culture-adapt", flags, killed, home, "localize", 1)
    monkeypatch.setenv("SENSEFORGE_HOME", str(home))
    resumed = build(CULTURE_ADAPT, config, killed, resume=True, store=Store())
    assert resumed.state == "done"

    again = build(CULTURE_ADAPT, config, tmp_path / "again", store=Store())
    assert again.ledger["calls"] == again.ledger["cache_hits"] > 0
    for name in OUTPUTS:
        # a language that keeps nothing writes no split file (the 270M model's copies are rejected `untranslated`)
        assert (killed / name).is_file() == (again.run_dir / name).is_file(), name
        if (killed / name).is_file():
            assert (killed / name).read_bytes() == (again.run_dir / name).read_bytes(), name
    assert (killed / "funnel.json").is_file() and (killed / "rejects.jsonl").is_file()

    funnel = json.loads((killed / "funnel.json").read_text())
    rows = {row["stage"]: row for row in funnel["stages"]}
    assert rows["source"]["in"] == ITEMS
    assert rows["keep"]["in"] > 0, funnel  # items get through every model stage to the last check
    adapted = [figure["values"] for figure in funnel["figures"] if figure["name"] == "adapted"]
    assert sum(adapted[0].values()) == funnel["kept"] if adapted else funnel["kept"] == 0
    for row in funnel["stages"]:
        assert row["in"] == row["out"] + sum(row["rejected"].values())
    kept_su = killed / "su" / "items" / "test.jsonl"
    for item in (json.loads(line) for line in (kept_su.read_text().splitlines() if kept_su.is_file() else [])):
        assert item["id"].startswith("adapt_su_") and set(item["metadata"]["similarity"]["scores"]["su"]) == {
            "direct",
            "back",
        }
