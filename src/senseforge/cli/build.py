"""``senseforge build``: run a recipe into a run directory (``mcsqa`` first)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from senseforge.cli._common import BaseUrlOption, ProviderOptions, StoreOption, err, out, parse_options, progress_bar
from senseforge.errors import ConfigError

app = typer.Typer(help="Build a benchmark with a recipe (resumable).", no_args_is_help=True)


def _pairs(values: list[str] | None, flag: str) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for value in values or []:
        key, sep, spec = value.partition("=")
        if not sep or not key.strip() or not spec.strip():
            raise ConfigError(f"{flag} {value!r}: write stage=provider/model, e.g. {flag} verify=openai/gpt-4o")
        pairs[key.strip()] = spec.strip()
    return pairs


def _overrides(
    lang: str | None,
    n: int | None,
    all_sets: bool,
    answers_per_set: int | None,
    seed: int | None,
    kb: Path | None,
    model: str | None,
    stage_model: list[str] | None,
    options: dict[str, Any],
    style: str | None,
    verify_by: str | None,
    reviewers: str | None,
    lm_review_as_hard: bool | None,
    review_k: int | None,
    batch_size: int | None,
) -> dict[str, Any]:
    """The settings given on the command line (``None``: not given)."""
    given: dict[str, Any] = {
        "lang": lang,
        "n": n,
        "answers_per_set": answers_per_set,
        "seed": seed,
        "kb": str(kb.resolve()) if kb is not None else None,
        "model": model,
        "stage_models": _pairs(stage_model, "--stage-model") or None,
        "style": style,
        "verify_by": verify_by,
        "reviewers": tuple(s.strip() for s in reviewers.split(",") if s.strip()) if reviewers else None,
        "lm_review_as_hard": lm_review_as_hard,
        "review_k": review_k,
        "batch_size": batch_size,
    }
    chosen = {key: value for key, value in given.items() if value is not None}
    if all_sets:
        chosen["n"] = None
    if options:
        chosen["model_options"] = options
    return chosen


def _resolve(given: dict[str, Any], manifest: dict[str, Any] | None) -> Any:
    from pydantic import ValidationError

    from senseforge.pipelines.mcsqa.config import McsqaConfig

    settings = dict(manifest["config"]) if manifest else {}
    if "model_options" in given:
        model = given.get("model", settings.get("model", McsqaConfig.model_fields["model"].default))
        given = {**given, "model_options": {model: given["model_options"]}}
    settings.update(given)
    try:
        return McsqaConfig.model_validate(settings)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = "-".join(str(part) for part in first["loc"][:1]).replace("_", "-")
        raise ConfigError(f"--{where}: {first['msg']}") from exc


@app.command("mcsqa")
def mcsqa(
    lang: str | None = typer.Option(None, "--lang", "-l", help="Language of the questions (BCP-47), e.g. ja."),
    n: int | None = typer.Option(None, "--n", min=1, help="Question sets to sample (default: 6000, the paper's)."),
    all_sets: bool = typer.Option(False, "--all", help="Use every question set instead of sampling --n."),
    answers_per_set: int | None = typer.Option(
        None, "--answers-per-set", min=1, max=3, help="Questions per question set, one per target (default: 3)."
    ),
    seed: int | None = typer.Option(None, "--seed", help="Seed of sampling, shuffling and the split (default: 0)."),
    kb: Path | None = typer.Option(None, "--kb", help="Knowledge store folder (default: $SENSEFORGE_HOME/kb)."),
    model: str | None = typer.Option(
        None, "--model", "-m", help="provider/model of every LM stage (default: llamacpp/gemma-3-270m)."
    ),
    stage_model: list[str] | None = typer.Option(
        None, "--stage-model", help="A stage's own model: generate|refine|distractors|verify=provider/model."
    ),
    option: list[str] | None = ProviderOptions,
    base_url: str | None = BaseUrlOption,
    style: str | None = typer.Option(None, "--style", help="Prompts: auto | chat | completion (default: auto)."),
    verify_by: str | None = typer.Option(None, "--verify-by", help="auto | loglik | generate (default: auto)."),
    reviewers: str | None = typer.Option(
        None, "--reviewers", help="An LM review panel, comma-separated provider/model specs (default: humans)."
    ),
    lm_review_as_hard: bool | None = typer.Option(
        None, "--lm-review-as-hard/--no-lm-review-as-hard", help="Items the LM panel accepts become Hard (labelled)."
    ),
    review_k: int | None = typer.Option(None, "--review-k", min=1, help="Human reviewers per item (default: 2)."),
    decisions: list[Path] | None = typer.Option(
        None, "--decisions", help="JSONL of human review decisions (item_id, annotator, task=verify, accept)."
    ),
    human_rate: float | None = typer.Option(
        None, "--human-rate", min=0.0, help="US dollars per human judgement, for cost.json."
    ),
    batch_size: int | None = typer.Option(
        None, "--batch-size", min=1, help="Records per stored batch (default: 8 local, 32 × concurrency for APIs)."
    ),
    out_dir: Path | None = typer.Option(None, "--out", help="Run directory (default: runs/mcsqa-<lang>)."),
    resume: bool = typer.Option(False, "--resume", help="Continue the run in --out (settings from its manifest)."),
    store: str | None = StoreOption,
    run_store: str | None = typer.Option(
        None, "--run-store", help="SQLAlchemy URL of the run store (default: sqlite run.db in the run directory)."
    ),
) -> None:
    """Build an mCSQA-style benchmark: ConceptNet question sets → questions → Easy/Hard, splits."""
    from senseforge.pipelines.mcsqa.recipe import build, read_manifest
    from senseforge.store.db import Store

    given = _overrides(
        lang,
        n,
        all_sets,
        answers_per_set,
        seed,
        kb,
        model,
        stage_model,
        parse_options(option, base_url),
        style,
        verify_by,
        reviewers,
        lm_review_as_hard,
        review_k,
        batch_size,
    )
    if out_dir is None and lang is None:
        raise ConfigError("give --lang (or --out of the run to resume)")
    run_dir = out_dir or Path("runs") / f"mcsqa-{lang}"
    manifest = read_manifest(run_dir) if resume else None
    if resume and manifest is None:
        raise ConfigError(f"{run_dir}: no run to resume (no manifest.json); start it without --resume")
    config = _resolve(given, manifest)
    err.print(f"run: {run_dir} · lang: {config.lang} · model: {config.model}")
    summary = build(
        config,
        run_dir,
        resume=resume,
        store=Store(store),
        run_store_url=run_store,
        decisions=decisions or [],
        human_rate=human_rate,
        progress=progress_bar,
    )
    print_summary(summary)


def print_summary(summary: Any) -> None:
    """The funnel, the cost and where everything is."""
    if summary.state == "awaiting_review":
        err.print(
            f"{summary.awaiting} item(s) await human review (listed in {summary.run_dir / 'review' / 'queue.jsonl'}).\n"
            f"judge them in the app:  senseforge annotate serve {summary.run_dir}  (invite people with "
            f"senseforge annotate invite NAME {summary.run_dir}),\n"
            "or collect decisions as JSONL (item_id, annotator, task=verify, accept); then continue with\n"
            f"  senseforge build mcsqa --out {summary.run_dir} --resume [--decisions FILE]"
        )
        return
    funnel, cost = summary.funnel, summary.cost
    table = Table(title=f"mCSQA funnel ({funnel['lang']})")
    for column in ("stage", "in", "out", "rejected"):
        table.add_column(column, justify="right" if column in ("in", "out") else "left")
    for row in funnel["stages"]:
        reasons = ", ".join(f"{reason} {count}" for reason, count in row["rejected"].items())
        table.add_row(row["stage"], str(row["in"]), str(row["out"]), reasons)
    out.print(table)
    splits = " · ".join(f"{name} {c['easy']} easy / {c['hard']} hard" for name, c in funnel["splits"].items())
    out.print(f"kept {funnel['kept']} items: {splits}")
    share = funnel["refined"]["changed_share"]
    out.print(f"refinement changed {funnel['refined']['changed']} question(s)" + (f" ({share:.0%})" if share else ""))
    total, per = cost["total_usd"], cost["cost_per_kept_question_usd"]
    money = "unknown (unpriced model or human rate)" if total is None else f"${total:.6f}"
    per_item = "unknown" if per is None else f"${per:.6f}"
    out.print(f"cost: {money} · per kept question: {per_item}")
    ledger = summary.ledger
    if ledger:
        out.print(
            f"this run's calls: {ledger.get('calls', 0)} ({ledger.get('cache_hits', 0)} from cache), "
            f"{ledger.get('retried_calls', 0)} retried, {ledger.get('failed_calls', 0)} failed"
        )
    where = summary.run_dir
    out.print(f"dataset: {where / 'dataset'} · reports: {where / 'funnel.json'}, {where / 'cost.json'}")
