"""A run's funnel as data: what each stage took in, passed on and rejected, what was kept, how it was split,
the run's groups (per language, per task) each with the same, and the figures the recipe declared.

``in`` = ``out`` + Σ ``rejected`` in every stage row, in the stage's own unit; a stage that splits records (one
reply into its items) counts its children and says how many records it took ``from`` the stage before it.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

from senseforge.runfolder.figures import Figure

FUNNEL_FORMAT: Literal[2] = 2
"""The typed form's version (files written before it have no ``format`` and are read through
:mod:`senseforge.runfolder.legacy`)."""


class StageRow(BaseModel):
    """One stage's row: records in, out, rejected by reason (in the stage's own unit)."""

    model_config = ConfigDict(populate_by_name=True)

    stage: str
    in_: int = Field(alias="in")
    out: int
    rejected: dict[str, int]
    from_: int | None = Field(default=None, alias="from")
    """For a stage that splits records: how many records it split (the previous stage's ``out``)."""

    @model_serializer(mode="wrap")
    def _no_empty_from(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        dumped: dict[str, Any] = handler(self)
        if dumped.get("from", 0) is None:
            del dumped["from"]
        return dumped


class Group(BaseModel):
    """One group of a run (a language, a task): its own stage rows, what it kept, its splits and figures."""

    model_config = ConfigDict(populate_by_name=True, extra="forbid")

    name: str
    stages: list[StageRow]
    kept: int
    splits: dict[str, int] = Field(default_factory=dict)
    """Kept items per split (``train``, ``validation``, ``test``), in that order."""
    folder: str | None = None
    """Where the group's dataset, items and cost are written, relative to the run folder (``id``), when it has
    a folder of its own."""
    figures: list[Figure] = Field(default_factory=list)

    def figure(self, name: str) -> Figure | None:
        return next((f for f in self.figures if f.name == name), None)


def summed_splits(groups: list[Group]) -> dict[str, int]:
    """The kept items per split over every group (splits in the order first met)."""
    out: dict[str, int] = {}
    for group in groups:
        for split, n in group.splits.items():
            out[split] = out.get(split, 0) + n
    return out


class Funnel(BaseModel):
    """The funnel of a run, in the one typed form every recipe writes."""

    model_config = ConfigDict(populate_by_name=True, extra="forbid")

    format: Literal[2] = FUNNEL_FORMAT
    recipe: str
    lang: str | None = None
    """The run's language, for a run of one language."""
    title: str = "Records into and out of each stage"
    """The caption of the funnel's chart (a recipe names its paper's figure here)."""
    cost_title: str = "Cost per stage"
    """The caption of the cost chart."""
    kept_unit: str = "item"
    """What the recipe keeps (``item``, ``question``, ``example``): the cost is given per kept one."""
    group_by: Literal["lang", "task"] | None = None
    """What the groups are, when the run has any."""
    stages: list[StageRow]
    kept: int
    splits: dict[str, int] = Field(default_factory=dict)
    """Kept items per split over the whole run."""
    datasets: list[str] = Field(default_factory=lambda: ["dataset"])
    """The folders the dataset was written to, relative to the run folder."""
    groups: list[Group] = Field(default_factory=list)
    groups_title: str | None = None
    """The caption of the chart of every group's stage rows side by side (``None``: not drawn)."""
    figures: list[Figure] = Field(default_factory=list)
    judges_in_figures: bool = False
    """The figures already show the judges' agreement (so the report does not draw it again from the run store)."""

    def figure(self, name: str) -> Figure | None:
        return next((f for f in self.figures if f.name == name), None)

    def group(self, name: str) -> Group | None:
        return next((g for g in self.groups if g.name == name), None)

    def stage(self, name: str) -> StageRow | None:
        return next((row for row in self.stages if row.stage == name), None)

    def summary_lines(self) -> list[str]:
        """What the CLI prints after the funnel's table: what was kept, then every figure marked ``summary``."""
        unit = self.kept_unit if self.kept == 1 else f"{self.kept_unit}s"
        lines = [f"kept {self.kept} {unit}"]
        for figure in self.figures:
            if figure.summary:
                lines += figure.lines()
        for group in self.groups:
            for figure in group.figures:
                if figure.summary:
                    lines += [f"{group.name}: {line}" for line in figure.lines()]
        return lines
