"""``senseforge annotate open-judge`` / ``open-agreement``: people judge open answers, beside the LM judge."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from senseforge.cli._common import RunDirArgument, StoreUrlOption, err, out, run_store_url, stat_text
from senseforge.errors import ConfigError

OPEN_JUDGE = "open-judge"
EvalDirArgument = typer.Argument(..., help="An eval output folder (or one above several): its samples.jsonl files.")


def _open_samples(eval_dir: Path) -> dict[str, list[Any]]:
    """The ``open`` samples under ``eval_dir`` with a free answer and a gold, per evaluated model.

    The model is the one its ``results.json`` names (else the folder's name); folders of the
    same model are read together.
    """
    from senseforge.evaluate.records import MCSample, read_results, read_samples

    files = sorted(eval_dir.rglob("samples.jsonl")) if eval_dir.is_dir() else []
    if not files:
        raise ConfigError(f"{eval_dir}: no samples.jsonl here; point at the --out folder of `senseforge eval run`")
    per_model: dict[str, list[Any]] = {}
    for file in files:
        folder = file.parent
        model = read_results(folder).model.name if (folder / "results.json").is_file() else folder.name
        samples = [
            s
            for s in read_samples(file)
            if isinstance(s, MCSample) and s.response is not None and s.gold is not None and s.gold in s.labels
        ]
        if samples:
            per_model.setdefault(model, []).extend(samples)
    return per_model


def open_judge(
    run_dir: Path = RunDirArgument,
    eval_dir: Path = EvalDirArgument,
    k: int = typer.Option(2, "--k", min=1, help="People per (item, model)."),
    store: str | None = StoreUrlOption,
) -> None:
    """Queue people to grade the free answers of an `eval run --formulation open` (one task per item and model).

    Each task shows the question, the reference answer (the gold option's text) and the
    model's answer, never the LM judge's verdict; compare the two with `annotate open-agreement`.
    RUN_DIR need not exist: it is created, with its run.db, for these tasks alone.
    """
    from senseforge.annotate.store import AnnotationStore
    from senseforge.data.schema import OpenAnswer
    from senseforge.pipelines.taskqueue import QueuedTask

    per_model = _open_samples(eval_dir)
    if store is None:
        run_dir.mkdir(parents=True, exist_ok=True)  # a fresh folder holds only the people's tasks
    queued = [
        QueuedTask(
            type=OPEN_JUDGE,
            input=OpenAnswer(
                id=f"{sample.id}::{model}",
                item_id=sample.id,
                model=model,
                lang=sample.lang,
                question=sample.prompt,
                gold=sample.choices[sample.labels.index(sample.gold)],
                answer=sample.response,
            ),
            k=k,
            group=OPEN_JUDGE,
        )
        for model, samples in per_model.items()
        for sample in samples
    ]
    annotation = AnnotationStore(run_store_url(run_dir, store))
    try:
        new = annotation.queue(queued)
    finally:
        annotation.close()
    models = ", ".join(f"{model} {len(samples)}" for model, samples in per_model.items()) or "none"
    out.print(
        f"{new} new {OPEN_JUDGE} task(s) queued ({len(queued) - new} already there), {k} people each; "
        f"answers per model: {models}",
        markup=False,
    )


def open_agreement(
    run_dir: Path = RunDirArgument,
    eval_dir: Path = EvalDirArgument,
    out_file: Path | None = typer.Option(
        None, "--out", help="Where to write the report as JSON (default EVAL_DIR/open_agreement.json)."
    ),
    store: str | None = StoreUrlOption,
) -> None:
    """Per model: people's accuracy on the free answers, the LM judge's on the same items, and how they agree.

    People's decision on an answer is the majority of their verdicts (a tie goes to the
    verdict given first); annotators below a gold accuracy bar do not count. Agreement is
    the share of items where the judge's verdict is the people's decision, with Cohen's kappa.
    """
    from senseforge.annotate.store import AnnotationStore
    from senseforge.data.io import atomic_open
    from senseforge.data.schema import OpenJudgeJudgement
    from senseforge.evaluate.judge import judge_agreement
    from senseforge.pipelines.quality import excluded_annotators

    per_model = _open_samples(eval_dir)
    annotation = AnnotationStore(run_store_url(run_dir, store))
    try:
        below = excluded_annotators(annotation.runs).get(OPEN_JUDGE, frozenset())
        verdicts = {
            task_id: [j.verdict for j in made if isinstance(j, OpenJudgeJudgement) and j.annotator not in below]
            for task_id, made in annotation.judgements(OPEN_JUDGE).items()
        }
    finally:
        annotation.close()
    models = {
        model: judge_agreement(samples, {s.id: verdicts.get(f"{s.id}::{model}", []) for s in samples})
        for model, samples in per_model.items()
    }
    table = Table(title=f"LM judge vs people · {eval_dir.name}")
    for column in ("model", "items", "human acc", "judge acc", "agreement", "Cohen κ", "undecided"):
        table.add_column(column, justify="left" if column == "model" else "right")
    for model, row in models.items():
        table.add_row(
            model,
            str(row["items"]),
            stat_text(row["human_acc"]),
            stat_text(row["judge_acc"]),
            stat_text(row["agreement"]),
            stat_text(row["kappa"]),
            str(row["undecided"]),
        )
    out.print(table)
    destination = out_file or eval_dir / "open_agreement.json"
    with atomic_open(destination) as handle:
        json.dump({"eval_dir": str(eval_dir), "models": models}, handle, ensure_ascii=False, indent=2, sort_keys=True)
        handle.write("\n")
    err.print(f"wrote {destination}", markup=False)
