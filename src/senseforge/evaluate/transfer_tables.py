"""Cross-lingual transfer tables of mCSQA §5 (Tables 7 and 9, Figure 6) from per-item outcomes.

The input is the result of already-evaluated models: for every ``(train_setting, test_lang)``
a sequence of :class:`ItemOutcome`. A train setting is ``"mono:<lang>"`` (fine-tuned on one
language), ``"multi"`` (fine-tuned on all languages together) or ``"unseen:<lang>"`` (on every
language except ``<lang>``). The languages are the sorted set of test languages.

- **Cells** (:func:`accuracy_cells`): per setting, test language and subset (``total``,
  ``easy``, ``hard``) the accuracy, the number of items and a 95% percentile bootstrap interval.
  Every subset is scored from its own items: Total counts all items of the evaluation (items
  without a difficulty too), so it is the item-weighted mean of Easy and Hard, never their
  plain average. A subset without items has accuracy ``None``.
- **Transfer matrix** (Table 9, Figure 6; :func:`transfer_matrix`): rows are the training
  language of a monolingual model, columns the test language. ``raw`` holds accuracies;
  ``relative`` holds each cell as a percentage of the test language's own monolingual score,
  ``raw[train][test] / raw[test][test] * 100``, so the diagonal is 100. A relative cell is
  ``None`` when the raw cell is missing or the reference is missing or 0.
- **Table 7** (:func:`table7_rows`): per test language the monolingual score (``mono:L`` on L),
  the multilingual score (``multi`` on L), ``delta = multi - mono`` and the score of the model
  that never saw L (``unseen:L`` on L); ``None`` where an evaluation is missing.
- **Finding** (:func:`finding`): how many off-diagonal relative cells keep at least 90 on Easy,
  and how many fall below 80 on Hard; mCSQA reports that Easy items lose under 10% in
  transfer and Hard items over 20%.

:func:`write_tables` writes all of it (JSON, CSV and a heat map per subset).
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, TypedDict

import numpy as np
from pydantic import BaseModel, ConfigDict

from senseforge.data.io import atomic_open
from senseforge.errors import MissingDependencyError
from senseforge.evaluate.metrics import accuracy, bootstrap_ci

Subset = Literal["total", "easy", "hard"]
SUBSETS: tuple[Subset, ...] = ("total", "easy", "hard")
"""The item subsets every table is built for, in report order."""

EASY_KEEP = 90.0
"""Relative score (percent) at or above which an Easy transfer counts as kept."""

HARD_LOSS = 80.0
"""Relative score (percent) below which a Hard transfer counts as lost."""


class ItemOutcome(BaseModel):
    """One test item's result: its id, whether the model got it right, its difficulty."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    correct: bool
    difficulty: Literal["easy", "hard"] | None = None


class SubsetCell(TypedDict):
    """Accuracy of one subset of one evaluation; ``acc`` and ``ci95`` are ``None`` without items."""

    acc: float | None
    n: int
    ci95: list[float] | None


class TransferMatrix(TypedDict):
    """Train × test matrices over the monolingual models, indexed ``[train][test]``."""

    raw: dict[str, dict[str, float | None]]
    relative: dict[str, dict[str, float | None]]


class Table7Row(TypedDict):
    """One language's row of Table 7."""

    lang: str
    mono: float | None
    multi: float | None
    delta: float | None
    unseen: float | None


_INSTALL_HINT = "pip install 'senseforge[report]'"
_MATRIX_KINDS: tuple[Literal["raw", "relative"], ...] = ("raw", "relative")
_TABLE7_KEYS: tuple[Literal["mono", "multi", "delta", "unseen"], ...] = ("mono", "multi", "delta", "unseen")

Cells = dict[tuple[str, str], dict[Subset, SubsetCell]]
Evaluations = Mapping[tuple[str, str], Sequence[ItemOutcome]]


def _check_setting(setting: str) -> None:
    kind, _, lang = setting.partition(":")
    if setting == "multi" or (kind in ("mono", "unseen") and lang):
        return
    raise ValueError(f"train setting {setting!r} is not 'mono:<lang>', 'multi' or 'unseen:<lang>'")


