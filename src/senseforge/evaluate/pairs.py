"""Evaluations of several (model, dataset) pairs as one job: what one pair is, and the seam an executor fills.

``eval run`` over several models and datasets evaluates each pair the same way wherever it runs: in this
process one after another (the CLI's loop), or on a Ray cluster (``senseforge.cluster.evaluation``), where an
actor holding one model replica evaluates the pairs of its model. Both call :func:`evaluate_pair`, so each
pair's ``samples.jsonl`` is the same bytes and its ``results.json`` the same but for the timings.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from senseforge.evaluate.harness import default_out, run_eval
from senseforge.evaluate.records import EvalResults
from senseforge.evaluate.run import EvalConfig
from senseforge.llm.base import LLM, Progress

__all__ = ["ModelSpec", "Pair", "PairRunner", "PairSettings", "evaluate_pair", "pair_grid", "pair_out"]


@dataclass(frozen=True)
class ModelSpec:
    """How to open one evaluated model in any process: what ``open_llm`` needs, all of it picklable.

    Attributes:
        name: ``provider/model``.
        options: the provider options (``--option`` and ``--base-url``).
        store: the store URL or path of the cache and ledger (``None``: the default store).
        read_cache: whether cached replies are read back (``--no-cache`` turns it off).
    """

    name: str
    options: dict[str, Any] = field(default_factory=dict)
    store: str | None = None
    read_cache: bool = True


@dataclass(frozen=True)
class Pair:
    """One (model, dataset) shard of an evaluation.

    Attributes:
        model: the model's ``provider/model``.
        data: the dataset file or run directory.
        out: its output folder, or ``None`` for :func:`~senseforge.evaluate.harness.default_out`.
    """

    model: str
    data: Path
    out: Path | None


@dataclass(frozen=True)
class PairSettings:
    """What every pair of one job shares: the evaluation config and how the data is read.

    Attributes:
        config: the evaluation's settings.
        fmt: the datasets' format (``None``: detected).
        lang: the items' language when the format does not say.
        shots_from: the dataset the shots are drawn from.
        split: the split of a run directory.
        overwrite: whether a folder holding another evaluation is replaced.
    """

    config: EvalConfig
    fmt: str | None = None
    lang: str | None = None
    shots_from: Path | None = None
    split: str = "test"
    overwrite: bool = False


PairRunner = Callable[[Sequence[Pair], PairSettings], list[tuple[EvalResults, Path]]]
"""Evaluates pairs somewhere (e.g. on Ray) and returns each pair's results and output folder, in the pairs'
order; the CLI takes one for ``--executor ray``."""


def pair_out(data: Path, model: str, root: Path | None, count: int, slug: Callable[[str], str]) -> Path | None:
    """Where one pair's results go: ``root`` (``--out``) itself for one pair, ``<root>/<data>-<model>`` for several,
    or ``None`` (:func:`~senseforge.evaluate.harness.default_out`) without a root."""
    if root is None:
        return None
    if count == 1:
        return root
    name = data.name if data.is_dir() else data.stem
    return root / f"{slug(name)}-{slug(model)}"


def pair_grid(
    models: Sequence[str], datasets: Sequence[Path], out: Path | None, slug: Callable[[str], str]
) -> list[Pair]:
    """Every model on every dataset, model by model, as ``eval run`` orders them.

    Args:
        models: the models, in the order given.
        datasets: the datasets, in the order given.
        out: ``--out``: the folder itself for one pair, one folder per pair under it for several, or ``None``.
        slug: how a name becomes part of a folder name.
    """
    count = len(models) * len(datasets)
    return [Pair(model, data, pair_out(data, model, out, count, slug)) for model in models for data in datasets]


def evaluate_pair(
    pair: Pair,
    llm: LLM,
    settings: PairSettings,
    *,
    judge: LLM | None = None,
    progress: Progress | None = None,
) -> tuple[EvalResults, Path]:
    """Evaluate one pair with its opened model; writes its ``results.json`` and ``samples.jsonl``.

    Args:
        pair: the shard.
        llm: the opened model ``pair.model`` names.
        settings: the job's shared settings.
        judge: the opened judge, for ``--formulation open``.
        progress: called as items are scored.

    Returns:
        The results and the folder they were written to.
    """
    payload = run_eval(
        pair.data,
        llm,
        settings.config,
        pair.out,
        fmt=settings.fmt,
        lang=settings.lang,
        shots_from=settings.shots_from,
        split=settings.split,
        progress=progress,
        judge=judge,
        overwrite=settings.overwrite,
    )
    return payload, pair.out or default_out(pair.data, pair.model, settings.config, payload.data.kind)
