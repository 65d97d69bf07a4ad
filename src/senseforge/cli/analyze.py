"""``senseforge analyze``: the studies the papers ran on their data (see :mod:`senseforge.analyze`).

Each study is one command in its own module (``senseforge.cli.analyze_<name>``) that adds
itself to :data:`app`; every command prints a table and writes JSON, CSV and a figure to
``--out`` (default ``analysis/<name>/``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

app = typer.Typer(
    help="The papers' studies on any dataset, run directory or released file: lexical, errors, conflicts, "
    "concepts, language, stats; and contamination against the registry.",
    no_args_is_help=True,
)


def out_option(name: str) -> Any:
    """The ``--out`` option of a study (default ``analysis/<name>/``)."""
    return typer.Option(Path("analysis") / name, "--out", help=f"Output folder (default analysis/{name}/).")


def _register() -> None:
    import importlib
    import pkgutil

    import senseforge.cli as package

    for info in pkgutil.iter_modules(package.__path__):
        if info.name.startswith("analyze_"):
            importlib.import_module(f"senseforge.cli.{info.name}")


_register()
