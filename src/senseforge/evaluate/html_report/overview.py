"""The overview the page opens with: every run (kept, cost, Easy/Hard, human share), every model × dataset ×
language with its interval, and the figures across languages and across models."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from senseforge.data.text import money
from senseforge.evaluate.html_report import figures as fig
from senseforge.evaluate.html_report.common import (
    anchor,
    ci_text,
    e,
    headline_name,
    interval,
    metric,
    none,
    note,
    num,
    show,
    table,
)
from senseforge.evaluate.html_report.inputs import Evaluation, Run
from senseforge.runfolder.figures import Table


def _difficulties(run: Run) -> tuple[int | None, int | None, float | None]:
    """Easy and Hard items, and the share of items people wrote or judged, from the kept items."""
    counts: Counter[str] = Counter()
    with_provenance = human = 0
    for item in run.items():
        if item.get("difficulty") in ("easy", "hard"):
            counts[item["difficulty"]] += 1
        provenance = item.get("provenance")
        if isinstance(provenance, dict):
            with_provenance += 1
            human += provenance.get("review") == "human"  # people wrote it, or verified it
    if not counts and run.funnel is not None:  # no items here: the funnel's Easy/Hard per split, where it has one
        for figure in run.funnel.figures:
            if isinstance(figure, Table) and {"Easy", "Hard"} <= set(figure.columns):
                counts.update({k.lower(): int(sum(v or 0 for v in figure.column(k))) for k in ("Easy", "Hard")})
                break
    easy, hard = (counts["easy"], counts["hard"]) if counts else (None, None)
    return easy, hard, (human / with_provenance if with_provenance else None)


def overview(runs: Sequence[Run], unfiled: Sequence[Evaluation], figures: fig.Figures) -> str:
    out = "<h2 id=overview>Overview</h2>"
    rows: list[tuple[Any, ...]] = []
    if runs:
        for run in runs:
            easy, hard, human = _difficulties(run)
            rows.append(
                (
                    f'<a href="#{anchor(run)}">{e(run.heading)}</a>',
                    run.recipe or "–",
                    ", ".join(run.languages()) or "–",
                    run.funnel.kept if run.funnel is not None else None,
                    money(run.cost.total_usd) if run.cost else None,  # – : no cost.json yet
                    money(run.cost.cost_per_kept_item_usd) if run.cost else None,
                    easy,
                    hard,
                    human,
                    len(run.evaluations),
                )
            )
        out += "<h3>Runs</h3>" + _raw_table(
            ("run", "recipe", "languages", "kept", "cost", "per kept", "Easy", "Hard", "human share", "evals"),
            rows,
        )
        out += note(
            "human share: the share of kept items that people wrote or verified (the rest an LM verified or "
            "reviewed); – where the items do not say."
        )
        out += _easy_hard_languages(runs, figures)
    every = [(run.heading, evaluation) for run in runs for evaluation in run.evaluations]
    every += [(_data_name(evaluation), evaluation) for evaluation in unfiled]
    if not every:
        return (
            out
            + "<h3>Evaluations</h3>"
            + none("No evaluations yet: run senseforge eval run --data <run>, then give the run (or --eval <folder>).")
        )
    rows = []
    for dataset, evaluation in every:
        name = headline_name(evaluation)
        for lang, metrics in evaluation.languages().items():
            rows.append(
                (
                    evaluation.model_setting(),
                    dataset,
                    lang,
                    metrics.get("n"),
                    name.replace("_", " "),
                    metric(metrics, name),
                    ci_text(metrics, name),
                )
            )
    out += "<h3>Every model × dataset × language</h3>" + table(
        ("model · setting", "dataset", "language", "n", "metric", "value", "95% CI"), rows
    )
    out += _cross_language(every, figures) + _cross_model(every, figures)
    return out


def _raw_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A table whose first cell is HTML already (a link)."""
    head = "".join(f"<th>{e(h)}</th>" for h in header)
    body = "".join(
        "<tr>" + f"<td>{row[0]}</td>" + "".join(f"<td>{num(c)}</td>" for c in row[1:]) + "</tr>" for row in rows
    )
    return f'<div class="scroll"><table><tr>{head}</tr>{body}</table></div>'


