"""Train, validation and test: one ratio type, and the split stage every recipe that cuts its items uses.

:class:`Ratios` reads the shares in either form a config gives them — three numbers
(``(0.8, 0.1, 0.1)``, mCSQA's ``ratios``) or text (``"80/10/10"``, culture-gen's
``split``) — and the config field keeps the form it was given in (the manifest and the
config hash stay as they were). :class:`Split` is a barrier stage: it sees every record,
cuts their items with :func:`senseforge.data.splits.split_items` (seeded, stratified by
difficulty) and records each item's split. A recipe that cuts its items when it finishes
(culture-gen, per language) calls :func:`split` itself.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Generic, NamedTuple, TypeVar

from senseforge.data.schema import MCItem
from senseforge.data.splits import split_items
from senseforge.pipelines.outcomes import StageOutput, ok
from senseforge.pipelines.runstore import Record, StageResult
from senseforge.pipelines.stage import StageContext

R = TypeVar("R", bound=Record)


class Ratios(NamedTuple):
    """Train / validation / test shares (weights: :func:`~senseforge.data.splits.split_items` normalises them)."""

    train: float
    validation: float
    test: float

    @classmethod
    def of(cls, value: str | Sequence[float]) -> Ratios:
        """Three numbers as given, or text such as ``80/10/10`` (``/``, ``,`` or ``:`` between) as shares of one.

        Raises:
            ValueError: not three non-negative numbers with a positive sum.

        >>> Ratios.of("80/10/10"), Ratios.of((8, 1, 1))
        (Ratios(train=0.8, validation=0.1, test=0.1), Ratios(train=8.0, validation=1.0, test=1.0))
        """
        text = isinstance(value, str)
        parts = re.split(r"[/,:]", value) if isinstance(value, str) else list(value)
        try:
            numbers = [float(p) for p in parts]
        except (TypeError, ValueError):
            numbers = []
        if len(numbers) != 3 or min(numbers) < 0 or sum(numbers) <= 0:
            raise ValueError(f"split {value!r}: write train/validation/test shares, e.g. 80/10/10")
        total = sum(numbers) if text else 1.0
        return cls(numbers[0] / total, numbers[1] / total, numbers[2] / total)


def split(items: Sequence[MCItem], ratios: Ratios | None, seed: int) -> dict[str, list[MCItem]]:
    """The items per split (``ratios`` ``None``: every item in test, as a paper's release that has only a test set)."""
    if ratios is None:
        return {"test": list(items)}
    return split_items(items, ratios=ratios, seed=seed)


@dataclass
class Split(Generic[R]):
    """A barrier stage that cuts the records' items into train, validation and test, and records each one's split.

    A recipe says what item a record is (:meth:`item`) and how a record keeps its place (:meth:`placed`).
    """

    name: str
    ratios: Ratios
    seed: int
    barrier = True
    people_tasks = ()
    pauses_run = False
    specs: tuple[str, ...] = ()

    def item(self, record: StageResult[R]) -> MCItem:
        """The record's item as the split sees it (its id and difficulty)."""
        raise NotImplementedError

    def placed(self, record: StageResult[R], item: MCItem, split: str) -> Any:
        """The record's data with its item and split."""
        raise NotImplementedError

    def run(self, records: Sequence[StageResult[R]], ctx: StageContext) -> StageOutput:
        items = {record.record_id: self.item(record) for record in records}
        cut = split(list(items.values()), self.ratios, self.seed)
        where = {item.id: name for name, members in cut.items() for item in members}
        return StageOutput([ok(r, self.placed(r, items[r.record_id], where[items[r.record_id].id])) for r in records])
