"""``senseforge annotate``: the human loop — serve the app, invite people, watch progress."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from senseforge.cli import annotate_interop, annotate_open
from senseforge.cli._common import RunDirArgument, StoreUrlOption, err, out, run_store_url, stat_text
from senseforge.errors import ConfigError, DataValidationError, MissingDependencyError

app = typer.Typer(help="Annotate a run in the browser: serve, invite, status, baseline.", no_args_is_help=True)


class _HideTokens(logging.Filter):
    """Keeps invite tokens out of the access log (``/login?token=…`` is a password)."""

    pattern = re.compile(r"(token=)[^&\s\"]+")

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(self.pattern.sub(r"\1…", a) if isinstance(a, str) else a for a in record.args)
        return True


def _invite_link(base_url: str, token: str) -> str:
    return f"{base_url.rstrip('/')}/login?token={token}"


@app.command("serve")
def serve(
    run_dir: Path = RunDirArgument,
    host: str = typer.Option("127.0.0.1", "--host", help="Interface to listen on (0.0.0.0: every interface)."),
    port: int = typer.Option(8000, "--port", min=1, max=65535, help="TCP port."),
    store: str | None = StoreUrlOption,
    lease: float = typer.Option(600.0, "--lease", min=1.0, help="Seconds an assignment stays reserved."),
    secure_cookies: bool = typer.Option(
        False, "--secure-cookies", help="Mark the session cookie Secure (when served over HTTPS behind a proxy)."
    ),
    access_log: bool = typer.Option(True, "--access-log/--no-access-log", help="Log every request."),
    follow: bool = typer.Option(
        False,
        "--follow",
        help="Move the run on by itself: when people's judgements let a waiting stage decide, resume it "
        "(`senseforge build RECIPE --out RUN_DIR --resume` as a child process, one at a time). Opt-in: a resume "
        "runs the recipe's model stages, which can spend API money.",
    ),
    settle: float = typer.Option(
        10.0,
        "--settle",
        min=0.0,
        help="With --follow: seconds the judgements must stay unchanged before a resume (an undo within it waits "
        "again).",
    ),
) -> None:
    """Serve the annotation app over the run store (invite people with `senseforge annotate invite`)."""
    try:
        import uvicorn

        from senseforge.annotate.app import create_app
    except ImportError as exc:
        raise MissingDependencyError(
            f"the annotation app needs {exc.name or 'starlette'}: pip install 'senseforge[annotate]'"
        ) from exc
    from senseforge.annotate.store import AnnotationStore

    url = run_store_url(run_dir, store)
    annotation = AnnotationStore(url)
    try:
        people = annotation.annotator_names()
        queued = {name: row["tasks"] for name, row in annotation.progress()["tasks"].items()}
    finally:
        annotation.close()
    base = f"http://{'127.0.0.1' if host in ('0.0.0.0', '::') else host}:{port}"
    tasks = ", ".join(f"{name} {count}" for name, count in queued.items()) or "none queued yet"
    err.print(f"serving {run_dir} at {base}  (tasks: {tasks}; {len(people)} annotator(s))", markup=False)
    err.print(f"invite someone:  senseforge annotate invite NAME {run_dir} --base-url {base}  [--admin]", markup=False)
    follower = None
    if follow:
        from senseforge.annotate.follow import Follower

        follower = Follower(run_dir, url, run_store=store, settle_s=settle)
        err.print(
            f"following: the run is resumed by itself {settle:g} s after judgements let a stage decide "
            f"(`{follower.shown}`; each resume can spend API money)",
            markup=False,
        )
    config = uvicorn.Config(
        create_app(
            url,
            lease_s=lease,
            secure_cookies=secure_cookies,
            follower=follower,
            run_state=_run_state(run_dir, store),
        ),
        host=host,
        port=port,
        access_log=access_log,
        log_level="info",
    )
    logging.getLogger("uvicorn.access").addFilter(_HideTokens())  # after Config has set up uvicorn's logging
    uvicorn.Server(config).run()


def _run_state(run_dir: Path, store: str | None) -> Callable[[], dict[str, Any]] | None:
    """Where the run stands (``runs show``'s status as JSON values) for the admin page; ``None`` without a run
    folder (a task queue served on its own)."""
    from senseforge.pipelines.status import run_status
    from senseforge.runfolder import files

    if not (run_dir / files.MANIFEST).is_file():
        return None

    def state() -> dict[str, Any]:
        status = run_status(run_dir, run_store_url=store, failures=1)
        return status.model_dump(mode="json", include={"state", "batches", "causes", "heartbeat"})

    return state


@app.command("invite")
def invite(
    name: str = typer.Argument(..., help="The annotator's name (inviting a name again replaces their link)."),
    run_dir: Path = RunDirArgument,
    admin: bool = typer.Option(False, "--admin", help="May see progress, agreement and exports."),
    base_url: str = typer.Option(
        "http://127.0.0.1:8000", "--base-url", help="Where people reach the app (as `annotate serve` printed it)."
    ),
    store: str | None = StoreUrlOption,
    lang: str | None = typer.Option(
        None,
        "--lang",
        help="The language of their pages (en, id, …: the app's catalogues); they can switch it on the page. "
        "Re-inviting without it keeps theirs.",
    ),
) -> None:
    """Create an annotator and print their invite link (shown once; the store keeps only a hash)."""
    from senseforge.annotate.i18n import check_language
    from senseforge.annotate.store import AnnotationStore

    if lang is not None:
        check_language(lang)  # before the store is touched: an unknown language lists the known ones
    annotation = AnnotationStore(run_store_url(run_dir, store))
    try:
        token = annotation.invite(name, "admin" if admin else "annotator", lang)
        short = annotation.short_of_people()
    finally:
        annotation.close()
    for row in short:  # still too few people for what is queued
        err.print(f"warning: {row['message']}", markup=False)
    said = f", pages in {lang}" if lang else ""
    err.print(
        f"invited {name} as {'admin' if admin else 'annotator'}{said}; send them this link (it is their password):"
    )
    out.print(_invite_link(base_url, token), markup=False)


def _progress_table(progress: dict[str, Any]) -> tuple[Table, Table]:
    tasks = Table(title="task types")
    for column in ("task type", "tasks", "complete", "judgements"):
        tasks.add_column(column, justify="left" if column == "task type" else "right")
    for name, row in sorted(progress["tasks"].items()):
        tasks.add_row(name, str(row["tasks"]), str(row["complete"]), f"{row['done']} / {row['wanted']}")
    people = Table(title="annotators")
    for column in ("annotator", "task type", "done", "open"):
        people.add_column(column, justify="right" if column in ("done", "open") else "left")
    for name, per_type in sorted(progress["annotators"].items()):
        for task_type, row in sorted(per_type.items()):
            people.add_row(name, task_type, str(row["done"]), str(row["open"]))
    return tasks, people


def _casts_votes(task_type: str) -> bool:
    """Whether judgements of this type vote (create and revise write drafts: no agreement to measure)."""
    from senseforge.data.schema import JUDGEMENTS

    body = JUDGEMENTS.bodies().get(task_type)
    return body is not None and body.vote_kind is not None


def _agreement_table(agreement: dict[str, dict[str, Any] | None]) -> Table:
    table = Table(title="agreement")
    for column in ("task type", "items", "ratings", "Fleiss κ", "Krippendorff α"):
        table.add_column(column, justify="left" if column == "task type" else "right")
    for name, row in sorted(agreement.items()):
        if row is None:
            table.add_row(name, "", "", "n/a", "n/a")
        else:
            table.add_row(
                name,
                str(row["items"]),
                str(row["ratings"]),
                stat_text(row["fleiss_kappa"]),
                stat_text(row["krippendorff_alpha"]),
            )
    return table


def _qc_table(counts: dict[str, int]) -> Table:
    table = Table(title="QC queue")
    table.add_column("state")
    table.add_column("items", justify="right")
    for state, n in counts.items():
        table.add_row(state, str(n))
    return table


@app.command("status")
def status(
    run_dir: Path = RunDirArgument,
    store: str | None = StoreUrlOption,
    as_json: bool = typer.Option(False, "--json", help="Print everything as one JSON object."),
) -> None:
    """Progress per task type and per annotator, agreement per task type, and the QC queue when there is one.

    Agreement (Fleiss' kappa, Krippendorff's nominal alpha) is over the items with two or
    more human votes; "n/a" where it is undefined, and for create and revise, whose
    judgements cast no vote. With --json: the keys tasks, annotators, agreement (null for a
    type that casts no vote) and qc (null without qc tasks; else its counts and items).
    """
    from dataclasses import asdict

    from senseforge.annotate.store import AnnotationStore
    from senseforge.annotate.tasktypes import TASK_TYPES
    from senseforge.evaluate.policies import agreement as agreement_of

    annotation = AnnotationStore(run_store_url(run_dir, store))
    try:
        progress = annotation.progress()
        agreement = {
            name: asdict(agreement_of(annotation.judgements(name), name)) if _casts_votes(name) else None
            for name in progress["tasks"]
        }
        checked = any(name in TASK_TYPES and TASK_TYPES[name].checks_drafts for name in progress["tasks"])
        qc = annotation.qc_queue() if checked else None
        gold = annotation.gold_report()
    finally:
        annotation.close()
    if as_json:
        report = {**progress, "agreement": agreement, "qc": qc, "gold": gold}
        typer.echo(json.dumps(report, ensure_ascii=False, indent=2, sort_keys=True))
        return
    if not progress["tasks"]:
        out.print(f"{run_dir}: no annotation tasks queued", markup=False)
        return
    for table in _progress_table(progress):
        out.print(table)
    out.print(_agreement_table(agreement))
    if qc is not None:
        out.print(_qc_table(qc["counts"]))
    if gold:
        table = Table(title="gold items")
        for column in ("annotator", "task type", "gold", "right", "accuracy", "counts"):
            table.add_column(column, justify="right" if column in ("gold", "right", "accuracy") else "left")
        for who, per_type in gold.items():
            for task_type, row in per_type.items():
                counts = "no: below the bar" if row["excluded"] else "yes"
                table.add_row(who, task_type, str(row["gold"]), str(row["correct"]), stat_text(row["accuracy"]), counts)
        out.print(table)


@app.command("baseline")
def baseline(
    run_dir: Path = RunDirArgument,
    n: int = typer.Option(100, "--n", min=1, help="Items sampled per split."),
    k: int = typer.Option(5, "--k", min=1, help="Blind answers per item."),
    seed: int = typer.Option(0, "--seed", help="Seed of the sample."),
    exclude_ambiguous: int | None = typer.Option(
        3, "--exclude-ambiguous", help="Drop items more than this many annotators flagged ambiguous (-1: keep all)."
    ),
    store: str | None = StoreUrlOption,
) -> None:
    """Queue a human baseline (blind answering, k people per item); once answered, report human accuracy."""
    from senseforge.annotate.baseline import baseline_report, queue_baseline
    from senseforge.annotate.store import AnnotationStore

    annotation = AnnotationStore(run_store_url(run_dir, store))
    try:
        queued = queue_baseline(annotation, run_dir, n=n, k=k, seed=seed)
        if any(queued.values()):
            counts = ", ".join(f"{split} {count}" for split, count in queued.items())
            err.print(f"queued for blind answering, {k} people each: {counts}; run this again for the report")
        invited = annotation.annotator_names()
        if k > len(invited):  # no item can get k answers: the report would say "answered 0" for ever
            err.print(
                f"warning: --k {k} asks {k} different people to answer each item, but {len(invited)} "
                f"{'is' if len(invited) == 1 else 'are'} invited{' (' + ', '.join(invited) + ')' if invited else ''}: "
                f"invite {k - len(invited)} more (senseforge annotate invite NAME {run_dir}) or run this with a "
                f"lower --k (items already queued keep the k they were queued with)",
                markup=False,
            )
        report = baseline_report(
            annotation,
            run_dir,
            exclude_ambiguous=None if exclude_ambiguous is not None and exclude_ambiguous < 0 else exclude_ambiguous,
            seed=seed,
        )
    finally:
        annotation.close()
    if report["splits"]:  # beside the run's results, for senseforge report
        from senseforge.data.io import atomic_open

        with atomic_open(run_dir / "human_baseline.json") as handle:
            handle.write(json.dumps(report, indent=2, sort_keys=True) + "\n")
    table = Table(title=f"human baseline · {run_dir.name} (majority of {k})")
    for column in ("split", "queued", "answered", "excluded", "human acc", "95% CI"):
        table.add_column(column, justify="left" if column == "split" else "right")
    for split, row in report["splits"].items():
        acc = "—" if row["human_acc"] is None else f"{row['human_acc']:.3f}"
        ci = row["human_acc_ci95"]
        table.add_row(
            split,
            str(row["queued"]),
            str(row["complete"]),
            str(row["excluded"]),
            acc,
            "" if ci is None else f"[{ci[0]:.3f}, {ci[1]:.3f}]",
        )
    out.print(table)
    for model in report["models"]:
        out.print(f"model {model['model']} on {model['task']}: acc {model['acc']:.3f} (n={model['n']})", markup=False)


@app.command("gold")
def gold(
    run_dir: Path = RunDirArgument,
    task_type: str = typer.Option(..., "--type", help="The task type the gold items belong to (one that votes)."),
    file: Path | None = typer.Argument(
        None,
        help='Gold items: JSONL of {"input": …, "expected": {fields a right judgement posts}}; for verify and '
        "answer also any dataset senseforge eval reads (each item's marked answer is the right one).",
    ),
    rate: float | None = typer.Option(
        None, "--rate", min=0.0, max=0.99, help="Share of the tasks served that are gold."
    ),
    min_accuracy: float | None = typer.Option(
        None, "--min-accuracy", min=0.0, max=1.0, help="Below this accuracy an annotator's judgements do not count."
    ),
    min_gold: int | None = typer.Option(None, "--min-gold", min=1, help="Gold items done before the bar applies (5)."),
    qualify: float | None = typer.Option(
        None,
        "--qualify",
        min=0.01,
        max=1.0,
        help="Make the gold items a qualification: served first, all of them, and only those who get at least "
        "this share right are served the type's real tasks (CRoW: 0.8).",
    ),
    store: str | None = StoreUrlOption,
) -> None:
    """Mix gold items (known answers) into a task type's queue and set the accuracy bar.

    Each annotator is served gold items of the type at `--rate` (never the same one twice)
    while real work is left; their accuracy shows in `annotate status` and on the admin
    page. An annotator below `--min-accuracy` on at least `--min-gold` of them has every
    judgement of the type left out of decisions (the build, on `--resume`, drops them),
    and gets no more tasks of it. Create and revise cast no vote, so they have no gold.
    """
    from senseforge.annotate.store import AnnotationStore
    from senseforge.annotate.tasktypes import TASK_TYPES
    from senseforge.pipelines.quality import set_quality

    if task_type not in TASK_TYPES:
        raise ConfigError(f"unknown task type {task_type!r}: one of {', '.join(TASK_TYPES)}")
    entries = _gold_entries(file, task_type) if file is not None else []
    annotation = AnnotationStore(run_store_url(run_dir, store))
    try:
        added = annotation.add_gold(task_type, entries) if entries else 0
        settings = set_quality(
            annotation.runs,
            task_type=task_type,
            rate=rate,
            min_accuracy=min_accuracy,
            min_gold=min_gold,
            qualify=qualify,
        )
    finally:
        annotation.close()
    share = settings.rates.get(task_type, 0.0)
    bar = (
        "no accuracy bar"
        if settings.min_accuracy is None
        else (f"judgements below {settings.min_accuracy:.2f} accuracy on {settings.min_gold}+ gold items do not count")
    )
    test = settings.qualify.get(task_type)
    if test is not None:
        bar += f"; a qualification: all of them first, real tasks only at {test:.2f} right or more"
    out.print(f"{added} gold {task_type} item(s) added; served at a rate of {share:.2f}; {bar}", markup=False)


def _gold_entries(path: Path, task_type: str) -> list[tuple[Any, dict[str, Any]]]:
    """(input, expected fields) from a gold file (see ``annotate gold --help``)."""
    from pydantic import ValidationError

    from senseforge.annotate.tasktypes import TASK_TYPES
    from senseforge.data.io import format_validation_error, iter_json_rows
    from senseforge.data.loaders import load_dataset

    model = TASK_TYPES[task_type].input_model
    rows = list(iter_json_rows(path)) if path.suffix.lower() == ".jsonl" else []
    if rows and all("input" in row and "expected" in row for _, row in rows):
        entries: list[tuple[Any, dict[str, Any]]] = []
        for number, row in rows:
            try:
                entries.append((model.model_validate(row["input"]), dict(row["expected"])))
            except (ValidationError, TypeError, ValueError) as exc:
                detail = format_validation_error(exc) if isinstance(exc, ValidationError) else str(exc)
                raise DataValidationError(f"{path}:{number}: {detail}") from None
        return entries
    if task_type not in ("verify", "answer"):
        raise ConfigError(f"{path}: gold {task_type} items are JSONL rows of input and expected fields")
    items = load_dataset(path).items
    missing = [item.id for item in items if item.answer is None]
    if missing:
        raise DataValidationError(f"{path}: gold items need their answer ({missing[0]} has none)")
    expected = {"accept": "yes"} if task_type == "verify" else None
    return [(item, expected or {"choice": item.answer, "certain": "yes"}) for item in items]


# the commands of their own modules, listed after this module's
app.command("export")(annotate_interop.export_tasks)
app.command("import")(annotate_interop.import_judgements)
app.command("open-judge")(annotate_open.open_judge)
app.command("open-agreement")(annotate_open.open_agreement)
