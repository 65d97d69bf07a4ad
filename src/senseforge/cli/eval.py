"""``senseforge eval``: evaluate a model on a dataset; compare result files."""

from __future__ import annotations

import inspect
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.table import Table

from senseforge.cli._common import (
    BaseUrlOption,
    NoCacheOption,
    ProviderOptions,
    StoreOption,
    describe_stats,
    err,
    on_interrupt,
    open_model,
    out,
    progress_bar,
)
from senseforge.cli._options import Fields, config_params, given, long_name
from senseforge.pipelines.recipe import Flag

if TYPE_CHECKING:
    from senseforge.evaluate.compare_records import Comparison
    from senseforge.evaluate.leaderboard import Entry
    from senseforge.evaluate.records import EvalResults

ExecutorOption: Any = typer.Option(
    "local",
    "--executor",
    help="local: the pairs one after another in this process | ray: an actor per model on a Ray cluster, "
    "the (model, dataset) pairs as shards (needs the ray extra).",
)
RayAddressOption: Any = typer.Option(
    None,
    "--ray-address",
    help="With --executor ray: the cluster to join (default: a local Ray with this machine's cores).",
)

ReplicasOption: Any = typer.Option(
    None,
    "--replicas",
    min=1,
    help="With --executor ray: the most actors per model, each holding the model once (default: one per dataset, "
    "up to as many as the cluster's CPUs, or GPUs, hold at once).",
)

app = typer.Typer(help="Evaluate models: multiple choice and CRoW-style binary tasks.", no_args_is_help=True)


MODELS_HELP = (
    "provider/model, e.g. llamacpp/gemma-3-270m, openai/gpt-4o-mini, hf/path/to/folder; repeatable: "
    "every model is evaluated on every --data."
)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")


def _pair_out(data: Path, model: str, root: Path | None, pairs: int) -> Path | None:
    """Where one (data, model) result goes: ``--out`` itself for one pair, a folder under it for several, or
    ``None`` for the default (:func:`senseforge.evaluate.harness.default_out`, named after the setting too)."""
    from senseforge.evaluate.pairs import pair_out

    return pair_out(data, model, root, pairs, _slug)


RUN_FLAGS: dict[str, Flag] = {
    "formulation": Flag(
        short="-f",
        show_default=False,
        help="loglik | letter | generate | open (default: loglik; generate with --variant putri-all, as Putri et "
        "al.). open asks the question without its options and lets --judge grade the free answer.",
    ),
    "judge": Flag(
        help="provider/model that grades each free answer against the gold option (needed by --formulation open)."
    ),
    "variant": Flag(
        help="Prompt: plain | putri1 | putri2 | putri3 | putri-all (all three Putri prompts, each and their mean)."
    ),
    "chain_of_thought": Flag(name="--cot"),
    "crow_parity": Flag(
        help="Binary: per-dimension Macro-F1 as CRoW's scripts count it (one entry per knowledge triple; a task "
        "without a dimension counts 0 in the cross-task mean). Default: each example once per dimension it "
        "names, within each task, averaged over the tasks that have the dimension, n reported per cell."
    ),
    "n_bootstrap": Flag(name="--bootstrap", help="Bootstrap resamples for the CIs."),
}
"""How ``eval run`` shows :class:`~senseforge.evaluate.run.EvalConfig`'s fields beyond ``--field-name`` and the
field's docstring."""


