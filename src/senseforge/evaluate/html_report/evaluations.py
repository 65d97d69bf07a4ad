"""The evaluations of a dataset: accuracy on all, Easy and Hard items and per category (multiple choice), Macro-F1
and Situational Accuracy per task and dimension (CRoW), people's accuracy, and the note when the evaluated model
also verified the items."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from senseforge.evaluate.html_report import figures as fig
from senseforge.evaluate.html_report.common import ci_text, e, interval, metric, none, note, num, show, table
from senseforge.evaluate.html_report.inputs import Evaluation, Run


def circular(run: Run | None, evaluation: Evaluation) -> bool:
    """Whether the evaluated model also verified the run's items (a run with a ``verify`` stage, mCSQA's, split
    them into Easy and Hard by it, so that split is then the model's own)."""
    if run is None or run.funnel is None or run.funnel.stage("verify") is None or evaluation.kind != "mc":
        return False
    verifiers = run.models_of("verify")
    if evaluation.model in verifiers:
        return True
    weights = evaluation.results.model.identity.get("weights_sha256")
    models = run.manifest.models if run.manifest is not None else {}
    return bool(weights) and any((models.get(v) or {}).get("weights_sha256") == weights for v in verifiers)


def evaluations_part(heading: str, evaluations: Sequence[Evaluation], figures: fig.Figures, run: Run | None) -> str:
    if not evaluations:
        return "<h3>Evaluations</h3>" + none(
            "No evaluations yet: run senseforge eval run --data <run> (or give --eval <folder>)."
        )
    out = "<h3>Evaluations</h3>"
    mc = [evaluation for evaluation in evaluations if evaluation.kind == "mc"]
    if mc:
        out += _multiple_choice(heading, mc, figures, run)
    out += "".join(_binary(heading, evaluation, figures) for evaluation in evaluations if evaluation.kind == "binary")
    for evaluation in evaluations:
        if evaluation.results.diagnosis:
            out += note(f"{evaluation.label}: {evaluation.results.diagnosis}")
    return out


def _multiple_choice(heading: str, mc: Sequence[Evaluation], figures: fig.Figures, run: Run | None) -> str:
    """Total/Easy/Hard accuracy of every model (one figure), the circularity note, accuracy per category."""
    out = ""
    labels = [evaluation.label for evaluation in mc]
    parts: dict[str, list[Mapping[str, Any] | None]] = {"total": [], "Easy": [], "Hard": []}
    for evaluation in mc:
        groups = evaluation.results.breakdowns.get("difficulty") or {}
        parts["total"].append(evaluation.headline_metrics())
        parts["Easy"].append(groups.get("easy"))
        parts["Hard"].append(groups.get("hard"))
    values = {k: [metric(m, "acc") for m in v] for k, v in parts.items()}
    intervals = {k: [interval(m, "acc") for m in v] for k, v in parts.items()}
    chart = fig.bars(labels, values, xlabel="accuracy", intervals=intervals, limit=(0.0, 1.15))
    caption = (
        "Accuracy on all, Easy and Hard items (mCSQA's Figure 5), with 95% intervals over items "
        "(Wilson where a group is too small to resample)."
    )
    rows = [
        (label, *(values[k][i] for k in values), ci_text(parts["total"][i], "acc")) for i, label in enumerate(labels)
    ]
    out += show(
        figures,
        f"{heading}-accuracy",
        caption,
        chart,
        table(("model · setting", "total", "Easy", "Hard", "total 95% CI"), rows),
    )
    for evaluation in mc:
        if circular(run, evaluation):
            out += note(
                f"{evaluation.model} also verified these items when they were built: Easy means this model "
                "already chose the answer then, so its Easy accuracy is near 1 and its Hard accuracy near 0 by "
                "construction. Read its numbers as a check of the pipeline, not as a result; evaluate another "
                "model for one."
            )
    for evaluation in mc:
        categories = evaluation.results.breakdowns.get("category") or {}
        if len(categories) < 2:
            continue
        labels = list(categories)
        accs = [metric(m, "acc") for m in categories.values()]
        chart = fig.bars(
            labels,
            {"accuracy": accs},
            xlabel="accuracy",
            intervals={"accuracy": [interval(m, "acc") for m in categories.values()]},
            limit=(0.0, 1.15),
        )
        caption = f"{evaluation.label}: accuracy per category (Putri et al.'s per-category view)."
        rows = [
            (c, categories[c].get("n"), a, ci_text(categories[c], "acc")) for c, a in zip(labels, accs, strict=True)
        ]
        out += show(
            figures,
            f"{heading}-{evaluation.label}-categories",
            caption,
            chart,
            table(("category", "n", "acc", "95% CI"), rows),
        )
    return out