def languages(evaluations: Mapping[tuple[str, str], object]) -> list[str]:
    """The sorted set of test languages of ``evaluations`` (or of cells, keyed the same way)."""
    return sorted({lang for _, lang in evaluations})


def _subset_cell(flags: Sequence[bool], n_bootstrap: int, seed: int) -> SubsetCell:
    if not flags:
        return {"acc": None, "n": 0, "ci95": None}
    lo, hi = bootstrap_ci(flags, accuracy, n_resamples=n_bootstrap, seed=seed)
    return {"acc": accuracy(flags), "n": len(flags), "ci95": [lo, hi]}


def accuracy_cells(evaluations: Evaluations, *, n_bootstrap: int = 1000, seed: int = 0) -> Cells:
    """Accuracy, item count and 95% bootstrap interval per evaluation and subset.

    Args:
        evaluations: outcomes keyed ``(train_setting, test_lang)``.
        n_bootstrap: bootstrap resamples per interval.
        seed: seed of every interval (the same inputs give the same intervals).

    Returns:
        ``{(setting, lang): {"total" | "easy" | "hard": {"acc", "n", "ci95"}}}``; Total is
        computed from all items of the evaluation.

    Raises:
        ValueError: a train setting has an unknown form, or an evaluation repeats an item id.
    """
    cells: Cells = {}
    for (setting, lang), items in sorted(evaluations.items()):
        _check_setting(setting)
        ids = [item.id for item in items]
        if len(set(ids)) != len(ids):
            raise ValueError(f"evaluation ({setting!r}, {lang!r}) repeats an item id")
        by_subset: dict[Subset, list[bool]] = {
            "total": [item.correct for item in items],
            "easy": [item.correct for item in items if item.difficulty == "easy"],
            "hard": [item.correct for item in items if item.difficulty == "hard"],
        }
        cells[(setting, lang)] = {s: _subset_cell(by_subset[s], n_bootstrap, seed) for s in SUBSETS}
    return cells


def _acc(cells: Cells, setting: str, lang: str, subset: Subset) -> float | None:
    cell = cells.get((setting, lang))
    return None if cell is None else cell[subset]["acc"]


def _check_subset(subset: str) -> None:
    if subset not in SUBSETS:
        raise ValueError(f"subset must be one of {SUBSETS}, got {subset!r}")


def transfer_matrix(cells: Cells, langs: Sequence[str], subset: Subset) -> TransferMatrix:
    """The monolingual train × test matrix, raw and relative to the test language's own score.

    Args:
        cells: output of :func:`accuracy_cells`.
        langs: languages, the order of rows and columns.
        subset: ``"total"``, ``"easy"`` or ``"hard"``.

    Returns:
        ``{"raw": {train: {test: acc}}, "relative": {train: {test: percent}}}``; the relative
        diagonal is exactly 100 wherever the monolingual score is positive.

    Raises:
        ValueError: ``subset`` is not one of :data:`SUBSETS`.
    """
    _check_subset(subset)
    raw = {tr: {te: _acc(cells, f"mono:{tr}", te, subset) for te in langs} for tr in langs}
    relative: dict[str, dict[str, float | None]] = {}
    for tr in langs:
        relative[tr] = {}
        for te in langs:
            ref, value = raw[te][te], raw[tr][te]
            if ref is None or ref == 0 or value is None:
                relative[tr][te] = None
            else:
                relative[tr][te] = 100.0 if tr == te else value / ref * 100.0
    return {"raw": raw, "relative": relative}


def table7_rows(cells: Cells, langs: Sequence[str], subset: Subset) -> list[Table7Row]:
    """Table 7: per language the mono, multi and unseen scores and ``delta = multi - mono``.

    Args:
        cells: output of :func:`accuracy_cells`.
        langs: languages, the order of the rows.
        subset: ``"total"``, ``"easy"`` or ``"hard"``.

    Returns:
        One row per language; a missing evaluation (or an empty subset) gives ``None``.

    Raises:
        ValueError: ``subset`` is not one of :data:`SUBSETS`.
    """
    _check_subset(subset)
    rows: list[Table7Row] = []
    for lang in langs:
        mono = _acc(cells, f"mono:{lang}", lang, subset)
        multi = _acc(cells, "multi", lang, subset)
        delta = None if mono is None or multi is None else multi - mono
        unseen = _acc(cells, f"unseen:{lang}", lang, subset)
        rows.append({"lang": lang, "mono": mono, "multi": multi, "delta": delta, "unseen": unseen})
    return rows