def _run_params() -> tuple[list[inspect.Parameter], Fields]:
    """``eval run``'s options: the data and models, the config's fields (generated), where the results go."""
    from senseforge.evaluate.run import EvalConfig

    generated, fields = config_params(EvalConfig.model_fields, RUN_FLAGS, list(EvalConfig.model_fields))
    first: list[tuple[str, Any, Any]] = [
        (
            "data",
            list[Path],
            typer.Option(
                ..., "--data", "-d", help="Dataset file (any supported format) or a run directory; repeatable."
            ),
        ),
        (
            "model",
            list[str] | None,
            typer.Option(None, "--model", "-m", envvar="SENSEFORGE_MODEL", help=MODELS_HELP),
        ),
    ]
    last: list[tuple[str, Any, Any]] = [
        ("shots_from", Path | None, typer.Option(None, "--shots-from", help="Dataset file to draw the shots from.")),
        (
            "split",
            str,
            typer.Option("test", "--split", help="Split of a run directory: train | validation | test | all."),
        ),
        ("fmt", str | None, typer.Option(None, "--format", help="Dataset format (default: detected).")),
        ("lang", str | None, typer.Option(None, "--lang", help="Language of the items when the format does not say.")),
        (
            "out_dir",
            Path | None,
            typer.Option(
                None,
                "--out",
                help=(
                    "Output folder (default: evals/<data>-<model>-<setting>, or <run>/eval/<model>-<setting> for a "
                    "run directory; the setting names the formulation, variant and shots). With several models or "
                    "datasets: one folder per pair under it, and leaderboard.json/.csv. A folder holding another "
                    "evaluation is refused."
                ),
            ),
        ),
        (
            "overwrite",
            bool,
            typer.Option(
                False, "--overwrite", help="Replace the results of a different evaluation in the output folder."
            ),
        ),
        ("base_url", str | None, BaseUrlOption),
        ("option", list[str] | None, ProviderOptions),
        ("store", str | None, StoreOption),
        ("no_cache", bool, NoCacheOption),
        ("executor", str, ExecutorOption),
        ("ray_address", str | None, RayAddressOption),
        ("replicas", int | None, ReplicasOption),
    ]

    def param(name: str, annotation: Any, default: Any) -> inspect.Parameter:
        return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)

    return [*(param(*p) for p in first), *generated, *(param(*p) for p in last)], fields


def run(**values: Any) -> None:
    """Evaluate models; writes results.json and samples.jsonl per (data, model) and prints the headline metrics."""
    from pydantic import ValidationError

    from senseforge.errors import ConfigError
    from senseforge.evaluate.harness import default_out, run_eval
    from senseforge.evaluate.run import EvalConfig
    from senseforge.llm.registry import DEFAULT_MODEL

    option, base_url, store = (values.get(name) for name in ("option", "base_url", "store"))
    no_cache = bool(values.get("no_cache"))
    out_dir: Path | None = values.get("out_dir")
    settings = given(values, _RUN_FIELDS)
    settings.setdefault("formulation", "generate" if settings.get("variant") == "putri-all" else "loglik")
    models = list(dict.fromkeys(values.get("model") or [DEFAULT_MODEL]))
    datasets: list[Path] = list(dict.fromkeys(values["data"]))
    try:
        config = EvalConfig(**settings)
    except ValidationError as exc:
        name = str(exc.errors()[0]["loc"][0])
        raise ConfigError(f"{long_name(name, RUN_FLAGS.get(name, Flag()))}: {exc.errors()[0]['msg']}") from exc
    judge = config.judge
    config.check_variant()
    config.check_judge()
    missing = [str(path) for path in datasets if not path.exists()]
    if missing:
        raise ConfigError(f"--data: no such file or folder: {', '.join(missing)}")
    pairs = len(models) * len(datasets)
    executor = values.get("executor") or "local"
    if executor not in ("local", "ray"):
        raise ConfigError(f"--executor {executor}: give local or ray")
    if executor == "ray":
        _run_on_ray(values, models, datasets, config, out_dir)
        return
    for name in ("ray_address", "replicas"):
        if values.get(name):
            raise ConfigError(f"--{name.replace('_', '-')} needs --executor ray")
    done: list[tuple[EvalResults, Path]] = []
    on_interrupt(
        "nothing of the unfinished evaluation was written; run the same command again: the calls that finished "
        "are read back from the cache" + ("" if not no_cache else " (drop --no-cache for that)")
    )
    # the judge is opened once, with no provider options: --option and --base-url are the evaluated model's
    judge_llm = open_model(judge, None, None, store, no_cache=no_cache, run="eval") if judge else None
    try:
        for name in models:
            llm = open_model(name, option, base_url, store, no_cache=no_cache, run="eval")
            try:
                for path in datasets:
                    chosen = _pair_out(path, name, out_dir, pairs)
                    with progress_bar(f"evaluating {name} on {path.name}", None, "items") as advance:
                        payload = run_eval(
                            path,
                            llm,
                            config,
                            chosen,
                            fmt=values.get("fmt"),
                            lang=values.get("lang"),
                            shots_from=values.get("shots_from"),
                            split=values["split"],
                            progress=advance,
                            judge=judge_llm,
                            overwrite=values["overwrite"],
                        )
                    destination = chosen or default_out(path, name, config, payload.data.kind)
                    print_results(payload)
                    print_difficulty(payload)
                    report_generation(payload)
                    err.print(f"wrote {destination / 'results.json'} and {destination / 'samples.jsonl'}")
                    done.append((payload, destination))
            finally:
                llm.close()
            err.print(describe_stats(llm))
    finally:
        if judge_llm is not None:
            judge_llm.close()
            err.print(f"judge {judge}: {describe_stats(judge_llm)}")
    if pairs > 1:
        _leaderboard(done, out_dir)


