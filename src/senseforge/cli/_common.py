"""Helpers shared by the CLI modules: building a cached backend, progress, messages."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from senseforge.errors import ConfigError

err = Console(stderr=True, highlight=False, soft_wrap=True)
out = Console(highlight=False, soft_wrap=True)

ModelOption = typer.Option(
    "llamacpp/gemma-3-270m",
    "--model",
    "-m",
    envvar="SENSEFORGE_MODEL",
    help="provider/model, e.g. llamacpp/gemma-3-270m, openai/gpt-4o-mini, hf/path/to/folder, scripted/echo.",
)
BaseUrlOption = typer.Option(
    None, "--base-url", envvar="SENSEFORGE_BASE_URL", help="Endpoint of an OpenAI-compatible server (openai provider)."
)
ProviderOptions = typer.Option(
    None, "--option", "-o", help="Provider option as key=value (value parsed as JSON when it can be); repeatable."
)
StoreOption = typer.Option(
    None,
    "--store",
    envvar="SENSEFORGE_STORE_URL",
    help="SQLAlchemy URL of the cache/ledger store (default: sqlite under $SENSEFORGE_HOME).",
)
NoCacheOption = typer.Option(False, "--no-cache", help="Call the backend even when a cached response exists.")


def parse_options(pairs: list[str] | None, base_url: str | None) -> dict[str, Any]:
    """``key=value`` strings (and ``--base-url``) as a provider options dict."""
    options: dict[str, Any] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--option {pair!r}: write key=value, e.g. --option max_concurrency=4")
        try:
            options[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            options[key.strip()] = value
    if base_url:
        options["base_url"] = base_url
    return options


def open_model(
    model: str,
    option: list[str] | None,
    base_url: str | None,
    store: str | None,
    *,
    no_cache: bool,
    run: str | None = None,
) -> Any:
    """A cached backend from the common model flags; ``scripted/<name>`` knows every recipe's dry-run authors."""
    from senseforge.llm.cache import open_llm
    from senseforge.pipelines.registry import dry_run_authors
    from senseforge.store.db import Store

    options = parse_options(option, base_url)
    return open_llm(model, options, store=Store(store), read_cache=not no_cache, run=run, responders=dry_run_authors())


@contextlib.contextmanager
def progress_bar(description: str, total: int | None) -> Iterator[Any]:
    """A progress bar on stderr (hidden when stderr is not a terminal or there is one item).

    ``total=None`` counts requests as they finish without a known end.
    """
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=(total is not None and total <= 1) or not err.is_terminal,
    ) as bar:
        task = bar.add_task(description, total=total)
        yield lambda n: bar.advance(task, n)


def describe_stats(llm: Any) -> str:
    """One status line: cache hits and misses, and what the calls cost."""
    stats = llm.stats
    hits = f"{stats.hits} hit{'s' if stats.hits != 1 else ''}"
    misses = f"{stats.misses} miss{'es' if stats.misses != 1 else ''}"
    parts = [f"cache: {hits}, {misses}"]
    if stats.misses == 0:
        parts.append("no backend call")
    if stats.cost_unknown_calls:
        parts.append("cost: unknown (model not in the price table)")
    else:
        parts.append(f"cost: ${stats.cost_usd:.6f}")
    if stats.failures:
        parts.append(f"{stats.failures} failed")
    return " · ".join(parts)
