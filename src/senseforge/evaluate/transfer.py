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
from collections.abc import Mapping, Sequence
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


def run_transfer(
    data: Mapping[str, LanguageData],
    config: FinetuneConfig,
    out_dir: Path,
    *,
    n_bootstrap: int = 1000,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Train every setting, test it, and write the tables (``transfer.json``, CSVs, the heat map) to ``out_dir``.

    Raises:
        ConfigError: fewer than two languages.
    """
    langs = sorted(data)
    if len(langs) < 2:
        raise ConfigError(f"transfer needs two languages or more, got {langs}")
    say = progress or (lambda _line: None)
    evaluations: dict[tuple[str, str], list[ItemOutcome]] = {}
    models: dict[str, Any] = {}
    for setting, trained_on in settings_of(langs).items():
        say(f"{setting}: training on {', '.join(trained_on)}")
        train = [item for lang in trained_on for item in data[lang].train]
        selects = [data[lang].select for lang in trained_on]
        select = None if any(s is None for s in selects) else [i for s in selects if s is not None for i in s]
        result = finetune(train, select, config, out_dir / "models" / setting.replace(":", "-"), progress=say)
        models[setting] = {"learning_rate": result.learning_rate, "selection_accuracy": result.selection_accuracy}
        for lang in languages_tested(setting, langs):
            picked = predict(result.model_dir, data[lang].test, config)
            evaluations[(setting, lang)] = outcomes(data[lang].test, picked)
    cells = accuracy_cells(evaluations, n_bootstrap=n_bootstrap, seed=config.seed)
    paths = write_tables(out_dir, cells, langs)
    summary = {"langs": langs, "models": models, "files": sorted(str(p.name) for p in paths)}
    with atomic_open(out_dir / "models.json") as handle:
        handle.write(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    return {"cells": cells, "summary": summary, "finding": _finding(out_dir)}


def _finding(out_dir: Path) -> Any:
    document = json.loads((out_dir / "transfer.json").read_text(encoding="utf-8"))
    return document.get("finding") if isinstance(document, dict) else None


__all__ = ["LanguageData", "finding", "languages_tested", "outcomes", "run_transfer", "settings_of"]
