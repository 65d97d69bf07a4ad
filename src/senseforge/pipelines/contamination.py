"""The contamination gate: a stage any recipe places before models judge its items and people review them,
checking each against the benchmarks of a registry (:mod:`senseforge.registry`).

It is there only when the config names a registry (``--registry``) and the mode is not ``off``, so a build
without one makes exactly what it made before. Under ``reject`` an exact or normal-form copy is rejected as
``contaminated`` and a near copy as ``near_duplicate``, the evidence naming the registry entry, the source
item's id, the kind and the score; a cross-lingual match is only flagged. Under ``flag`` every match is a
flag: the record goes on with the matches in :attr:`~senseforge.pipelines.runstore.Record.contamination`,
and the recipe writes them into ``items/``.

A recipe without a copy filter of its own (culture-adapt, human-gen) also ends with :class:`SelfDuplicates`
when the gate is on: at that final barrier its kept items are checked against each other in record-id order
(so the verdict does not depend on the order they arrived in), and a later copy of an earlier item is
``self_duplicate`` — or ``cross_split`` when the two sit in different splits (the same item in train and test),
rejected or flagged as the gate's mode says.

The registry's content hash is recorded in the manifest (:func:`manifest_facts`); a resume after it changed
is refused (:meth:`~senseforge.pipelines.config.RecipeConfig.input_changes`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

from senseforge.errors import ConfigError
from senseforge.pipelines.config import RecipeConfig
from senseforge.pipelines.outcomes import Outcome, StageOutput, ok, rejected
from senseforge.pipelines.runstore import Record, StageResult
from senseforge.pipelines.stage import RuleStage, StageContext
from senseforge.registry.check import Checker, checked_against, copies_within
from senseforge.registry.store import Registry, Unit

GATE = "contamination"
"""The stage's name in the funnel."""
SELF_CHECK = "self_duplicates"
"""The final barrier's name in the funnel (:class:`SelfDuplicates`)."""
SELF_DUPLICATE = "self_duplicate"
"""Rejection (or flag) reason: the item copies an earlier item of the same build, in the same split."""
CROSS_SPLIT = "cross_split"
"""Rejection (or flag) reason: the item copies an earlier item of the same build that sits in another split."""

UnitOf = Callable[[str, Any], Unit]
"""What a recipe's record is, for the check: ``(record id, data) -> Unit`` (text, language, gold answer)."""


def mode_of(config: RecipeConfig, default: Literal["reject", "flag"]) -> Literal["reject", "flag"] | None:
    """What the gate does for ``config`` (``None``: no gate — no registry, or ``off``)."""
    if not config.registry or config.contamination == "off":
        return None
    return default if config.contamination == "auto" else config.contamination


@dataclass
class ContaminationGate(RuleStage[Record]):
    """Checks each record against the registry; rejects copies (``reject``) or flags them (``flag``)."""

    registry: Path
    unit_of: UnitOf = field(repr=False)
    mode: Literal["reject", "flag"] = "reject"

    @cached_property
    def checker(self) -> Checker:
        """The registry's fingerprints, read once per build."""
        return Checker(Registry.open(self.registry))

    def rule(self, records: Sequence[StageResult[Record]], ctx: StageContext) -> StageOutput:
        units = [self.unit_of(r.record_id, r.data) for r in records]
        found = self.checker.check(units, centres_from_units=False)  # a verdict independent of the batching
        outcomes: list[Outcome] = []
        for record, matches in zip(records, found, strict=True):
            copies = [m for m in matches if m.rejects]
            if self.mode == "reject" and copies:
                best = copies[0]
                evidence = {"registry": best.entry, "source_id": best.source_id, "kind": best.kind, "score": best.score}
                if best.licence:
                    evidence["licence"] = best.licence
                outcomes.append(rejected(record, best.reason, evidence=evidence))
            elif matches:
                outcomes.append(ok(record, record.data.with_(contamination=[m.to_json() for m in matches])))
            else:
                outcomes.append(ok(record))
        return StageOutput(outcomes)


SplitOf = Callable[[Any], str | None]
"""Which split a record's data sits in (``None``: the build has one)."""


