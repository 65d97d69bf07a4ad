"""The spaCy extractor: a real spaCy pipeline (blank English with an entity ruler, built and saved in the test,
so nothing is downloaded) loaded from its folder, its entities sorted into names and places."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import spacy

from senseforge.errors import ConfigError
from senseforge.pipelines.culture_adapt.spans import spacy_spans


def saved_pipeline(folder: Path) -> str:
    """A blank English pipeline whose entity ruler knows a few names and places, saved to ``folder``."""
    nlp = spacy.blank("en")
    ruler = nlp.add_pipe("entity_ruler")
    ruler.add_patterns(  # type: ignore[attr-defined]
        [
            {"label": "PERSON", "pattern": "James"},
            {"label": "PERSON", "pattern": "Sally"},
            {"label": "GPE", "pattern": "Michigan"},
            {"label": "GPE", "pattern": [{"LOWER": "new"}, {"LOWER": "york"}]},
            {"label": "ORG", "pattern": "Acme"},
        ]
    )
    nlp.to_disk(folder)
    return str(folder)


def test_entities_become_names_and_places_once_each(tmp_path: Path) -> None:
    model = saved_pipeline(tmp_path / "ner")
    text = "James and Sally drove from Michigan to New York for Acme.\nA. New York\nB. james"
    names, places = spacy_spans(model, text)
    assert names == ["James", "Sally"]
    assert places == ["Michigan", "New York"]  # repeated once; an ORG is neither


def test_a_missing_pipeline_is_a_config_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no-such-pipeline"):
        spacy_spans(str(tmp_path / "no-such-pipeline"), "James")


def test_a_recipe_run_with_the_spacy_extractor(tmp_path: Path) -> None:
    """``--extractor spacy``: names and places come from the pipeline, no model is asked for them."""
    from senseforge.pipelines.culture_adapt.config import CultureAdaptConfig
    from senseforge.pipelines.culture_adapt.recipe import CULTURE_ADAPT
    from senseforge.pipelines.runner import build
    from senseforge.pipelines.runstore import RunStore, sqlite_url
    from senseforge.store.db import Store

    row = {
        "id": "s-1",
        "question": "James drove to Michigan to buy a sofa. Where did he shop?",
        "question_concept": "sofa",
        "choices": {"label": list("ABCDE"), "text": ["furniture store", "bakery", "pond", "zoo", "moon"]},
        "answerKey": "A",
    }
    source = tmp_path / "source.jsonl"
    source.write_text(json.dumps(row) + "\n", encoding="utf-8")
    config = CultureAdaptConfig(
        source=(str(source),),
        model="scripted/culture-adapt-author",
        extractor="spacy",
        spacy_model=saved_pipeline(tmp_path / "ner"),
        similarity="chrf",
    )
    run_dir = tmp_path / "run"
    assert build(CULTURE_ADAPT, config, run_dir, store=Store()).state == "done"
    run = RunStore(sqlite_url(run_dir / "run.db"))
    try:
        (extracted,) = run.results("extract", "ok")
    finally:
        run.close()
    assert extracted.payload["names"] == ["James"] and extracted.payload["places"] == ["Michigan"]
    assert extracted.payload["extractor"] == config.spacy_model and "calls" not in extracted.payload
