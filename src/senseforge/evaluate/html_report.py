"""``senseforge report``: one self-contained HTML page over runs, evaluations and a transfer study.

Everything is read from the files the other commands write — a run's ``manifest.json``,
``funnel.json`` and ``cost.json``, every ``results.json`` under its ``eval/`` folder (and
any given with ``--eval``), a transfer study's ``transfer.json`` and heat map — and every
figure is drawn with matplotlib and embedded as a PNG data URI, with its numbers in a table
beside it: the page makes no request. Per run: the construction funnel (mCSQA's Figure 3),
the cost per stage and per kept item (Figure 4), the accuracy of each model on Easy and
Hard items (Figure 5) and per category (Putri et al.), per-task Macro-F1, Situational
Accuracy and per-dimension Macro-F1 with the CRoW score (CRoW), people's accuracy where
``annotate baseline`` measured it (``human_baseline.json``), the annotators' or
validators' agreement where the run has it, and the manifest (models, prompt hashes,
seeds). Then the transfer heat maps and Table 7 (Figure 6, Tables 7 and 9), and a
leaderboard of every evaluation with its confidence interval. A section without data says
so (a fresh build has no evaluation yet).
"""

from __future__ import annotations

import base64
import html
import io
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from senseforge.data.io import atomic_open
from senseforge.errors import ConfigError, MissingDependencyError
from senseforge.evaluate.records import EvalResults

_STYLE = """body{font-family:system-ui,sans-serif;max-width:70rem;margin:1rem auto;padding:0 1rem;color:#222}
h1,h2,h3{font-weight:600}table{border-collapse:collapse;margin:.5rem 0 1rem}td,th{border:1px solid #ccc;padding:.2rem
.5rem;text-align:right}th:first-child,td:first-child{text-align:left}figure{display:flex;flex-wrap:wrap;gap:1rem;
align-items:flex-start;margin:0}img{max-width:38rem}p.none{color:#777;font-style:italic}code{font-size:.85em}"""


