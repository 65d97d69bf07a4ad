"""The config of an mCSQA build: the engine's shared settings plus the recipe's own."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import AliasChoices, Field, field_validator

from senseforge.data.lang import normalize_tag
from senseforge.errors import ConfigError
from senseforge.kb import conceptnet
from senseforge.kb.question_sets import DEFAULT_RELATIONS
from senseforge.pipelines.config import ReviewSettings, VerifiedConfig, is_chat
from senseforge.pipelines.mcsqa.templates import DEFAULT_SAMPLING, STAGES, resolve_language, template_hash
from senseforge.pipelines.split import Ratios

LM_STAGES: tuple[str, ...] = ("generate", "refine", "distractors", "verify")
"""Stages that call a model, each with its own ``--stage-model``."""

VerifyBy = Literal["auto", "loglik", "generate"]


class McsqaReviewSettings(ReviewSettings):
    """mCSQA's review panel: its help, and ``lm_review_as_hard`` for ``lm_review_final``."""

    final: bool = Field(default=False, validation_alias=AliasChoices("final", "lm_review_final", "lm_review_as_hard"))
    """Items the LM panel accepts become Hard (labelled ``review: lm``); else they go on to people."""
    k: int = Field(default=2, ge=1, validation_alias=AliasChoices("k", "review_k"))
    """People per reviewed item (paper: two); all must accept."""


class McsqaConfig(VerifiedConfig):
    """Everything that decides what an mCSQA build produces (hashed into the manifest)."""

    lm_stages: ClassVar[tuple[str, ...]] = LM_STAGES
    review_stage: ClassVar[str | None] = "review"

    recipe: Literal["mcsqa"] = "mcsqa"
    lang: str
    """BCP-47 tag of the questions."""
    n: int | None = Field(default=6000, ge=1)
    """Question sets to sample (paper: 6,000), or every one when unset (``--all``)."""
    answers_per_set: int = Field(default=3, ge=1, le=3)
    """Questions per question set, each with another target as the answer (paper: all three)."""
    kb: str | None = None
    """Knowledge store folder (``None``: the default store)."""
    relations: tuple[str, ...] = DEFAULT_RELATIONS
    """ConceptNet relations that make question sets (the CSQA-style 22)."""
    source_lang: str | None = None
    """Language whose ConceptNet concepts stand in for ``lang`` (e.g. ``ms`` for Indonesian on 5.7)."""
    verify_by: VerifyBy = "auto"
    """LM verification by log-likelihood (local base models) or generation (chat APIs)."""
    review: McsqaReviewSettings = Field(default_factory=McsqaReviewSettings)
    """The review panel: LM judges, their policy, people and their policy."""
    ratios: tuple[float, float, float] = (0.8, 0.1, 0.1)
    """Train / validation / test shares of the split."""

    @field_validator("ratios")
    @classmethod
    def _ratios(cls, value: tuple[float, float, float]) -> tuple[float, float, float]:
        Ratios.of(value)
        return value

    @field_validator("lang")
    @classmethod
    def _tag(cls, value: str) -> str:
        return normalize_tag(value)

    @property
    def lm_review_as_hard(self) -> bool:
        """mCSQA's name for :attr:`lm_review_final`."""
        return self.review.final

    def input_changes(self, manifest: Mapping[str, Any]) -> list[str]:
        """How the inputs outside the config differ from those the run's manifest records (the registry, and the
        knowledge store, see :func:`knowledge`); empty when they are the same or the manifest predates the record."""
        changed = super().input_changes(manifest)
        recorded = manifest.get("knowledge")
        if not isinstance(recorded, Mapping):
            return changed
        return [*changed, *knowledge_changes(recorded, self)]

    def verify_method(self) -> Literal["loglik", "generate"]:
        """How the verifier answers: generation for chat models, log-likelihood for base models (unless set)."""
        if self.verify_by != "auto":
            return self.verify_by
        spec = self.model_for("verify")
        return "generate" if is_chat(spec, self.options_for(spec)) else "loglik"


def template_hashes(config: McsqaConfig) -> dict[str, str]:
    """``{stage/lang/style: sha256}`` for the templates the build uses."""
    lang = resolve_language(config.lang)
    return {
        f"{stage}/{lang}/{config.style_for(stage)}": template_hash(stage, lang, config.style_for(stage))
        for stage in STAGES
    }


def generate_template_hash(config: McsqaConfig) -> str:
    """SHA-256 of the generate template the build writes its questions with (each item carries it)."""
    return template_hash("generate", resolve_language(config.lang), config.style_for("generate"))


def knowledge(config: McsqaConfig) -> dict[str, Any]:
    """The knowledge store the build reads, as the manifest records it: folder, edges file, its size and
    SHA-256, and the import's source, time and languages (:func:`senseforge.kb.conceptnet.identity`).

    The SHA-256 is the one recorded at import; a store from an older version is hashed once and
    remembered by (path, size, mtime) in the senseforge store.
    """
    from senseforge.store.db import Store

    return conceptnet.identity(Path(config.kb) if config.kb else None, digest=lambda path: Store().file_digest(path))


def knowledge_changes(recorded: Mapping[str, Any], config: McsqaConfig) -> list[str]:
    """What differs between the knowledge a run recorded and the store the config names now (each difference
    named); empty when the edges are the same bytes (a re-import of the same dump may keep them)."""
    was = f"{recorded.get('source')} imported {recorded.get('imported_at')}"
    try:
        now = knowledge(config)
    except ConfigError:
        return [f"the knowledge store {recorded.get('store')} is gone (the run read {was})"]
    if now.get("sha256") == recorded.get("sha256"):
        return []
    named = ("store", "source", "imported_at", "langs", "edges", "size", "sha256")
    changes = [f"{key}: {recorded.get(key)!r} → {now.get(key)!r}" for key in named if recorded.get(key) != now.get(key)]
    return [f"the knowledge store was re-imported ({', '.join(changes)})"]


def manifest_facts(config: McsqaConfig) -> dict[str, Any]:
    """The recipe's part of the manifest: seeds, sampling per step, template hashes, the knowledge store."""
    return {
        "knowledge": knowledge(config),
        "seeds": {
            "question_sets": config.seed,
            "shuffle": config.seed,
            "split": config.seed,
            **{f"sampling.{stage}": DEFAULT_SAMPLING[stage].seed for stage in STAGES},
        },
        "sampling": {stage: vars(DEFAULT_SAMPLING[stage]) for stage in STAGES},
        "templates": template_hashes(config),
    }
