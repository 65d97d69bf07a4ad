"""``senseforge build RECIPE``: one subcommand per recipe, its options generated from the recipe's config.

Every field of a recipe's config model becomes ``--field-name`` (type, default and help
from the field); lists are comma-separated. Every recipe also takes ``--model/-m``,
``--stage-model STAGE=SPEC``, ``--option/-o KEY=VALUE``, ``--base-url``, ``--out``,
``--resume``, ``--config run.toml``, ``--set key=value``, ``--decisions``,
``--human-rate``, ``--store``, ``--run-store``, ``--wait`` and ``--poll``. The command only gathers what was
given; the library resolves the config (:func:`senseforge.pipelines.rundir.resolve_run`)
and runs the recipe.
"""

from __future__ import annotations

import inspect
import re
import shlex
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import typer
from click.core import ParameterSource
from rich.table import Table

from senseforge.cli._common import (
    BaseUrlOption,
    ProviderOptions,
    StoreOption,
    command_line,
    err,
    money,
    on_interrupt,
    out,
    parse_options,
    stage_progress,
)
from senseforge.cli._options import Fields, config_params, given
from senseforge.errors import ConfigError
from senseforge.pipelines.batchwait import POLL_S
from senseforge.pipelines.config import ReviewedConfig
from senseforge.pipelines.progress import ProgressSink, StageProgress
from senseforge.pipelines.recipe import Flag, ReadsTogether, Recipe
from senseforge.pipelines.recipes import dry_run_authors, recipes
from senseforge.runfolder import files

app = typer.Typer(help="Build a benchmark with a recipe (resumable).", no_args_is_help=True)


@app.callback(invoke_without_command=True)
def _recipes(
    ctx: typer.Context, list_: bool = typer.Option(False, "--list", help="List the recipes and exit.")
) -> None:
    """Build a benchmark with a recipe (resumable)."""
    if list_:
        for recipe in recipes().values():
            out.print(f"{recipe.name}\t{recipe.summary}")
        raise typer.Exit()
    if ctx.invoked_subcommand is None:
        out.print(ctx.get_help())


_SKIPPED = frozenset({"recipe", "stage_models", "model_options"})
"""Config fields with their own common flags (or none)."""


def _pairs(values: list[str] | None, flag: str) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for value in values or []:
        key, sep, spec = value.partition("=")
        if not sep or not key.strip() or not spec.strip():
            raise ConfigError(f"{flag} {value!r}: write stage=provider/model, e.g. {flag} verify=openai/gpt-4o")
        pairs[key.strip()] = spec.strip()
    return pairs


def _field_params(recipe: Recipe) -> tuple[list[inspect.Parameter], Fields]:
    """The generated options (the recipe's own fields first) and, per parameter name, ``(field, kind, flag)``."""
    model = recipe.config_model
    settings = model.settings()
    shared = list(ReviewedConfig.settings())  # the shared settings in their one order (human-gen's adjudicate too)
    ordered = [n for n in settings if n not in shared] + [n for n in shared if n in settings]
    flags = {
        "model": Flag(short="-m"),
        "registry": Flag(
            path=True, help="A contamination registry folder (`senseforge registry`) to check items against."
        ),
        **recipe.flags,
    }
    return config_params(settings, flags, ordered, skip=_SKIPPED | set(model.unused))


