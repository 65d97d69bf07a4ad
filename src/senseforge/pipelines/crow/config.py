"""The settings of ``build crow`` (hashed into the manifest, like every recipe's)."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from senseforge.llm.registry import parse_spec
from senseforge.pipelines.config import RecipeConfig, runs_locally
from senseforge.pipelines.crow.tasks import TaskSpec, task_name, task_specs
from senseforge.pipelines.panel import Panel

LOCAL_MAX_TOKENS = 96
"""CKA and WSG reply budget of a local base model: a few triples or one rewrite fit, and it writes until the limit."""


class CrowConfig(RecipeConfig):
    """Everything that decides what a crow build produces."""

    lm_stages: ClassVar[tuple[str, ...]] = ("cka", "wsg")
    panel_settings: ClassVar[tuple[str, ...]] = (
        "validators",
        "stage_by",
        "k",
        "ckv_min",
        "wsv_min",
        "validator_temperature",
    )

    recipe: Literal["crow"] = "crow"
    source: tuple[str, ...] = ()
    """Source files or folders (CRoW-shaped JSON, CommonMT CSV, or JSONL mapped by a task spec); empty: our
    small bundled input."""
    task: tuple[str, ...] = ()
    """Tasks to build (dialogue, summarization, intent, safety, stance, mt-zh-en …); empty: every task the
    sources hold. A JSONL row without a ``task`` belongs to the one task given."""
    task_spec: str | None = None
    """A TOML file of task specs (``[tasks.<name>]``) adding to or replacing the built-in ones."""
    n: int | None = Field(default=None, ge=1)
    """Contexts per task, a seeded sample of those that pass the source filters; ``None``: all."""
    validators: tuple[str, ...] = ()
    """LM validators of CKV and WSV (model specs, used in turn for the ``k`` votes); empty: the run's model."""
    stage_by: tuple[str, ...] = ()
    """Who does a stage, as ``stage=lm`` or ``stage=human`` pairs (``cka=human,ckv=human``); unnamed stages: LMs.
    People work in the app (``cka``, ``ckv``, ``wsg`` and ``wsv`` tasks; one person writes, ``k`` validate)."""
    k: int = Field(default=3, ge=1)
    """Votes per validated triple or rewrite (CRoW: three workers)."""
    ckv_min: int = Field(default=2, ge=1)
    """A triple is kept with at least this many of the ``k`` votes."""
    wsv_min: int = Field(default=2, ge=1)
    """A rewrite is kept with at least this many of the ``k`` votes."""
    max_triples: int = Field(default=5, ge=1)
    """Triples CKA may give per context (CRoW: one to five)."""
    max_edits: int = Field(default=5, ge=0)
    """Words a rewrite may change (word-level edit distance; CRoW: five)."""
    negation_only: Literal["flag", "reject"] = "flag"
    """A rewrite that only adds or removes a negation: kept and flagged ``negation_only``, or rejected."""
    cka_temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    """Sampling temperature of knowledge annotation."""
    wsg_temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    """Sampling temperature of schema generation."""
    validator_temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    """Sampling temperature of chat validators (each has its own seed: the run's seed plus its index)."""
    max_tokens: int = Field(default=None, ge=16)  # type: ignore[assignment]  # by model: set on validation
    """Longest CKA or WSG reply; by default by model: 96 when either stage's model is a local base model
    (llamacpp/…, hf/…: it writes until the limit, slowly), else 384. The resolved value goes into the manifest."""

    @field_validator("validators")
    @classmethod
    def _specs(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for spec in value:
            parse_spec(spec)
        return value

    @field_validator("source")
    @classmethod
    def _sources(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        missing = [path for path in value if not Path(path).exists()]
        if missing:
            raise ValueError(f"no such file or folder: {', '.join(missing)}")
        return value

    @field_validator("stage_by")
    @classmethod
    def _who(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        seen: dict[str, str] = {}
        for pair in value:
            stage, sep, who = (part.strip() for part in pair.partition("="))
            if not sep or stage not in ("cka", "ckv", "wsg", "wsv") or who not in ("lm", "human"):
                raise ValueError(f"{pair!r}: write STAGE=lm or STAGE=human, STAGE one of cka, ckv, wsg, wsv")
            seen[stage] = who
        return tuple(f"{stage}={who}" for stage, who in sorted(seen.items()))

    @field_validator("task_spec")
    @classmethod
    def _spec_file(cls, value: str | None) -> str | None:
        if value is not None and not Path(value).is_file():
            raise ValueError(f"no such task spec file: {value}")
        return value

    @model_validator(mode="after")
    def _by_model(self) -> CrowConfig:
        """A reply budget left to the model gets its value, so the manifest and hash hold what the run uses."""
        if self.max_tokens is None:
            local = any(runs_locally(self.model_for(stage)) for stage in self.lm_stages)
            object.__setattr__(self, "max_tokens", LOCAL_MAX_TOKENS if local else 384)
        return self

    @model_validator(mode="after")
    def _votes(self) -> CrowConfig:
        for name in ("ckv_min", "wsv_min"):
            if getattr(self, name) > self.k:
                raise ValueError(f"{name} {getattr(self, name)} is more than the k = {self.k} votes")
        specs = self.specs()
        object.__setattr__(self, "task", tuple(dict.fromkeys(task_name(t, specs) for t in self.task)))
        return self

    def specs(self) -> dict[str, TaskSpec]:
        """Every task spec the run knows (built-in, and the user's file's)."""
        return task_specs(Path(self.task_spec) if self.task_spec else None)

    def by(self, stage: str) -> Literal["lm", "human"]:
        """Who does ``stage``."""
        found = dict(pair.split("=", 1) for pair in self.stage_by).get(stage, "lm")
        return "human" if found == "human" else "lm"

    def panels(self) -> dict[str, Panel]:
        """CKV's and WSV's panels: the :attr:`panel` of LM validators, or ``k`` people where :attr:`stage_by` says
        so; a triple (rewrite) is kept with at least ``ckv_min`` (``wsv_min``) of the ``k`` votes."""
        return {stage: self._panel(stage, least) for stage, least in (("ckv", self.ckv_min), ("wsv", self.wsv_min))}

    def _panel(self, stage: str, least: int) -> Panel:
        policy = f"at-least:{least}/{self.k}"
        judges = () if self.by(stage) == "human" else self.panel
        return Panel(
            judges=judges,
            judges_policy=policy,
            final=True,
            policy=policy,
            k=self.k,
            temperature=self.validator_temperature,
        )

    @property
    def panel(self) -> tuple[str, ...]:
        """The ``k`` validators, the given models in turn (``lm:<spec>#<i>`` each, with its own seed)."""
        given = self.validators or (self.model,)
        return tuple(given[index % len(given)] for index in range(self.k))
