"""``senseforge annotate export`` / ``import``: tasks out to Label Studio or Argilla, annotations back."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

import typer

from senseforge.cli._common import RunDirArgument, StoreUrlOption, err, out, run_store_url
from senseforge.errors import ConfigError, DataValidationError


class InteropFormat(StrEnum):
    """The annotation tools `annotate export` writes for and `annotate import` reads from."""

    label_studio = "label-studio"
    argilla = "argilla"


FormatOption = typer.Option(
    ..., "--format", help="label-studio (tasks JSON + labeling config) or argilla (2.x settings + records)."
)


def _task_types_help() -> str:
    """The ``--type`` help, from the registry of task types (every one travels to both tools)."""
    from senseforge.annotate.tasktypes import TASK_TYPES

    *rest, last = TASK_TYPES
    return f"Task type: {', '.join(rest)} or {last}."


TaskTypeOption = typer.Option(..., "--type", help=_task_types_help())


def _known_task_type(name: str) -> str:
    from senseforge.annotate.tasktypes import TASK_TYPES

    if name not in TASK_TYPES:
        raise ConfigError(f"--type {name!r}: one of {', '.join(TASK_TYPES)}")
    return name


def export_tasks(
    run_dir: Path = RunDirArgument,
    fmt: InteropFormat = FormatOption,
    task_type: str = TaskTypeOption,
    out_dir: Path = typer.Option(..., "--out", help="Folder to write the files into (created when missing)."),
    every: bool = typer.Option(False, "--all", help="Every task of the type, not only those still short of k."),
    check: bool = typer.Option(
        False, "--check", help="Validate the files with the tool's own package (installed by the interop extra)."
    ),
    store: str | None = StoreUrlOption,
) -> None:
    """Write a task type's tasks for Label Studio or Argilla 2.x (by default the open ones: fewer judgements than k).

    label-studio: tasks.json (import it into a project) and label_config.xml (the
    project's labeling interface). argilla: settings.json (rg.Settings.from_json) and
    records.json (rg.Record.from_dict on each). Each task carries its input, so
    `annotate import` needs nothing else. The files are plain JSON and XML: writing them
    needs neither tool installed; --check does.
    """
    from senseforge.annotate import interop
    from senseforge.annotate.store import AnnotationStore
    from senseforge.pipelines.quality import GOLD_GROUP, excluded_annotators

    name = _known_task_type(task_type)
    annotation = AnnotationStore(run_store_url(run_dir, store))
    try:
        # gold tasks check the app's annotators and stay there; judgements of people below the bar count for nobody
        queued = [(task, k) for task, k, group in annotation.inputs(name) if group != GOLD_GROUP]
        below = excluded_annotators(annotation.runs).get(name, frozenset())
        judged = {
            item: sum(j.annotator not in below for j in made) for item, made in annotation.judgements(name).items()
        }
    finally:
        annotation.close()
    wanted = [(task, k - judged.get(str(getattr(task, "id")), 0)) for task, k in queued]  # noqa: B009 — inputs have ids
    chosen = [(task, missing) for task, missing in wanted if every or missing > 0]
    inputs = [task for task, _ in chosen]
    if fmt is InteropFormat.label_studio:
        tasks, config = interop.label_studio_export(name, inputs)
        problems = interop.check_label_studio(tasks, config) if check else []
        how = "import tasks.json into a Label Studio project whose labeling interface is label_config.xml"
    else:
        min_submitted = max((missing for _, missing in chosen), default=1)
        settings, records = interop.argilla_export(name, inputs, min_submitted=min_submitted)
        problems = interop.check_argilla(settings, records) if check else []
        how = "rg.Settings.from_json('settings.json'), then log [rg.Record.from_dict(r) for r in records.json]"
    for problem in problems:
        err.print(f"check: {problem}", markup=False)
    if problems:
        raise DataValidationError(f"{fmt.value} finds {len(problems)} problem(s) in the export; nothing written")
    if fmt is InteropFormat.label_studio:
        paths = interop.write_label_studio(out_dir, name, inputs)
    else:
        paths = interop.write_argilla(out_dir, name, inputs, min_submitted=min_submitted)
    which = "every" if every else "open"
    err.print(f"{len(inputs)} {which} {name} task(s) of {len(queued)} → {', '.join(map(str, paths))}", markup=False)
    command = f"senseforge annotate import {run_dir} --format {fmt.value} --type {name} FILE"
    err.print(f"next: {how}; then `{command}`", markup=False)


def import_judgements(
    run_dir: Path = RunDirArgument,
    file: Path = typer.Argument(..., help="The tool's export: Label Studio JSON, or Argilla records JSON."),
    fmt: InteropFormat = FormatOption,
    task_type: str = TaskTypeOption,
    prefix: str | None = typer.Option(
        None, "--annotator-prefix", help="Put before each tool user's name (default ls: or argilla:)."
    ),
    annotator_map: Path | None = typer.Option(
        None, "--annotator-map", help="JSON object: a tool user (email, username or id) → our annotator name."
    ),
    store: str | None = StoreUrlOption,
) -> None:
    """Store the judgements in a Label Studio or Argilla export (as human judgements; importing again changes nothing).

    Each annotation goes through the task type's checks, as a submission in the app does;
    one that fails them is listed with where it is and why, and the rest are stored.
    Skipped (Label Studio) and draft or discarded (Argilla) answers are left out. Argilla:
    export with records.to_list(flatten=True), which keeps each response's status.
    Annotators are named <prefix><email, username or id> unless --annotator-map names them.
    """
    from senseforge.annotate import interop
    from senseforge.annotate.store import AnnotationStore

    name = _known_task_type(task_type)
    names: dict[str, str] | None = None
    if annotator_map is not None:
        given = interop.read_export(annotator_map)
        if not isinstance(given, dict):
            raise ConfigError(f"--annotator-map {annotator_map}: expected a JSON object of tool user → annotator")
        names = {str(k): str(v) for k, v in given.items()}
    exported = interop.read_export(file)
    annotation = AnnotationStore(run_store_url(run_dir, store))
    try:
        if fmt is InteropFormat.label_studio:
            result = interop.label_studio_import(
                name, exported, annotation, prefix=interop.LABEL_STUDIO_PREFIX if prefix is None else prefix,
                names=names,
            )  # fmt: skip
        else:
            result = interop.argilla_import(
                name, exported, annotation, prefix=interop.ARGILLA_PREFIX if prefix is None else prefix, names=names
            )
        changed = annotation.store_imported(result.judgements)
    finally:
        annotation.close()
    for rejection in result.rejected:
        err.print(f"rejected: {file}: {rejection}", markup=False)
    out.print(
        f"{len(result.judgements)} {name} judgement(s) stored ({changed} new or changed, "
        f"{len(result.judgements) - changed} already there); {result.skipped} skipped; "
        f"{len(result.rejected)} rejected",
        markup=False,
    )
