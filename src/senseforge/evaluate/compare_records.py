"""The records of :mod:`senseforge.evaluate.compare`: what a comparison of two evaluations holds.

:class:`Comparison` is everything ``senseforge eval compare`` shows, as data: which evaluation
each side is (:class:`Side`) and, per metric, each side's own number (:class:`Estimate`), the
paired B − A (:class:`PairedDifference`) and McNemar's exact test (:class:`McNemar`).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

__all__ = [
    "CONFIDENCE",
    "Comparison",
    "Estimate",
    "McNemar",
    "PairedDifference",
    "Row",
    "Side",
]

CONFIDENCE = 0.95
"""The level of every interval here."""


# --------------------------------------------------------------------------- result records


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class McNemar(_Model):
    """McNemar's exact test of one accuracy on the shared pairs."""

    a_only: int
    """Pairs A got right and B wrong."""
    b_only: int
    """Pairs B got right and A wrong."""
    p_value: float
    """Two-sided exact p-value (:func:`mcnemar_p_value`)."""
    unit: str
    """What a pair is: ``item``, ``example`` or ``context``."""


class Estimate(_Model):
    """One side's number as its ``results.json`` reports it, with its intervals."""

    value: float
    ci95: list[float] | None = None
    """Percentile bootstrap interval; ``None`` with fewer than two resampling units (or none reported)."""
    wilson95: list[float] | None = None
    """Wilson score interval, for a proportion."""
    ci_unit: str | None = None
    """What the bootstrap resamples: ``item`` or ``context``."""
    units: int | None = None
    """How many of them there are."""


class PairedDifference(_Model):
    """B − A on the shared items, with its paired bootstrap interval."""

    a: float
    """A's number on the shared items."""
    b: float
    """B's number on the shared items."""
    diff: float
    """``b - a``."""
    ci95: list[float] | None
    """Percentile bootstrap interval of the difference; ``None`` with fewer than two units."""
    ci_unit: str
    """What the bootstrap resamples: ``item`` or ``context``."""
    units: int
    """Shared units resampled."""


class Row(_Model):
    """One metric of one task (or group): each side's number and the paired comparison."""

    task: str
    metric: str
    a: Estimate | None
    b: Estimate | None
    paired: PairedDifference | None = None
    mcnemar: McNemar | None = None


class Side(_Model):
    """Which evaluation one side is."""

    path: str
    """Its ``results.json``."""
    label: str
    """Model, formulation and ``n`` in one line (:meth:`EvalResults.label`)."""
    model: str
    setting: str
    n: int | None
    data_name: str
    data_path: str
    data_split: str | None
    data_sha256: str | None
    """The hash of the evaluated data where ``results.json`` records one."""
    scored: int | None
    """Items (or examples) with a gold answer in ``samples.jsonl``; ``None`` without that file."""


class Comparison(_Model):
    """Everything ``senseforge eval compare`` shows, as data (``--json`` prints it)."""

    a: Side
    b: Side
    kind: Literal["mc", "binary"]
    unit: str
    """What :attr:`shared` counts: ``item`` (multiple choice) or ``example`` (binary)."""
    shared: int
    """Items scored by both sides (the pairs)."""
    only_a: int
    only_b: int
    n_resamples: int
    seed: int
    confidence: float = CONFIDENCE
    warnings: list[str]
    rows: list[Row]
