"""Names and places found by a spaCy pipeline the user has installed (never downloaded here).

``model`` is what :func:`spacy.load` takes: an installed pipeline package
(``en_core_web_sm``) or a folder a pipeline was saved to. Entities labelled ``PERSON``
or ``PER`` are person names; ``GPE``, ``LOC``, ``FAC`` are places. Spans are returned as
written, deduplicated in order.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from senseforge.errors import ConfigError, MissingDependencyError

PERSON_LABELS = frozenset({"PERSON", "PER"})
PLACE_LABELS = frozenset({"GPE", "LOC", "FAC"})


@cache
def _pipeline(model: str) -> Any:
    try:
        import spacy
    except ImportError as exc:
        raise MissingDependencyError("extractor=spacy needs spaCy and a pipeline: pip install 'spacy>=3.7,<4'") from exc
    try:
        return spacy.load(model)
    except OSError as exc:
        raise ConfigError(
            f"--spacy-model {model!r}: no such installed pipeline or folder ({exc}); install one with pip first"
        ) from exc


def spacy_spans(model: str, text: str) -> tuple[list[str], list[str]]:
    """The person names and the places spaCy's entity recogniser finds in ``text``."""
    doc = _pipeline(model)(text)
    names: dict[str, None] = {}
    places: dict[str, None] = {}
    for ent in doc.ents:
        if ent.label_ in PERSON_LABELS:
            names[ent.text] = None
        elif ent.label_ in PLACE_LABELS:
            places[ent.text] = None
    return list(names), list(places)