def _read(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None


def _e(value: Any) -> str:
    return html.escape(str(value))


def _num(value: Any, digits: int = 4) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return _e(value)


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{_num(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise MissingDependencyError("the report draws with matplotlib: pip install 'senseforge[report]'") from exc
    return plt


def _png(figure: Any) -> str:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=90, bbox_inches="tight")
    _pyplot().close(figure)
    data = base64.b64encode(buffer.getvalue()).decode("ascii")
    return f'<img alt="figure" src="data:image/png;base64,{data}">'


def _bars(title: str, labels: Sequence[str], series: Mapping[str, Sequence[float | None]], xlabel: str) -> str:
    """A horizontal grouped bar chart (one group per label, one bar per series) as an embedded image."""
    plt = _pyplot()
    figure, axes = plt.subplots(figsize=(6.5, 0.45 * max(3, len(labels)) + 1))
    height = 0.8 / max(1, len(series))
    for index, (name, values) in enumerate(series.items()):
        positions = [i + index * height for i in range(len(labels))]
        axes.barh(positions, [v or 0.0 for v in values], height=height, label=name)
    axes.set_yticks([i + height * (len(series) - 1) / 2 for i in range(len(labels))], labels)
    axes.invert_yaxis()
    axes.set_xlabel(xlabel)
    axes.set_title(title)
    if len(series) > 1:
        axes.legend()
    return _png(figure)


def _figure(chart: str, table: str) -> str:
    return f"<figure>{chart}{table}</figure>"


def _none(what: str) -> str:
    return f'<p class="none">{_e(what)}</p>'


# -- sections --------------------------------------------------------------------------------------


def funnel_section(funnel: Mapping[str, Any] | None) -> str:
    if not funnel or not funnel.get("stages"):
        return "<h3>Funnel</h3>" + _none("No funnel yet: the build has not finished.")
    stages = funnel["stages"]
    labels = [row["stage"] for row in stages]
    chart = _bars(
        "records per stage", labels, {"in": [r["in"] for r in stages], "out": [r["out"] for r in stages]}, "records"
    )
    rows: list[tuple[Any, ...]] = [
        (r["stage"], r["in"], r["out"], ", ".join(f"{k} {v}" for k, v in r["rejected"].items())) for r in stages
    ]
    out = "<h3>Funnel</h3>" + _figure(chart, _table(("stage", "in", "out", "rejected"), rows))
    out += f"<p>kept: {_num(funnel.get('kept'))}</p>"
    for task, part in (funnel.get("by_task") or {}).items():
        dims = part.get("dimensions", {}).get("examples", {})
        if dims:
            chart = _bars(
                f"{task}: knowledge dimensions of the examples", list(dims), {"triples": list(dims.values())}, "triples"
            )
            out += _figure(chart, _table(("dimension", "triples"), list(dims.items())))
        agreement = part.get("agreement") or {}
        if agreement:
            rows = [
                (name, a["items"], a["raters"], a["fleiss_kappa"], a["krippendorff_alpha"])
                for name, a in agreement.items()
                if a
            ]
            out += f"<h4>{_e(task)}: agreement</h4>" + _table(
                ("stage", "items", "raters", "Fleiss κ", "Krippendorff α"), rows
            )
    return out


def cost_section(cost: Mapping[str, Any] | None) -> str:
    if not cost:
        return "<h3>Cost</h3>" + _none("No cost yet: the build has not finished.")
    stages = cost.get("stages") or {}
    rows = [(name, s["calls"], s["tokens_in"], s["tokens_out"], s["cost_usd"]) for name, s in stages.items()]
    per = next((v for k, v in cost.items() if k.startswith("cost_per_kept_")), None)
    out = "<h3>Cost</h3>"
    if rows:
        money = [s["cost_usd"] for s in stages.values()]
        priced = None not in money and any(m > 0 for m in money)  # else tokens: unpriced, or free (a local model)
        values = [s["cost_usd"] if priced else s["tokens_in"] + s["tokens_out"] for s in stages.values()]
        chart = _bars(
            "cost per stage", list(stages), {"USD" if priced else "tokens": values}, "USD" if priced else "tokens"
        )
        out += _figure(chart, _table(("stage", "calls", "tokens in", "tokens out", "USD"), rows))
        if not priced:
            out += "<p>The chart counts tokens: no stage has a known price above zero.</p>"
    human = cost.get("human") or {}
    out += (
        f"<p>human judgements: {_num(human.get('judgements'))} at {_num(human.get('rate_usd'))} USD · total "
        f"{_num(cost.get('total_usd'), 6)} USD · per kept {_num(per, 6)} USD (– : unknown, a price or rate missing)</p>"
    )
    return out


def _metric(metrics: Mapping[str, Any], name: str) -> float | None:
    value = metrics.get(f"{name},none", metrics.get(name))
    return float(value) if isinstance(value, int | float) else None


def _ci(metrics: Mapping[str, Any], name: str) -> str:
    value = metrics.get(f"{name}_ci95,none")
    return f"[{value[0]:.3f}, {value[1]:.3f}]" if isinstance(value, list) and len(value) == 2 else "–"


def evaluation_section(results: Sequence[tuple[str, Mapping[str, Any]]]) -> str:
    if not results:
        return "<h3>Evaluations</h3>" + _none(
            "No evaluations yet: run senseforge eval run --data <run> (or give --eval)."
        )
    out = "<h3>Evaluations</h3>"
    mc = [(name, r) for name, r in results if r.get("data", {}).get("kind") == "mc"]
    binary = [(name, r) for name, r in results if r.get("data", {}).get("kind") == "binary"]
    if mc:
        labels, total, easy, hard = [], [], [], []
        rows: list[tuple[Any, ...]] = []
        for name, r in mc:
            task = next(iter(r["results"]))
            groups = r.get("breakdowns", {}).get("difficulty", {})
            values = (
                _metric(r["results"][task], "acc"),
                _metric(groups.get("easy", {}), "acc"),
                _metric(groups.get("hard", {}), "acc"),
            )
            labels.append(name)
            total.append(values[0])
            easy.append(values[1])
            hard.append(values[2])
            rows.append((name, *values, _ci(r["results"][task], "acc")))
        chart = _bars(
            "accuracy: Total, Easy and Hard", labels, {"total": total, "easy": easy, "hard": hard}, "accuracy"
        )
        out += _figure(chart, _table(("model on data", "total", "easy", "hard", "total 95% CI"), rows))
        for name, r in mc:
            categories = r.get("breakdowns", {}).get("category", {})
            if categories:
                accs = [_metric(m, "acc") for m in categories.values()]
                chart = _bars(f"{name}: accuracy per category", list(categories), {"acc": accs}, "accuracy")
                out += _figure(chart, _table(("category", "acc"), list(zip(categories, accs, strict=True))))
    for name, r in binary:
        tasks = {t: m for t, m in r["results"].items() if t != "crow"}
        rows = [
            (t, _metric(m, "macro_f1"), _metric(m, "situational_acc"), _ci(m, "macro_f1")) for t, m in tasks.items()
        ]
        chart = _bars(f"{name}: Macro-F1 per task", list(tasks), {"Macro-F1": [row[1] for row in rows]}, "Macro-F1")
        out += _figure(chart, _table(("task", "Macro-F1", "Situational Acc.", "Macro-F1 95% CI"), rows))
        crow = r["results"].get("crow", {})
        f1, sa = _metric(crow, "crow_score_macro_f1"), _metric(crow, "crow_score_situational_acc")
        out += f"<p>CRoW score: Macro-F1 {_num(f1)} · Situational Accuracy {_num(sa)}</p>"
        dims: dict[str, list[float]] = {}
        for m in tasks.values():
            for dim, value in (m.get("per_dimension_macro_f1") or {}).items():
                dims.setdefault(dim, []).append(float(value))
        if dims:
            means = [sum(v) / len(v) for v in dims.values()]
            chart = _bars(
                f"{name}: Macro-F1 per dimension", list(dims), {"Macro-F1": means}, "Macro-F1 (mean over tasks)"
            )
            out += _figure(
                chart,
                _table(
                    ("dimension", "Macro-F1", "tasks"), [(d, m, len(dims[d])) for d, m in zip(dims, means, strict=True)]
                ),
            )
    return out


def human_section(baseline: Mapping[str, Any] | None) -> str:
    """People's accuracy (``annotate baseline``): per split, by majority vote, with its interval."""
    splits = (baseline or {}).get("splits") or {}
    if not splits:
        return ""
    rows = [
        (split, row.get("human_acc"), row.get("scored"), _ci({"h_ci95,none": row.get("human_acc_ci95")}, "h"))
        for split, row in splits.items()
    ]
    chart = _bars("people's accuracy (majority vote)", list(splits), {"people": [r[1] for r in rows]}, "accuracy")
    return "<h3>Human baseline</h3>" + _figure(chart, _table(("split", "human acc", "items", "95% CI"), rows))


def manifest_section(manifest: Mapping[str, Any] | None) -> str:
    if not manifest:
        return "<h3>Manifest</h3>" + _none("No manifest.")
    models = manifest.get("models") or {}
    rows = [(spec, ", ".join(f"{k}={v}" for k, v in (identity or {}).items())) for spec, identity in models.items()]
    templates = manifest.get("templates") or {}
    out = "<h3>Manifest</h3>" + _table(("model", "identity"), rows)
    out += _table(("template", "SHA-256"), [(k, f"{v}"[:16] + "…") for k, v in templates.items()])
    facts = (manifest.get("recipe"), manifest.get("senseforge_version"), manifest.get("git_sha"))
    seeds = json.dumps(manifest.get("seeds"))
    out += f"<p>recipe {_e(facts[0])} · senseforge {_e(facts[1])} · git {_e(facts[2])} · "
    out += f"seeds <code>{_e(seeds)}</code></p>"
    return out


def transfer_section(folder: Path | None) -> str:
    if folder is None:
        return ""
    document = _read(folder / "transfer.json")
    if not isinstance(document, dict):
        return "<h2>Transfer</h2>" + _none(f"No transfer.json in {folder}.")
    image = folder / "transfer_heatmap.png"
    out = "<h2>Transfer</h2>"
    if image.is_file():
        data = base64.b64encode(image.read_bytes()).decode("ascii")
        out += f'<img alt="transfer heat maps" src="data:image/png;base64,{data}">'
    for subset, tables in document.get("subsets", {}).items():
        rows = [(r["lang"], r["mono"], r["multi"], r["delta"], r["unseen"]) for r in tables.get("table7", [])]
        out += f"<h3>Table 7 · {_e(subset)}</h3>" + _table(("lang", "mono", "multi", "Δ", "unseen"), rows)
    summary = (document.get("finding") or {}).get("summary")
    return out + (f"<p>{_e(summary)}</p>" if summary else "")


def _evaluations(run: Path, extra: Sequence[Path]) -> list[tuple[str, Mapping[str, Any]]]:
    files = sorted((run / "eval").rglob("results.json")) if (run / "eval").is_dir() else []
    for given in extra:
        files += sorted(given.rglob("results.json")) if given.is_dir() else [given]
    out: list[tuple[str, Mapping[str, Any]]] = []
    for path in files:
        document = _read(path)
        if isinstance(document, dict) and "results" in document:
            out.append((_label(document, path), document))
    return out


def _label(document: Mapping[str, Any], path: Path) -> str:
    """``model · setting · n=N on data``, the evaluation's label (see :meth:`EvalResults.label`)."""
    data = document.get("data", {}).get("name", path.parent.name)
    try:
        return f"{EvalResults.model_validate(document).label()} on {data}"
    except ValidationError:
        return f"{document.get('model', {}).get('name', '?')} on {data}"


def leaderboard_section(results: Sequence[tuple[str, Mapping[str, Any]]]) -> str:
    if not results:
        return ""
    rows = []
    for name, r in results:
        for task, metrics in r["results"].items():
            key = "crow_score_macro_f1" if task == "crow" else ("macro_f1" if r["data"]["kind"] == "binary" else "acc")
            rows.append((name, task, key, _metric(metrics, key), _ci(metrics, key)))
    return "<h2>Leaderboard</h2>" + _table(("model on data", "task", "metric", "value", "95% CI"), rows)


def build_report(runs: Sequence[Path], *, evals: Sequence[Path] = (), transfer: Path | None = None) -> str:
    """The page (HTML text) over the runs, the extra evaluation folders and a transfer study.

    Raises:
        ConfigError: a run folder that does not exist.
    """
    missing = [str(r) for r in runs if not r.is_dir()]
    if missing:
        raise ConfigError(f"no such run folder: {', '.join(missing)}")
    parts = [
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>senseforge report</title>'
        f"<style>{_STYLE}</style></head><body>"
    ]
    parts.append("<h1>senseforge report</h1>")
    every: list[tuple[str, Mapping[str, Any]]] = []
    for index, run in enumerate(runs):
        results = _evaluations(run, evals if index == 0 else ())
        every += results
        parts.append(f"<h2>{_e(run.name)}</h2>")
        parts.append(funnel_section(_read(run / "funnel.json")))
        parts.append(cost_section(_read(run / "cost.json")))
        parts.append(evaluation_section(results))
        parts.append(human_section(_read(run / "human_baseline.json")))
        parts.append(manifest_section(_read(run / "manifest.json")))
    if not runs and evals:
        every = _evaluations(Path("/nonexistent"), evals)
        parts.append(evaluation_section(every))
    parts.append(transfer_section(transfer))
    parts.append(leaderboard_section(every))
    parts.append("</body></html>")
    return "\n".join(parts)


def write_report(path: Path, runs: Sequence[Path], *, evals: Sequence[Path] = (), transfer: Path | None = None) -> Path:
    """Write the page atomically; its path."""
    text = build_report(runs, evals=evals, transfer=transfer)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_open(path) as handle:
        handle.write(text)
    return path
