"""What the report reads: run folders, evaluation results, and which evaluation belongs to which run.

A **run folder** is what ``build`` wrote: ``manifest.json`` and, once finished, ``funnel.json`` and
``cost.json``, read and validated by :meth:`~senseforge.runfolder.folder.RunFolder.open` (a funnel an earlier
version wrote is read in the typed form too). An **evaluation** is a ``results.json`` that ``eval run``
wrote. Each evaluation is filed under the run it evaluated, wherever its file lies (inside the run's
``eval/``, or in a folder given with ``--eval``): first by the data path it records (the run folder or a
file inside it), then, when that path leads to no run given (the run was moved or copied), by the digest
of the data it scored (the same items give the same digest). An evaluation of data that is no run given
stays unfiled and is shown under its data's name.

Headings are unique: two runs both called ``mcsqa-en`` are shown as ``a/mcsqa-en`` and ``b/mcsqa-en``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from senseforge.data.schema import Judgement
from senseforge.errors import ConfigError
from senseforge.evaluate.records import EvalResults
from senseforge.runfolder import files
from senseforge.runfolder.cost import Cost
from senseforge.runfolder.folder import RunFolder
from senseforge.runfolder.funnel import Funnel
from senseforge.runfolder.manifest import Manifest

RUN_FILES = files.RUN_FILES
"""A folder holding either is a run folder."""
RESULTS = "results.json"

Judged = tuple[Judgement, str]
"""A judgement and where it came from (``human`` or ``lm``), as the run store holds it."""


def read_json(path: Path) -> Any:
    """The file's JSON, or ``None`` when it is missing or unreadable."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def folder_kind(path: Path) -> Literal["run", "evals"] | None:
    """``run`` for a run folder, ``evals`` for evaluation results (a ``results.json``, or a folder with some
    below it and no run files), ``None`` for anything else."""
    if path.is_file():
        return "evals" if path.name == RESULTS or _is_results(read_json(path)) else None
    if not path.is_dir():
        return None
    if any((path / name).is_file() for name in RUN_FILES):
        return "run"
    return "evals" if next(path.rglob(RESULTS), None) is not None else None


def _is_results(document: Any) -> bool:
    return isinstance(document, dict) and "results" in document and "data" in document


def sort_inputs(paths: Sequence[Path]) -> tuple[list[Path], list[Path], list[str]]:
    """The given folders as run folders and evaluation results, and one line for each evaluation folder given
    where a run was expected (it is read as evaluations).

    Raises:
        ConfigError: a path that is neither (one line naming it and what it lacks).
    """
    runs: list[Path] = []
    evals: list[Path] = []
    notes: list[str] = []
    for path in paths:
        kind = folder_kind(path)
        if kind == "run":
            runs.append(path)
        elif kind == "evals":
            evals.append(path)
            notes.append(f"{path}: evaluation results, not a run folder; read as --eval {path}")
        elif not path.exists():
            raise ConfigError(f"{path}: no such folder")
        else:
            raise ConfigError(
                f"{path}: neither a run folder ({' or '.join(RUN_FILES)}) nor evaluation results ({RESULTS} below it)"
            )
    return runs, evals, notes


@dataclass
class Evaluation:
    """One ``results.json``."""

    path: Path
    results: EvalResults

    @property
    def label(self) -> str:
        """``model · setting · n=N``."""
        return self.results.label()

    @property
    def model(self) -> str:
        return self.results.model.name

    @property
    def kind(self) -> str:
        return self.results.data.kind

    def model_setting(self) -> str:
        """``model · setting`` (no ``n``): the same model asked the same way on several datasets."""
        return f"{self.results.model.name} · {self.results.setting()}"

    def languages(self) -> dict[str, Mapping[str, Any]]:
        """Language → the metrics of that language's items (one entry, the headline, without a breakdown)."""
        groups = self.results.breakdowns.get("lang") if self.kind == "mc" else None
        if isinstance(groups, dict) and groups:
            return {str(lang): metrics for lang, metrics in groups.items() if isinstance(metrics, dict)}
        headline = self.headline_metrics()
        return {"–": headline} if headline else {}

    def headline_metrics(self) -> dict[str, Any]:
        """The metrics of the first task (multiple choice) or the CRoW summary (binary)."""
        for task, metrics in self.results.results.items():
            if self.kind == "binary" and task != "crow":
                continue
            return metrics.to_json()
        return {}


def read_evaluation(path: Path) -> Evaluation | None:
    """The evaluation in ``path`` (a ``results.json``), or ``None`` when it is not one."""
    document = read_json(path)
    if not _is_results(document):
        return None
    try:
        return Evaluation(path, EvalResults.model_validate(document))
    except ValidationError:
        return None


def results_files(path: Path) -> list[Path]:
    """``path`` itself (a file), or every ``results.json`` below it, sorted."""
    return [path] if path.is_file() else sorted(path.rglob(RESULTS))


