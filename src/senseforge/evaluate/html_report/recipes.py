"""What a run built, as its recipe declared it: the funnel and cost of every run, its groups' stage rows side by
side (per language), and each figure it declared (top-level, then per group), drawn by its kind — counts, a share,
a table, agreement — or, where the recipe marked it not drawn, given as a line of numbers; then the review
agreement of the judges in the run store. Nothing here names a recipe: a new recipe's figures are drawn as they are
declared (:mod:`senseforge.runfolder.figures`)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from senseforge.data.text import money
from senseforge.evaluate.html_report import figures as fig
from senseforge.evaluate.html_report.common import drawable, e, none, num, show, table
from senseforge.evaluate.html_report.inputs import Run
from senseforge.evaluate.policies import agreement
from senseforge.runfolder.cost import StageCost
from senseforge.runfolder.figures import Agreement, Counts, Figure, Share, Table
from senseforge.runfolder.funnel import Funnel, Group

_GROUPED_BY = {"lang": "language", "task": "task"}
"""How the heading of a run's groups names what they are."""


def funnel_part(run: Run, figures: fig.Figures) -> str:
    funnel = run.funnel
    if funnel is None or not funnel.stages:
        return "<h3>Funnel</h3>" + none("No funnel yet: the build has not finished.")
    stages = funnel.stages
    labels = [row.stage for row in stages]
    chart = fig.bars(labels, {"in": [r.in_ for r in stages], "out": [r.out for r in stages]}, xlabel="records")
    rows = [(r.stage, r.in_, r.out, ", ".join(f"{k} {v}" for k, v in r.rejected.items())) for r in stages]
    caption = funnel.title
    caption += f"; {funnel.kept} kept. A stage's in − out is what it rejected, by reason in the table."
    return "<h3>Funnel</h3>" + show(
        figures, f"{run.heading}-funnel", caption, chart, table(("stage", "in", "out", "rejected"), rows)
    )


def cost_part(run: Run, figures: fig.Figures) -> str:
    cost = run.cost
    if cost is None:
        return "<h3>Cost</h3>" + none("No cost yet: the build has not finished.")
    stages = cost.stages
    out = "<h3>Cost</h3>"
    if stages:
        spent = [s.cost_usd for s in stages.values()]
        priced = None not in spent and any((m or 0) > 0 for m in spent)
        values = [(s.cost_usd or 0.0) if priced else s.tokens_in + s.tokens_out for s in stages.values()]
        unit = "USD" if priced else "tokens (in + out)"
        chart = fig.bars(list(stages), {unit: values}, xlabel=unit)
        caption = run.funnel.cost_title if run.funnel is not None else "Cost per stage"
        caption += "" if priced else ": tokens, since no stage has a known price above zero (a local model is free)"
        rows = [(n, _calls(s), s.tokens_in, s.tokens_out, money(s.cost_usd)) for n, s in stages.items()]
        if any(s.batched_calls for s in stages.values()):
            caption += "; calls marked batch went through the API's Batch API, at its price"
        out += show(
            figures,
            f"{run.heading}-cost",
            caption + ".",
            chart,
            table(("stage", "calls", "tokens in", "tokens out", "cost"), rows),
        )
    people = {task: v for task, v in (cost.human_by_task or {}).items() if v.judgements}
    if people:
        chart = fig.bars(
            list(people), {"judgements": [float(v.judgements) for v in people.values()]}, xlabel="judgements"
        )
        caption = "People's work per task: judgements made (their cost in the table, where a rate is set)."
        paid = [(task, v.judgements, money(v.rate_usd), money(v.cost_usd)) for task, v in people.items()]
        out += show(
            figures, f"{run.heading}-people", caption, chart, table(("task", "judgements", "each", "cost"), paid)
        )
    human = cost.human
    out += (
        f"<p>human judgements: {num(human.judgements)} at {money(human.rate_usd)} each · total "
        f"{money(cost.total_usd)} · per kept {money(cost.cost_per_kept_item_usd)} "
        "(unknown: a price or rate missing)</p>"
    )
    return out


def _calls(stage: StageCost) -> object:
    """A stage's calls, marked ``batch`` where they went through an API's Batch API (some of them: how many)."""
    calls, batched = stage.calls, stage.batched_calls
    if not batched:
        return calls
    return f"{calls} batch" if batched == calls else f"{calls} ({batched} batch)"


def declared_parts(run: Run, figures: fig.Figures) -> str:
    """The run's groups side by side (when its funnel has a caption for them), then every figure it declared:
    top-level first, then each group's, headed ``<group>: <title>``."""
    funnel = run.funnel
    if funnel is None:
        return ""
    out = groups_part(run.heading, funnel, figures)
    out += "".join(figure_part(f"{run.heading}-{f.name}", f, figures) for f in funnel.figures)
    for group in funnel.groups:
        out += "".join(
            figure_part(f"{run.heading}-{group.name}-{f.name}", f, figures, group.name) for f in group.figures
        )
    return out


def groups_part(heading: str, funnel: Funnel, figures: fig.Figures) -> str:
    """Records out of each stage per group, side by side (only when the funnel gives the chart a caption)."""
    shown: list[Group] = [group for group in funnel.groups if group.stages]
    if funnel.groups_title is None or not shown:
        return ""
    stages = list(dict.fromkeys(row.stage for group in shown for row in group.stages))
    series = {
        group.name: [float(next((row.out for row in group.stages if row.stage == stage), 0)) for stage in stages]
        for group in shown
    }
    chart = fig.bars(stages, series, xlabel="records out")
    rows = [(stage, *(series[name][i] for name in series)) for i, stage in enumerate(stages)]
    what = _GROUPED_BY.get(funnel.group_by or "", "group")
    return f"<h3>Funnel per {e(what)}</h3>" + show(
        figures, f"{heading}-per-{what}", funnel.groups_title, chart, table(("stage", *series), rows)
    )


