"""``senseforge build RECIPE``: one subcommand per recipe, its options generated from the recipe's config.

Every field of a recipe's config model becomes ``--field-name`` (type, default and help
from the field); lists are comma-separated. Every recipe also takes ``--model/-m``,
``--stage-model STAGE=SPEC``, ``--option/-o KEY=VALUE``, ``--base-url``, ``--out``,
``--resume``, ``--config run.toml``, ``--set key=value``, ``--decisions``,
``--human-rate``, ``--store`` and ``--run-store``. The command only gathers what was
given; the library resolves the config (:func:`senseforge.pipelines.runner.resolve_run`)
and runs the recipe.
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer
from pydantic.fields import FieldInfo
from rich.table import Table

from senseforge.cli._common import (
    BaseUrlOption,
    ProviderOptions,
    StoreOption,
    err,
    money,
    on_interrupt,
    out,
    parse_options,
    plural,
    progress_bar,
)
from senseforge.errors import ConfigError
from senseforge.pipelines.config import RecipeConfig
from senseforge.pipelines.recipe import Flag, Recipe
from senseforge.pipelines.registry import dry_run_authors, recipes

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


def _kind(annotation: Any) -> tuple[str, type]:
    """How a field is read from the command line: ``(kind, click type)``."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType) and len(args) == 1:
        return _kind(args[0])
    if annotation is bool:
        return "bool", bool
    if annotation in (int, float, str):
        return "scalar", annotation
    if origin is typing.Literal:
        return "choice", str
    if origin in (tuple, list):
        return "list", str
    return "skip", str


def _describe(name: str, info: FieldInfo, flag: Flag, kind: str) -> str:
    text = flag.help or " ".join((info.description or name.replace("_", " ")).split()).replace("``", "")
    if kind == "choice":
        text += " One of: " + ", ".join(map(str, typing.get_args(info.annotation))) + "."
    if kind == "list":
        text += " Repeatable." if flag.repeat else " Comma-separated."
    default = info.get_default(call_default_factory=True)
    if default not in (None, (), [], {}) and not info.is_required():
        shown = ", ".join(map(str, default)) if isinstance(default, tuple | list) else default  # wraps at commas
        text += f" (default: {shown})"
    return text


def _field_params(recipe: Recipe) -> tuple[list[inspect.Parameter], dict[str, tuple[str, str, Flag]]]:
    """The generated options and, per parameter name, ``(field, kind, flag)``."""
    params: list[inspect.Parameter] = []
    fields: dict[str, tuple[str, str, Flag]] = {}
    model = recipe.config_model
    shared = set(RecipeConfig.model_fields)
    ordered = [n for n in model.model_fields if n not in shared] + [n for n in model.model_fields if n in shared]
    for name in ordered:
        info = model.model_fields[name]
        if name in _SKIPPED or name in model.unused:
            continue
        flag = recipe.flags.get(name, Flag())
        kind, click_type = _kind(info.annotation)
        if kind == "skip":
            continue
        long = "--" + name.replace("_", "-")
        help_text = _describe(name, info, flag, kind)
        aliases = [f"{n}/--no-{n.removeprefix('--')}" for n in flag.aliases] if kind == "bool" else []
        names = [f"{long}/--no-{long.removeprefix('--')}"] if kind == "bool" else [long, *flag.aliases]
        if aliases:  # a switch's aliases go in their own hidden option: four names overflow a help line
            help_text = f"{help_text} Also {', '.join(flag.aliases)}."
        if name == "model":
            names.append("-m")
        elif flag.short:
            names.append(flag.short)
        option = typer.Option(None, *names, help=help_text)
        annotation = (bool | None) if kind == "bool" else (click_type | None)
        if kind == "list" and flag.repeat:
            annotation = list[str] | None
        params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=option, annotation=annotation))
        fields[name] = (name, kind, flag)
        if aliases:
            alias = typer.Option(None, *aliases, hidden=True)
            params.append(
                inspect.Parameter(
                    f"_alias_{name}", inspect.Parameter.KEYWORD_ONLY, default=alias, annotation=bool | None
                )
            )
            fields[f"_alias_{name}"] = (name, kind, flag)
        if flag.none_flag:
            none_name = f"_none_{name}"
            params.append(
                inspect.Parameter(
                    none_name,
                    inspect.Parameter.KEYWORD_ONLY,
                    default=typer.Option(False, flag.none_flag, help=flag.none_help),
                    annotation=bool,
                )
            )
            fields[none_name] = (name, "none", flag)
    return params, fields


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
        ("out_dir", Path | None, typer.Option(None, "--out", help=f"Run directory (default: runs/{recipe.name}-…).")),
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
            "run_store",
            str | None,
            typer.Option(
                None, "--run-store", help="SQLAlchemy URL of the run store (default: sqlite run.db in the run)."
            ),
        ),
    ]
    if "model" in recipe.config_model.unused:  # a recipe that calls no model offers no model options
        common = [entry for entry in common if entry[0] not in ("stage_model", "option", "base_url", "store")]
    return [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=d, annotation=a) for n, a, d in common]


