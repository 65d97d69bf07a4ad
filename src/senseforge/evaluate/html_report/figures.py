"""The report's figures: drawn once with matplotlib, shown on the page and kept as SVG and PDF beside it.

Every figure is drawn at the size it is printed (6.4 in wide), with its text at 9 pt or more, its legend
outside the axes (below them) so it never covers data, and error bars where the numbers have a 95%
interval. The page shows the SVG; the SVG (text kept as text, so it can be edited) and the PDF are
written to the figures folder beside the page and linked under each figure with its caption. Both are
deterministic: no date, a fixed hash salt.
"""

from __future__ import annotations

import base64
import html
import io
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from senseforge.data.io import atomic_open
from senseforge.errors import MissingDependencyError

WIDTH_IN = 6.4
"""A figure's printed width in inches: one column of a two-column page spread across, or a full one-column page."""
MIN_FONT_PT = 9.0
"""The smallest text a figure draws (tick labels, bar values, legends)."""
STYLE: dict[str, Any] = {
    "font.size": 10.0,
    "axes.titlesize": 11.0,
    "axes.labelsize": 10.0,
    "xtick.labelsize": MIN_FONT_PT,
    "ytick.labelsize": MIN_FONT_PT,
    "legend.fontsize": MIN_FONT_PT,
    "svg.fonttype": "none",
    "svg.hashsalt": "senseforge-report",
    "pdf.fonttype": 42,
    "axes.spines.top": False,
    "axes.spines.right": False,
}
"""matplotlib settings of every report figure."""
PALETTE = ("#3b6ea5", "#e0883a", "#5a9e5a", "#b8484a", "#8a6bb1", "#8c6d5a", "#cf7fb8", "#7f7f7f")
"""Series colours (colour-blind-safe order of matplotlib's tab10, reordered)."""