def _leaderboard(done: list[tuple[EvalResults, Path]], out_dir: Path | None) -> None:
    from senseforge.evaluate.leaderboard import entries, write_leaderboard

    rows = entries([payload for payload, _ in done])
    print_leaderboard(rows)
    where = out_dir or Path("evals")
    json_path, csv_path = write_leaderboard(
        where, rows, [(f"{p.label()} on {p.data.name}", d / "results.json") for p, d in done]
    )
    err.print(f"wrote {json_path} and {csv_path}")


def _run_on_ray(
    values: dict[str, Any], models: list[str], datasets: list[Path], config: Any, out_dir: Path | None
) -> None:
    """``eval run --executor ray``: every pair as a shard on Ray, then the same report as ``local``."""
    from senseforge.cli._common import parse_options
    from senseforge.cluster.evaluation import ray_pair_runner
    from senseforge.cluster.runtime import connect
    from senseforge.evaluate.pairs import ModelSpec, PairSettings, pair_grid

    store, read_cache = values.get("store"), not values.get("no_cache")
    options = parse_options(values.get("option"), values.get("base_url"))
    specs = {name: ModelSpec(name, options, store, read_cache) for name in models}
    judge = ModelSpec(config.judge, {}, store, read_cache) if config.judge else None
    settings = PairSettings(
        config=config,
        fmt=values.get("fmt"),
        lang=values.get("lang"),
        shots_from=values.get("shots_from"),
        split=values["split"],
        overwrite=values["overwrite"],
    )
    cluster = connect(values.get("ray_address"))
    err.print(f"ray: {cluster.nodes} node(s), {cluster.cpus:g} CPUs, {cluster.gpus:g} GPUs")
    pairs = pair_grid(models, datasets, out_dir, _slug)
    done = ray_pair_runner(specs, judge=judge, replicas=values.get("replicas"))(pairs, settings)
    for payload, destination in done:
        print_results(payload)
        print_difficulty(payload)
        report_generation(payload)
        err.print(f"wrote {destination / 'results.json'} and {destination / 'samples.jsonl'}")
    if len(pairs) > 1:
        _leaderboard(done, out_dir)


_RUN_PARAMS, _RUN_FIELDS = _run_params()
run.__signature__ = inspect.Signature(_RUN_PARAMS)  # type: ignore[attr-defined]
run.__annotations__ = {p.name: p.annotation for p in _RUN_PARAMS}
app.command("run")(run)