def _flags(values: dict[str, Any], fields: dict[str, tuple[str, str, Flag]]) -> dict[str, Any]:
    """The settings given on the command line (``None``: not given)."""
    given: dict[str, Any] = {}
    for param, (name, kind, flag) in fields.items():
        value = values.get(param)
        if kind == "none":
            if value:
                given[name] = None
            continue
        if value is None or name in given:
            continue
        if kind == "list" and flag.repeat:
            value = tuple(str(Path(v).resolve()) if flag.path else v for v in value)
            if not value:
                continue
        elif kind == "list":
            value = tuple(part.strip() for part in str(value).split(",") if part.strip())
        elif flag.path:
            value = str(Path(value).resolve())
        given[name] = value
    return given


def recipe_command(recipe: Recipe) -> Callable[..., None]:
    """The ``build <recipe>`` command, its options generated from the recipe's config."""
    field_params, fields = _field_params(recipe)

    def command(**values: Any) -> None:
        from senseforge.pipelines.runner import build, check_resume, resolve_run
        from senseforge.store.db import Store

        given = _flags(values, fields)
        stage_models = _pairs(values.get("stage_model"), "--stage-model")
        if stage_models:
            given["stage_models"] = stage_models
        options = parse_options(values.get("option"), values.get("base_url"))
        if options:
            given["model_options"] = options
        config, run_dir = resolve_run(
            recipe,
            flags=given,
            out=values.get("out_dir"),
            resume=bool(values.get("resume")),
            config_file=values.get("config_file"),
            sets=values.get("sets") or [],
        )
        calls = bool(type(config).lm_stages or config.reviewers)  # human-gen calls no model
        check_resume(run_dir, config, resume=bool(values.get("resume")))  # a refusal comes before the header
        err.print(f"run: {run_dir} · recipe: {recipe.name}" + (f" · model: {config.model}" if calls else ""))

        def resume_hint() -> str:
            if (run_dir / "manifest.json").is_file():
                return f"continue with `senseforge build {recipe.name} --out {run_dir} --resume`"
            return "nothing was stored yet: run the same command again"

        on_interrupt(resume_hint)
        summary = build(
            recipe,
            config,
            run_dir,
            resume=bool(values.get("resume")),
            store=Store(values.get("store")),
            run_store_url=values.get("run_store"),
            decisions=values.get("decisions") or [],
            human_rate=human_rate(values.get("human_rate")),
            progress=progress_bar,
            responders=dry_run_authors(),
        )
        print_summary(summary)

    params = field_params + _common_params(recipe)
    command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    command.__annotations__ = {p.name: p.annotation for p in params}
    command.__doc__ = recipe.summary
    command.__name__ = recipe.name.replace("-", "_")
    return command


for _recipe in recipes().values():
    app.command(_recipe.name, help=_recipe.summary)(recipe_command(_recipe))


def _kept_in(lang: str, counts: dict[str, Any]) -> str:
    """One language's share of a funnel: of its concept slots, or per split."""
    if "slots" in counts:
        return f"{lang} {counts['kept']} of {counts['slots']} concepts"
    splits = ", ".join(f"{name} {n}" for name, n in (counts.get("splits") or {}).items())
    return f"{lang} {counts['kept']}" + (f" ({splits})" if splits else "")


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


def _agreement(cell: dict[str, Any] | None) -> str:
    if not cell:
        return "–"
    kappa, alpha = cell.get("fleiss_kappa"), cell.get("krippendorff_alpha")
    return f"κ {'–' if kappa is None else f'{kappa:.2f}'} α {'–' if alpha is None else f'{alpha:.2f}'}"


def _task_table(by_task: dict[str, Any]) -> Table:
    """A CRoW run per task: contexts kept, examples, why contexts were left out, the panels' agreement."""
    table = Table(title="per task: contexts kept of those in; examples = originals+rewrites")
    for column in ("task", "contexts", "examples", "left out", "CKV", "WSV"):
        table.add_column(column, justify="right" if column in ("contexts", "examples") else "left")
    for task, row in by_task.items():
        contexts, examples = row["contexts"], row["examples"]
        shown = str(examples["total"])
        if examples.get("rewrite") is not None:
            shown += f" = {examples['original']}+{examples['rewrite']}"
        left = ", ".join(f"{reason} {n}" for reason, n in contexts["left_out"].items())
        table.add_row(
            task,
            f"{contexts['kept']}/{contexts['in']}",
            shown,
            left,
            _agreement(row["agreement"].get("ckv")),
            _agreement(row["agreement"].get("wsv")),
        )
    return table


