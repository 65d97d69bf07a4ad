"""The cross-lingual transfer study (mCSQA §5): fine-tune per language, on all, on all but one; test on each.

For languages L: one model per language (``mono:<L>``, trained on L), one on every language
(``multi``) and, with three languages or more, one per language on all the others
(``unseen:<L>``). Every mono model and the multi model are tested on every language's test
split, each unseen model on the language it did not see. The per-item outcomes become the
tables of :mod:`senseforge.evaluate.transfer_tables`: the train × test matrix (raw, and as
a share of the tested language's monolingual accuracy) for Total, Easy and Hard, and Table
7's rows (Mono, Multi, Δ = Multi − Mono, Unseen). Each model's run folder is
``<out>/models/<setting>/`` (see :mod:`senseforge.evaluate.finetune`): a killed study
resumes where it stopped.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from senseforge.data.io import atomic_open
from senseforge.data.schema import MCItem
from senseforge.errors import ConfigError
from senseforge.evaluate.finetune import FinetuneConfig, Progress, finetune, predict
from senseforge.evaluate.transfer_tables import ItemOutcome, accuracy_cells, finding, write_tables


@dataclass
class LanguageData:
    """One language's splits: train, the selection split (``None``: a seeded 10% of train), test."""

    train: list[MCItem]
    select: list[MCItem] | None
    test: list[MCItem]


def settings_of(langs: Sequence[str]) -> dict[str, list[str]]:
    """Each training setting and the languages it trains on.

    >>> settings_of(["en", "ja", "zh"])["unseen:ja"]
    ['en', 'zh']
    """
    out = {f"mono:{lang}": [lang] for lang in langs}
    out["multi"] = list(langs)
    if len(langs) >= 3:
        out.update({f"unseen:{lang}": [other for other in langs if other != lang] for lang in langs})
    return out


def languages_tested(setting: str, langs: Sequence[str]) -> list[str]:
    """The test languages of a setting: every language, but an unseen model only its own."""
    return [setting.split(":", 1)[1]] if setting.startswith("unseen:") else list(langs)


def outcomes(items: Sequence[MCItem], picked: Sequence[int]) -> list[ItemOutcome]:
    """Per item, whether the picked choice is the answer, with the item's difficulty."""
    return [
        ItemOutcome(id=item.id, correct=item.choices[p].label == item.answer, difficulty=item.difficulty)
        for item, p in zip(items, picked, strict=True)
    ]


@dataclass(frozen=True)
class SettingJob:
    """One fine-tune of the study: a setting, the items it trains on, and the test sets it is scored on.

    Attributes:
        setting: ``mono:<L>``, ``multi`` or ``unseen:<L>``.
        trained_on: the languages it trains on.
        train: the training items (the languages' train splits together).
        select: the selection items, or ``None`` for a seeded 10% of ``train``.
        tests: each tested language's test items.
        out_dir: the setting's run folder.
    """

    setting: str
    trained_on: list[str]
    train: list[MCItem]
    select: list[MCItem] | None
    tests: dict[str, list[MCItem]]
    out_dir: Path


@dataclass(frozen=True)
class SettingOutcome:
    """What one fine-tune gives the study: its chosen rate and per-language outcomes on the tested languages."""

    setting: str
    learning_rate: float
    selection_accuracy: float
    outcomes: dict[str, list[ItemOutcome]]


SettingRunner = Callable[[Sequence[SettingJob], FinetuneConfig, Progress], list[SettingOutcome]]
"""Runs the study's fine-tunes somewhere (e.g. each as a Ray task) and returns their outcomes in the jobs'
order; :func:`run_transfer` takes one (default: one after another in this process)."""


def train_setting(job: SettingJob, config: FinetuneConfig, progress: Progress | None = None) -> SettingOutcome:
    """Fine-tune one setting (resuming its run folder) and score it on each tested language."""
    result = finetune(job.train, job.select, config, job.out_dir, progress=progress)
    scored = {lang: outcomes(test, predict(result.model_dir, test, config)) for lang, test in job.tests.items()}
    return SettingOutcome(job.setting, result.learning_rate, result.selection_accuracy, scored)


def run_locally(jobs: Sequence[SettingJob], config: FinetuneConfig, progress: Progress) -> list[SettingOutcome]:
    """The study's fine-tunes one after another in this process."""
    done = []
    for job in jobs:
        progress(f"{job.setting}: training on {', '.join(job.trained_on)}")
        done.append(train_setting(job, config, progress))
    return done


def setting_jobs(data: Mapping[str, LanguageData], out_dir: Path) -> list[SettingJob]:
    """The study's fine-tunes over ``data``'s languages, in the order of :func:`settings_of`."""
    langs = sorted(data)
    jobs = []
    for setting, trained_on in settings_of(langs).items():
        train = [item for lang in trained_on for item in data[lang].train]
        selects = [data[lang].select for lang in trained_on]
        select = None if any(s is None for s in selects) else [i for s in selects if s is not None for i in s]
        tests = {lang: data[lang].test for lang in languages_tested(setting, langs)}
        jobs.append(
            SettingJob(setting, trained_on, train, select, tests, out_dir / "models" / setting.replace(":", "-"))
        )
    return jobs


def run_transfer(
    data: Mapping[str, LanguageData],
    config: FinetuneConfig,
    out_dir: Path,
    *,
    n_bootstrap: int = 1000,
    progress: Progress | None = None,
    runner: SettingRunner | None = None,
) -> dict[str, Any]:
    """Train every setting, test it, and write the tables (``transfer.json``, CSVs, the heat map) to ``out_dir``.

    Args:
        data: each language's splits.
        config: how each model is fine-tuned.
        out_dir: the study folder.
        n_bootstrap: bootstrap resamples for the cells' intervals.
        progress: called with a line as work goes on.
        runner: where the fine-tunes run (default: :func:`run_locally`).

    Raises:
        ConfigError: fewer than two languages.
    """
    langs = sorted(data)
    if len(langs) < 2:
        raise ConfigError(f"transfer needs two languages or more, got {langs}")
    say = progress or (lambda _line: None)
    evaluations: dict[tuple[str, str], list[ItemOutcome]] = {}
    models: dict[str, Any] = {}
    for done in (runner or run_locally)(setting_jobs(data, out_dir), config, say):
        models[done.setting] = {"learning_rate": done.learning_rate, "selection_accuracy": done.selection_accuracy}
        for lang, scored in done.outcomes.items():
            evaluations[(done.setting, lang)] = scored
    cells = accuracy_cells(evaluations, n_bootstrap=n_bootstrap, seed=config.seed)
    paths = write_tables(out_dir, cells, langs)
    summary = {"langs": langs, "models": models, "files": sorted(str(p.name) for p in paths)}
    with atomic_open(out_dir / "models.json") as handle:
        handle.write(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    return {"cells": cells, "summary": summary, "finding": _finding(out_dir)}


def _finding(out_dir: Path) -> Any:
    document = json.loads((out_dir / "transfer.json").read_text(encoding="utf-8"))
    return document.get("finding") if isinstance(document, dict) else None


__all__ = [
    "LanguageData",
    "SettingJob",
    "SettingOutcome",
    "SettingRunner",
    "finding",
    "languages_tested",
    "outcomes",
    "run_locally",
    "run_transfer",
    "setting_jobs",
    "settings_of",
    "train_setting",
]
