"""Where an analysis goes: a table on the terminal, and JSON, CSV and a figure in its output folder.

``write_outputs(folder, name, doc, rows, figure)`` writes ``<name>.json`` (the whole
result), ``<name>.csv`` (the table's rows) and, when matplotlib is installed and a figure is
given, ``<name>.svg`` and ``<name>.pdf`` (the same figure, for a paper; ``senseforge report --analysis``
shows the SVG and links both) — each atomically, so an interrupted analysis never leaves half a file.
Figures are drawn with matplotlib's Agg backend (no display needed).
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
            svg, pdf = drawn
            for path, content in ((folder / f"{name}.svg", svg.encode("utf-8")), (folder / f"{name}.pdf", pdf)):
                with atomic_open(path, "wb") as handle:
                    handle.write(content)
                written.append(path)
    return written


def draw(figure: FigureMaker) -> tuple[str, bytes] | None:
    """The figure as SVG text and PDF bytes (no dates in either), or ``None`` without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        from matplotlib.figure import Figure
    except ImportError:
        return None
    from senseforge.evaluate.html_report.figures import WIDTH_IN, styled

    with styled():  # the report's figure style: print size, text of 9 pt or more, kept as text in the SVG
        fig = Figure(figsize=(WIDTH_IN, 4), layout="constrained")
        figure(fig)
        svg, pdf = io.StringIO(), io.BytesIO()
        fig.savefig(svg, format="svg", metadata={"Date": None})
        fig.savefig(pdf, format="pdf", metadata={"CreationDate": None, "ModDate": None})
    return svg.getvalue(), pdf.getvalue()


def percent(value: float | None) -> str:
    """``NN.NN%`` (``n/a`` for ``None``)."""
    return "n/a" if value is None else f"{100 * value:.2f}%"


def _cell(value: Any) -> Any:
    if isinstance(value, list | tuple | dict):
        return json.dumps(value, ensure_ascii=False)
    return value
