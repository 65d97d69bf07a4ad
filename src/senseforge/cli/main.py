"""The ``senseforge`` command: a thin Typer layer, one module per noun."""

from __future__ import annotations

import inspect
import logging
import signal
import sys
import threading
from typing import Any

import typer
from typer.core import TyperGroup

from senseforge._version import __version__
from senseforge.cli import analyze as analyze_cli
from senseforge.cli import annotate as annotate_cli
from senseforge.cli import build as build_cli
from senseforge.cli import demo as demo_cli
from senseforge.cli import eval as eval_cli
from senseforge.cli import export as export_cli
from senseforge.cli import finetune as finetune_cli
from senseforge.cli import kb as kb_cli
from senseforge.cli import llm as llm_cli
from senseforge.cli import registry as registry_cli
from senseforge.cli import report as report_cli
from senseforge.cli import runs as runs_cli
from senseforge.cli._common import err, interrupt_hint, record_command_line
from senseforge.errors import SenseforgeError


def _summary(help_text: str) -> str:
    """The first sentence of a command's help, as a group lists it."""
    words = inspect.cleandoc(help_text).split("\n\n", 1)[0].split()
    ends = [index for index, word in enumerate(words) if word.endswith(".")]
    return " ".join(words[: ends[0] + 1] if ends else words)


class _Group(TyperGroup):
    """A command group that lists each command's first sentence whole.

    Click cuts a summary that does not fit beside the command names with "..."; a summary
    given as the command's short help is wrapped instead.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for command in self.commands.values():
            if command.short_help is None and command.help:
                command.short_help = _summary(command.help)


# Help is click's plain layout: it wraps every text to the terminal and never cuts one. Rich's
# panels squeeze names, types and help into columns and cut what does not fit with "…" (at 80
# columns: defaults, env vars, long option names). The root's mode is every subcommand's.
app = typer.Typer(
    name="senseforge",
    help="Build and evaluate commonsense-reasoning benchmarks grounded in a language and its culture.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    rich_markup_mode=None,
    cls=_Group,
)
app.add_typer(llm_cli.app, name="llm", cls=_Group)
app.add_typer(kb_cli.app, name="kb", cls=_Group)
app.add_typer(eval_cli.app, name="eval", cls=_Group)
app.add_typer(export_cli.app, name="export", cls=_Group)
app.add_typer(build_cli.app, name="build", cls=_Group)
app.add_typer(annotate_cli.app, name="annotate", cls=_Group)
app.add_typer(analyze_cli.app, name="analyze", cls=_Group)
app.add_typer(runs_cli.app, name="runs", cls=_Group)
app.add_typer(registry_cli.app, name="registry", cls=_Group)
app.command("demo")(demo_cli.demo)
app.command("finetune")(finetune_cli.finetune)
app.command("transfer")(finetune_cli.transfer)
app.command("report")(report_cli.report)


class LogFormatter(logging.Formatter):
    """Log lines as a user reads them, ``warning: …``; the logger's name only with ``--debug``.

    >>> record = logging.LogRecord("senseforge.llm.cache", logging.WARNING, "", 1, "no price for m", None, None)
    >>> LogFormatter(debug=False).format(record)
    'warning: no price for m'
    >>> LogFormatter(debug=True).format(record)
    'warning senseforge.llm.cache: no price for m'
    """

    def __init__(self, *, debug: bool) -> None:
        super().__init__("%(level)s %(name)s: %(message)s" if debug else "%(level)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        record.level = record.levelname.lower()
        return super().format(record)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"senseforge {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    debug: bool = typer.Option(False, "--debug", help="Show full tracebacks and debug logs."),
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    """senseforge: LMs write, humans judge, models are measured."""
    handler = logging.StreamHandler()
    handler.setFormatter(LogFormatter(debug=debug))
    logging.basicConfig(level=logging.DEBUG if debug else logging.WARNING, handlers=[handler])


def _one_line(text: str) -> str:
    return " ".join(text.split())


INTERRUPTED = 130
"""Exit status after Ctrl-C (SIGINT), as a shell reports a process it killed with signal 2."""
TERMINATED = 143
"""Exit status after SIGTERM (signal 15)."""


class _Terminated:
    """SIGTERM handler: remembers the signal and stops the work as Ctrl-C does (a ``KeyboardInterrupt``), so the
    same clean-up runs (stores closed, finished calls kept) and the exit status says which signal it was."""

    def __init__(self) -> None:
        self.received = False

    def __call__(self, signum: int, frame: object) -> None:
        self.received = True
        raise KeyboardInterrupt


def _interrupted(terminated: _Terminated) -> None:
    """Say what was interrupted and how to go on, and exit 130 (SIGINT) or 143 (SIGTERM)."""
    hint = interrupt_hint()
    err.print(f"interrupted — {hint}" if hint else "interrupted", markup=False)
    sys.exit(TERMINATED if terminated.received else INTERRUPTED)


def main(argv: list[str] | None = None) -> None:
    """Entry point: one clear line for user errors, tracebacks only with ``--debug``.

    Ctrl-C and SIGTERM end a command with exit status 130 / 143 and a line saying how to
    go on (a build: ``--resume``), never with status 0.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    record_command_line(args)
    debug = "--debug" in args
    terminated = _Terminated()
    previous = (
        signal.signal(signal.SIGTERM, terminated) if threading.current_thread() is threading.main_thread() else None
    )
    try:
        # outside standalone mode Typer returns the code of an Exit (Ctrl-C becomes Exit(130)) instead of raising
        code = app(args=args, prog_name="senseforge", standalone_mode=False)
        if isinstance(code, int) and not isinstance(code, bool) and code != 0:
            if code == INTERRUPTED:
                _interrupted(terminated)
            sys.exit(code)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        err.print("aborted")
        sys.exit(INTERRUPTED)
    except typer.TyperException as exc:  # bad flags, missing arguments (click's usage errors)
        if type(exc).__name__ == "NoArgsIsHelpError":
            exc.show()  # type: ignore[attr-defined]
            sys.exit(0)
        if debug:
            raise
        ctx = getattr(exc, "ctx", None)
        hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
        message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
        err.print(f"error: {_one_line(message)}{hint}", markup=False)
        sys.exit(getattr(exc, "exit_code", 2))
    except SenseforgeError as exc:
        if debug:
            raise
        err.print(f"error: {_one_line(str(exc))}", markup=False)
        sys.exit(getattr(exc, "exit_code", 1))  # 1, or an error's own status (RunBusy: 75, try again later)
    except KeyboardInterrupt:
        _interrupted(terminated)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    main()