def _off_diagonal(matrix: TransferMatrix) -> list[float]:
    rel = matrix["relative"]
    return [v for tr, row in rel.items() for te, v in row.items() if tr != te and v is not None]


def finding(matrices: Mapping[str, TransferMatrix]) -> dict[str, Any]:
    """How much of the monolingual score transfers: Easy cells kept (≥ 90), Hard cells lost (< 80).

    Args:
        matrices: transfer matrices keyed by subset; ``"easy"`` and ``"hard"`` are used.
            Off-diagonal cells with a ``None`` relative score are not counted.

    Returns:
        ``easy_kept``/``easy_cells``/``easy_share``, ``hard_lost``/``hard_cells``/``hard_share``
        (a share is ``None`` without cells) and a one-sentence ``summary``.

    Raises:
        ValueError: ``matrices`` lacks the ``"easy"`` or the ``"hard"`` matrix.
    """
    missing = [s for s in ("easy", "hard") if s not in matrices]
    if missing:
        raise ValueError(f"finding needs the easy and hard matrices; missing: {', '.join(missing)}")
    easy, hard = _off_diagonal(matrices["easy"]), _off_diagonal(matrices["hard"])
    kept = sum(v >= EASY_KEEP for v in easy)
    lost = sum(v < HARD_LOSS for v in hard)
    summary = (
        f"off-diagonal: {kept} of {len(easy)} cells keep ≥ {EASY_KEEP:g}% on Easy; "
        f"{lost} of {len(hard)} fall below {HARD_LOSS:g}% on Hard "
        "(mCSQA: Easy transfer loses under 10%, Hard over 20%)"
    )
    return {
        "easy_kept": kept,
        "easy_cells": len(easy),
        "easy_share": kept / len(easy) if easy else None,
        "hard_lost": lost,
        "hard_cells": len(hard),
        "hard_share": lost / len(hard) if hard else None,
        "summary": summary,
    }


def total_is_weighted_mean(cells: Cells) -> bool:
    """Whether Total is the item-weighted mean of Easy and Hard wherever that is defined.

    Checked for every evaluation where Easy and Hard both have items and every item has a
    difficulty (``n_total == n_easy + n_hard``), within 1e-12.
    """
    for cell in cells.values():
        t, e, h = cell["total"], cell["easy"], cell["hard"]
        if e["acc"] is None or h["acc"] is None or t["acc"] is None or t["n"] != e["n"] + h["n"]:
            continue
        weighted = (e["acc"] * e["n"] + h["acc"] * h["n"]) / (e["n"] + h["n"])
        if not math.isclose(t["acc"], weighted, rel_tol=0.0, abs_tol=1e-12):
            return False
    return True


def _fmt(value: float | None) -> str:
    return "" if value is None else repr(value)


def _write_csv(path: Path, header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    with atomic_open(path) as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)


def _heatmap_png(matrices: Mapping[str, TransferMatrix], langs: Sequence[str]) -> bytes:
    buffer = io.BytesIO()
    heatmap_figure(matrices, langs).savefig(buffer, format="png", dpi=120)
    return buffer.getvalue()


