"""The page's sections: each run (the figures it declared, its evaluations, its manifest), the transfer study and
the analyses. The overview is :mod:`.overview`; what a section draws of a run, :mod:`.recipes` and
:mod:`.evaluations`; the pieces they share, :mod:`.common`."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from senseforge.evaluate.html_report import figures as fig
from senseforge.evaluate.html_report.common import FOLDER_TOKEN, anchor, e, none, note, show, table
from senseforge.evaluate.html_report.evaluations import evaluations_part, human_baseline_part
from senseforge.evaluate.html_report.inputs import Run, read_json
from senseforge.evaluate.html_report.recipes import agreement_part, cost_part, declared_parts, funnel_part
from senseforge.runfolder.manifest import Manifest


def run_section(run: Run, figures: fig.Figures) -> str:
    out = f'<section id="{anchor(run)}"><h2>{e(run.heading)}</h2>'
    out += f"<p><code>{e(run.path)}</code> · recipe {e(run.recipe or 'unknown')}</p>"
    out += funnel_part(run, figures) + cost_part(run, figures)
    out += declared_parts(run, figures)
    out += agreement_part(run, figures)
    out += evaluations_part(run.heading, run.evaluations, figures, run)
    out += human_baseline_part(run, figures)
    out += contamination_part(run)
    out += manifest_part(run.manifest)
    return out + "</section>"


def contamination_part(run: Run) -> str:
    """What the run's contamination gate checked its items against and what it found; nothing for a run without one."""
    gate = run.manifest.fact("contamination") if run.manifest is not None else None
    if not isinstance(gate, Mapping):
        return ""
    rows = [(x.get("name"), x.get("items"), x.get("licence") or "not given") for x in gate.get("checked_against") or []]
    stage = run.funnel.stage("contamination") if run.funnel is not None else None
    found = "not run yet"
    if stage is not None:
        rejected = ", ".join(f"{reason} {n}" for reason, n in stage.rejected.items()) or "none"
        found = f"{stage.in_} items checked, rejected: {rejected}"
    # the final barrier of a recipe without a copy filter of its own
    own = run.funnel.stage("self_duplicates") if run.funnel is not None else None
    if own is not None:
        copies = ", ".join(f"{reason} {n}" for reason, n in own.rejected.items()) or "none"
        found += f"; {own.in_} kept items checked against each other, rejected: {copies}"
    mode = "copies rejected" if gate.get("mode") == "reject" else "copies flagged in items/"
    out = "<h3>Contamination</h3>" + table(("registered benchmark", "items", "licence"), rows)
    return out + f"<p>{e(mode)}; cross-lingual matches flagged · {e(found)}</p>"


def manifest_part(manifest: Manifest | None) -> str:
    if manifest is None:
        return "<h3>Manifest</h3>" + none("No manifest.")
    rows = [
        (spec, ", ".join(f"{k}={v}" for k, v in (identity or {}).items())) for spec, identity in manifest.models.items()
    ]
    out = "<details><summary>Manifest</summary>" + table(("model", "identity"), rows)
    out += table(("template", "SHA-256"), [(k, f"{v}"[:16] + "…") for k, v in manifest.templates.items()])
    out += (
        f"<p>recipe {e(manifest.recipe)} · senseforge {e(manifest.senseforge_version)} · git {e(manifest.git_sha)} · "
    )
    seeds = manifest.seeds if "seeds" in manifest.model_fields_set else None
    out += f"seeds <code>{e(json.dumps(seeds))}</code></p></details>"
    return out


