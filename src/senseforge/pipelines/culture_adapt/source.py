"""The source of culture-adapt: one record per source item, each keeping its split.

Files are read by :func:`senseforge.data.loaders.load_dataset`, so any multiple-choice
format ``senseforge eval`` reads will do (CommonsenseQA JSON Lines first). A record's id
is ``<split>:<source id>``; its data (:class:`~senseforge.pipelines.culture_adapt.records.AdaptRecord`)
holds the split, the source id and language, and the item. With
``test_from_train`` a seeded sample of train becomes the test split (Putri et al. took
their test from CommonsenseQA's train, whose test has no answers).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from senseforge.data.loaders import load_dataset
from senseforge.data.schema import MCItem
from senseforge.errors import ConfigError
from senseforge.pipelines.culture_adapt.config import CultureAdaptConfig, split_and_path
from senseforge.pipelines.culture_adapt.item import Fields
from senseforge.pipelines.culture_adapt.records import AdaptRecord
from senseforge.pipelines.runstore import StageResult

DEMO_SOURCE = "demo_source.jsonl"


def demo_source() -> Path:
    """Our bundled sample: eight CommonsenseQA dev items (MIT), some naming people or places."""
    return Path(str(resources.files("senseforge.pipelines.culture_adapt") / "data" / DEMO_SOURCE))


def fields_of(item: MCItem) -> Fields:
    """A loaded item as the recipe carries it (no answer: an empty label, rejected by the screen)."""
    return Fields(
        question=item.question,
        concept=item.question_concept or "",
        choices=tuple((c.label, c.text) for c in item.choices),
        answer=item.answer or "",
    )


def read_sources(config: CultureAdaptConfig) -> list[tuple[str, MCItem, Path]]:
    """Every source item with its split and file, in file order.

    Raises:
        ConfigError: a file that is not multiple-choice data, or an id given twice.
        DataValidationError: a bad row (located).
    """
    entries = [split_and_path(e) for e in config.source] or [("test", demo_source())]
    out: list[tuple[str, MCItem, Path]] = []
    seen: dict[str, Path] = {}
    for split, path in entries:
        data = load_dataset(path, lang=config.source_lang)
        if data.kind != "mc":
            raise ConfigError(f"{path}: {data.fmt} holds binary examples; culture-adapt needs multiple-choice items")
        for item in data.items:
            if item.id in seen:
                raise ConfigError(f"{path}: item id {item.id!r} is also in {seen[item.id]}; ids must be unique")
            seen[item.id] = path
            out.append((split, item, path))
    return out


def carve_test(rows: list[tuple[str, MCItem, Path]], n: int, seed: int) -> list[tuple[str, MCItem, Path]]:
    """``n`` train items, drawn with the seed, moved to the test split.

    Raises:
        ConfigError: fewer than ``n`` train items.
    """
    train = sorted(row[1].id for row in rows if row[0] == "train")
    if len(train) < n:
        raise ConfigError(f"--test-from-train {n}: the train source has only {len(train)} items")
    chosen = set(random.Random(seed).sample(train, n))
    return [("test" if item.id in chosen else split, item, path) for split, item, path in rows]


@dataclass(frozen=True)
class SourceItems:
    """The first stage: the source items as records."""

    name: str = "source"

    def records(self, config: CultureAdaptConfig) -> tuple[list[StageResult], dict[str, Any]]:
        rows = read_sources(config)
        if config.test_from_train is not None:
            rows = carve_test(rows, config.test_from_train, config.seed)
        records: list[StageResult] = [
            StageResult(
                f"{split}:{item.id}",
                "ok",
                AdaptRecord(split=split, source_id=item.id, source_lang=config.source_lang, source=fields_of(item)),
            )
            for split, item, _ in rows
        ]
        splits: dict[str, int] = {}
        for split, _, _ in rows:
            splits[split] = splits.get(split, 0) + 1
        files = sorted({str(path) for _, _, path in rows})
        return records, {"files": files, "items": len(rows), "splits": dict(sorted(splits.items()))}
