"""What a recipe is, for the engine: its name, config, source, stages, and what it writes when done.

A recipe is only its own parts — a config model (a
:class:`~senseforge.pipelines.config.RecipeConfig` subclass), a source that makes the
first records, its stages (each maps records to records; see
:mod:`senseforge.pipelines.stage`), and :meth:`Recipe.release`, which declares what it
releases (:mod:`senseforge.pipelines.release`). The runner (:mod:`senseforge.pipelines.runner`)
does the rest alike for every recipe, writing the release too (:mod:`senseforge.pipelines.finish`).

The batches that decide a model call (five concepts per call, say) are records the
source makes — one record, one call — so neither ``--batch-size`` nor a resume ever
changes what a call contains.

Built-in recipes are listed in :mod:`senseforge.pipelines.recipes`, the way a plugin would be.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from senseforge.llm.mock import AnyResponder
from senseforge.pipelines.config import RecipeConfig
from senseforge.pipelines.release import AnyRelease
from senseforge.pipelines.runstore import Record, StageResult
from senseforge.pipelines.stage import Stage


@dataclass(frozen=True)
class Flag:
    """How one config field appears on the command line beyond its generated ``--field-name``."""

    short: str | None = None
    """A short form (``-l``); it must mean the same everywhere in the CLI."""
    none_flag: str | None = None
    """A switch that sets the field to ``None`` (``--all`` for ``n``)."""
    none_help: str = ""
    aliases: tuple[str, ...] = ()
    """Other long names the flag answers to."""
    help: str | None = None
    """Help text (default: the field's docstring)."""
    path: bool = False
    """The value is a local path, recorded absolute (so a resume from elsewhere finds it)."""
    repeat: bool = False
    """A list field given by repeating the flag (``--source a --source b``), not comma-separated."""
    name: str | None = None
    """The long name, when not ``--field-name`` (``--cot`` for ``chain_of_thought``)."""
    show_default: bool = True
    """Whether the help ends with the default (not when the help text says it itself)."""


class Source(Protocol):
    """Makes a run's first records, once; the runner stores them as the first stage's results."""

    @property
    def name(self) -> str:
        """The first stage's name in the run store and the funnel."""
        ...

    def records(self, config: Any) -> tuple[list[StageResult], dict[str, Any]]:
        """The first records (sorted by id) and facts about how they were made (for the funnel)."""
        ...


class Recipe(Protocol):
    """One benchmark-building method."""

    @property
    def name(self) -> str: ...

    @property
    def summary(self) -> str:
        """One line for ``senseforge build --help``."""
        ...

    @property
    def config_model(self) -> type[RecipeConfig]: ...

    @property
    def record(self) -> type[Record]:
        """The model of the data its records carry from stage to stage (validated on every read)."""
        ...

    @property
    def flags(self) -> Mapping[str, Flag]:
        """Extra command-line forms of config fields (short flags, ``--all`` …)."""
        ...

    @property
    def authors(self) -> Mapping[str, AnyResponder]:
        """Dry-run authors, as ``scripted/<name>`` models."""
        ...

    def default_run_dir(self, config: Any) -> Path:
        """Where a run goes when no ``--out`` is given."""
        ...

    def source(self, config: Any) -> Source: ...

    def stages(self, config: Any) -> list[Stage]:
        """The stages after the source, in order."""
        ...

    def splitting(self) -> frozenset[str]:
        """Names of the stages that turn one record into several (their funnel rows say ``from``)."""
        ...

    def manifest(self, config: Any) -> dict[str, Any]:
        """The recipe's own facts for the manifest (seeds, sampling, template hashes …)."""
        ...

    def release(self, config: Any) -> AnyRelease:
        """What the run releases when it finishes (the engine writes it, and the funnel)."""
        ...


@runtime_checkable
class ReadsTogether(Protocol):
    """A recipe whose source can read the inputs of several runs in one pass (``build mcsqa --lang en,ja``:
    every language's question sets from one scan of the knowledge store)."""

    def together(self, configs: Sequence[Any]) -> Recipe:
        """The recipe with the inputs of every config read at once; each run's first records are then exactly
        those the recipe would make for that config alone."""
        ...
