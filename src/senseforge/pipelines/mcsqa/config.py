"""The resolved configuration of an mCSQA build, its hash, and the run manifest."""

from __future__ import annotations

import hashlib
import json
import platform
import subprocess
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from senseforge import __version__
from senseforge.data.lang import normalize_tag
from senseforge.kb.question_sets import DEFAULT_RELATIONS
from senseforge.llm.registry import DEFAULT_MODEL, parse_spec
from senseforge.pipelines.templates import DEFAULT_SAMPLING, STAGES, resolve_language, template_hash

LM_STAGES: tuple[str, ...] = ("generate", "refine", "distractors", "verify")
"""Stages that call a model, each with its own ``--stage-model``."""

Style = Literal["auto", "chat", "completion"]
CHAT_PROVIDERS = frozenset({"openai", "scripted"})
"""Providers whose models are asked in chat form by default (the rest are local base models)."""


def is_chat(spec: str) -> bool:
    """Whether ``auto`` treats the model as a chat model (API) rather than a local base model."""
    return parse_spec(spec)[0] in CHAT_PROVIDERS


VerifyBy = Literal["auto", "loglik", "generate"]


class McsqaConfig(BaseModel):
    """Everything that decides what an mCSQA build produces (hashed into the manifest).

    Report-only settings (the human rate) and inputs that arrive over time (review
    decisions) are not part of it, so changing them never blocks ``--resume``.
    """

    model_config = ConfigDict(extra="forbid")

    recipe: Literal["mcsqa"] = "mcsqa"
    lang: str
    """BCP-47 tag of the questions."""
    n: int | None = Field(default=6000, ge=1)
    """Question sets to sample (paper: 6,000); ``None`` takes every one."""
    answers_per_set: int = Field(default=3, ge=1, le=3)
    """Questions per question set, each with another target as the answer (paper: all three)."""
    seed: int = 0
    """Seed of question-set sampling, choice shuffling and the split."""
    kb: str | None = None
    """Knowledge store folder (``None``: the default store)."""
    relations: tuple[str, ...] = DEFAULT_RELATIONS
    source_lang: str | None = None
    model: str = DEFAULT_MODEL
    """The model of every LM stage unless a stage names its own."""
    stage_models: dict[str, str] = Field(default_factory=dict)
    """Per-stage models (``generate``, ``refine``, ``distractors``, ``verify``)."""
    model_options: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Provider options per model spec (e.g. ``base_url``, ``max_concurrency``)."""
    style: Style = "auto"
    """Prompt style: chat templates, few-shot completion templates, or by provider."""
    verify_by: VerifyBy = "auto"
    """LM verification by log-likelihood (local base models) or generation (chat APIs)."""
    reviewers: tuple[str, ...] = ()
    """An LM review panel (model specs); empty: humans review."""
    lm_review_as_hard: bool = False
    """Items the LM panel accepts become Hard (labelled ``review: lm``); else they go on to humans."""
    review_k: int = Field(default=2, ge=1)
    """Human reviewers per item (paper: two); all must accept."""
    ratios: tuple[float, float, float] = (0.8, 0.1, 0.1)
    batch_size: int | None = Field(default=None, ge=1)
    """Records per stored batch; ``None``: 8 for local models (the progress bar moves per
    batch), 32 × the concurrency bound for APIs (enough requests to keep every slot busy).
    A killed run redoes at most one unstored batch, and the cache answers the calls in it
    that had finished."""
    call_rounds: int = Field(default=3, ge=1)
    """Passes over records whose calls failed transiently before the run stops as incomplete."""

    @field_validator("lang")
    @classmethod
    def _tag(cls, value: str) -> str:
        return normalize_tag(value)

    @field_validator("stage_models")
    @classmethod
    def _stages(cls, value: dict[str, str]) -> dict[str, str]:
        for stage, spec in value.items():
            if stage not in LM_STAGES:
                raise ValueError(f"unknown stage {stage!r} (stages with a model: {', '.join(LM_STAGES)})")
            parse_spec(spec)
        return value

    def model_for(self, stage: str) -> str:
        """The model spec of an LM stage."""
        return self.stage_models.get(stage, self.model)

    def options_for(self, spec: str) -> dict[str, Any]:
        """Provider options of a model spec."""
        return dict(self.model_options.get(spec, {}))

    def style_for(self, stage: str) -> Literal["chat", "completion"]:
        """Chat templates for API models, few-shot completion for local base models (unless set)."""
        if self.style != "auto":
            return self.style
        return "chat" if is_chat(self.model_for(stage)) else "completion"

    def verify_method(self) -> Literal["loglik", "generate"]:
        """How the verifier answers: generation for APIs, log-likelihood for local models (unless set)."""
        if self.verify_by != "auto":
            return self.verify_by
        return "generate" if is_chat(self.model_for("verify")) else "loglik"

    def batch_for(self, stage: str) -> int:
        """Records per batch of a stage (see :attr:`batch_size`)."""
        if self.batch_size is not None:
            return self.batch_size
        spec = self.model_for(stage) if stage in LM_STAGES else self.model
        if stage == "review" and self.reviewers:
            spec = self.reviewers[0]
        if parse_spec(spec)[0] != "openai":
            return 8
        bound = int(self.options_for(spec).get("max_concurrency", 8))
        return max(64, 32 * bound)

    def canonical(self) -> str:
        """The config as canonical JSON."""
        return json.dumps(self.model_dump(mode="json"), ensure_ascii=False, sort_keys=True, separators=(",", ":"))

    def hash(self) -> str:
        """SHA-256 of :meth:`canonical`."""
        return hashlib.sha256(self.canonical().encode("utf-8")).hexdigest()


def config_differences(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """``key: old → new`` for every top-level setting that differs."""
    keys = sorted(set(old) | set(new))
    return [f"{key}: {old.get(key)!r} → {new.get(key)!r}" for key in keys if old.get(key) != new.get(key)]


def git_sha() -> str | None:
    """The commit of the senseforge checkout this code runs from, or ``None`` (installed wheel)."""
    here = Path(__file__).resolve().parent
    try:
        result = subprocess.run(
            ["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    sha = result.stdout.strip()
    return sha if result.returncode == 0 and len(sha) == 40 else None


def template_hashes(config: McsqaConfig) -> dict[str, str]:
    """``{stage/lang/style: sha256}`` for the templates the build uses."""
    lang = resolve_language(config.lang)
    return {
        f"{stage}/{lang}/{config.style_for(stage)}": template_hash(stage, lang, config.style_for(stage))
        for stage in STAGES
    }


def build_manifest(
    config: McsqaConfig, *, identities: dict[str, dict[str, str]], store_url: str, run_store_url: str
) -> dict[str, Any]:
    """The manifest of a run: config and hash, versions, seeds, templates, models, stores."""
    return {
        "recipe": config.recipe,
        "config": config.model_dump(mode="json"),
        "config_hash": config.hash(),
        "senseforge_version": __version__,
        "git_sha": git_sha(),
        "python": platform.python_version(),
        "seeds": {
            "question_sets": config.seed,
            "shuffle": config.seed,
            "split": config.seed,
            **{f"sampling.{stage}": DEFAULT_SAMPLING[stage].seed for stage in STAGES},
        },
        "sampling": {stage: vars(DEFAULT_SAMPLING[stage]) for stage in STAGES},
        "templates": template_hashes(config),
        "models": identities,
        "store_url": store_url,
        "run_store_url": run_store_url,
    }
