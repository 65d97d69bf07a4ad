"""What a run built, as its recipe's paper draws it: the funnel and cost of every recipe; mCSQA's refinement,
verification and Easy/Hard splits; human-gen's QC rounds and answer agreement; the culture recipes' funnel per
language and category; CRoW per task, dimension and validator agreement; and the review agreement of the judges
in the run store."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from senseforge.data.text import money
from senseforge.evaluate.html_report import figures as fig
from senseforge.evaluate.html_report.common import drawable, e, none, num, per_kept, show, table
from senseforge.evaluate.html_report.inputs import Run, read_json
from senseforge.evaluate.policies import agreement

_FUNNEL_CAPTIONS = {
    "mcsqa": "mCSQA's construction funnel (its Figure 3): records into and out of each step",
    "crow": "CRoW's construction funnel over every task: records into and out of each stage",
    "human-gen": "The human-written items: slots, creation, QC and answering",
}


def funnel_part(run: Run, figures: fig.Figures) -> str:
    funnel = run.funnel
    if not funnel or not funnel.get("stages"):
        return "<h3>Funnel</h3>" + none("No funnel yet: the build has not finished.")
    stages = funnel["stages"]
    labels = [row["stage"] for row in stages]
    chart = fig.bars(labels, {"in": [r["in"] for r in stages], "out": [r["out"] for r in stages]}, xlabel="records")
    rows = [(r["stage"], r["in"], r["out"], ", ".join(f"{k} {v}" for k, v in r["rejected"].items())) for r in stages]
    caption = _FUNNEL_CAPTIONS.get(run.recipe or "", "Records into and out of each stage")
    caption += f"; {funnel.get('kept', '–')} kept. A stage's in − out is what it rejected, by reason in the table."
    return "<h3>Funnel</h3>" + show(
        figures, f"{run.heading}-funnel", caption, chart, table(("stage", "in", "out", "rejected"), rows)
    )


def cost_part(run: Run, figures: fig.Figures) -> str:
    cost = run.cost
    if not cost:
        return "<h3>Cost</h3>" + none("No cost yet: the build has not finished.")
    stages = cost.get("stages") or {}
    out = "<h3>Cost</h3>"
    if stages:
        spent = [s.get("cost_usd") for s in stages.values()]
        priced = None not in spent and any((m or 0) > 0 for m in spent)
        values = [s["cost_usd"] if priced else s["tokens_in"] + s["tokens_out"] for s in stages.values()]
        unit = "USD" if priced else "tokens (in + out)"
        chart = fig.bars(list(stages), {unit: values}, xlabel=unit)
        caption = "Cost per step (mCSQA's Figure 4)" if run.recipe == "mcsqa" else "Cost per stage"
        caption += "" if priced else ": tokens, since no stage has a known price above zero (a local model is free)"
        rows = [(n, _calls(s), s["tokens_in"], s["tokens_out"], money(s.get("cost_usd"))) for n, s in stages.items()]
        if any(s.get("batched_calls") for s in stages.values()):
            caption += "; calls marked batch went through the API's Batch API, at its price"
        out += show(
            figures,
            f"{run.heading}-cost",
            caption + ".",
            chart,
            table(("stage", "calls", "tokens in", "tokens out", "cost"), rows),
        )
    people = {task: v for task, v in (cost.get("human_by_task") or {}).items() if v.get("judgements")}
    if people:
        chart = fig.bars(
            list(people), {"judgements": [float(v["judgements"]) for v in people.values()]}, xlabel="judgements"
        )
        caption = "People's work per task: judgements made (their cost in the table, where a rate is set)."
        paid = [
            (task, v["judgements"], money(v.get("rate_usd")), money(v.get("cost_usd"))) for task, v in people.items()
        ]
        out += show(
            figures, f"{run.heading}-people", caption, chart, table(("task", "judgements", "each", "cost"), paid)
        )
    human = cost.get("human") or {}
    out += (
        f"<p>human judgements: {num(human.get('judgements'))} at {money(human.get('rate_usd'))} each · total "
        f"{money(cost.get('total_usd'))} · per kept {money(per_kept(cost))} (unknown: a price or rate missing)</p>"
    )
    return out


def _calls(stage: dict[str, Any]) -> object:
    """A stage's calls, marked ``batch`` where they went through an API's Batch API (some of them: how many)."""
    calls, batched = stage["calls"], stage.get("batched_calls") or 0
    if not batched:
        return calls
    return f"{calls} batch" if batched == calls else f"{calls} ({batched} batch)"


def mcsqa_parts(run: Run, figures: fig.Figures) -> str:
    funnel = run.funnel or {}
    out = ""
    refined = funnel.get("refined") or {}
    if refined.get("refined_questions"):
        changed = int(refined.get("changed", 0))
        total = int(refined["refined_questions"])
        chart = fig.stacked(["refined"], {"changed": [changed], "unchanged": [total - changed]}, xlabel="questions")
        caption = (
            f"Refinement: {changed} of {total} questions changed by the refine step "
            f"({100 * float(refined.get('changed_share', 0.0)):.1f}%)."
        )
        out += "<h3>Refinement</h3>" + show(
            figures,
            f"{run.heading}-refined",
            caption,
            chart,
            table(("changed", "unchanged"), [(changed, total - changed)]),
        )
    verify = funnel.get("verify") or {}
    if verify:
        chart = fig.bars(list(verify), {"questions": [float(v) for v in verify.values()]}, xlabel="questions")
        caption = (
            "Verification outcomes: Easy (the verifying model chose the answer), to review (it did not), of them "
            "those it answered wrongly or unreadably."
        )
        out += "<h3>Verification</h3>" + show(
            figures, f"{run.heading}-verify", caption, chart, table(("outcome", "questions"), list(verify.items()))
        )
    review = funnel.get("review") or {}
    if review:
        out += "<p>Hard kept by " + ", ".join(f"{e(k.replace('hard_by_', ''))}: {num(v)}" for k, v in review.items())
        out += "</p>"
    splits = funnel.get("splits") or {}
    if splits and all(isinstance(v, dict) for v in splits.values()):
        labels = list(splits)
        easy = [float(splits[s].get("easy", 0)) for s in labels]
        hard = [float(splits[s].get("hard", 0)) for s in labels]
        chart = fig.stacked(labels, {"Easy": easy, "Hard": hard}, xlabel="questions")
        caption = "Easy and Hard questions per split (mCSQA's Table 3 shape; stratified 80/10/10 by default)."
        rows = [(s, a, b) for s, a, b in zip(labels, easy, hard, strict=True)]
        out += "<h3>Easy and Hard per split</h3>" + show(
            figures, f"{run.heading}-splits", caption, chart, table(("split", "Easy", "Hard"), rows)
        )
    return out


def human_gen_parts(run: Run, figures: fig.Figures) -> str:
    funnel = run.funnel or {}
    out = ""
    qc = funnel.get("qc") or {}
    rounds = qc.get("rounds") or {}
    if rounds:
        labels = [f"{k} round{'s' if str(k) != '1' else ''}" for k in rounds]
        chart = fig.bars(labels, {"items": [float(v) for v in rounds.values()]}, xlabel="items")
        caption = (
            f"Quality control: items by the rounds they took to pass ({qc.get('sent_back', 0)} sent back, "
            f"{qc.get('revisions', 0)} revisions, {qc.get('unresolved', 0)} unresolved)."
        )
        out += "<h3>QC rounds</h3>" + show(
            figures, f"{run.heading}-qc", caption, chart, table(("rounds", "items"), list(rounds.items()))
        )
    answers = funnel.get("answers") or {}
    if answers:
        kappa, alpha = answers.get("fleiss_kappa"), answers.get("krippendorff_alpha")
        share = answers.get("majority_is_creator")
        items = answers.get("items") or 0
        creator = (float(share) / items) if isinstance(share, int | float) and items else None
        labels = ["Fleiss κ", "Krippendorff α", "majority = creator"]
        chart = fig.bars(labels, {"value": [kappa, alpha, creator]}, xlabel="agreement", limit=(-1.0, 1.15))
        caption = (
            f"Answer agreement: {answers.get('per_item', '?')} answers per item over {items} items; the last bar is "
            "the share of items whose majority answer is the creator's."
        )
        rows = [("Fleiss κ", kappa), ("Krippendorff α", alpha), ("majority = creator", creator)]
        out += "<h3>Answer agreement</h3>" + show(
            figures, f"{run.heading}-answers", caption, chart, table(("measure", "value"), rows)
        )
    return out


def culture_parts(run: Run, figures: fig.Figures) -> str:
    out = ""
    per_lang = {lang: read_json(run.path / lang / "funnel.json") for lang in run.languages()}
    per_lang = {lang: f for lang, f in per_lang.items() if isinstance(f, dict) and f.get("stages")}
    if per_lang:
        stages = list(dict.fromkeys(row["stage"] for f in per_lang.values() for row in f["stages"]))
        series = {
            lang: [float(next((r["out"] for r in f["stages"] if r["stage"] == s), 0)) for s in stages]
            for lang, f in per_lang.items()
        }
        chart = fig.bars(stages, series, xlabel="records out")
        caption = "Records out of each stage per language (Putri et al.'s per-language construction)."
        rows = [(s, *(series[lang][i] for lang in series)) for i, s in enumerate(stages)]
        out += "<h3>Funnel per language</h3>" + show(
            figures, f"{run.heading}-per-language", caption, chart, table(("stage", *series), rows)
        )
    for lang, funnel in per_lang.items():
        categories = funnel.get("by_category") or {}
        if not categories:
            continue
        stages = list(dict.fromkeys(stage for part in categories.values() for stage in part))
        last = stages[-1]
        generated = [float((part.get(stages[0]) or {}).get("out", 0)) for part in categories.values()]
        kept = [float((part.get(last) or {}).get("out", 0)) for part in categories.values()]
        chart = fig.bars(list(categories), {stages[0]: generated, f"after {last}": kept}, xlabel="items")
        caption = f"{lang}: items per category out of the first ({stages[0]}) and the last ({last}) stage."
        rows = [(c, g, k) for c, g, k in zip(categories, generated, kept, strict=True)]
        out += f"<h3>{e(lang)}: per category</h3>" + show(
            figures, f"{run.heading}-{lang}-categories", caption, chart, table(("category", stages[0], last), rows)
        )
    adapted = (run.funnel or {}).get("adapted") or {}
    if adapted:
        chart = fig.bars(list(adapted), {"kept": [float(v) for v in adapted.values()]}, xlabel="kept items")
        caption = "Kept items by how they were adapted: full rewrite, names only, or none needed."
        out += "<h3>Adaptation</h3>" + show(
            figures, f"{run.heading}-adapted", caption, chart, table(("adaptation", "kept"), list(adapted.items()))
        )
    return out


def crow_parts(run: Run, figures: fig.Figures) -> str:
    by_task = (run.funnel or {}).get("by_task") or {}
    if not by_task:
        return ""
    out = "<h3>Per task</h3>"
    tasks = list(by_task)
    examples = [by_task[t].get("examples") or {} for t in tasks]
    series = {
        "contexts kept": [float((by_task[t].get("contexts") or {}).get("kept", 0)) for t in tasks],
        "examples": [float(x.get("total", 0)) for x in examples],
        "valid": [float(x.get("valid", 0)) for x in examples],
    }
    chart = fig.bars(tasks, series, xlabel="count")
    caption = "CRoW per task: contexts kept, examples written and those valid (a rewrite that flips the label)."
    rows = [(t, *(series[k][i] for k in series)) for i, t in enumerate(tasks)]
    out += show(figures, f"{run.heading}-tasks", caption, chart, table(("task", *series), rows))
    dims: dict[str, dict[str, float]] = defaultdict(dict)
    for task in tasks:
        for dim, count in ((by_task[task].get("dimensions") or {}).get("examples") or {}).items():
            dims[dim][task] = float(count)
    if dims:
        labels = sorted(dims)
        per_task = {task: [dims[d].get(task) for d in labels] for task in tasks}
        chart = fig.bars(labels, per_task, xlabel="examples")
        caption = "Commonsense dimensions of the examples per task (CRoW's Table 2 shape)."
        rows = [(d, *(per_task[t][i] for t in tasks)) for i, d in enumerate(labels)]
        out += show(figures, f"{run.heading}-dimensions", caption, chart, table(("dimension", *tasks), rows))
    agreements = [
        (task, stage, a) for task in tasks for stage, a in ((by_task[task].get("agreement") or {}).items()) if a
    ]
    if agreements:
        labels = [f"{task} · {stage}" for task, stage, _ in agreements]
        series = {
            "Fleiss κ": [a.get("fleiss_kappa") for _, _, a in agreements],
            "Krippendorff α": [a.get("krippendorff_alpha") for _, _, a in agreements],
        }
        rows = [
            (label, a.get("items"), a.get("raters"), a.get("fleiss_kappa"), a.get("krippendorff_alpha"))
            for label, (_, _, a) in zip(labels, agreements, strict=True)
        ]
        numbers = table(("task · stage", "items", "raters", "Fleiss κ", "Krippendorff α"), rows)
        if drawable(series):
            chart = fig.bars(labels, series, xlabel="agreement", limit=(-1.0, 1.15))
            caption = "Validators' agreement per task and validation stage (CKV: knowledge, WSV: rewrites)."
            out += show(figures, f"{run.heading}-validators", caption, chart, numbers)
        else:
            out += "<h4>Validators' agreement</h4>" + numbers
            out += none("Undefined everywhere: too few items with several votes, or every vote the same.")
    return out


def agreement_part(run: Run, figures: fig.Figures) -> str:
    """Agreement of the judges the run store holds, per task and source (people, LM panel)."""
    if run.recipe == "crow":
        return ""  # its funnel has the validators' agreement per task (above)
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
