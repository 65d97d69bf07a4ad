"""``check_dataset``: each item's language said with where it came from, and the cross-lingual check saying
what it compared, or why it compared nothing."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from senseforge.analyze.contamination import check_dataset
from senseforge.registry.store import Registry

FIXTURES = Path(__file__).parents[1] / "fixtures"
SOURCES = FIXTURES / "contamination" / "csqa_sources.jsonl"
ADAPTED = FIXTURES / "contamination" / "adapted.jsonl"
ADAPTED_ID = FIXTURES / "contamination" / "adapted_id.jsonl"


def test_without_embeddings_nothing_is_compared_and_the_report_says_why(tmp_path: Path) -> None:
    registry = Registry.open(tmp_path / "reg")
    registry.add(SOURCES, "csqa-dev", lang="en", embed=False)
    report = check_dataset(str(ADAPTED), registry)
    doc = report.to_json()
    assert doc["cross_lingual_checked"] is False and doc["cross_lingual_compared"] == 0
    assert doc["cross_lingual_reason"] == "no embeddings in the registry for csqa-dev (registered with --no-embeddings)"
    assert doc["languages"] == {"by_lang": {"id": {"row": 5}, "su": {"row": 5}}, "note": None}
    assert [(i["lang"], i["lang_from"]) for i in doc["item_languages"]] == [("id", "row")] * 3 + [("su", "row")] * 3 + [
        ("id", "row")
    ] * 2 + [("su", "row")] * 2
    off = check_dataset(str(ADAPTED_ID), registry, cross=False, lang="id")
    assert off.cross_lingual_reason == "not asked for (--no-cross-lingual)"
    assert {(i.lang, i.lang_from) for i in off.items} == {("id", "flag")}


def test_a_flag_that_contradicts_a_row_is_a_located_error(tmp_path: Path) -> None:
    from senseforge.errors import DataValidationError

    registry = Registry.open(tmp_path / "reg")
    registry.add(SOURCES, "csqa-dev", lang="en", embed=False)
    with pytest.raises(DataValidationError, match=r"adapted\.jsonl:4: lang: is 'su', but lang='id' was asked for"):
        check_dataset(str(ADAPTED), registry, lang="id")


def test_without_the_langid_extra_the_assumption_is_stated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from senseforge.data import langid

    registry = Registry.open(tmp_path / "reg")
    registry.add(SOURCES, "csqa-dev", lang="en", embed=False)
    langid._identifier.cache_clear()
    monkeypatch.setitem(sys.modules, "gcld3", None)
    try:
        report = check_dataset(str(ADAPTED_ID), registry)
    finally:
        langid._identifier.cache_clear()
    assert {(i.lang, i.lang_from) for i in report.items} == {("en", "assumed")}
    assert report.languages is not None and report.languages.note is not None
    assert "5 item(s) whose file does not say their language are assumed to be in en" in report.languages.note