def _common_params(recipe: Recipe) -> list[inspect.Parameter]:
    stages = "|".join(recipe.config_model.lm_stages) or "STAGE"
    common: list[tuple[str, Any, Any]] = [
        (
            "stage_model",
            list[str] | None,
            typer.Option(None, "--stage-model", help=f"A stage's own model: {stages}=provider/model."),
        ),
        ("option", list[str] | None, ProviderOptions),
        ("base_url", str | None, BaseUrlOption),
        ("out_dir", Path | None, typer.Option(None, "--out", help=_out_help(recipe))),
        (
            "resume",
            bool,
            typer.Option(False, "--resume", help="Continue the run in --out (settings from its manifest)."),
        ),
        ("config_file", Path | None, typer.Option(None, "--config", help="A TOML run config (keys are the settings).")),
        (
            "sets",
            list[str] | None,
            typer.Option(None, "--set", help="A setting as key=value (JSON values); repeatable."),
        ),
        (
            "decisions",
            list[Path] | None,
            typer.Option(
                None,
                "--decisions",
                help="JSONL of people's judgements (item_id, annotator, task, the task's fields: accept for a review).",
            ),
        ),
        (
            "human_rate",
            str | None,
            typer.Option(
                None,
                "--human-rate",
                help="US dollars per human judgement, for cost.json: one rate (0.05), or one per task type "
                "(create=0.40,qc=0.10,revise=0.20,answer=0.05).",
            ),
        ),
        ("store", str | None, StoreOption),
        (
            "wait",
            bool,
            typer.Option(
                False,
                "--wait",
                help="With a Batch API (-o batch=true): wait for each stage's batch and go on by itself until the run "
                "is done or needs people (Ctrl-C stops waiting; --resume --wait goes on).",
            ),
        ),
        (
            "poll",
            float,
            typer.Option(
                POLL_S,
                "--poll",
                min=0.001,
                metavar="SECONDS",
                help="With --wait: seconds between checks of the batches (growing to ten times that while they run).",
            ),
        ),
        (
            "run_store",
            str | None,
            typer.Option(
                None, "--run-store", help="SQLAlchemy URL of the run store (default: sqlite run.db in the run)."
            ),
        ),
        (
            "executor",
            str,
            typer.Option(
                "local",
                "--executor",
                metavar="local|ray",
                help="Where model stages run: this process (local), or Ray tasks (ray; pip install 'senseforge[ray]').",
            ),
        ),
        (
            "ray_address",
            str | None,
            typer.Option(
                None,
                "--ray-address",
                help="With --executor ray: the cluster to join (auto, host:port, ray://…); default: a local Ray "
                "with this machine's cores.",
            ),
        ),
        (
            "replay",
            bool,
            typer.Option(
                True,
                "--replay/--no-replay",
                help="Store what a stage made of a record before as it is when the same record, stage settings, "
                "models and senseforge come again, its calls answered from the cache (the default); --no-replay "
                "runs every stage again.",
            ),
        ),
    ]
    if "model" in recipe.config_model.unused:  # a recipe that calls no model offers no model options
        skipped = ("stage_model", "option", "base_url", "store", "wait", "poll", "executor", "ray_address", "replay")
        common = [entry for entry in common if entry[0] not in skipped]
    return [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=d, annotation=a) for n, a, d in common]


def _out_help(recipe: Recipe) -> str:
    text = f"Run directory (default: runs/{recipe.name}-…)."
    if "lang" in recipe.config_model.model_fields:
        text += f" With several --lang, a name with {{lang}} in it, or a folder holding {recipe.name}-LANG runs."
    return text