@dataclass
class Run:
    """A run folder and what the report shows of it."""

    path: Path
    heading: str
    manifest: Manifest | None
    funnel: Funnel | None
    cost: Cost | None
    judgements: Sequence[Judged] | None = None
    """The run store's judgements (``None``: not read; the agreement figures say so)."""
    evaluations: list[Evaluation] = field(default_factory=list)

    @property
    def recipe(self) -> str | None:
        """The recipe that built it (the manifest's, else its config's, else the funnel's)."""
        if self.manifest is not None:
            named = self.manifest.recipe or self.manifest.config.get("recipe")
            if named:
                return str(named)
        return self.funnel.recipe if self.funnel is not None else None

    @property
    def config(self) -> dict[str, Any]:
        return dict(self.manifest.config) if self.manifest is not None else {}

    def read(self, name: str) -> Any:
        return read_json(self.path / name)

    def languages(self) -> list[str]:
        """The run's languages: its groups when grouped by language, else the funnel's ``lang``, else the config's."""
        funnel = self.funnel
        langs: list[str] = []
        if funnel is not None:
            if funnel.group_by == "lang":
                langs = [group.name for group in funnel.groups]
            elif funnel.lang:
                langs = [funnel.lang]
        if not langs:
            config = self.config
            langs = config.get("langs") or ([config["lang"]] if config.get("lang") else [])
        return [str(lang) for lang in langs]

    def items(self) -> Iterator[dict[str, Any]]:
        """Every kept item (``items/`` before ``dataset/``; per language under ``<lang>/`` too)."""
        folders = [self.path, *(self.path / lang for lang in self.languages())]
        for folder in folders:
            for sub in (files.ITEMS, files.DATASET):
                found = sorted((folder / sub).glob("*.jsonl")) if (folder / sub).is_dir() else []
                if found:
                    for file in found:
                        yield from _rows(file)
                    break

    def models_of(self, stage: str) -> set[str]:
        """The model specs that ran ``stage``: its stage model, else the run's model."""
        config = self.config
        chosen = (config.get("stage_models") or {}).get(stage) or config.get("model")
        return {str(chosen)} if chosen else set()


def _rows(path: Path) -> Iterator[dict[str, Any]]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return
    for line in lines:
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict):
            yield row


def headings(paths: Sequence[Path]) -> list[str]:
    """A unique heading per path: its name, with as many parent folders as it takes to tell it from the others.

    >>> headings([Path("a/x/mcsqa-en"), Path("b/x/mcsqa-en"), Path("c/crow")])
    ['a/x/mcsqa-en', 'b/x/mcsqa-en', 'crow']
    """
    parts = [path.resolve().parts for path in paths]
    out = []
    for index, mine in enumerate(parts):
        depth = 1
        while depth < len(mine) and any(
            other[-depth:] == mine[-depth:] for j, other in enumerate(parts) if j != index and other != mine
        ):
            depth += 1
        out.append("/".join(mine[-depth:]))
    return out


def read_runs(folders: Sequence[Path], judgements: Mapping[Path, Sequence[Judged]] | None = None) -> list[Run]:
    """The runs of ``folders`` with unique headings.

    Raises:
        ConfigError: a folder that does not exist, or a run file in one that is unreadable or of the wrong shape
            (the file and the place in it named).
    """
    missing = [str(folder) for folder in folders if not folder.is_dir()]
    if missing:
        raise ConfigError(f"no such run folder: {', '.join(missing)}")
    given = {Path(path).resolve(): judged for path, judged in (judgements or {}).items()}
    runs = []
    for folder, heading in zip(folders, headings(folders), strict=True):
        opened = RunFolder.open(folder) if folder_kind(folder) == "run" else RunFolder(folder, None, None, None)
        runs.append(
            Run(
                path=folder,
                heading=heading,
                manifest=opened.manifest,
                funnel=opened.funnel,
                cost=opened.cost,
                judgements=given.get(folder.resolve()),
            )
        )
    return runs


def file_evaluations(runs: Sequence[Run], given: Sequence[Path]) -> list[Evaluation]:
    """Read every evaluation (each run's ``eval/`` folder and ``given``) once, and file each under the run it
    evaluated (appended to that run's ``evaluations``); the unfiled ones, in reading order."""
    paths: dict[Path, None] = {}
    for run in runs:
        for path in results_files(run.path / "eval") if (run.path / "eval").is_dir() else []:
            paths[path.resolve()] = None
    for folder in given:
        for path in results_files(folder):
            paths[path.resolve()] = None
    unfiled: list[Evaluation] = []
    digests: dict[tuple[Path, str], str | None] = {}
    for path in paths:
        evaluation = read_evaluation(path)
        if evaluation is None:
            continue
        owner = _by_path(runs, evaluation) or _by_digest(runs, evaluation, digests)
        if owner is None:
            unfiled.append(evaluation)
        else:
            owner.evaluations.append(evaluation)
    return unfiled


def _by_path(runs: Sequence[Run], evaluation: Evaluation) -> Run | None:
    data = Path(evaluation.results.data.path)
    if not data.exists():
        return None
    data = data.resolve()
    for run in runs:
        root = run.path.resolve()
        if data == root or data.is_relative_to(root):
            return run
    return None


def _by_digest(runs: Sequence[Run], evaluation: Evaluation, digests: dict[tuple[Path, str], str | None]) -> Run | None:
    from senseforge.evaluate.harness import evaluated_digest
    from senseforge.evaluate.run import EvalConfig

    identity = evaluation.results.identity or {}
    wanted = identity.get("data_sha256")
    if not wanted:
        return None
    try:
        config = EvalConfig.model_validate(identity.get("config") or evaluation.results.config)
    except ValidationError:
        return None
    split = identity.get("split") or evaluation.results.data.split
    key = json.dumps(identity.get("config"), sort_keys=True) + f"|{split}"
    for run in runs:
        cached = (run.path.resolve(), key)
        if cached not in digests:
            digests[cached] = evaluated_digest(run.path, config, split)
        if digests[cached] == wanted:
            return run
    return None
