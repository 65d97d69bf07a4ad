"""What the report's sections share: small HTML pieces, the metrics read from a ``results.json``, and how a
figure is shown (drawn into the page's :class:`~.figures.Figures`, captioned, its numbers under it)."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

from senseforge.evaluate.html_report import figures as fig
from senseforge.evaluate.html_report.inputs import Evaluation, Run

FOLDER_TOKEN = "{figures}"
"""Stands for the figures folder's name in a section's HTML until the page knows it."""


def e(value: Any) -> str:
    return html.escape(str(value))


def num(value: Any, digits: int = 3) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return e(value)
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return e(value)


def table(header: Sequence[str], rows: Sequence[Sequence[Any]], digits: int = 3) -> str:
    head = "".join(f"<th>{e(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{num(c, digits)}</td>" for c in row) + "</tr>" for row in rows)
    return f'<div class="scroll"><table><tr>{head}</tr>{body}</table></div>'


def none(text: str) -> str:
    return f'<p class="none">{e(text)}</p>'


def note(text: str) -> str:
    return f'<p class="note">{e(text)}</p>'


def drawable(series: Mapping[str, Sequence[float | None]]) -> bool:
    """Whether any value of ``series`` is known (a chart of nothing but missing values is left out)."""
    return any(value is not None for column in series.values() for value in column)


def show(figures: fig.Figures, key: str, caption: str, figure: Any, numbers: str = "") -> str:
    return figures.add(key, caption, figure).html(FOLDER_TOKEN, numbers)


def metric(metrics: Mapping[str, Any] | None, name: str) -> float | None:
    if not metrics:
        return None
    value = metrics.get(f"{name},none", metrics.get(name))
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def interval(metrics: Mapping[str, Any] | None, name: str) -> tuple[float, float] | None:
    """The 95% bootstrap interval, else the Wilson interval (the one to read at 0 or 1)."""
    for kind in ("ci95", "wilson95"):
        value = (metrics or {}).get(f"{name}_{kind},none")
        if isinstance(value, list) and len(value) == 2 and all(isinstance(v, int | float) for v in value):
            return float(value[0]), float(value[1])
    return None


def ci_text(metrics: Mapping[str, Any] | None, name: str) -> str:
    found = interval(metrics, name)
    return f"[{found[0]:.3f}, {found[1]:.3f}]" if found else "–"


def headline_name(evaluation: Evaluation) -> str:
    return "crow_score_macro_f1" if evaluation.kind == "binary" else "acc"


def anchor(run: Run) -> str:
    return "run-" + "".join(c if c.isalnum() else "-" for c in run.heading)