def _binary(heading: str, evaluation: Evaluation, figures: fig.Figures) -> str:
    """One CRoW-style evaluation: Macro-F1 and Situational Accuracy per task, the CRoW score, per dimension."""
    out = ""
    tasks = {t: m.to_json() for t, m in evaluation.results.results.items() if t != "crow"}
    names = list(tasks)
    series = {
        "Macro-F1": [metric(tasks[t], "macro_f1") for t in names],
        "Situational acc.": [metric(tasks[t], "situational_acc") for t in names],
    }
    intervals = {
        "Macro-F1": [interval(tasks[t], "macro_f1") for t in names],
        "Situational acc.": [interval(tasks[t], "situational_acc") for t in names],
    }
    chart = fig.bars(names, series, xlabel="score", intervals=intervals, limit=(0.0, 1.15))
    crow = evaluation.headline_metrics()
    caption = (
        f"{evaluation.label}: Macro-F1 and Situational Accuracy per task (CRoW's Table 3), 95% intervals over "
        f"contexts; CRoW score {num(metric(crow, 'crow_score_macro_f1'))} (Macro-F1), "
        f"{num(metric(crow, 'crow_score_situational_acc'))} (Situational Accuracy)."
    )
    rows = [
        (t, series["Macro-F1"][i], series["Situational acc."][i], ci_text(tasks[t], "macro_f1"))
        for i, t in enumerate(names)
    ]
    out += show(
        figures,
        f"{heading}-{evaluation.label}-tasks",
        caption,
        chart,
        table(("task", "Macro-F1", "Situational Acc.", "Macro-F1 95% CI"), rows),
    )
    out += f"<p>CRoW score: Macro-F1 {num(metric(crow, 'crow_score_macro_f1'), 4)} · Situational Accuracy "
    out += f"{num(metric(crow, 'crow_score_situational_acc'), 4)}</p>"
    dims = crow.get("per_dimension_macro_f1") or {}
    if isinstance(dims, dict) and dims:
        labels = list(dims)
        f1s = [d.get("macro_f1") if isinstance(d, dict) else d for d in dims.values()]
        counts = [d.get("tasks") if isinstance(d, dict) else None for d in dims.values()]
        chart = fig.bars(labels, {"Macro-F1": f1s}, xlabel="Macro-F1 (mean over tasks)", limit=(0.0, 1.15))
        caption = f"{evaluation.label}: Macro-F1 per commonsense dimension, the mean over the tasks that have it."
        per_dimension = list(zip(labels, f1s, counts, strict=True))
        out += show(
            figures,
            f"{heading}-{evaluation.label}-dimensions",
            caption,
            chart,
            table(("dimension", "Macro-F1", "tasks"), per_dimension),
        )
    return out


def human_baseline_part(run: Run, figures: fig.Figures) -> str:
    """People's accuracy (``annotate baseline``): per split, by majority vote, with its interval."""
    baseline = run.read("human_baseline.json")
    splits = (baseline or {}).get("splits") if isinstance(baseline, dict) else None
    if not splits:
        return ""
    labels = list(splits)
    values = [splits[s].get("human_acc") for s in labels]
    intervals = [tuple(splits[s]["human_acc_ci95"]) if splits[s].get("human_acc_ci95") else None for s in labels]
    chart = fig.bars(labels, {"people": values}, xlabel="accuracy", intervals={"people": intervals}, limit=(0.0, 1.15))
    rows = [
        (s, values[i], splits[s].get("scored"), ci_text({"h_ci95,none": splits[s].get("human_acc_ci95")}, "h"))
        for i, s in enumerate(labels)
    ]
    caption = "People's accuracy per split by majority vote (annotate baseline), with its 95% interval."
    return "<h3>Human baseline</h3>" + show(
        figures, f"{run.heading}-human-baseline", caption, chart, table(("split", "human acc", "items", "95% CI"), rows)
    )


def unfiled_part(unfiled: Sequence[Evaluation], figures: fig.Figures) -> str:
    if not unfiled:
        return ""
    groups: dict[tuple[str, str], list[Evaluation]] = defaultdict(list)
    for evaluation in unfiled:
        groups[(evaluation.results.data.name, evaluation.results.data.path)].append(evaluation)
    out = '<section id="other-data"><h2>Evaluations of other data</h2>'
    out += note("Their data is none of the runs given (by path and by the digest of the items they scored).")
    for (name, path), evaluations in groups.items():
        out += f"<h3>{e(name)}</h3><p><code>{e(path)}</code></p>"
        out += evaluations_part(name, evaluations, figures, None)
    return out + "</section>"
