"""Helpers shared by the CLI modules: building a cached backend, progress, messages."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from senseforge.data.text import plural
from senseforge.errors import ConfigError

if TYPE_CHECKING:
    from senseforge.pipelines.progress import StageProgress

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
RunDirArgument = typer.Argument(..., help="The run directory (holds manifest.json and run.db).")
StoreUrlOption = typer.Option(
    None,
    "--store",
    envvar="SENSEFORGE_RUN_STORE",
    help="SQLAlchemy URL of the run store (default: sqlite run.db in the run directory).",
)


def out_option(name: str) -> Any:
    """The ``--out`` option of an ``analyze`` study (default ``analysis/<name>/``)."""
    return typer.Option(Path("analysis") / name, "--out", help=f"Output folder (default analysis/{name}/).")


def run_store_url(run_dir: Path, given: str | None) -> str:
    """The run store of ``run_dir``: ``given``, else ``run_dir/run.db`` unless the manifest names another."""
    from senseforge.pipelines.rundir import store_url_of

    return store_url_of(run_dir, given, flag="--store")


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
    from senseforge.pipelines.recipes import dry_run_authors
    from senseforge.store.db import Store

    options = parse_options(option, base_url)
    return open_llm(model, options, store=Store(store), read_cache=not no_cache, run=run, responders=dry_run_authors())


PLAIN_PROGRESS_EVERY_S = 10.0
"""Off a terminal, the least time between two progress lines (so a log stays short)."""


class PlainProgress:
    """Progress as plain lines on stderr, for a pipe or a log file where a live bar cannot redraw.

    A line (``evaluating X: 120/300 (40%) 0:01:10``) at most every ``every_s`` seconds
    while work goes on, and a last one from :meth:`finish`. Only text: no control codes.

    Args:
        description: what is counted, as the line starts.
        total: how many there are; ``None`` counts without a known end (no percentage).
        every_s: the least time between two lines.
        clock: seconds from a monotonic clock (replaceable in tests).
        unit: what is counted, said after the count (``items``); nothing when empty.
    """

    def __init__(
        self,
        description: str,
        total: int | None,
        *,
        every_s: float = PLAIN_PROGRESS_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
        unit: str = "",
    ) -> None:
        self.description = description
        self.unit = f" {unit}" if unit else ""
        self.total = total
        self.every_s = every_s
        self.clock = clock
        self.done = 0
        self.started = self._last = clock()
        self._lock = threading.Lock()

    def advance(self, n: int = 1) -> None:
        """Count ``n`` more as done; print a line when ``every_s`` has passed since the last one."""
        with self._lock:
            self.done += n
            now = self.clock()
            if now - self._last >= self.every_s:
                self._last = now
                err.print(self.line(now), markup=False, highlight=False)

    def start(self) -> None:
        """Say that the work began (``description: 0/300 …``), so a log shows a slow first step is under way."""
        with self._lock:
            err.print(self.line(self.clock()), markup=False, highlight=False)

    def finish(self) -> None:
        """Print the last line (nothing when nothing was done)."""
        with self._lock:
            if self.done:
                err.print(self.line(self.clock()), markup=False, highlight=False)

    def line(self, now: float) -> str:
        """The progress line at time ``now``."""
        elapsed = timedelta(seconds=int(max(0.0, now - self.started)))
        if self.total:
            share = 100 * self.done // self.total
            return f"{self.description}: {self.done:,}/{self.total:,}{self.unit} ({share}%) {elapsed}"
        return f"{self.description}: {self.done:,}{self.unit} done {elapsed}"


@contextlib.contextmanager
def progress_bar(description: str, total: int | None, unit: str = "") -> Iterator[Any]:
    """Progress on stderr: a live bar on a terminal, else a plain line now and then (:class:`PlainProgress`).

    Nothing is shown for a single item. ``total=None`` counts as things finish without a known end; ``unit``
    names what is counted (``items``).
    """
    if not err.is_terminal:
        if total is not None and total <= 1:
            yield lambda n: None
            return
        plain = PlainProgress(description, total, every_s=PLAIN_PROGRESS_EVERY_S, unit=unit)
        plain.start()
        yield plain.advance
        plain.finish()
        return
    with _live_task(description, total, unit) as advance:
        yield advance


def stage_progress(event: StageProgress) -> None:
    """Draw a run's progress (a :data:`~senseforge.pipelines.progress.ProgressSink` for ``build``): a bar per
    stage's pass on a terminal, else a plain line now and then (``create: 3/8 records (37%) · 5 queued for people ·
    9 requests answered 0:00:04``). The bar counts records decided; records only queued for people, records to
    retry and the requests answered are said apart, so tasks waiting in the annotation app never read as done."""
    with _Stages.lock:
        if event.label not in _Stages.open:
            single = event.total is not None and event.total <= 1  # nothing shown for one record, as for other bars
            _Stages.open[event.label] = None if single else _StageBar(event) if err.is_terminal else _StageLine()
        shown = _Stages.open[event.label]
        if shown is not None:
            shown.show(event)
        if event.last:
            del _Stages.open[event.label]


def progress_text(event: StageProgress) -> str:
    """A stage's counts in words: records decided (of how many), then what is said apart.

    >>> from senseforge.pipelines.progress import StageProgress
    >>> progress_text(StageProgress("create", total=4, queued=4, requests=0))
    '0/4 records (0%) · 4 queued for people'
    >>> progress_text(StageProgress("expand", total=None, done=12, retry=1, requests=31))
    '12 records · 1 to retry · 31 requests answered'
    """
    if event.total:
        parts = [f"{event.done:,}/{event.total:,} records ({100 * event.done // event.total}%)"]
    else:
        parts = [f"{event.done:,} records"]
    if event.queued:
        parts.append(f"{event.queued:,} queued for people")
    if event.retry:
        parts.append(f"{event.retry:,} to retry")
    if event.batch:
        parts.append(f"{event.batch:,} waiting for a batch at the API")
    if event.requests:
        parts.append(f"{plural(event.requests, 'request')} answered")
    return " · ".join(parts)


class _Stages:
    """The stages' passes shown now, by label (``None``: one not shown)."""

    lock = threading.Lock()
    open: ClassVar[dict[str, _StageLine | _StageBar | None]] = {}