def figure_part(key: str, figure: Figure, figures: fig.Figures, group: str | None = None) -> str:
    """One declared figure: drawn by its kind with its numbers under it, or (not drawn) its lines of numbers."""
    title = figure.title if group is None else f"{group}: {figure.title}"
    if not figure.draw:
        lines = figure.lines()
        lines[0] = f"{group}: {lines[0]}" if group is not None else lines[0]
        return "<p>" + "<br>".join(e(line.strip()) for line in lines) + "</p>"
    if isinstance(figure, Agreement):
        return _agreement(key, title, figure, figures)
    chart, numbers = _drawn(figure)
    return f"<h3>{e(title)}</h3>" + show(figures, key, figure.caption or f"{title}.", chart, numbers)


def _drawn(figure: Counts | Share | Table) -> tuple[Any, str]:
    """The chart of a figure of counts, a share or a table, and the table of its numbers."""
    unit = figure.unit or "count"
    if isinstance(figure, Counts):
        labels = list(figure.values)
        values = [_float(v) for v in figure.values.values()]
        chart = fig.bars(labels, {unit: values}, xlabel=unit)
        return chart, table(("", unit), list(figure.values.items()))
    if isinstance(figure, Share):
        rest = figure.whole - figure.part
        chart = fig.stacked(
            [figure.name], {figure.part_label: [float(figure.part)], figure.rest_label: [float(rest)]}, xlabel=unit
        )
        return chart, table((figure.part_label, figure.rest_label), [(figure.part, rest)])
    columns = {name: [_float(v) for v in figure.column(name)] for name in figure.columns}
    if figure.stacked:
        chart = fig.stacked(figure.rows, {k: [v or 0.0 for v in c] for k, c in columns.items()}, xlabel=unit)
    else:
        chart = fig.bars(figure.rows, columns, xlabel=unit)
    rows = [(label, *row) for label, row in zip(figure.rows, figure.values, strict=True)]
    return chart, table(("", *figure.columns), rows)


def _agreement(key: str, title: str, figure: Agreement, figures: fig.Figures) -> str:
    """Fleiss' κ and Krippendorff's α per group of raters, beyond chance; numbers only where undefined everywhere."""
    groups = figure.groups
    labels = [g.label for g in groups]
    series = {
        "Fleiss κ": [g.fleiss_kappa for g in groups],
        "Krippendorff α": [g.krippendorff_alpha for g in groups],
    }
    extra = list(dict.fromkeys(name for g in groups for name in g.extra))
    ratings = any(g.ratings is not None for g in groups)
    header: Sequence[str] = ("", "items", "raters", *(("ratings",) if ratings else ()), *series, *extra)
    rows = [
        (
            g.label,
            g.items,
            g.raters,
            *((g.ratings,) if ratings else ()),
            g.fleiss_kappa,
            g.krippendorff_alpha,
            *(g.extra.get(name) for name in extra),
        )
        for g in groups
    ]
    numbers = table(header, rows)
    if not drawable(series):
        undefined = "Undefined everywhere: too few items with several votes, or every vote the same."
        return f"<h3>{e(title)}</h3>" + numbers + none(undefined)
    chart = fig.bars(labels, series, xlabel="agreement", limit=(-1.0, 1.15))
    return f"<h3>{e(title)}</h3>" + show(figures, key, figure.caption or f"{title}.", chart, numbers)


def _float(value: int | float | None) -> float | None:
    return None if value is None else float(value)


def agreement_part(run: Run, figures: fig.Figures) -> str:
    """Agreement of the judges the run store holds, per task and source (people, LM panel)."""
    if run.funnel is not None and run.funnel.judges_in_figures:
        return ""  # its declared figures have the judges' agreement (above)
    if run.judgements is None:
        return ""
    groups: dict[tuple[str, str], dict[str, list[Any]]] = defaultdict(lambda: defaultdict(list))
    for judgement, source in run.judgements:
        groups[(judgement.task, source)][judgement.item_id].append(judgement)  # a QC round is its own unit
    rows = []
    for (task, source), by_item in sorted(groups.items()):
        found = agreement(by_item, task, panel=source == "lm")
        rows.append((f"{task} · {'LM panel' if source == 'lm' else 'people'}", found))
    measured = [(label, a) for label, a in rows if a.items]
    if not measured:
        return "<h3>Review agreement</h3>" + none("No item has two or more judgements yet.")
    labels = [label for label, _ in measured]
    series = {
        "Fleiss κ": [a.fleiss_kappa for _, a in measured],
        "Krippendorff α": [a.krippendorff_alpha for _, a in measured],
    }
    numbers = table(
        ("task · judges", "items", "ratings", "Fleiss κ", "Krippendorff α"),
        [(label, a.items, a.ratings, a.fleiss_kappa, a.krippendorff_alpha) for label, a in measured],
    )
    if not drawable(series):
        return "<h3>Review agreement</h3>" + numbers + none("Undefined: every vote the same, or too few alike.")
    chart = fig.bars(labels, series, xlabel="agreement", limit=(-1.0, 1.15))
    caption = "Review agreement per task and judge type, beyond chance (no bar: undefined, e.g. every vote the same)."
    return "<h3>Review agreement</h3>" + show(figures, f"{run.heading}-agreement", caption, chart, numbers)