def recipe_command(recipe: Recipe) -> Callable[..., None]:
    """The ``build <recipe>`` command, its options generated from the recipe's config."""
    field_params, fields = _field_params(recipe)

    def command(**values: Any) -> None:
        from senseforge.pipelines.outcomes import RunIncomplete
        from senseforge.pipelines.rundir import check_resume, resolve_run_manifest

        flags = given(values, fields)
        _join_executor(values)
        stage_models = _pairs(values.get("stage_model"), "--stage-model")
        if stage_models:
            flags["stage_models"] = stage_models
        options = parse_options(values.get("option"), values.get("base_url"))
        if options:
            flags["model_options"] = options
        resume = bool(values.get("resume"))
        runs: list[tuple[Any, Path, bool]] = []
        manifests: dict[Path, dict[str, Any] | None] = {}  # read once per run, by resolve_run_manifest
        languages = _each_language(recipe, flags, values.get("out_dir"))
        sources: dict[str, Any] = {"config_file": values.get("config_file"), "sets": values.get("sets") or []}
        for each, out_dir in languages:
            # several languages: --resume continues those begun and begins the others (the command names them all)
            this = resume and (len(languages) == 1 or _holds_run(recipe, each, out_dir, sources))
            config, run_dir, manifest = resolve_run_manifest(recipe, flags=each, out=out_dir, resume=this, **sources)
            # a refusal comes before the header, for every run
            manifests[run_dir] = check_resume(run_dir, config, resume=this, manifest=manifest)
            runs.append((config, run_dir, this))
        if len({run_dir.resolve() for _, run_dir, _ in runs}) < len(runs):
            raise ConfigError("two languages would share one run folder: give --out a name with {lang} in it")
        chosen = recipe
        fresh = [config for config, run_dir, this in runs if not (this and (run_dir / "manifest.json").is_file())]
        if len(fresh) > 1 and isinstance(recipe, ReadsTogether):
            with err.status(f"reading the inputs of {len(fresh)} runs in one pass …", spinner="dots"):
                chosen = recipe.together(fresh)
        unfinished: list[str] = []
        waiting: list[tuple[Any, Path, Any]] = []
        for config, run_dir, this in runs:
            try:
                summary = _build_one(
                    chosen,
                    config,
                    run_dir,
                    {**values, "resume": this},
                    several=len(runs) > 1,
                    manifest=manifests[run_dir],
                )
            except RunIncomplete as exc:
                if len(runs) == 1:
                    raise
                err.print(f"error: {run_dir}: {exc}", markup=False, soft_wrap=True)  # the other languages go on
                unfinished.append(str(run_dir))
                continue
            if values.get("wait") and summary.state == "awaiting_batch":
                waiting.append((config, run_dir, summary))
        if waiting:
            unfinished += _wait(chosen, waiting, values, alone=len(runs) == 1)
        if unfinished:
            raise RunIncomplete(
                f"{len(unfinished)} of {len(runs)} runs stopped with calls still failing ({', '.join(unfinished)}); "
                "run the same command with --resume"
            )

    params = field_params + _common_params(recipe)
    command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    command.__annotations__ = {p.name: p.annotation for p in params}
    command.__doc__ = recipe.summary
    command.__name__ = recipe.name.replace("-", "_")
    return command


def _join_executor(values: dict[str, Any]) -> None:
    """Check ``--executor`` and join the Ray it names (before any run starts).

    Raises:
        ConfigError: an unknown executor, or ``--ray-address`` without ``--executor ray``.
    """
    executor = values.get("executor") or "local"
    if executor not in ("local", "ray"):
        raise ConfigError(f"unknown executor {executor!r}: use local or ray")
    if values.get("ray_address") and executor != "ray":
        raise ConfigError("--ray-address needs --executor ray")
    if executor == "ray":
        from senseforge.cluster import runtime  # registers the ray executor

        cluster = runtime.connect(values.get("ray_address"))
        err.print(f"ray: {cluster.nodes} node(s), {cluster.cpus:g} CPU(s), {cluster.gpus:g} GPU(s)")


def _holds_run(recipe: Recipe, flags: dict[str, Any], out_dir: Path | None, sources: dict[str, Any]) -> bool:
    """Whether the run folder of one language of the command (``--out``, or the one its settings name) holds a
    run."""
    from senseforge.pipelines.rundir import resolve_run

    folder = out_dir if out_dir is not None else resolve_run(recipe, flags=flags, out=None, resume=False, **sources)[1]
    return (folder / "manifest.json").is_file()