@app.command("score")
def score(
    gold: Path = typer.Option(
        ..., "--gold", help="Gold binary data: a file (e.g. release/private.jsonl) or a run directory."
    ),
    predictions: Path = typer.Option(
        ...,
        "--predictions",
        "-p",
        help='Submission: JSON Lines (or a JSON array) of {"task", "example_id", "prediction": 0|1}.',
    ),
    out_dir: Path | None = typer.Option(None, "--out", help="Output folder (default: evals/<gold>-submission)."),
    n_bootstrap: int = typer.Option(1000, "--bootstrap", min=100, help="Bootstrap resamples for the CIs."),
    seed: int = typer.Option(0, "--seed", help="Seed for the bootstrap and the random baseline."),
    crow_parity: bool = typer.Option(
        False, "--crow-parity", help="Per-dimension Macro-F1 as CRoW's scripts count it (see eval run --help)."
    ),
) -> None:
    """Score a submission against gold labels without a model; writes results.json and samples.jsonl.

    A gold example without a prediction counts as wrong, and the number missing is reported.
    """
    from senseforge.evaluate.run import EvalConfig
    from senseforge.evaluate.submission import missing_count, score_submission

    config = EvalConfig(n_bootstrap=n_bootstrap, seed=seed, crow_parity=crow_parity)
    destination = out_dir or Path("evals") / f"{_slug(gold.name if gold.is_dir() else gold.stem)}-submission"
    payload = score_submission(gold, predictions, config, destination)
    print_results(payload)
    missing = missing_count(payload)
    if missing:
        total = payload.breakdowns["submission"]["examples"]
        err.print(f"warning: {missing} of {total} gold examples have no prediction (counted as wrong)")
    err.print(f"wrote {destination / 'results.json'} and {destination / 'samples.jsonl'}")


