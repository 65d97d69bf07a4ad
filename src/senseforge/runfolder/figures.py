"""The figures a recipe declares about its run, as data: a few kinds, each drawn by the report and printed as
plain lines by the CLI.

A figure is named (its ``name`` is unique in its funnel or group and names its image file), headed
(``title``), explained (``caption``, in the recipe's words: which paper's figure it mirrors, what a bar
means) and typed by its ``kind``:

* :class:`Counts` — a number per label (verification outcomes, kept items by adaptation, items by QC round).
* :class:`Share` — a part of a whole (questions the refine step changed).
* :class:`Table` — numbers per row and column (Easy/Hard per split, items per category and stage).
* :class:`Agreement` — chance-corrected agreement per group of raters (Fleiss' κ, Krippendorff's α).

``draw`` says whether the report draws it (``False``: facts for the record, shown as numbers only);
``summary`` whether the CLI prints it after a build.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

Number = int | float | None


def _number(value: Number) -> str:
    if value is None:
        return "–"
    if isinstance(value, float) and not value.is_integer():
        return f"{value:.3g}"
    return str(int(value))


class _Figure(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    """Unique in its funnel or group; names the figure's image file."""
    title: str
    """A short heading."""
    caption: str = ""
    """What the figure shows, in a sentence or two."""
    unit: str = ""
    """What the numbers count (``questions``, ``items``)."""
    draw: bool = True
    """Whether the report draws it (else its numbers are shown in a table only)."""
    summary: bool = False
    """Whether the CLI prints it after a build."""


class Counts(_Figure):
    """A number per label."""

    kind: Literal["counts"] = "counts"
    values: dict[str, Number]

    def lines(self) -> list[str]:
        shown = " · ".join(f"{label} {_number(n)}" for label, n in self.values.items())
        return [f"{self.title}: {shown}" if shown else f"{self.title}: none"]


class Share(_Figure):
    """``part`` of ``whole`` (drawn as one stacked bar: the part and the rest)."""

    kind: Literal["share"] = "share"
    part: int
    whole: int
    part_label: str
    rest_label: str

    @property
    def fraction(self) -> float | None:
        return self.part / self.whole if self.whole else None

    def lines(self) -> list[str]:
        fraction = self.fraction
        percent = "" if fraction is None else f" ({100 * fraction:.1f}%)"
        return [f"{self.title}: {self.part} of {self.whole} {self.unit} {self.part_label}{percent}".replace("  ", " ")]


class Table(_Figure):
    """Numbers per row (``rows``) and column (``columns``): ``values[i][j]`` is row i's number in column j."""

    kind: Literal["table"] = "table"
    rows: list[str]
    columns: list[str]
    values: list[list[Number]]
    stacked: bool = False
    """Drawn as stacked bars (the columns are parts of a row's whole), else side by side."""

    def column(self, name: str) -> list[Number]:
        index = self.columns.index(name)
        return [row[index] for row in self.values]

    def lines(self) -> list[str]:
        out = [f"{self.title}:"]
        for label, row in zip(self.rows, self.values, strict=True):
            out.append(
                "  " + f"{label}: " + " · ".join(f"{c} {_number(n)}" for c, n in zip(self.columns, row, strict=True))
            )
        return out


class Rated(BaseModel):
    """Agreement of one group of raters."""

    model_config = ConfigDict(extra="forbid")

    label: str
    items: int
    raters: int | None = None
    """Raters per item (when fixed)."""
    ratings: int | None = None
    fleiss_kappa: float | None = None
    krippendorff_alpha: float | None = None
    extra: dict[str, Number] = Field(default_factory=dict)
    """Further measures shown beside the two (``accept_rate``, ``majority_is_creator`` …)."""


class Agreement(_Figure):
    """Chance-corrected agreement per group of raters (undefined where every vote is the same or too few)."""

    kind: Literal["agreement"] = "agreement"
    groups: list[Rated]

    def lines(self) -> list[str]:
        out = [f"{self.title}:"]
        for g in self.groups:
            extra = "".join(f" · {k} {_number(v)}" for k, v in g.extra.items())
            out.append(
                f"  {g.label}: Fleiss κ {_number(g.fleiss_kappa)} · Krippendorff α {_number(g.krippendorff_alpha)}"
                f" ({g.items} items){extra}"
            )
        return out


Figure = Annotated[Counts | Share | Table | Agreement, Field(discriminator="kind")]
"""Any figure, told apart by its ``kind``."""