def heatmap_figure(
    matrices: Mapping[str, Mapping[str, Any]], langs: Sequence[str], *, width_in: float | None = None
) -> Any:
    """The heat maps of the relative matrices, one per subset (Figure 6), as a matplotlib ``Figure``: side by
    side, or one above another in a figure ``width_in`` wide (the report's column).

    Raises:
        MissingDependencyError: matplotlib is not installed.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise MissingDependencyError(f"the transfer heat map needs matplotlib: {_INSTALL_HINT}") from exc

    subsets = [subset for subset in SUBSETS if subset in matrices]
    if width_in is None:
        fig = Figure(figsize=(4.2 * len(subsets), 4.0), layout="constrained")
        axes = fig.subplots(1, len(subsets), squeeze=False)[0]
    else:
        side = min(width_in, 1.2 + 0.55 * len(langs))
        fig = Figure(figsize=(width_in, (side * 0.85 + 0.4) * len(subsets)), layout="constrained")
        axes = fig.subplots(len(subsets), 1, squeeze=False)[:, 0]
    for ax, subset in zip(axes, subsets, strict=True):
        rel = matrices[subset]["relative"]
        grid = np.array([[np.nan if rel[tr][te] is None else rel[tr][te] for te in langs] for tr in langs], dtype=float)
        top = float(np.nanmax(grid)) if np.isfinite(grid).any() else 100.0
        vmax = max(100.0, top)
        image = ax.imshow(np.ma.masked_invalid(grid), cmap="viridis", vmin=0.0, vmax=vmax)
        for i in range(len(langs)):
            for j in range(len(langs)):
                value = float(grid[i, j])
                text = "–" if math.isnan(value) else f"{value:.1f}"
                dark = math.isnan(value) or value > 0.6 * vmax  # dark text on the bright end of viridis
                ax.text(j, i, text, ha="center", va="center", color="black" if dark else "white", fontsize=9)
        ax.set_xticks(range(len(langs)), labels=list(langs))
        ax.set_yticks(range(len(langs)), labels=list(langs))
        ax.set_xlabel("test language")
        ax.set_ylabel("train language")
        ax.set_title(f"{subset.capitalize()} (% of monolingual)")
        fig.colorbar(image, ax=ax, shrink=0.8)
    return fig


def write_tables(out_dir: str | Path, cells: Cells, langs: Sequence[str]) -> list[Path]:
    """Write ``transfer.json``, the CSV tables per subset and ``transfer_heatmap.png``.

    ``transfer.json`` is ``{"langs", "cells": {setting: {lang: {subset: cell}}},
    "subsets": {subset: {"raw", "relative", "table7"}}, "finding"}``. The CSVs are
    ``transfer_<subset>_raw.csv`` and ``transfer_<subset>_relative.csv`` (header
    ``train\\test,<lang>…``) and ``table7_<subset>.csv`` (``lang,mono,multi,delta,unseen``);
    a ``None`` is written as an empty field. Every file is written atomically.

    Args:
        out_dir: folder to write into (created when missing).
        cells: output of :func:`accuracy_cells`.
        langs: languages, the order of rows and columns.

    Returns:
        The paths written, JSON first and the heat map last.

    Raises:
        MissingDependencyError: matplotlib is not installed (nothing is written then).
    """
    out = Path(out_dir)
    matrices: dict[str, TransferMatrix] = {s: transfer_matrix(cells, langs, s) for s in SUBSETS}
    tables = {s: table7_rows(cells, langs, s) for s in SUBSETS}
    png = _heatmap_png(matrices, langs)
    nested: dict[str, dict[str, dict[Subset, SubsetCell]]] = {}
    for (setting, lang), cell in cells.items():
        nested.setdefault(setting, {})[lang] = cell
    payload = {
        "langs": list(langs),
        "cells": nested,
        "subsets": {s: {**matrices[s], "table7": tables[s]} for s in SUBSETS},
        "finding": finding(matrices),
    }
    paths = [out / "transfer.json"]
    with atomic_open(paths[0]) as handle:
        json.dump(payload, handle, ensure_ascii=False, indent=2)
        handle.write("\n")
    for s in SUBSETS:
        for kind in _MATRIX_KINDS:
            grid = matrices[s][kind]
            path = out / f"transfer_{s}_{kind}.csv"
            _write_csv(path, ["train\\test", *langs], [[tr, *(_fmt(grid[tr][te]) for te in langs)] for tr in langs])
            paths.append(path)
        path = out / f"table7_{s}.csv"
        rows = [[r["lang"], *(_fmt(r[k]) for k in _TABLE7_KEYS)] for r in tables[s]]
        _write_csv(path, ["lang", *_TABLE7_KEYS], rows)
        paths.append(path)
    paths.append(out / "transfer_heatmap.png")
    with atomic_open(paths[-1], "wb") as handle:
        handle.write(png)
    return paths
