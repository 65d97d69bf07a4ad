"""The spaCy extractor: a real spaCy pipeline (blank English with an entity ruler, built and saved in the test,
so nothing is downloaded) loaded from its folder, its entities sorted into names and places."""

from __future__ import annotations

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
