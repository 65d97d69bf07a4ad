"""The ``senseforge`` command: a thin Typer layer, one module per noun."""

from __future__ import annotations

import logging
import sys

import typer

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
from senseforge.cli import report as report_cli
from senseforge.cli._common import err
from senseforge.errors import SenseforgeError

app = typer.Typer(
    name="senseforge",
    help="Build and evaluate commonsense-reasoning benchmarks grounded in a language and its culture.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
app.add_typer(llm_cli.app, name="llm")
app.add_typer(kb_cli.app, name="kb")
app.add_typer(eval_cli.app, name="eval")
app.add_typer(export_cli.app, name="export")
app.add_typer(build_cli.app, name="build")
app.add_typer(annotate_cli.app, name="annotate")
app.add_typer(analyze_cli.app, name="analyze")
app.command("demo")(demo_cli.demo)
app.command("finetune")(finetune_cli.finetune)
app.command("transfer")(finetune_cli.transfer)
app.command("report")(report_cli.report)


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
    logging.basicConfig(level=logging.DEBUG if debug else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")


def _one_line(text: str) -> str:
    return " ".join(text.split())


def main(argv: list[str] | None = None) -> None:
    """Entry point: one clear line for user errors, tracebacks only with ``--debug``."""
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args
    try:
        app(args=args, prog_name="senseforge", standalone_mode=False)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        err.print("aborted")
        sys.exit(130)
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
        sys.exit(1)
    except KeyboardInterrupt:
        err.print("interrupted")
        sys.exit(130)


if __name__ == "__main__":
    main()
