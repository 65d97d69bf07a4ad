"""Many results → one table: each model's headline numbers on each dataset, with intervals.

``senseforge eval run`` with several ``--model`` and ``--data`` values writes one result
folder per (data, model) pair and then this table as ``leaderboard.json`` and
``leaderboard.csv`` beside them. A row is one model; a column is one dataset's task (and
prompt variant, for ``putri-all``) and metric.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from senseforge.data.io import atomic_open
from senseforge.evaluate.records import BinaryMetrics, CrowSummary, EvalResults, MCMetrics

HEADLINE: dict[type, tuple[str, ...]] = {
    MCMetrics: ("acc", "acc_norm"),
    BinaryMetrics: ("macro_f1", "situational_acc"),
    CrowSummary: ("crow_score_macro_f1", "crow_score_situational_acc"),
}
"""The numbers a leaderboard shows per kind of metrics (``acc_norm`` only where it was computed)."""


@dataclass(frozen=True)
class Entry:
    """One model's number on one dataset's task."""

    model: str
    data: str
    task: str
    metric: str
    value: float
    ci95_low: float | None
    ci95_high: float | None
    n: int | None
    setting: str = ""
    """How the model was asked (``letter``, ``generate/putri-all · 5-shot``): two settings of one model are two
    rows of the table."""

    @property
    def row(self) -> str:
        """The table row this entry belongs to: the model and its setting."""
        return f"{self.model} · {self.setting}" if self.setting else self.model

    @property
    def column(self) -> str:
        return (
            f"{self.data} · {self.task} · {self.metric}" if self.task != self.data else f"{self.data} · {self.metric}"
        )


def entries(results: Sequence[EvalResults]) -> list[Entry]:
    """The headline numbers of every result, in the order given."""
    out: list[Entry] = []
    for result in results:
        for task, metrics in result.results.items():
            for metric in HEADLINE[type(metrics)]:
                value = getattr(metrics, metric, None)
                if value is None:
                    continue
                ci = getattr(metrics, f"{metric}_ci95", None)
                out.append(
                    Entry(
                        model=result.model.name,
                        setting=result.setting(),
                        data=result.data.name,
                        task=task,
                        metric=metric,
                        value=float(value),
                        ci95_low=ci[0] if ci else None,
                        ci95_high=ci[1] if ci else None,
                        n=getattr(metrics, "n", None),
                    )
                )
    return out


def write_leaderboard(folder: Path, rows: Sequence[Entry], results: Sequence[tuple[str, Path]]) -> tuple[Path, Path]:
    """``leaderboard.json`` (entries and where each result lives) and ``leaderboard.csv`` (one row per entry)."""
    folder.mkdir(parents=True, exist_ok=True)
    json_path, csv_path = folder / "leaderboard.json", folder / "leaderboard.csv"
    payload = {
        "entries": [asdict(row) for row in rows],
        "results": [{"name": name, "path": str(path)} for name, path in results],
    }
    with atomic_open(json_path) as handle:
        json.dump(payload, handle, ensure_ascii=False, indent=2)
        handle.write("\n")
    buffer = io.StringIO()
    fields = list(Entry.__dataclass_fields__)
    writer = csv.DictWriter(buffer, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow(asdict(row))
    with atomic_open(csv_path) as handle:
        handle.write(buffer.getvalue())
    return json_path, csv_path