def transfer_section(folder: Path | None, figures: fig.Figures) -> str:
    if folder is None:
        return ""
    document = read_json(folder / "transfer.json")
    if not isinstance(document, dict):
        return "<h2 id=transfer>Transfer</h2>" + none(f"No transfer.json in {folder}.")
    from senseforge.evaluate.transfer_tables import heatmap_figure

    out = "<h2 id=transfer>Transfer</h2>"
    langs = [str(lang) for lang in document.get("langs") or []]
    subsets = document.get("subsets") or {}
    if langs and subsets:
        chart = heatmap_figure(subsets, langs, width_in=fig.WIDTH_IN)
        caption = (
            "Cross-lingual transfer (mCSQA's Figure 6): accuracy of a model trained on one language (row) and tested "
            "on another (column), as a percentage of the monolingual model of the test language."
        )
        numbers = "".join(
            f"<h4>{e(s)} · raw accuracy</h4>"
            + table(
                ("train \\ test", *langs),
                [(tr, *((part.get("raw") or {}).get(tr, {}).get(te) for te in langs)) for tr in langs],
            )
            for s, part in subsets.items()
        )
        out += show(figures, "transfer-heatmap", caption, chart, numbers)
    for subset, tables in subsets.items():
        rows = [(r["lang"], r["mono"], r["multi"], r["delta"], r["unseen"]) for r in tables.get("table7", [])]
        out += f"<h3>Table 7 · {e(subset)}</h3>" + table(("lang", "mono", "multi", "Δ", "unseen"), rows)
    summary = (document.get("finding") or {}).get("summary")
    return out + (f"<p>{e(summary)}</p>" if summary else "")


def analyses_section(folders: Sequence[Path], figures: fig.Figures) -> str:
    """The analyses' own figures: ``senseforge analyze`` writes ``<name>.svg`` and ``<name>.pdf`` beside
    ``<name>.json``."""
    if not folders:
        return ""
    out = "<h2 id=analyses>Analyses</h2>"
    for folder in folders:
        svgs = sorted(folder.rglob("*.svg")) if folder.is_dir() else []
        if not svgs:
            out += none(f"No analysis figure in {folder}.")
            continue
        for svg in svgs:
            caption = _analysis_caption(svg.stem, read_json(svg.with_suffix(".json")))
            drawn = figures.adopt(svg.stem, caption, svg.read_text(encoding="utf-8"), svg.with_suffix(".pdf"))
            out += drawn.html(FOLDER_TOKEN)
            if svg.stem == "irt":
                out += _irt_part(read_json(svg.with_suffix(".json")))
    return out


def _irt_part(document: Any) -> str:
    """``analyze irt``'s warnings (too few respondents; one model in several set-ups), its respondents, its suspicious
    items and, when chosen, its subset's leave-one-out check."""
    if not isinstance(document, dict):
        return ""
    warned = "".join(note(f"Warning: {w}.") for w in document.get("warnings") or [])
    people = [
        (r.get("label"), r.get("ability"), r.get("ability_se"))
        for r in document.get("respondents") or []
        if isinstance(r, dict)
    ]
    out = warned
    if people:
        out += f"<h3>Respondents ({len(people)})</h3>" + table(("respondent", "ability", "SE"), people)
    rows = [
        (i.get("id"), i.get("difficulty"), i.get("discrimination"), "; ".join(i.get("reasons") or []))
        for i in document.get("items") or []
        if isinstance(i, dict) and i.get("suspicious")
    ]
    out += f"<h3>Suspicious items ({len(rows)})</h3>"
    out += table(("item", "difficulty", "discrimination", "evidence"), rows) if rows else none("No suspicious item.")
    subset = document.get("subset")
    if isinstance(subset, dict):
        out += f"<h3>Subset of {len(subset.get('ids') or [])} items (leave one respondent out)</h3>" + table(
            ("", "accuracy error", "rank correlation"),
            [
                ("chosen subset", subset.get("loo_error"), subset.get("loo_rank_correlation")),
                (
                    "random (median), plain accuracy",
                    subset.get("random_loo_error"),
                    subset.get("random_rank_correlation"),
                ),
                (
                    "random (median), same estimator",
                    subset.get("random_loo_error_estimator"),
                    subset.get("random_rank_correlation_estimator"),
                ),
            ],
            digits=4,
        )
    return out


def _analysis_caption(name: str, document: Any) -> str:
    title = {
        "lexical": "Lexical overlap between the questions and their sources",
        "errors": "Where the models' answers go wrong",
        "conflicts": "Items on which models or people conflict",
        "concepts": "Concepts the questions are built from",
        "language": "Languages the items are written in",
        "stats": "The datasets' statistics",
        "irt": "Item map: the respondents' abilities above the items' difficulty and discrimination",
    }.get(name, f"Analysis: {name}")
    summary = document.get("summary") if isinstance(document, dict) else None
    return f"{title}." + (f" {summary}" if isinstance(summary, str) else "")
