"""The record culture-adapt carries from stage to stage: one source item, and what each stage made of it.

The source sets ``split``, ``source_id``, ``source_lang`` and ``source``; every later field
stays unset until its stage fills it in (``names`` and ``places`` by extract, ``relevance``,
``irrelevant`` and ``mode`` by relevance, ``draft``, ``draft_lang`` and ``adapted`` by adapt,
``items`` by localize and translate, ``back`` by back_translate, the rest by keep). The
item texts are :class:`~senseforge.pipelines.culture_adapt.item.Fields`, stored in their
JSON form (:meth:`~senseforge.pipelines.culture_adapt.item.Fields.to_json`).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from senseforge.pipelines.culture_adapt.item import Fields
from senseforge.pipelines.panel import PanelVerdict
from senseforge.pipelines.runstore import Record, as_stored


def item_id(lang: str, source_id: str) -> str:
    """The released id: ``adapt_<lang>_<source id>``."""
    return f"adapt_{lang}_{source_id}"


Mode = Literal["full", "names", "none"]
"""How an item is adapted: the whole of it, its person names only, or not at all."""


class Verdict(BaseModel):
    """The relevance stage's judgement of one element of an item (its concept, names or places)."""

    model_config = ConfigDict(extra="forbid")

    value: str
    """The element as the prompts showed it (names and places joined by commas)."""
    votes: list[bool | None]
    """One vote per prompt: ``True`` = foreign to the culture, ``False`` = familiar, ``None`` = unreadable."""
    irrelevant: bool
    """Whether enough prompts voted it foreign."""


class Scores(BaseModel):
    """How faithful one translation is: compared with the original directly, and through its back-translation."""

    model_config = ConfigDict(extra="forbid")

    direct: float
    """The translation against the adaptation-language item."""
    back: float
    """Its back-translation against the adaptation-language item."""


class Faithfulness(BaseModel):
    """The keep stage's faithfulness measurements of an item's translations."""

    model_config = ConfigDict(extra="forbid")

    measure: dict[str, str]
    """What scored them (the scorer's identity: name, package, version …)."""
    threshold: float
    """The score a translation needs, directly or back-translated."""
    scores: dict[str, Scores]
    """Per further language."""


class Untranslated(BaseModel):
    """A translation that copies its source (see :mod:`~senseforge.pipelines.culture_adapt.copies`)."""

    model_config = ConfigDict(extra="forbid")

    lang: str
    """The language the copy was meant to be in."""
    source_lang: str
    """The language of the text it copies."""
    similarity: float
    """Shingle Jaccard of the copy with its source."""
    detected: str | None
    """The language the identifier found in the copy, if any."""
    source: str
    """The text it copies (question and options)."""


class AdaptRecord(Record):
    """One source item on its way through culture-adapt (fields unset until their stage sets them)."""

    split: str
    """The split the item keeps (``train``, ``validation``, ``test``)."""
    source_id: str
    """The item's id in its source file."""
    source_lang: str
    """The language of the source items."""
    source: Fields
    """The item as read."""
    names: list[str] | None = None
    """Person names found in the item."""
    places: list[str] | None = None
    """Places found in the item."""
    extractor: str | None = None
    """What found them: ``lm``, or the spaCy pipeline's name."""
    relevance: dict[str, Verdict] | None = None
    """Per element judged (``concept``, ``names``, ``places``), the verdict."""
    irrelevant: list[str] | None = None
    """The elements judged foreign to the culture, in :data:`~.templates.ELEMENTS` order."""
    mode: Mode | None = None
    """How the item is adapted."""
    draft: Fields | None = None
    """The item after adapting (the source itself when it needed no adapting)."""
    draft_lang: str | None = None
    """The language of the draft: the adaptation language after a full rewrite, else the source language."""
    adapted: bool | None = None
    """Whether a model rewrote the item."""
    items: dict[str, Fields] | None = None
    """The item per language: the adaptation language first, then each translation."""
    back: dict[str, Fields] | None = None
    """Each translation back-translated into the adaptation language."""
    similarity: Faithfulness | None = None
    """How faithful the translations are."""
    concept_lost_in: list[str] | None = None
    """The languages whose question no longer holds the concept."""
    lang_detected: dict[str, str | None] | None = None
    """Per language, the language the identifier found in the item's question."""
    untranslated: Untranslated | None = None
    """A translation that copies its source, when copies are only flagged."""
    panels: dict[str, PanelVerdict] | None = None
    """Per language, what the verification panel (``--panel``) answered and decided of the item in it; unset
    without a panel."""

    def shown_checked(self) -> dict[str, Any]:
        """The item's latest text: its translations once it has them, else its draft, else its source."""
        if self.items is not None:
            return {"items": as_stored(self.items)}
        if self.draft is not None:
            return {"draft": as_stored(self.draft)}
        return {"source": as_stored(self.source)}