@dataclass
class SelfDuplicates:
    """The final barrier: items that copy an earlier item of the build (by record id), rejected or flagged.

    Items are compared within a language, exactly, in normal form and near (MinHash Jaccard of the shingles,
    with the same gold answer), as against the registry
    (:func:`~senseforge.registry.check.copies_within`). The evidence names the earlier record, the kind and
    the score, and for ``cross_split`` both splits.
    """

    name: str
    unit_of: UnitOf = field(repr=False)
    mode: Literal["reject", "flag"] = "reject"
    split_of: SplitOf | None = field(default=None, repr=False)
    barrier = True
    people_tasks = ()
    pauses_run = False
    specs: tuple[str, ...] = ()

    def run(self, records: Sequence[StageResult[Record]], ctx: StageContext) -> StageOutput:
        ordered = sorted(records, key=lambda r: r.record_id)
        copies: dict[str, dict[str, Any]] = {}
        by_lang: dict[str | None, list[tuple[StageResult[Record], Unit]]] = {}
        for record in ordered:
            unit = self.unit_of(record.record_id, record.data)
            by_lang.setdefault(unit.lang, []).append((record, unit))
        for members in by_lang.values():
            for copy in copies_within([unit for _, unit in members]):
                record, earlier = members[copy.index][0], members[copy.earlier][0]
                mine, theirs = self._split(record), self._split(earlier)
                found: dict[str, Any] = {"copy_of": earlier.record_id, "kind": copy.kind, "score": copy.score}
                found.update({"splits": [theirs, mine], "reason": CROSS_SPLIT} if mine != theirs else {})
                copies[record.record_id] = {"reason": SELF_DUPLICATE, **found}
        outcomes: list[Outcome] = []
        for record in records:
            copy_of = copies.get(record.record_id)
            if copy_of is None:
                outcomes.append(ok(record))
            elif self.mode == "reject":
                evidence = {key: value for key, value in copy_of.items() if key != "reason"}
                outcomes.append(rejected(record, copy_of["reason"], evidence=evidence))
            else:
                flags = [*(record.data.contamination or []), copy_of]
                outcomes.append(ok(record, record.data.with_(contamination=flags)))
        return StageOutput(outcomes)

    def _split(self, record: StageResult[Record]) -> str | None:
        return self.split_of(record.data) if self.split_of is not None else None


def self_check(
    config: RecipeConfig, unit_of: UnitOf, default: Literal["reject", "flag"], split_of: SplitOf | None = None
) -> list[SelfDuplicates]:
    """The final barrier a recipe without a copy filter of its own ends with: one stage, or none when the config
    asks for no check (no registry, or ``--contamination off``)."""
    mode = mode_of(config, default)
    return [] if mode is None else [SelfDuplicates(SELF_CHECK, unit_of, mode, split_of)]


def kept_stage(config: RecipeConfig, last: str) -> str:
    """The stage whose kept records are the build's items: :data:`SELF_CHECK` when the recipe ends with it
    (:func:`self_check` made one), else ``last``."""
    checked = mode_of(config, "reject") is not None  # the mode itself does not matter here, only that there is one
    return SELF_CHECK if checked else last


def gate(config: RecipeConfig, unit_of: UnitOf, default: Literal["reject", "flag"]) -> list[ContaminationGate]:
    """The gate a recipe puts in its stages: one stage, or none when the config asks for no check."""
    mode = mode_of(config, default)
    if mode is None or config.registry is None:
        return []
    return [ContaminationGate(GATE, Path(config.registry), unit_of, mode)]


def registry_of(folder: str) -> Registry:
    """The registry a config names, refused when it holds no benchmark.

    Raises:
        ConfigError: no benchmark registered there.
        StoreError: an unreadable registry, or one made with other MinHash settings.
    """
    registry = Registry.open(Path(folder))
    if not registry.entries:
        raise ConfigError(
            f"--registry {folder}: no benchmark registered there; add one with "
            "`senseforge registry add FILE --name NAME --registry ...`, or leave --registry out"
        )
    return registry


def manifest_facts(config: RecipeConfig, default: Literal["reject", "flag"]) -> dict[str, Any]:
    """``{"contamination": …}`` for the manifest: the registry, its content hash, its entries and the mode; empty
    when there is no gate (a manifest as before).

    Raises:
        ConfigError: the registry holds no benchmark.
    """
    mode = mode_of(config, default)
    if mode is None or config.registry is None:
        return {}
    registry = registry_of(config.registry)
    return {
        "contamination": {
            "registry": str(registry.folder),
            "registry_hash": registry.content_hash(),
            "mode": mode,
            "checked_against": checked_against(registry),
        }
    }