def _again_with_resume() -> str | None:
    """This command line again with ``--resume`` (any password in it as ``PASSWORD``), or ``None`` when it is not
    known."""
    args = command_line()
    if args is None:
        return None
    shown = [_PASSWORD.sub(r"\1PASSWORD@", arg) for arg in args]
    if "--resume" not in shown:
        shown.append("--resume")
    note = " (with the store's password where PASSWORD stands)" if any(map(_PASSWORD.search, args)) else ""
    return f"`{shlex.join(['senseforge', *shown])}`{note}"


_PASSWORD = re.compile(r"(://[^:/@\s]*:)[^@\s]+@")
"""The password of a database URL (``scheme://user:password@host``)."""


def _build_one(
    recipe: Recipe,
    config: Any,
    run_dir: Path,
    values: dict[str, Any],
    *,
    several: bool = False,
    polled: bool = False,
    manifest: dict[str, Any] | None = None,
) -> Any:
    """Build (or resume) one run and print its summary; how it ended (``several``: one of the languages of one
    command).

    ``polled``: a resume of ``--wait``, silent until it gets somewhere (answers come, or the run stops waiting).
    ``manifest``: the run's manifest as the command read it (a resume), handed to the build.
    With ``--wait``, a run that waits for batches prints no summary: :func:`_wait` says what it waits for.
    """
    from senseforge.pipelines.rundir import read_manifest, resume_command, resume_note
    from senseforge.pipelines.runner import build
    from senseforge.store.db import Store

    judges = any(panel.judges for panel in config.panels().values())
    calls = bool(type(config).lm_stages or judges)  # human-gen calls no model
    header = f"run: {run_dir} · recipe: {recipe.name}" + (f" · model: {config.model}" if calls else "")
    if not polled:
        err.print(header)

    def resume_hint() -> str:
        again = _again_with_resume() if several else None
        if again is not None:  # the runs of the other languages, begun or not, go on with this one
            return f"continue with {again}"
        if (run_dir / "manifest.json").is_file():
            try:  # its stores: one whose password it does not keep is named, to fill in
                manifest = read_manifest(run_dir)
            except ConfigError:
                manifest = None
            return f"continue with `{resume_command(recipe.name, run_dir, manifest)}`{resume_note(manifest)}"
        return "nothing was stored yet: run the same command again"

    def waiting_hint() -> str:
        hint = resume_hint()
        return f"{hint} (add --wait to go on waiting for the batches)" if "--resume" in hint else hint

    on_interrupt(waiting_hint if values.get("wait") else resume_hint)
    store = _typed(values, "store")  # from the environment it is a default: a resume keeps the run's own
    summary = build(
        recipe,
        config,
        run_dir,
        resume=polled or bool(values.get("resume")),
        store=Store(store) if store else None,
        run_store_url=values.get("run_store"),
        decisions=[] if polled else values.get("decisions") or [],
        human_rate=human_rate(values.get("human_rate")),
        progress=_when_used(stage_progress) if polled else stage_progress,
        responders=dry_run_authors(),
        executor=values.get("executor") or "local",
        manifest=manifest,
        replay=values.get("replay", True),
    )
    if values.get("wait") and summary.state == "awaiting_batch":
        return summary
    if polled:
        err.print(header)
    print_summary(summary)
    return summary


def _wait(recipe: Recipe, waiting: list[tuple[Any, Path, Any]], values: dict[str, Any], *, alone: bool) -> list[str]:
    """``--wait``: resume the runs that wait for batches at the API, each time their batches may have been
    answered, until none does (see :mod:`senseforge.pipelines.batchwait`); the runs that stopped with calls still
    failing (one alone raises)."""
    from senseforge.pipelines.batchwait import wait_for_batches
    from senseforge.pipelines.outcomes import RunIncomplete
    from senseforge.pipelines.runner import BuildSummary

    unfinished: list[str] = []

    def resume(index: int) -> Any:
        config, run_dir, _ = waiting[index]
        try:
            return _build_one(recipe, config, run_dir, values, several=not alone, polled=True)
        except RunIncomplete as exc:
            if alone:
                raise
            err.print(f"error: {run_dir}: {exc}", markup=False, soft_wrap=True)  # the other languages go on
            unfinished.append(str(run_dir))
            return BuildSummary(run_dir, "incomplete", recipe=recipe.name)

    def say(line: str) -> None:
        err.print(line, markup=False, highlight=False, soft_wrap=True)

    wait_for_batches(
        [summary for _, _, summary in waiting], resume, poll_s=float(values["poll"]), say=say, sleep=_sleep
    )
    return unfinished