def _data_name(evaluation: Evaluation) -> str:
    return f"{evaluation.results.data.name} (not a run given)"


def _easy_hard_languages(runs: Sequence[Run], figures: fig.Figures) -> str:
    """Easy and Hard kept questions of every run that tells them apart (mCSQA's), one bar per run and language."""
    split = [(run, found) for run in runs if (found := _difficulties(run))[:2] != (None, None)]
    if not split:
        return ""
    labels, easy, hard = [], [], []
    for run, (e_, h_, _) in split:
        labels.append(f"{', '.join(run.languages()) or '?'} · {run.heading}")
        easy.append(float(e_ or 0))
        hard.append(float(h_ or 0))
    chart = fig.stacked(labels, {"Easy": easy, "Hard": hard}, xlabel="kept questions")
    caption = (
        "mCSQA: Easy and Hard questions per language (Easy: the verifying model answered them; Hard: it did not "
        "and a review kept them)."
    )
    rows = [(label, a, b) for label, a, b in zip(labels, easy, hard, strict=True)]
    return "<h3>mCSQA across languages</h3>" + show(
        figures, "mcsqa-easy-hard-per-language", caption, chart, table(("language · run", "Easy", "Hard"), rows)
    )


def _cross_language(every: Sequence[tuple[str, Evaluation]], figures: fig.Figures) -> str:
    mc = [(dataset, evaluation) for dataset, evaluation in every if evaluation.kind == "mc"]
    if not mc:
        return ""
    keys: dict[tuple[str, str], None] = {}
    cells: dict[tuple[str, str, str], Mapping[str, Any]] = {}
    series: dict[str, None] = {}
    for dataset, evaluation in mc:
        for lang, metrics in evaluation.languages().items():
            keys[(lang, dataset)] = None
            series[evaluation.model_setting()] = None
            cells[(evaluation.model_setting(), lang, dataset)] = metrics
    rows = sorted(keys)
    labels = [f"{lang} · {dataset}" for lang, dataset in rows]
    values = {s: [metric(cells.get((s, lang, d)), "acc") for lang, d in rows] for s in series}
    intervals = {s: [interval(cells.get((s, lang, d)), "acc") for lang, d in rows] for s in series}
    chart = fig.points(labels, values, intervals, xlabel="accuracy")
    caption = (
        "Accuracy per language and dataset, one marker per model and setting, with 95% bootstrap intervals over "
        "items (Wilson where a group has too few items to resample)."
    )
    numbers = table(
        ("language · dataset", *series),
        [(label, *(values[s][i] for s in series)) for i, label in enumerate(labels)],
    )
    return "<h3>Across languages</h3>" + show(figures, "cross-language", caption, chart, numbers)


def _cross_model(every: Sequence[tuple[str, Evaluation]], figures: fig.Figures) -> str:
    out = ""
    for kind, name, what in (("mc", "acc", "accuracy"), ("binary", "crow_score_macro_f1", "CRoW score (Macro-F1)")):
        chosen = [(dataset, evaluation) for dataset, evaluation in every if evaluation.kind == kind]
        if not chosen:
            continue
        models = list(dict.fromkeys(evaluation.model_setting() for _, evaluation in chosen))
        datasets = list(dict.fromkeys(dataset for dataset, _ in chosen))
        cells = {(evaluation.model_setting(), dataset): evaluation.headline_metrics() for dataset, evaluation in chosen}
        values = {d: [metric(cells.get((m, d)), name) for m in models] for d in datasets}
        intervals = {d: [interval(cells.get((m, d)), name) for m in models] for d in datasets}
        chart = fig.points(models, values, intervals, xlabel=what)
        caption = f"{what.capitalize()} of each model and setting, one marker per dataset, with 95% intervals."
        numbers = table(
            ("model · setting", *datasets), [(m, *(values[d][i] for d in datasets)) for i, m in enumerate(models)]
        )
        out += show(figures, f"cross-model-{kind}", caption, chart, numbers)
    return ("<h3>Across models</h3>" + out) if out else ""
