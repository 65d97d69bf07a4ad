"""``senseforge eval``: evaluate a model on a dataset; compare result files."""

from __future__ import annotations

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
    open_model,
    out,
    progress_bar,
)

if TYPE_CHECKING:
    from senseforge.evaluate.leaderboard import Entry
    from senseforge.evaluate.records import EvalResults

app = typer.Typer(help="Evaluate models: multiple choice and CRoW-style binary tasks.", no_args_is_help=True)


MODELS_HELP = (
    "provider/model, e.g. llamacpp/gemma-3-270m, openai/gpt-4o-mini, hf/path/to/folder; repeatable: "
    "every model is evaluated on every --data."
)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")


def _default_out(data: Path, model: str) -> Path:
    if data.is_dir():
        return data / "eval" / _slug(model)
    return Path("evals") / f"{data.stem}-{_slug(model)}"


def _pair_out(data: Path, model: str, root: Path | None, pairs: int) -> Path:
    """Where one (data, model) result goes: ``--out`` itself for one pair, a folder under it for several."""
    if root is None:
        return _default_out(data, model)
    if pairs == 1:
        return root
    name = data.name if data.is_dir() else data.stem
    return root / f"{_slug(name)}-{_slug(model)}"


@app.command("run")
def run(
    data: list[Path] = typer.Option(
        ..., "--data", "-d", help="Dataset file (any supported format) or a run directory; repeatable."
    ),
    model: list[str] | None = typer.Option(None, "--model", "-m", envvar="SENSEFORGE_MODEL", help=MODELS_HELP),
    formulation: str | None = typer.Option(
        None,
        "--formulation",
        "-f",
        help=(
            "loglik | letter | generate | open (default: loglik; generate with --variant putri-all, as Putri et "
            "al.). open asks the question without its options and lets --judge grade the free answer."
        ),
    ),
    judge: str | None = typer.Option(
        None,
        "--judge",
        help="provider/model that grades each free answer against the gold option (needed by --formulation open).",
    ),
    variant: str = typer.Option(
        "plain",
        "--variant",
        help="Prompt: plain | putri1 | putri2 | putri3 | putri-all (all three Putri prompts, each and their mean).",
    ),
    prompt_language: str = typer.Option("en", "--prompt-language", help="en (default) or item."),
    shots: int = typer.Option(0, "--shots", min=0, help="Solved examples before each item."),
    shots_from: Path | None = typer.Option(None, "--shots-from", help="Dataset file to draw the shots from."),
    seed: int = typer.Option(0, "--seed"),
    limit: int | None = typer.Option(None, "--limit", min=1, help="Evaluate the first N items only."),
    split: str = typer.Option("test", "--split", help="Split of a run directory: train | validation | test | all."),
    fmt: str | None = typer.Option(None, "--format", help="Dataset format (default: detected)."),
    lang: str | None = typer.Option(None, "--lang", help="Language of the items when the format does not say."),
    binary_mode: str = typer.Option("loglik", "--binary-mode", help="Binary tasks: loglik | generate."),
    oracle_knowledge: bool = typer.Option(False, "--oracle-knowledge", help="Binary: show the knowledge triples."),
    chain_of_thought: bool = typer.Option(False, "--cot", help="Binary: reason first, answer in <Answer> tags."),
    crow_parity: bool = typer.Option(
        False,
        "--crow-parity",
        help=(
            "Binary: per-dimension Macro-F1 as CRoW's scripts count it (one entry per knowledge triple; a task "
            "without a dimension counts 0 in the cross-task mean). Default: each example once per dimension it "
            "names, within each task, averaged over the tasks that have the dimension, n reported per cell."
        ),
    ),
    gold_key: str = typer.Option(
        "answer_creator",
        "--gold-key",
        help="Gold answer of items with both (Putri et al.'s Human_Gen): answer_creator (default) | answer_majority.",
    ),
    n_bootstrap: int = typer.Option(1000, "--bootstrap", min=100, help="Bootstrap resamples for the CIs."),
    out_dir: Path | None = typer.Option(
        None,
        "--out",
        help=(
            "Output folder (default: evals/<data>-<model>, or <run>/eval/<model> for a run directory). With "
            "several models or datasets: one folder per pair under it, and leaderboard.json/.csv."
        ),
    ),
    base_url: str | None = BaseUrlOption,
    option: list[str] | None = ProviderOptions,
    store: str | None = StoreOption,
    no_cache: bool = NoCacheOption,
) -> None:
    """Evaluate models; writes results.json and samples.jsonl per (data, model) and prints the headline metrics."""
    from pydantic import ValidationError

    from senseforge.errors import ConfigError
    from senseforge.evaluate.harness import run_eval
    from senseforge.evaluate.leaderboard import entries, write_leaderboard
    from senseforge.evaluate.run import EvalConfig
    from senseforge.llm.registry import DEFAULT_MODEL

    models = list(dict.fromkeys(model or [DEFAULT_MODEL]))
    datasets = list(dict.fromkeys(data))
    try:
        config = EvalConfig(
            formulation=formulation or ("generate" if variant == "putri-all" else "loglik"),
            variant=variant,
            prompt_language=prompt_language,
            shots=shots,
            seed=seed,
            limit=limit,
            binary_mode=binary_mode,
            oracle_knowledge=oracle_knowledge,
            chain_of_thought=chain_of_thought,
            crow_parity=crow_parity,
            gold_key=gold_key,
            n_bootstrap=n_bootstrap,
            judge=judge,
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ConfigError(f"--{'-'.join(str(first['loc'][0]).split('_'))}: {first['msg']}") from exc
    config.check_variant()
    config.check_judge()
    missing = [str(path) for path in datasets if not path.exists()]
    if missing:
        raise ConfigError(f"--data: no such file or folder: {', '.join(missing)}")
    pairs = len(models) * len(datasets)
    done: list[tuple[EvalResults, Path]] = []
    # the judge is opened once, with no provider options: --option and --base-url are the evaluated model's
    judge_llm = open_model(judge, None, None, store, no_cache=no_cache, run="eval") if judge else None
    try:
        for name in models:
            llm = open_model(name, option, base_url, store, no_cache=no_cache, run="eval")
            try:
                for path in datasets:
                    destination = _pair_out(path, name, out_dir, pairs)
                    with progress_bar(f"evaluating {name} on {path.name}", None) as advance:
                        payload = run_eval(
                            path,
                            llm,
                            config,
                            destination,
                            fmt=fmt,
                            lang=lang,
                            shots_from=shots_from,
                            split=split,
                            progress=advance,
                            judge=judge_llm,
                        )
                    print_results(payload)
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
        rows = entries([payload for payload, _ in done])
        print_leaderboard(rows)
        where = out_dir or Path("evals")
        json_path, csv_path = write_leaderboard(
            where, rows, [(f"{p.model.name} on {p.data.name}", d / "results.json") for p, d in done]
        )
        err.print(f"wrote {json_path} and {csv_path}")


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
    if isinstance(value, float):
        return "—" if math.isnan(value) else f"{value:.4f}"
    if isinstance(value, list) and len(value) == 2 and all(isinstance(v, float) for v in value):
        return f"[{value[0]:.3f}, {value[1]:.3f}]"
    return str(value)


def print_results(payload: EvalResults) -> None:
    """A table of each task's headline metrics with their 95% intervals."""
    table = Table(title=f"{payload.model.name} on {payload.data.name}")
    for column in ("task", "metric", "value", "95% CI", "n"):
        table.add_column(column)
    for task, metric, value, ci, n in payload.headline():
        table.add_row(task, metric, _fmt(value), _fmt(ci) if ci else "", "" if n is None else str(n))
    out.print(table)


def print_leaderboard(rows: Sequence[Entry]) -> None:
    """Models as rows, (dataset, task, metric) as columns: value and 95% interval."""
    columns = list(dict.fromkeys(row.column for row in rows))
    models = list(dict.fromkeys(row.model for row in rows))
    cell = {(row.model, row.column): row for row in rows}
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
    first: Path = typer.Argument(..., help="A results.json (or its folder)."),
    second: Path = typer.Argument(..., help="Another results.json (or its folder)."),
) -> None:
    """Side-by-side headline metrics (and breakdowns) of two result files."""
    from senseforge.evaluate.records import read_results

    a, b = read_results(first), read_results(second)
    table = Table(title="comparison")
    table.add_column("task / group")
    table.add_column("metric")
    table.add_column(f"A: {a.model.name}", justify="right")
    table.add_column(f"B: {b.model.name}", justify="right")
    table.add_column("B − A", justify="right")
    rows_a, rows_b = _rows(a), _rows(b)
    for key in sorted(rows_a | rows_b):
        va, vb = rows_a.get(key), rows_b.get(key)
        delta = vb - va if va is not None and vb is not None else None
        table.add_row(
            key[0],
            key[1],
            _fmt(va) if va is not None else "",
            _fmt(vb) if vb is not None else "",
            _fmt(delta) if delta is not None else "",
        )
    out.print(table)


def _rows(payload: EvalResults) -> dict[tuple[str, str], float]:
    rows: dict[tuple[str, str], float] = {}
    for task, metric, value, _ci, _n in payload.headline():
        rows[(task, metric)] = value
    for field, group, metrics in payload.group_metrics():
        if metrics.acc is not None:
            rows[(f"{field}={group}", "acc")] = metrics.acc
    return rows
