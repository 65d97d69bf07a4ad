"""The dataset card's account of how a dataset was built, from the run it came from (manifest, funnel, cost).

A split folder inside a run directory (``<run>/items/``, ``<run>/<lang>/dataset/`` …) finds
the run's ``manifest.json``, ``funnel.json`` and ``cost.json`` (and an ``analysis/irt/irt.json`` when
``analyze irt`` wrote one there) in itself or a folder above
(at most three levels up). The card then says which recipe, models, prompt hashes and seeds
made it, what each stage kept and what it cost, where its sources come from and under which
licence, and what it is for and not for.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

SOURCES: dict[str, str] = {
    "mcsqa": "ConceptNet 5 assertions (CC BY-SA 4.0; share alike: derived data keep the licence)",
    "culture-adapt": "CommonsenseQA (MIT), adapted and translated by the models named above",
    "culture-gen": "concept lists given to the recipe; questions written by the models named above",
    "human-gen": "questions written by the annotators of the run",
    "crow": "the task datasets given as sources (CommonMT: CC BY-SA 4.0; CRoW's own items: no licence stated)",
}
"""Where each recipe's data comes from, and its licence where the source states one."""


def run_facts(folder: Path) -> dict[str, Any] | None:
    """The manifest, funnel and cost of the run a split folder belongs to, or ``None`` when it is in none."""
    for place in (folder, *list(folder.parents)[:3]):
        manifest = place / "manifest.json"
        if manifest.is_file():
            facts: dict[str, Any] = {}
            for name in ("manifest", "funnel", "cost"):
                try:
                    facts[name] = json.loads((place / f"{name}.json").read_text(encoding="utf-8"))
                except (OSError, json.JSONDecodeError):
                    facts[name] = None
            irt = _irt_fit(place)
            if irt is not None:
                facts["irt"] = irt
            return facts
    return None


def _irt_fit(run: Path) -> str | None:
    """The one-line summary of an item response fit in the run's ``analysis/irt/`` (``analyze irt``), if any."""
    try:
        document = json.loads((run / "analysis" / "irt" / "irt.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    summary = document.get("summary") if isinstance(document, dict) else None
    return summary if isinstance(summary, str) else "an item response fit"


def checked_against(manifest: Mapping[str, Any]) -> str:
    """What the run's contamination gate checked items against, as the card says it (or that nothing was)."""
    gate = manifest.get("contamination")
    if not isinstance(gate, Mapping):
        return "no contamination registry (`senseforge analyze contamination` checks a dataset afterwards)"
    entries = ", ".join(
        f"`{e.get('name')}` ({e.get('items', '?')} items, licence {e.get('licence') or 'not given'})"
        for e in gate.get("checked_against") or []
    )
    return f"{entries or 'an empty registry'}; copies {'rejected' if gate.get('mode') == 'reject' else 'flagged'}"


def built_lines(facts: Mapping[str, Any], human_share: float | None) -> list[str]:
    """The card's sections on how the data was built, its sources and licences, and its use."""
    manifest = facts.get("manifest") or {}
    recipe = str(manifest.get("recipe") or "(unrecorded)")
    lines = ["", "## How it was built", ""]
    lines.append(
        f"- recipe: `{recipe}` (senseforge {manifest.get('senseforge_version', '?')}, git {manifest.get('git_sha')})"
    )
    models = ", ".join(f"`{spec}`" for spec in manifest.get("models") or {}) or "none"
    lines.append(f"- models: {models}")
    templates = manifest.get("templates") or {}
    if templates:
        lines.append("- prompt templates (SHA-256): " + ", ".join(f"`{k}` {str(v)[:12]}" for k, v in templates.items()))
    lines.append(f"- seeds: `{json.dumps(manifest.get('seeds'), sort_keys=True)}`")
    lines.append(f"- checked against: {checked_against(manifest)}")
    if facts.get("irt"):
        lines.append(f"- item response fit (`analysis/irt/irt.json`): {facts['irt']}")
    if human_share is not None:
        lines.append(f"- reviewed by people: {human_share:.1%} of the items")
    funnel = facts.get("funnel") or {}
    if funnel.get("stages"):
        lines += ["", "## Funnel and cost", "", "| stage | in | out | rejected |", "|---|---:|---:|---|"]
        for row in funnel["stages"]:
            rejected = ", ".join(f"{k} {v}" for k, v in row.get("rejected", {}).items())
            lines.append(f"| {row['stage']} | {row['in']:,} | {row['out']:,} | {rejected} |")
    cost = facts.get("cost") or {}
    if cost:
        total, per = cost.get("total_usd"), next((v for k, v in cost.items() if k.startswith("cost_per_kept_")), None)
        shown = "unknown (an unpriced model or no human rate)" if total is None else f"${total:.6f}"
        lines += ["", f"Cost: {shown}" + ("" if per is None else f", ${per:.6f} per kept item") + "."]
    lines += ["", "## Sources and licences", "", f"- {SOURCES.get(recipe, 'the sources given to the recipe')}"]
    lines.append("- model-written text: check the terms of the models named above before you redistribute it")
    lines += [
        "",
        "## Intended use and known limits",
        "",
        "- For evaluating how well models handle the commonsense of a language and its culture; not for training",
        "  the models that wrote or verified it (their answers decided what is Easy).",
        "- Easy items are those the writing model already answered; Hard ones only people (or an LM panel, where",
        "  the provenance says `lm`) verified. Accuracy on Easy overstates the writing model's peers.",
        "- Moderation is word-list based unless the run named another moderator; some unwanted content may remain.",
        "- Questions may carry the writing model's errors of language and culture; the funnel shows what was filtered.",
    ]
    return lines