def pyplot_figure() -> Any:
    """The ``matplotlib.figure.Figure`` class, with the Agg backend.

    Raises:
        MissingDependencyError: matplotlib is not installed.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        from matplotlib.figure import Figure
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise MissingDependencyError("the report draws with matplotlib: pip install 'senseforge[report]'") from exc
    return Figure


def styled() -> Any:
    """A context in which matplotlib draws and saves with :data:`STYLE`."""
    import matplotlib

    settings: Any = STYLE
    return matplotlib.rc_context(settings)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower()[:60] or "figure"


@dataclass(frozen=True)
class Drawn:
    """One figure as the page shows it and as a paper takes it."""

    number: int
    name: str
    """File stem in the figures folder: ``fig03-mcsqa-en-funnel``."""
    caption: str
    svg: str
    pdf: bytes | None
    """``None``: an adopted figure that came without a PDF."""

    def html(self, folder: str, table: str = "") -> str:
        """The ``<figure>``: the drawing, its caption with the SVG and PDF links, and its numbers."""
        data = base64.b64encode(self.svg.encode("utf-8")).decode("ascii")
        links = f'<a href="{html.escape(folder)}/{self.name}.svg" download>SVG</a>'
        if self.pdf is not None:
            links += f' · <a href="{html.escape(folder)}/{self.name}.pdf" download>PDF</a>'

        numbers = f"<details><summary>numbers</summary>{table}</details>" if table else ""
        return (
            f'<figure id="{self.name}"><img alt="Figure {self.number}" src="data:image/svg+xml;base64,{data}">'
            f"<figcaption><b>Figure {self.number}.</b> {html.escape(self.caption)} <span class=dl>{links}</span>"
            f"</figcaption>{numbers}</figure>"
        )


@dataclass
class Figures:
    """The figures of one page, numbered in the order they are drawn."""

    drawn: list[Drawn] = field(default_factory=list)

    def add(self, key: str, caption: str, figure: Any) -> Drawn:
        """Render ``figure`` (a matplotlib Figure) as SVG and PDF, number it and keep it."""

        svg, pdf = io.StringIO(), io.BytesIO()
        with styled():
            figure.savefig(svg, format="svg", metadata={"Date": None})
            figure.savefig(pdf, format="pdf", metadata={"CreationDate": None, "ModDate": None})
        number = len(self.drawn) + 1
        drawn = Drawn(number, f"fig{number:02d}-{_slug(key)}", caption, svg.getvalue(), pdf.getvalue())
        self.drawn.append(drawn)
        return drawn

    def adopt(self, key: str, caption: str, svg: str, pdf: Path) -> Drawn:
        """Number and keep a figure drawn elsewhere (an analysis's SVG, and its PDF when ``pdf`` exists)."""
        number = len(self.drawn) + 1
        content = pdf.read_bytes() if pdf.is_file() else None
        drawn = Drawn(number, f"fig{number:02d}-{_slug(key)}", caption, svg, content)
        self.drawn.append(drawn)
        return drawn

    def write(self, folder: Path) -> list[Path]:
        """Write every figure's SVG and PDF into ``folder`` (atomically, each); the paths."""
        folder.mkdir(parents=True, exist_ok=True)
        paths = []
        for drawn in self.drawn:
            for suffix, content in ((".svg", drawn.svg.encode("utf-8")), (".pdf", drawn.pdf)):
                if content is None:
                    continue
                path = folder / f"{drawn.name}{suffix}"
                with atomic_open(path, "wb") as handle:
                    handle.write(content)
                paths.append(path)
        return paths


def new_figure(height_in: float, *, columns: int = 1) -> tuple[Any, list[Any]]:
    """A figure of the report's width and ``height_in``, with ``columns`` axes side by side."""

    with styled():
        figure = pyplot_figure()(figsize=(WIDTH_IN, height_in), layout="constrained")
        axes = figure.subplots(1, columns, squeeze=False)[0]
    return figure, list(axes)


Interval = tuple[float, float] | None


def _error(values: Sequence[float | None], intervals: Sequence[Interval]) -> list[list[float]] | None:
    if not any(interval is not None for interval in intervals):
        return None
    low, high = [], []
    for value, interval in zip(values, intervals, strict=True):
        if value is None or interval is None:
            low.append(0.0)
            high.append(0.0)
        else:
            low.append(max(0.0, value - interval[0]))
            high.append(max(0.0, interval[1] - value))
    return [low, high]


def _legend_below(figure: Any, axes: Any, count: int) -> None:
    """The legend under the axes, outside the data, in as many columns as fit."""
    if count > 1:
        figure.legend(*axes.get_legend_handles_labels(), loc="outside lower center", ncols=min(count, 4), frameon=False)


def bars(
    labels: Sequence[str],
    series: Mapping[str, Sequence[float | None]],
    *,
    xlabel: str,
    intervals: Mapping[str, Sequence[Interval]] | None = None,
    limit: tuple[float, float] | None = None,
    values: bool = True,
) -> Any:
    """Horizontal grouped bars (a group per label, a bar per series), with 95% intervals when given.

    A missing value (``None``) draws no bar; its group still shows, and the table beside the figure says
    ``–``. ``values`` writes each bar's number at its end.
    """

    rows = max(1, len(labels))
    height = 0.35 + 0.28 * rows * max(1, len(series)) ** 0.6 + (0.45 if len(series) > 1 else 0.0)
    with styled():
        figure, (axes,) = new_figure(max(1.6, height))
        width = 0.8 / max(1, len(series))
        for index, (name, column) in enumerate(series.items()):
            positions = [i + index * width for i in range(len(labels))]
            shown = [v if v is not None else 0.0 for v in column]
            error = _error(column, (intervals or {}).get(name, [None] * len(column)))
            drawn = axes.barh(
                positions,
                shown,
                height=width * 0.92,
                label=name,
                color=PALETTE[index % len(PALETTE)],
                xerr=error,
                error_kw={"elinewidth": 1.0, "capsize": 2.5, "ecolor": "#333"},
            )
            for bar, value in zip(drawn, column, strict=True):
                if bar is not None and value is None:
                    bar.set_visible(False)
            if values:
                texts = [_short(v) if v is not None else "" for v in column]
                axes.bar_label(drawn, labels=texts, padding=3, fontsize=MIN_FONT_PT)
        axes.set_yticks([i + width * (len(series) - 1) / 2 for i in range(len(labels))], list(labels))
        axes.invert_yaxis()
        axes.set_xlabel(xlabel)
        if limit is not None:
            axes.set_xlim(*limit)
        else:
            axes.margins(x=0.15)
        _legend_below(figure, axes, len(series))
    return figure


def stacked(labels: Sequence[str], parts: Mapping[str, Sequence[float]], *, xlabel: str) -> Any:
    """Horizontal stacked bars: one bar per label, one segment per part."""

    with styled():
        figure, (axes,) = new_figure(max(1.6, 0.5 + 0.34 * max(1, len(labels)) + 0.45))
        left = [0.0] * len(labels)
        for index, (name, column) in enumerate(parts.items()):
            drawn = axes.barh(
                range(len(labels)), column, left=left, label=name, color=PALETTE[index % len(PALETTE)], height=0.7
            )
            axes.bar_label(
                drawn, labels=[_short(v) if v else "" for v in column], label_type="center", fontsize=MIN_FONT_PT
            )
            left = [a + b for a, b in zip(left, column, strict=True)]
        axes.set_yticks(range(len(labels)), list(labels))
        axes.invert_yaxis()
        axes.set_xlabel(xlabel)
        _legend_below(figure, axes, len(parts))
    return figure


def points(
    rows: Sequence[str],
    series: Mapping[str, Sequence[float | None]],
    intervals: Mapping[str, Sequence[Interval]],
    *,
    xlabel: str,
    limit: tuple[float, float] = (0.0, 1.0),
) -> Any:
    """A dot plot with 95% intervals: a line per row, a marker per series, slightly offset so none hides another."""

    markers = ("o", "s", "D", "^", "v", "P", "X", "*")
    with styled():
        figure, (axes,) = new_figure(max(1.8, 0.6 + 0.36 * max(1, len(rows)) + (0.45 if len(series) > 1 else 0)))
        step = 0.5 / max(1, len(series))
        for index, (name, column) in enumerate(series.items()):
            offset = (index - (len(series) - 1) / 2) * step
            ys = [i + offset for i, v in enumerate(column) if v is not None]
            xs = [v for v in column if v is not None]
            shown = [
                iv for v, iv in zip(column, intervals.get(name, [None] * len(column)), strict=True) if v is not None
            ]
            error = _error(xs, shown)
            axes.errorbar(
                xs,
                ys,
                xerr=error,
                fmt=markers[index % len(markers)],
                color=PALETTE[index % len(PALETTE)],
                label=name,
                capsize=2.5,
                elinewidth=1.0,
                markersize=5,
            )
        axes.set_yticks(range(len(rows)), list(rows))
        axes.set_ylim(len(rows) - 0.5, -0.5)
        axes.set_xlim(*limit)
        axes.grid(axis="x", color="#ddd", linewidth=0.6)
        axes.set_axisbelow(True)
        axes.set_xlabel(xlabel)
        _legend_below(figure, axes, len(series))
    return figure


def _short(value: float) -> str:
    if isinstance(value, int) or float(value).is_integer():
        return f"{int(value)}"
    return f"{value:.2f}" if abs(value) < 100 else f"{value:.0f}"