class _StageLine:
    """A stage's pass as plain lines: the first at once, then at most every :data:`PLAIN_PROGRESS_EVERY_S`, the
    last when the pass ends."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.started = clock()
        self.printed: float | None = None

    def show(self, event: StageProgress) -> None:
        now = self.clock()
        if self.printed is None or event.last or now - self.printed >= PLAIN_PROGRESS_EVERY_S:
            self.printed = now
            elapsed = timedelta(seconds=int(max(0.0, now - self.started)))
            err.print(f"{event.label}: {progress_text(event)} {elapsed}", markup=False, highlight=False)


class _StageBar:
    """A stage's pass as a line of the live display: its bar counts records decided, the words after it the rest."""

    def __init__(self, event: StageProgress) -> None:
        self.task, self.progress = _live_add(event.label, event.total, "")

    def show(self, event: StageProgress) -> None:
        detail = progress_text(event).partition(" · ")[2]
        self.progress.update(self.task, total=event.total, completed=event.done, detail=detail)
        if event.last:
            _live_remove(self.task)


class _Live:
    """The one live display on the terminal: every bar open at once is a line of it (stages streaming together
    each show theirs); it starts with the first bar and ends with the last."""

    lock = threading.Lock()
    progress: Progress | None = None
    bars = 0


def _live_add(description: str, total: int | None, detail: str) -> tuple[Any, Progress]:
    """A new line of the live display (started with its first line)."""
    with _Live.lock:
        if _Live.progress is None:
            columns = (
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[detail]}"),
                TimeElapsedColumn(),
            )
            _Live.progress = Progress(*columns, console=err, transient=True)
            _Live.progress.start()
        _Live.bars += 1
        task = _Live.progress.add_task(description, total=total, visible=total is None or total > 1, detail=detail)
        return task, _Live.progress


def _live_remove(task: Any) -> None:
    """Take a line off the live display (stopped with its last line)."""
    with _Live.lock:
        if _Live.progress is None:
            return
        _Live.progress.remove_task(task)
        _Live.bars -= 1
        if _Live.bars == 0:
            _Live.progress.stop()
            _Live.progress = None


@contextlib.contextmanager
def _live_task(description: str, total: int | None, detail: str = "") -> Iterator[Callable[[int], None]]:
    task, progress = _live_add(description, total, detail)
    try:
        yield lambda n: progress.advance(task, n)
    finally:
        _live_remove(task)


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
        parts.append(f"cost: {money(stats.cost_usd)}")
    if stats.failures:
        parts.append(f"{stats.failures} failed")
    line = " · ".join(parts)
    diagnosis = llm.diagnosis() if hasattr(llm, "diagnosis") else None
    return f"{line}\nwarning: {diagnosis}" if diagnosis else line


_INTERRUPT_HINT: list[str | Callable[[], str]] = []


def on_interrupt(hint: str | Callable[[], str]) -> None:
    """What to tell the user if this command is interrupted (Ctrl-C, SIGTERM): how to go on from where it stopped
    (a function is asked at that moment, so the hint can depend on how far the work got).

    The entry point prints ``interrupted — <hint>`` and exits 130 (143 for SIGTERM).
    """
    _INTERRUPT_HINT[:] = [hint]


_COMMAND_LINE: list[str] = []


def record_command_line(args: list[str]) -> None:
    """Remember the arguments the entry point was given (a hint may print the command again)."""
    _COMMAND_LINE[:] = list(args)


def command_line() -> list[str] | None:
    """The arguments of this command (after ``senseforge``) as the entry point got them, or ``None`` when it did
    not run (a command invoked in-process by a test)."""
    return list(_COMMAND_LINE) if _COMMAND_LINE else None


def interrupt_hint() -> str | None:
    """The hint the running command left with :func:`on_interrupt`, if any."""
    if not _INTERRUPT_HINT:
        return None
    hint = _INTERRUPT_HINT[0]
    return hint if isinstance(hint, str) else hint()


def stat_text(value: float | None) -> str:
    """A statistic (an accuracy, a kappa) to three places, or ``n/a``."""
    return "n/a" if value is None else f"{value:.3f}"


def money(usd: float | None) -> str:
    """US dollars as a person reads them (see :func:`senseforge.data.text.money`).

    >>> money(2.1), money(0.00042), money(0.0), money(None)
    ('$2.10', '$0.00042', '$0', 'unknown')
    """
    from senseforge.data.text import money as written

    return written(usd)