def _sleep(seconds: float) -> None:
    """How ``--wait`` waits between two checks (a test puts one here that finishes the batches instead)."""
    time.sleep(seconds)


def _when_used(sink: ProgressSink) -> ProgressSink:
    """A progress sink that shows a stage's pass only once something in it is counted: a ``--wait`` check that
    finds the batch still running prints nothing."""
    lock = threading.Lock()
    shown: set[str] = set()

    def lazy(event: StageProgress) -> None:
        with lock:
            if event.label not in shown:
                if not (event.done or event.queued or event.retry or event.requests):
                    return
                shown.add(event.label)
        sink(event)

    return lazy


def _typed(values: dict[str, Any], name: str) -> Any:
    """An option's value when given on the command line, not read from its environment variable."""
    ctx = click.get_current_context(silent=True)
    if ctx is not None and ctx.get_parameter_source(name) is ParameterSource.ENVIRONMENT:
        return None
    return values.get(name)


def _each_language(
    recipe: Recipe, flags: dict[str, Any], out_dir: Path | None
) -> list[tuple[dict[str, Any], Path | None]]:
    """The flags and ``--out`` of each run the command line asks for: one, or one per language of
    ``--lang a,b`` (``--out`` then a name with ``{lang}`` in it, or a folder holding ``RECIPE-LANG``;
    ``--source-lang`` then ``TAG=CODE`` pairs)."""
    lang = flags.get("lang")
    langs = [part.strip() for part in str(lang).split(",") if part.strip()] if isinstance(lang, str) else []
    if len(langs) < 2 or "lang" not in recipe.config_model.model_fields:
        return [(flags, out_dir)]
    codes = _language_codes(flags.get("source_lang"), langs)
    runs: list[tuple[dict[str, Any], Path | None]] = []
    for tag in dict.fromkeys(langs):
        each = {**flags, "lang": tag}
        if "source_lang" in flags:
            each["source_lang"] = codes.get(tag)
        if out_dir is None:
            runs.append((each, None))
        elif "{lang}" in str(out_dir):
            runs.append((each, Path(str(out_dir).replace("{lang}", tag))))
        else:
            runs.append((each, out_dir / f"{recipe.name}-{tag}"))
    return runs


def _language_codes(text: Any, langs: list[str]) -> dict[str, str]:
    """``--source-lang`` with several languages: ``TAG=CODE`` pairs, each tag one of ``--lang``'s."""
    if not text:
        return {}
    codes: dict[str, str] = {}
    for part in str(text).split(","):
        tag, sep, code = part.strip().partition("=")
        if not sep or not tag.strip() or not code.strip():
            raise typer.BadParameter(
                f"{part.strip()!r}: with several languages write TAG=CODE, e.g. id=ms", param_hint="--source-lang"
            )
        if tag.strip() not in langs:
            raise typer.BadParameter(
                f"{tag.strip()!r} is not one of --lang {','.join(langs)}", param_hint="--source-lang"
            )
        codes[tag.strip()] = code.strip()
    return codes


for _recipe in recipes().values():
    app.command(_recipe.name, help=_recipe.summary)(recipe_command(_recipe))


