"""What a recipe releases, declared: the engine writes it when the run finishes (:mod:`.finish`).

A recipe's :meth:`~senseforge.pipelines.recipe.Recipe.release` returns a :class:`Release`: which stage's kept
records are released, how a kept record becomes an item (:class:`~senseforge.data.schema.MCItem`, read from the
typed record) and a released row in its paper's shape, its groups (per language, per task, or none) and whether
each has a folder of its own, how the items split (:class:`Splitting`: ratios, each record's own split, or test
only), and the figures of its funnel — functions of the finished run (:class:`Finished`) to
:mod:`senseforge.runfolder.figures`. Everything else — grouping, splitting, the dataset and items files, the
funnel (one typed :class:`~senseforge.runfolder.funnel.Funnel`), the cost (per group where declared) and the
rejects — is the engine's, alike for every recipe.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar

from senseforge.data.schema import MCItem
from senseforge.pipelines.runstore import Record, RunStore, StageResult
from senseforge.pipelines.split import Ratios, split
from senseforge.runfolder.figures import Figure
from senseforge.runfolder.funnel import StageRow

R = TypeVar("R", bound=Record)


@dataclass(frozen=True)
class Splitting:
    """How a release cuts its items: by ``ratios`` (seeded, stratified by difficulty), by each record's own split
    (``of``), or, with neither, every item in test (a paper that released a test set only)."""

    ratios: Ratios | None = None
    seed: int = 0
    of: Callable[[StageResult[Any]], str] | None = None
    """Each kept record's split, when the run decided it (a split stage, the source's own splits)."""
    every: bool = False
    """Write every split's files, an empty one too (else only the splits that have items)."""

    def cut(self, kept: Sequence[tuple[StageResult[Any], MCItem]]) -> dict[str, list[MCItem]]:
        """The items per split: in the records' order when each record says its split, else sorted by id."""
        if self.of is None:
            return split(sorted((item for _, item in kept), key=lambda item: item.id), self.ratios, self.seed)
        out: dict[str, list[MCItem]] = {name: [] for name in ("train", "validation", "test")} if self.every else {}
        for record, item in kept:
            out.setdefault(self.of(record), []).append(item)
        return out


@dataclass(frozen=True)
class Finished(Generic[R]):
    """A finished run as a release's figures see it: the run store, the source's facts, the stage rows, the kept
    records (sorted by id) and, per group (``None``: an ungrouped release), the items and their splits."""

    run: RunStore
    facts: Mapping[str, Any]
    stages: list[StageRow]
    kept: list[StageResult[R]]
    items: dict[str | None, list[MCItem]]
    splits: dict[str | None, dict[str, list[MCItem]]]
    group_of: Callable[[StageResult[R]], str] | None = None

    def in_group(self, group: str) -> list[StageResult[R]]:
        """The kept records whose items are in ``group``."""
        return [r for r in self.kept if self.group_of is None or self.group_of(r) == group]


def _no_figures(done: Finished[Any]) -> list[Figure]:
    return []


def _no_group_figures(done: Finished[Any], group: str) -> list[Figure]:
    return []


@dataclass(frozen=True)
class Release(Generic[R]):
    """A recipe's release, declared (see the module notes)."""

    kept: str
    """The stage whose ``ok`` records are released."""
    record: type[R]
    item: Callable[[StageResult[R], str | None], MCItem]
    """A kept record as its full item in a group (``None``: an ungrouped release)."""
    row: Callable[[StageResult[R], MCItem], Mapping[str, Any]]
    """A kept record's item as a released row, in its paper's shape."""
    split: Splitting = field(default_factory=Splitting)
    groups: Sequence[str] = ()
    """The groups, in order (none: the release is one dataset)."""
    group_by: Literal["lang", "task"] | None = None
    group_of: Callable[[StageResult[R]], str] | None = None
    """A record's group in every stage: its item goes to that group alone and each group's stage rows count its
    own records. ``None``: every kept record has an item in every group, whose stage rows are the run's."""
    folders: bool = False
    """Each group has a folder of its own (``<group>/dataset``, ``items``, ``funnel.json``)."""
    group_cost: bool = False
    """Each group's folder has its own ``cost.json``."""
    folder: str = ""
    """Where an ungrouped release's ``dataset/`` and ``items/`` go, relative to the run folder (``""``: in it)."""
    figures: Callable[[Finished[R]], list[Figure]] = _no_figures
    """The funnel's own figures."""
    group_figures: Callable[[Finished[R], str], list[Figure]] = _no_group_figures
    """Each group's figures."""
    lang: str | None = None
    title: str = "Records into and out of each stage"
    cost_title: str = "Cost per stage"
    kept_unit: str = "item"
    groups_title: str | None = None
    judges_in_figures: bool = False

    def datasets(self) -> list[str]:
        """The folders the dataset is written to, relative to the run folder."""
        if self.groups and self.folders:
            return [f"{group}/dataset" for group in self.groups]
        return [str(Path(self.folder) / "dataset")]


W = TypeVar("W")


@dataclass(frozen=True)
class OwnFiles(Generic[R, W]):
    """A release whose files are not items cut into splits (CRoW's binary rows per task and its ``release/``): it
    writes them itself and says what it wrote (``W``); the engine does the funnel, the costs and the rejects."""

    write: Callable[[RunStore, Path, Mapping[str, Any], frozenset[str]], W]
    """Write the files (atomically) under the run folder, given the source's facts and the ids of the items people
    rejected on a re-check (:mod:`.recheck`: left out, nothing else moving); what was written."""
    kept: Callable[[W], Mapping[str, int]]
    """What each group kept, the groups in order."""
    record: type[R]
    group_by: Literal["lang", "task"] | None
    group_of: Callable[[StageResult[R]], str]
    shown: Callable[[str, str], bool]
    """Whether a group's stage rows show a stage (a task that does not run a stage has no row for it)."""
    judgements: Callable[[RunStore, str], dict[str, int]]
    """A group's people's judgements per task type (for its cost)."""
    figures: Callable[[RunStore, W], list[Figure]]
    group_figures: Callable[[RunStore, W, str], list[Figure]]
    cost_file: str
    """The file of every group's cost (``cost_by_task.json``)."""
    rechecked: Callable[[W], Mapping[str, Mapping[str, Mapping[str, Any]]]] = lambda written: {}
    """Per group, the items left out on a re-check, by id, each as ``rejects.jsonl`` shows it (``checked``)."""
    title: str = "Records into and out of each stage"
    cost_title: str = "Cost per stage"
    kept_unit: str = "item"
    judges_in_figures: bool = False


AnyRelease = Release[Any] | OwnFiles[Any, Any]
"""What a recipe's :meth:`~senseforge.pipelines.recipe.Recipe.release` returns."""