def _fmt(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return "—" if math.isnan(value) else f"{value:.4f}"
    if isinstance(value, list) and len(value) == 2 and all(isinstance(v, int | float) for v in value):
        return f"[{value[0]:.3f}, {value[1]:.3f}]"
    return str(value)


def _interval(ci: Sequence[float] | None, units: int | None = None, unit: str | None = None) -> str:
    """An interval as ``[low, high]``; where none could be bootstrapped from too few units, ``n/a (n = 1 item)``."""
    from senseforge.evaluate.bootstrap import MIN_UNITS

    if ci is not None and len(ci) == 2:
        return f"[{ci[0]:.3f}, {ci[1]:.3f}]"
    if units is not None and unit and units < MIN_UNITS:
        return f"n/a (n = {units} {unit}{'' if units == 1 else 's'})"
    return ""


def print_results(payload: EvalResults) -> None:
    """A table of each task's headline metrics with their 95% intervals: bootstrap, and Wilson for proportions."""
    table = Table(title=f"{payload.label()} on {payload.data.name}")
    for column in ("task", "metric", "value", "95% CI (bootstrap)", "95% Wilson", "n"):
        table.add_column(column)
    for task, metric, value, ci, n in payload.headline():
        found = payload.results[task]
        dumped = found.to_json()
        units = unit = None
        if f"{metric}_ci95,none" in dumped and hasattr(found, "resampling_units"):
            units, unit = found.resampling_units(), getattr(found, "ci_unit", None)
        wilson = dumped.get(f"{metric}_wilson95,none")
        table.add_row(
            task, metric, _fmt(value), _interval(ci, units, unit), _interval(wilson), "" if n is None else str(n)
        )
    out.print(table)


def print_difficulty(payload: EvalResults) -> None:
    """Accuracy on Easy and Hard items (mCSQA's main figure), when the data has them."""
    groups = [(group, metrics) for field, group, metrics in payload.group_metrics() if field == "difficulty"]
    if not groups:
        return
    table = Table(title="by difficulty")
    for column in ("difficulty", "acc", "95% CI", "n"):
        table.add_column(column)
    for group, metrics in groups:
        value = "" if metrics.acc is None else _fmt(metrics.acc)
        ci = metrics.acc_ci95
        table.add_row(group, value, _fmt(ci) if ci else "", str(metrics.n))
    out.print(table)


def report_generation(payload: EvalResults) -> None:
    """For generated answers: the parse rate, and the one-line diagnosis when the replies look wrong as a whole."""
    for task, metrics in payload.accuracy_rows():
        if metrics.unparsed_rate is not None:
            err.print(f"{task}: {1 - metrics.unparsed_rate:.1%} of answers parsed (lenient)")
    if payload.diagnosis:
        err.print(f"[yellow]warning:[/] {payload.diagnosis}")


def print_leaderboard(rows: Sequence[Entry]) -> None:
    """Models as rows, (dataset, task, metric) as columns: value and 95% interval."""
    columns = list(dict.fromkeys(row.column for row in rows))
    models = list(dict.fromkeys(row.row for row in rows))
    cell = {(row.row, row.column): row for row in rows}
    table = Table(title="leaderboard")
    table.add_column("model")
    for column in columns:
        table.add_column(column, justify="right")
    for name in models:
        values = []
        for column in columns:
            entry = cell.get((name, column))
            if entry is None:
                values.append("")
            elif entry.ci95_low is None or entry.ci95_high is None:
                values.append(_fmt(entry.value))
            else:
                values.append(f"{_fmt(entry.value)} [{entry.ci95_low:.3f}, {entry.ci95_high:.3f}]")
        table.add_row(name, *values)
    out.print(table)


@app.command("compare")
def compare(
    first: Path = typer.Argument(..., help="A: a results.json (or its folder), samples.jsonl beside it."),
    second: Path = typer.Argument(..., help="B: another results.json (or its folder), samples.jsonl beside it."),
    n_bootstrap: int | None = typer.Option(
        None, "--bootstrap", min=100, help="Bootstrap resamples for the paired intervals (default: A's)."
    ),
    seed: int | None = typer.Option(None, "--seed", help="Seed of the paired bootstrap (default: A's)."),
    as_json: bool = typer.Option(False, "--json", help="Print the comparison as JSON (for scripts)."),
) -> None:
    """Is B better than A? Each side's numbers with 95% intervals, and on the items both scored the
    paired difference B − A with its bootstrap interval and McNemar's exact test for accuracy."""
    from senseforge.evaluate.compare import compare_paths

    comparison = compare_paths(first, second, n_resamples=n_bootstrap, seed=seed)
    for warning in comparison.warnings:
        err.print(f"[yellow]warning:[/] {warning}")
    if as_json:
        typer.echo(comparison.model_dump_json(indent=2))
        return
    print_comparison(comparison)


def _estimate_cell(estimate: Any) -> str:
    if estimate is None:
        return ""
    lines = [_fmt(estimate.value)]
    boot = _interval(estimate.ci95, estimate.units, estimate.ci_unit)
    if boot:
        lines.append(f"boot {boot}")
    if estimate.wilson95:
        lines.append(f"Wilson {_interval(estimate.wilson95)}")
    return "\n".join(lines)


def print_comparison(comparison: Comparison) -> None:
    """The comparison as a table: A and B with their intervals, B − A on shared items, McNemar's p."""
    a, b = comparison.a, comparison.b
    out.print(f"A: {a.label}  ({a.path})")
    out.print(f"B: {b.label}  ({b.path})")
    unit = comparison.unit
    out.print(
        f"shared {unit}s: {comparison.shared} ({comparison.only_a} only in A, {comparison.only_b} only in B); "
        f"paired bootstrap: {comparison.n_resamples} resamples, seed {comparison.seed}"
    )
    table = Table(title="B − A")
    table.add_column("task / group")
    table.add_column("metric")
    table.add_column(f"A: {a.label}", justify="right")
    table.add_column(f"B: {b.label}", justify="right")
    table.add_column("B − A (shared)", justify="right")
    table.add_column("95% CI (paired)", justify="right")
    table.add_column("McNemar p (A only / B only)", justify="right")
    for row in comparison.rows:
        diff = ci = test = ""
        if row.paired is not None:
            paired = row.paired
            diff = f"{paired.diff:+.4f}"
            ci = _interval(paired.ci95, paired.units, paired.ci_unit) or "—"
            ci += f"\nn = {paired.units} {paired.ci_unit}{'' if paired.units == 1 else 's'}"
        if row.mcnemar is not None:
            test = f"{row.mcnemar.p_value:.4g} ({row.mcnemar.a_only} / {row.mcnemar.b_only})"
        table.add_row(row.task, row.metric, _estimate_cell(row.a), _estimate_cell(row.b), diff, ci, test)
    out.print(table)
