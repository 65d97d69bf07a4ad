"""Where an analysis goes: a table on the terminal, and JSON, CSV and a figure in its output folder.

``write_outputs(folder, name, doc, rows, figure)`` writes ``<name>.json`` (the whole
result), ``<name>.csv`` (the table's rows) and, when matplotlib is installed and a figure is
given, ``<name>.svg`` — each atomically, so an interrupted analysis never leaves half a
file. Figures are drawn with matplotlib's Agg backend (no display needed).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from senseforge.data.io import atomic_open

FigureMaker = Callable[[Any], Any]
"""Draws on a matplotlib ``Figure`` it is given."""


def default_out(name: str) -> Path:
    """``analysis/<name>/`` under the working directory."""
    return Path("analysis") / name


def write_outputs(
    folder: Path,
    name: str,
    doc: Mapping[str, Any],
    rows: Sequence[Mapping[str, Any]],
    figure: FigureMaker | None = None,
) -> list[Path]:
    """Write the analysis's files; returns their paths (the figure only when matplotlib is there)."""
    folder.mkdir(parents=True, exist_ok=True)
    written = [folder / f"{name}.json", folder / f"{name}.csv"]
    with atomic_open(written[0]) as handle:
        handle.write(json.dumps(doc, ensure_ascii=False, indent=2, sort_keys=False) + "\n")
    columns = list(dict.fromkeys(key for row in rows for key in row))
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({key: _cell(row.get(key)) for key in columns})
    with atomic_open(written[1]) as handle:
        handle.write(buffer.getvalue())
    if figure is not None:
        drawn = draw(figure)
        if drawn is not None:
            path = folder / f"{name}.svg"
            with atomic_open(path) as handle:
                handle.write(drawn)
            written.append(path)
    return written


def draw(figure: FigureMaker) -> str | None:
    """The figure as SVG text, or ``None`` without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        from matplotlib.figure import Figure
    except ImportError:
        return None
    fig = Figure(figsize=(7, 4), layout="constrained")
    figure(fig)
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", metadata={"Date": None})
    return buffer.getvalue()


def percent(value: float | None) -> str:
    """``NN.NN%`` (``n/a`` for ``None``)."""
    return "n/a" if value is None else f"{100 * value:.2f}%"


def _cell(value: Any) -> Any:
    if isinstance(value, list | tuple | dict):
        return json.dumps(value, ensure_ascii=False)
    return value
