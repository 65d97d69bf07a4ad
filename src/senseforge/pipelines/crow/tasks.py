"""CRoW's tasks as data: what a task's examples hold, what its label means, which stages it runs.

CRoW (Ismayilzada et al., 2023) calls the unchanged part of a task example its *context*
and the part that is perturbed its *target* (Table 6). A :class:`TaskSpec` names both
fields, what label 1 and label 0 mean (``plausible``/``implausible`` for a dialogue
response, ``safe``/``unsafe`` for an action …), the yes/no question a label answers, the
stages the task runs and the filters its source rows must pass.

The built-in specs (``data/tasks.toml``) follow CRoW: dialogue and stance start from
knowledge their sources already have (no CKA/CKV); translation already has its wrong
targets (no WSG/WSV; CKV is what filters its contexts); summarization, intent and safety
run all four. ``--task-spec FILE`` adds tasks or replaces built-in ones, in the same TOML
form (``[tasks.<name>]`` tables).

>>> spec = builtin_tasks()["safety"]
>>> spec.runs("cka"), spec.runs("wsg"), spec.label_word(False)
(True, True, 'unsafe')
>>> builtin_tasks()["mt-zh-en"].stages
('cka', 'ckv')
"""

from __future__ import annotations

import difflib
import functools
import tomllib
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from senseforge.data.crow import normalize_task
from senseforge.errors import ConfigError

StageName = Literal["cka", "ckv", "wsg", "wsv"]
STAGE_ORDER: tuple[StageName, ...] = ("cka", "ckv", "wsg", "wsv")
"""CRoW's four stages: knowledge annotation and validation, schema generation and validation."""


class SourceFilters(BaseModel):
    """What a source row must have to become a context (CRoW §4.2's filters)."""

    model_config = ConfigDict(extra="forbid")

    min_context_turns: int | None = Field(default=None, ge=1)
    """Turns of the dialogue before the target (dialogue: 2; summarization: 4)."""
    min_context_content_words: int | None = Field(default=None, ge=1)
    """Content words (not stopwords) of the context (intent: the headline has 5)."""
    min_target_content_words: int | None = Field(default=None, ge=1)
    """Content words of the target (summarization's summary and intent's intent: 5)."""


class TaskSpec(BaseModel):
    """One CRoW task (see the module notes)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    description: str
    context_field: str = Field(min_length=1)
    target_field: str = Field(min_length=1)
    context_name: str = Field(min_length=1)
    target_name: str = Field(min_length=1)
    turns: bool = False
    """The context is a list of dialogue turns (written as a list, shown one per line)."""
    valid: str = Field(min_length=1)
    """What label 1 means, in a word."""
    invalid: str = Field(min_length=1)
    """What label 0 means."""
    question: str = Field(min_length=1)
    """The yes/no question that label 1 answers with yes."""
    stages: tuple[StageName, ...]
    lang: str = "en"
    """Language of the target (rewrites are written, and their edits counted, in it)."""
    source_lang: str | None = None
    target_lang: str | None = None
    filters: SourceFilters = Field(default_factory=SourceFilters)

    @field_validator("stages")
    @classmethod
    def _stages(cls, value: tuple[StageName, ...]) -> tuple[StageName, ...]:
        if len(set(value)) != len(value):
            raise ValueError(f"stages repeat: {list(value)}")
        if "ckv" in value and "cka" not in value:
            raise ValueError("ckv validates what cka annotates: a task that runs ckv runs cka")
        if "wsv" in value and "wsg" not in value:
            raise ValueError("wsv validates what wsg writes: a task that runs wsv runs wsg")
        if not value:
            raise ValueError("a task runs at least one stage")
        return tuple(s for s in STAGE_ORDER if s in value)

    @model_validator(mode="after")
    def _languages(self) -> TaskSpec:
        if (self.source_lang is None) != (self.target_lang is None):
            raise ValueError("give both source_lang and target_lang, or neither")
        return self

    def runs(self, stage: str) -> bool:
        """Whether the task runs ``stage`` (``cka``, ``ckv``, ``wsg`` or ``wsv``)."""
        return stage in self.stages

    @property
    def rewrites(self) -> bool:
        """Whether its invalid targets are written by the recipe (WSG) rather than brought by the source."""
        return self.runs("wsg")

    @property
    def translation(self) -> bool:
        return self.source_lang is not None

    def label_word(self, label: bool) -> str:
        """``valid`` or ``invalid`` for label 1 / 0."""
        return self.valid if label else self.invalid


def _specs(document: Mapping[str, Any], origin: str) -> dict[str, TaskSpec]:
    tables = document.get("tasks")
    if not isinstance(tables, Mapping) or not tables:
        raise ConfigError(f"{origin}: no [tasks.<name>] tables")
    specs: dict[str, TaskSpec] = {}
    for raw_name, table in tables.items():
        name = str(raw_name).strip().lower()
        if not isinstance(table, Mapping):
            raise ConfigError(f"{origin}: tasks.{raw_name}: expected a table")
        known = set(TaskSpec.model_fields) - {"name"}
        for key in table:
            if key not in known:
                close = difflib.get_close_matches(str(key), sorted(known), n=1)
                hint = f"did you mean {close[0]}?" if close else f"the fields are {', '.join(sorted(known))}"
                raise ConfigError(f"{origin}: tasks.{raw_name}.{key}: not a task-spec field ({hint})")
        try:
            specs[name] = TaskSpec.model_validate({"name": name, **table})
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"])
            raise ConfigError(f"{origin}: tasks.{raw_name}.{where}: {first['msg']}") from exc
    return specs


@functools.cache
def builtin_tasks() -> dict[str, TaskSpec]:
    """CRoW's six tasks (translation in four language pairs), from ``data/tasks.toml``."""
    text = resources.files("senseforge.pipelines.crow").joinpath("data", "tasks.toml").read_text(encoding="utf-8")
    return _specs(tomllib.loads(text), "senseforge/pipelines/crow/data/tasks.toml")


def read_task_specs(path: Path) -> dict[str, TaskSpec]:
    """The task specs of a user TOML file (``[tasks.<name>]`` tables, the built-in form).

    Raises:
        ConfigError: unreadable file, bad TOML or an invalid spec (the key named).
    """
    try:
        with open(path, "rb") as handle:
            document = tomllib.load(handle)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the task spec ({exc.strerror or exc})") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from exc
    return _specs(document, str(path))


def task_specs(extra: Path | None = None) -> dict[str, TaskSpec]:
    """The built-in specs, with a user file's added or replacing them."""
    specs = dict(builtin_tasks())
    if extra is not None:
        specs.update(read_task_specs(extra))
    return specs


def task_name(value: str, specs: Mapping[str, TaskSpec]) -> str:
    """A task's name as the specs know it (CRoW's spellings accepted: ``mt_zh_en``, ``dialog``).

    Raises:
        ConfigError: no spec has the name.
    """
    key = value.strip().lower()
    if key not in specs:
        try:
            key = normalize_task(value)
        except Exception:
            key = value
    if key not in specs:
        raise ConfigError(f"unknown CRoW task {value!r}: known tasks are {', '.join(sorted(specs))}")
    return key