def human_rate(text: str | None) -> float | dict[str, float] | None:
    """``--human-rate``: one rate, or ``task=rate`` pairs separated by commas.

    Raises:
        typer.BadParameter: a rate that is not a number of dollars at least 0.
    """
    if text is None or not text.strip():
        return None

    def dollars(value: str, where: str) -> float:
        try:
            rate = float(value)
        except ValueError:
            message = f"{where}: {value!r} is not a number of dollars"
            raise typer.BadParameter(message, param_hint="--human-rate") from None
        if rate < 0 or rate != rate:
            raise typer.BadParameter(f"{where}: a rate is at least 0", param_hint="--human-rate")
        return rate

    if "=" not in text:
        return dollars(text.strip(), "rate")
    rates: dict[str, float] = {}
    for part in text.split(","):
        task, sep, value = part.partition("=")
        if not sep or not task.strip():
            raise typer.BadParameter(f"{part.strip()!r}: write TASK=RATE", param_hint="--human-rate")
        rates[task.strip()] = dollars(value.strip(), task.strip())
    return rates


def print_summary(summary: Any) -> None:
    """The funnel, the cost and where everything is (and, first, any diagnosis of the models' replies)."""
    for diagnosis in getattr(summary, "diagnoses", []):
        err.print(f"[yellow]warning:[/] {diagnosis}")
    if summary.state == "awaiting_batch":
        from senseforge.pipelines.batchwait import described

        err.print(
            f"the run waits for {len(summary.batches)} batch(es) at the API ({', '.join(summary.batches)}), "
            "answered within a day at half the price;\n"
            f"collect the answers and go on:  senseforge build {summary.recipe} --out {summary.run_dir} --resume\n"
            "(add --wait to keep checking and go on through every stage by itself)",
            markup=False,
        )
        for batch in getattr(summary, "open_batches", []):
            err.print(f"  {described(batch)}", markup=False, highlight=False)
        return
    if summary.state == "awaiting_review":
        tasks = ", ".join(f"{task} {n}" for task, n in summary.waiting_for.items())
        err.print(
            f"{summary.awaiting} item(s) wait for people (tasks queued: {tasks}; listed in "
            f"{summary.run_dir / files.REVIEW_QUEUE}).\n"
            f"people work in the app:  senseforge annotate serve {summary.run_dir}  (invite each with "
            f"senseforge annotate invite NAME {summary.run_dir}),\n"
            "or bring their judgements as JSONL (item_id, annotator, task, the task's fields: accept for a review);\n"
            f"then move the items on:  senseforge build {summary.recipe} --out {summary.run_dir} --resume "
            "[--decisions FILE]"
        )
        return
    funnel = summary.funnel
    table = Table(title=f"{summary.recipe} funnel" + (f" ({funnel.lang})" if funnel.lang else ""))
    for column in ("stage", "in", "out", "rejected"):
        table.add_column(column, justify="right" if column in ("in", "out") else "left")
    for row in funnel.stages:
        table.add_row(row.stage, str(row.in_), str(row.out), ", ".join(f"{why} {n}" for why, n in row.rejected.items()))
    out.print(table)
    for line in funnel.summary_lines():
        out.print(line, markup=False, highlight=False)
    cost = summary.cost
    spent = "unknown (unpriced model or human rate)" if cost.total_usd is None else money(cost.total_usd)
    per = cost.cost_per_kept_item_usd
    out.print(f"cost: {spent} · per kept {cost.kept_unit}: {'unknown' if per is None else money(per)}")
    ledger = summary.ledger
    if ledger:
        out.print(
            f"this run's calls: {ledger.get('calls', 0)} ({ledger.get('cache_hits', 0)} from cache), "
            f"{ledger.get('retried_calls', 0)} retried, {ledger.get('failed_calls', 0)} failed"
        )
    where = summary.run_dir
    written = [where / folder for folder in funnel.datasets if (where / folder).is_dir()]
    shown = ", ".join(str(folder) for folder in written) or "none (nothing was kept)"
    reports = ", ".join(str(where / name) for name in (files.FUNNEL, files.COST, files.REJECTS))
    out.print(f"dataset: {shown} · reports: {reports}")