def print_summary(summary: Any) -> None:
    """The funnel, the cost and where everything is (and, first, any diagnosis of the models' replies)."""
    for diagnosis in getattr(summary, "diagnoses", []):
        err.print(f"[yellow]warning:[/] {diagnosis}")
    if summary.state == "awaiting_review":
        tasks = ", ".join(f"{task} {n}" for task, n in summary.waiting_for.items())
        err.print(
            f"{summary.awaiting} item(s) wait for people (tasks queued: {tasks}; listed in "
            f"{summary.run_dir / 'review' / 'queue.jsonl'}).\n"
            f"people work in the app:  senseforge annotate serve {summary.run_dir}  (invite each with "
            f"senseforge annotate invite NAME {summary.run_dir}),\n"
            "or bring their judgements as JSONL (item_id, annotator, task, the task's fields: accept for a review);\n"
            f"then move the items on:  senseforge build {summary.recipe} --out {summary.run_dir} --resume "
            "[--decisions FILE]"
        )
        return
    funnel = summary.funnel.model_dump(mode="json", by_alias=True)
    cost = summary.cost.model_dump(mode="json", by_alias=True)
    title = {"mcsqa": "mCSQA"}.get(summary.recipe, summary.recipe)
    lang = f" ({funnel['lang']})" if funnel.get("lang") else ""
    table = Table(title=f"{title} funnel{lang}")
    for column in ("stage", "in", "out", "rejected"):
        table.add_column(column, justify="right" if column in ("in", "out") else "left")
    for row in funnel["stages"]:
        reasons = ", ".join(f"{reason} {count}" for reason, count in row["rejected"].items())
        table.add_row(row["stage"], str(row["in"]), str(row["out"]), reasons)
    out.print(table)
    splits = funnel.get("splits")
    by_lang = funnel.get("by_lang")
    by_task = funnel.get("by_task")
    if by_task:
        out.print(_task_table(by_task))
        out.print(f"kept {plural(funnel['kept'], 'example')}")
    elif by_lang:
        shown = " · ".join(_kept_in(lang, counts) for lang, counts in by_lang.items())
        out.print(f"kept {plural(funnel['kept'], 'item')}: {shown}")
    elif splits:
        shown = " · ".join(f"{name} {c['easy']} easy / {c['hard']} hard" for name, c in splits.items())
        out.print(f"kept {plural(funnel['kept'], 'item')}: {shown}")
    else:
        out.print(f"kept {plural(funnel['kept'], 'item')}")
    adapted = funnel.get("adapted")
    if adapted:
        out.print(
            f"of them adapted: {adapted.get('full', 0)} rewritten for the culture, "
            f"{adapted.get('names', 0)} names only, {adapted.get('none', 0)} unchanged"
        )
    qc, answers = funnel.get("qc"), funnel.get("answers")
    if isinstance(qc, dict) and isinstance(answers, dict):
        alpha = answers.get("krippendorff_alpha")
        out.print(
            f"QC sent {qc['sent_back']} of {qc['items']} item(s) back ({qc['unresolved']} unresolved); "
            f"{answers['excluded']} excluded as ambiguous; the majority matched the creator on "
            f"{answers['majority_is_creator']}; answerers' α = " + ("n/a" if alpha is None else f"{alpha:.3f}")
        )
    refined = funnel.get("refined")
    if refined:
        share = refined["changed_share"]
        out.print(f"refinement changed {refined['changed']} question(s)" + (f" ({share:.0%})" if share else ""))
    total = cost["total_usd"]
    unit, per = next(((k, v) for k, v in cost.items() if k.startswith("cost_per_kept_")), ("", None))
    spent = "unknown (unpriced model or human rate)" if total is None else money(total)
    per_item = "unknown" if per is None else money(per)
    what = unit.removeprefix("cost_per_kept_").removesuffix("_usd") or "item"
    out.print(f"cost: {spent} · per kept {what}: {per_item}")
    ledger = summary.ledger
    if ledger:
        out.print(
            f"this run's calls: {ledger.get('calls', 0)} ({ledger.get('cache_hits', 0)} from cache), "
            f"{ledger.get('retried_calls', 0)} retried, {ledger.get('failed_calls', 0)} failed"
        )
    where = summary.run_dir
    folders = [where / lang / "dataset" for lang in funnel.get("langs", [])] or [where / "dataset"]
    written = [folder for folder in folders if folder.is_dir()]
    shown = ", ".join(str(folder) for folder in written) or "none (nothing was kept)"
    out.print(f"dataset: {shown} · reports: {where / 'funnel.json'}, {where / 'cost.json'}, {where / 'rejects.jsonl'}")
