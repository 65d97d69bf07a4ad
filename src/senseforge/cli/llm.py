"""``senseforge llm``: list providers, generate, score choices by log-likelihood, and read the ledger."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING

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
    money,
    open_model,
    out,
    progress_bar,
)
from senseforge.errors import BackendError, ConfigError

if TYPE_CHECKING:
    from senseforge.llm.base import ReplyShape

app = typer.Typer(help="Language models: list providers, generate text, score choices.", no_args_is_help=True)


@app.command("models")
def models() -> None:
    """List the providers, whether each is installed, and example model strings."""
    from senseforge.llm.registry import DEFAULT_MODEL, PROVIDERS

    table = Table(title=f"providers (default model: {DEFAULT_MODEL})")
    for column in ("provider", "status", "what", "examples"):
        table.add_column(column)
    for info in PROVIDERS.values():
        missing = info.missing()
        status = "[green]ready[/]" if not missing else f"[yellow]missing {', '.join(missing)}[/]: {info.install_hint()}"
        table.add_row(info.name, status, info.summary, "\n".join(info.examples))
    out.print(table)


@app.command("generate")
def generate(
    prompts: list[str] = typer.Argument(..., help="One or more prompts; each is one request."),
    model: str = ModelOption,
    system: str | None = typer.Option(
        None, "--system", help="System message (implies --chat; a base model gets it as the prompt's first paragraph)."
    ),
    chat: bool = typer.Option(False, "--chat/--plain", help="Send the prompt as a chat turn, or as plain text."),
    temperature: float = typer.Option(0.0, "--temperature", "-t", min=0.0, max=2.0, help="0 = greedy."),
    top_p: float = typer.Option(1.0, "--top-p", min=0.0, max=1.0),
    seed: int = typer.Option(0, "--seed"),
    max_tokens: int = typer.Option(128, "--max-tokens", min=1),
    stop: list[str] = typer.Option([], "--stop", help="Stop string; repeatable."),
    json_mode: bool = typer.Option(False, "--json", help="Ask for a JSON object and print the parsed value."),
    schema: Path | None = typer.Option(
        None,
        "--schema",
        exists=True,
        dir_okay=False,
        help="A JSON schema file: the backend holds each reply to it where it can (implies --json).",
    ),
    base_url: str | None = BaseUrlOption,
    option: list[str] | None = ProviderOptions,
    store: str | None = StoreOption,
    no_cache: bool = NoCacheOption,
) -> None:
    """Generate text for each prompt and print it (status and cost go to stderr)."""
    from senseforge.llm.base import GenerateRequest

    shape = _shape_of(schema) if schema is not None else None
    json_mode = json_mode or shape is not None
    sampling = {
        "temperature": temperature,
        "top_p": top_p,
        "seed": seed,
        "max_tokens": max_tokens,
        "stop": tuple(stop),
        "json_mode": json_mode,
        **({"reply_shape": shape} if shape is not None else {}),
    }
    from senseforge.llm.prompting import chat_template, fit

    requests = [
        GenerateRequest.chat(p, system=system, **sampling) if chat or system else GenerateRequest(prompt=p, **sampling)
        for p in prompts
    ]
    llm = open_model(model, option, base_url, store, no_cache=no_cache)
    if (chat or system) and chat_template(llm) is None:
        # a base model: the chat turns become one plain prompt, the system text first (never a made-up template)
        requests = [fit(request, None, stop=()) for request in requests]
        err.print(f"note: {model} has no chat template (a base model): each prompt is sent as plain text")
    try:
        with progress_bar(f"generating with {model}", len(requests)) as advance:
            results = llm.generate(requests, progress=advance)
    finally:
        llm.close()
    failed = 0
    for index, result in enumerate(results):
        if len(results) > 1:
            out.print(f"[bold]--- {index + 1}[/]")
        if result.failure is not None:
            failed += 1
            err.print(f"[red]failed[/] ({result.failure.kind}): {result.failure.message}")
            continue
        if result.constrained is False:
            err.print(f"note: {model} did not hold the reply to the schema (it does not take one)")
        if json_mode:
            try:
                out.print_json(json.dumps(result.json(), ensure_ascii=False))
            except ValueError as exc:
                err.print(f"[yellow]no JSON in the output[/] ({exc}); raw text follows")
                out.print(result.text, markup=False)
        else:
            out.print(result.text, markup=False)
    err.print(describe_stats(llm))
    if failed:
        raise BackendError(f"{failed} of {len(results)} requests failed")


def _shape_of(path: Path) -> ReplyShape:
    """The reply shape of a JSON schema file, named after the file.

    Raises:
        ConfigError: the file is not JSON, or not a JSON object.
    """
    import re

    from senseforge.llm.base import ReplyShape
    from senseforge.llm.schemas import canonical

    try:
        schema = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"--schema {path}: not a JSON file ({exc})") from exc
    if not isinstance(schema, dict):
        raise ConfigError(f"--schema {path}: a JSON schema is a JSON object, not {type(schema).__name__}")
    name = re.sub(r"[^A-Za-z0-9_-]", "_", path.stem)[:64] or "reply"
    return ReplyShape(name=name, json_schema=canonical(schema))


@app.command("score")
def score(
    context: str = typer.Option(..., "--context", "-c", help="Text before each choice."),
    choices: list[str] = typer.Option(..., "--choice", help="A continuation to score; repeat for each choice."),
    model: str = ModelOption,
    sep: str = typer.Option(
        " ", "--sep", help="Put between context and choice (skipped when the context is empty or ends in whitespace)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the scores as JSON."),
    base_url: str | None = BaseUrlOption,
    option: list[str] | None = ProviderOptions,
    store: str | None = StoreOption,
    no_cache: bool = NoCacheOption,
) -> None:
    """Score each choice by its log-likelihood after the context; the best is marked."""
    from senseforge.llm.base import LoglikelihoodRequest

    if len(choices) < 1:
        raise ConfigError("give at least one --choice")
    joiner = "" if not context or context[-1].isspace() else sep
    requests = [LoglikelihoodRequest(context=context, continuation=joiner + choice) for choice in choices]
    llm = open_model(model, option, base_url, store, no_cache=no_cache)
    try:
        with progress_bar(f"scoring with {model}", len(requests)) as advance:
            results = llm.loglikelihood(requests, progress=advance)
    finally:
        llm.close()
    failures = [r.failure for r in results if r.failure is not None]
    if failures:
        raise BackendError(f"scoring failed ({failures[0].kind}): {failures[0].message}")
    rows = [
        {
            "choice": choice,
            "logprob": result.logprob,
            "logprob_per_char": (result.logprob or 0.0) / max(1, len(choice)),
            "prob": math.exp(result.logprob or -math.inf),
            "is_greedy": result.is_greedy,
            "n_tokens": result.n_tokens,
        }
        for choice, result in zip(choices, results, strict=True)
    ]
    best = max(range(len(rows)), key=lambda i: rows[i]["logprob"] or -math.inf)
    if as_json:
        out.print_json(json.dumps({"model": model, "context": context, "best": choices[best], "scores": rows}))
    else:
        table = Table(title=f"{model}: log-likelihood of each choice")
        for column in ("", "choice", "logprob", "per char", "tokens", "greedy"):
            table.add_column(column, justify="right" if column in ("logprob", "per char", "tokens") else "left")
        for index, row in enumerate(rows):
            table.add_row(
                "→" if index == best else "",
                str(row["choice"]),
                f"{row['logprob']:.4f}",
                f"{row['logprob_per_char']:.4f}",
                str(row["n_tokens"]),
                "yes" if row["is_greedy"] else "no",
            )
        out.print(table)
    err.print(describe_stats(llm))


def _run_label(run: str | None, store: str | None) -> tuple[str | None, str | None]:
    """``--run`` and ``--store``: a run directory is its manifest's ``run_id``, read in the store the manifest
    names (unless ``--store`` is given); anything else is a ledger label as it is."""
    from pathlib import Path

    from senseforge.pipelines.status import ledger_url_of
    from senseforge.runfolder import files
    from senseforge.runfolder.folder import read_manifest

    if run is None or not Path(run).is_dir():
        return run, store
    manifest = read_manifest(Path(run))
    if manifest is not None and "config" not in manifest.model_fields_set:
        raise ConfigError(f"{Path(run) / files.MANIFEST}: not a senseforge run manifest")
    if manifest is None or not manifest.run_id:
        raise ConfigError(f"--run {run}: no run manifest with a run_id in this folder; give its ledger label")
    url = ledger_url_of(manifest, store)
    if url is None and "***" in str(manifest.store_url):  # not the default store: the run's, with a password
        raise ConfigError(f"--run {run}: its store is {manifest.store_url}; give its full URL with --store")
    return manifest.run_id, url


@app.command("ledger")
def ledger(
    run: str | None = typer.Option(None, "--run", help="Only one run: its folder or its ledger label (run_id)."),
    failed: bool = typer.Option(False, "--failed", help="Only calls that failed after every retry."),
    limit: int = typer.Option(20, "--limit", "-n", min=0, help="Newest rows to show; 0: all."),
    as_json: bool = typer.Option(False, "--json", help="Print the rows as JSON (a list, newest first)."),
    store: str | None = StoreOption,
) -> None:
    """List the calls in the cost ledger, newest first: time, model, kind, tokens, cost, attempts, failure.

    Costs are priced from each call's recorded tokens with the price table as of now (a price added later prices
    earlier calls); with --json, each row also keeps cost_usd_at_call, what the table of its day said.
    """
    from datetime import UTC, datetime

    from rich.markup import escape

    from senseforge.llm.prices import PriceTable
    from senseforge.store.db import Store
    from senseforge.store.ledger import LedgerRow

    prices = PriceTable.load()

    def now(row: LedgerRow) -> float | None:
        return 0.0 if row.cache_hit else prices.cost(row.model, row.tokens_in, row.tokens_out, batched=row.batched)

    label, url = _run_label(run, store)
    ledger_store = Store(url)
    try:
        rows = ledger_store.ledger_recent(run=label, failed=failed, limit=limit or None)
    finally:
        ledger_store.close()
    if as_json:
        shown = [
            {**row.model_dump(mode="json"), "cost_usd": now(row), "cost_usd_at_call": row.cost_usd} for row in rows
        ]
        out.print_json(json.dumps(shown, ensure_ascii=False))
        return
    if not rows:
        what = "failed calls" if failed else "calls"
        err.print(f"no {what} in the ledger{f' of run {label}' if label else ''} ({ledger_store.url})", markup=False)
        return
    table = Table(title=f"ledger{f' of {label}' if label else ''}, newest first")
    for column in ("time", "model", "kind", "tokens", "cost", "attempts", "failure"):
        table.add_column(
            column,
            justify="right" if column in ("tokens", "cost", "attempts") else "left",
            no_wrap=column in ("time", "model"),
            overflow="fold",
            ratio=1 if column == "failure" else None,
        )
    for row in rows:
        tokens = "cache" if row.cache_hit else f"{row.tokens_in or 0}+{row.tokens_out or 0}"
        cost = money(now(row))
        failure = f"{row.failure_kind}: {row.failure_message or ''}".rstrip(": ") if row.failure_kind else ""
        failure = " ".join(failure.split())  # one line per call, whatever the error said
        stamp = datetime.fromtimestamp(row.ts, UTC).strftime("%Y-%m-%d %H:%M:%SZ")
        table.add_row(stamp, escape(row.model), row.kind, tokens, cost, str(row.attempts), escape(failure))
    _print_whole(table)
    out.print(prices.statement(), markup=False)


def _print_whole(table: Table) -> None:
    """On a terminal, the table fits its width; piped or redirected, it is as wide as its longest row, so each
    row stays on one line for ``grep``, ``sort`` or a file."""
    if out.is_terminal:
        out.print(table)
        return
    from rich.measure import Measurement

    natural = Measurement.get(out, out.options.update(width=1_000_000), table).maximum
    narrow = out.width
    out.width = max(natural, narrow)  # print(width=) cannot go past the console's own width
    try:
        out.print(table)
    finally:
        out.width = narrow
