"""``senseforge eval``: evaluate a model on a dataset; compare result files."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from senseforge.cli._common import (
    BaseUrlOption,
    ModelOption,
    NoCacheOption,
    ProviderOptions,
    StoreOption,
    describe_stats,
    err,
    open_model,
    out,
    progress_bar,
)

app = typer.Typer(help="Evaluate models: multiple choice and CRoW-style binary tasks.", no_args_is_help=True)


def _default_out(data: Path, model: str) -> Path:
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", model).strip("_")
    if data.is_dir():
        return data / "eval" / slug
    return Path("evals") / f"{data.stem}-{slug}"


@app.command("run")
def run(
    data: Path = typer.Option(..., "--data", "-d", help="Dataset file (any supported format) or a run directory."),
    model: str = ModelOption,
    formulation: str = typer.Option("loglik", "--formulation", "-f", help="loglik | letter | generate."),
    variant: str = typer.Option("plain", "--variant", help="Prompt: plain | putri1 | putri2 | putri3."),
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
    n_bootstrap: int = typer.Option(1000, "--bootstrap", min=100, help="Bootstrap resamples for the CIs."),
    out_dir: Path | None = typer.Option(None, "--out", help="Output folder (default: evals/<data>-<model>)."),
    base_url: str | None = BaseUrlOption,
    option: list[str] | None = ProviderOptions,
    store: str | None = StoreOption,
    no_cache: bool = NoCacheOption,
) -> None:
    """Evaluate a model; writes results.json and samples.jsonl and prints the headline metrics."""
    from pydantic import ValidationError

    from senseforge.errors import ConfigError
    from senseforge.evaluate.harness import run_eval
    from senseforge.evaluate.run import EvalConfig

    try:
        config = EvalConfig(
            formulation=formulation,
            variant=variant,
            prompt_language=prompt_language,
            shots=shots,
            seed=seed,
            limit=limit,
            binary_mode=binary_mode,
            oracle_knowledge=oracle_knowledge,
            chain_of_thought=chain_of_thought,
            n_bootstrap=n_bootstrap,
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ConfigError(f"--{'-'.join(str(first['loc'][0]).split('_'))}: {first['msg']}") from exc
    destination = out_dir or _default_out(data, model)
    llm = open_model(model, option, base_url, store, no_cache=no_cache, run="eval")
    try:
        with progress_bar(f"evaluating with {model}", None) as advance:
            payload = run_eval(
                data,
                llm,
                config,
                destination,
                fmt=fmt,
                lang=lang,
                shots_from=shots_from,
                split=split,
                progress=advance,
            )
    finally:
        llm.close()
    print_results(payload)
    err.print(describe_stats(llm))
    err.print(f"wrote {destination / 'results.json'} and {destination / 'samples.jsonl'}")


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return "—" if math.isnan(value) else f"{value:.4f}"
    if isinstance(value, list) and len(value) == 2 and all(isinstance(v, float) for v in value):
        return f"[{value[0]:.3f}, {value[1]:.3f}]"
    return str(value)


def _headline(metrics: dict[str, Any]) -> list[tuple[str, Any]]:
    return [(k, v) for k, v in metrics.items() if "," in k and "stderr" not in k and not k.endswith("_ci95,none")]


def print_results(payload: dict[str, Any]) -> None:
    """A table of each task's headline metrics with their 95% intervals."""
    table = Table(title=f"{payload['model']['name']} on {payload['data']['name']}")
    for column in ("task", "metric", "value", "95% CI", "n"):
        table.add_column(column)
    for task, metrics in payload["results"].items():
        for key, value in _headline(metrics):
            ci = metrics.get(key.replace(",none", "_ci95,none"))
            table.add_row(task, key.split(",")[0], _fmt(value), _fmt(ci) if ci else "", str(metrics.get("n", "")))
    out.print(table)


@app.command("compare")
def compare(
    first: Path = typer.Argument(..., help="A results.json (or its folder)."),
    second: Path = typer.Argument(..., help="Another results.json (or its folder)."),
) -> None:
    """Side-by-side headline metrics (and breakdowns) of two result files."""
    from senseforge.evaluate.harness import read_results

    a, b = read_results(first), read_results(second)
    table = Table(title="comparison")
    table.add_column("task / group")
    table.add_column("metric")
    table.add_column(f"A: {a['model']['name']}", justify="right")
    table.add_column(f"B: {b['model']['name']}", justify="right")
    table.add_column("B − A", justify="right")
    rows = _rows(a) | _rows(b)
    for key in sorted(rows):
        va, vb = _rows(a).get(key), _rows(b).get(key)
        delta = vb - va if isinstance(va, float) and isinstance(vb, float) else None
        table.add_row(
            key[0],
            key[1],
            _fmt(va) if va is not None else "",
            _fmt(vb) if vb is not None else "",
            _fmt(delta) if delta is not None else "",
        )
    out.print(table)


def _rows(payload: dict[str, Any]) -> dict[tuple[str, str], float]:
    rows: dict[tuple[str, str], float] = {}
    for task, metrics in payload["results"].items():
        for key, value in _headline(metrics):
            if isinstance(value, (int, float)):
                rows[(task, key.split(",")[0])] = float(value)
    for field, groups in payload.get("breakdowns", {}).items():
        for group, metrics in groups.items():
            value = metrics.get("acc,none")
            if isinstance(value, (int, float)):
                rows[(f"{field}={group}", "acc")] = float(value)
    return rows
