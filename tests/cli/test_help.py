"""Every command's ``--help`` reads whole at 80 columns: no line wider, nothing cut short."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
import typer

from senseforge.cli.main import app

WIDTH = 80
CUTS = re.compile(r"…|\w\.\.\.$", re.MULTILINE)
"""Rich cuts text with "…"; click ends a command's cut summary with "..." (a metavar's "FILE..." ends no line)."""


def _commands(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    yield path, command
    for name, sub in sorted((getattr(command, "commands", None) or {}).items()):
        yield from _commands(sub, (*path, name))


def _own_text(command: Any) -> str:
    """What the command's help is made of (an ellipsis written there is no sign of a cut)."""
    parts = [command.help or "", command.epilog or ""]
    parts += [f"{getattr(param, 'help', '') or ''} {param.default}" for param in command.params]
    parts += [sub.help or "" for sub in (getattr(command, "commands", None) or {}).values()]
    return " ".join(parts)


def test_every_help_fits_80_columns_and_cuts_nothing(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", str(WIDTH))
    root = typer.main.get_command(app)  # built once: one process renders every page
    pages = 0
    for path, command in _commands(root):
        where = " ".join(("senseforge", *path))
        root.main([*path, "--help"], prog_name="senseforge", standalone_mode=False, terminal_width=WIDTH)
        page = capsys.readouterr().out
        assert page.startswith(f"Usage: {where} "), page
        wide = [line for line in page.splitlines() if len(line) > WIDTH]
        assert not wide, f"{where} --help: lines wider than {WIDTH}: {wide}"
        body = page.split("\n", 1)[1]  # after the usage line, whose "ARGS..." is no cut
        cut = len(CUTS.findall(body)) > len(CUTS.findall(_own_text(command)))
        assert not cut, f"{where} --help cuts text short:\n{page}"
        assert "\x1b[" not in page
        pages += 1
    assert pages > 40  # the walk reached every subcommand


MARKUP = re.compile(r":(?:mod|class|func|meth|data|attr|obj|exc):`|``|\bNone\b")
"""What a docstring says to its readers in the code, not to a user: Sphinx roles, literals, Python's None."""


def test_every_help_is_plain_text(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Every page (each command, every recipe's ``build RECIPE``, the loopback server's) in words, no markup."""
    from senseforge.llm import loopback

    monkeypatch.setenv("COLUMNS", "200")  # whole lines: a marked-up word is never split over two
    root = typer.main.get_command(app)
    pages: dict[str, str] = {}
    for path, _command in _commands(root):
        root.main([*path, "--help"], prog_name="senseforge", standalone_mode=False, terminal_width=200)
        pages[" ".join(("senseforge", *path))] = capsys.readouterr().out
    with pytest.raises(SystemExit):
        loopback.main(["--help"])
    pages["python -m senseforge.llm.loopback"] = capsys.readouterr().out
    marked = {
        where: sorted({line.strip() for line in page.splitlines() if MARKUP.search(line)})
        for where, page in pages.items()
    }
    marked = {where: lines for where, lines in marked.items() if lines}
    assert not marked, "\n".join(f"{where} --help: {line}" for where, lines in marked.items() for line in lines)
    recipes = [where for where in pages if where.startswith("senseforge build ")]
    assert {"senseforge build mcsqa", "senseforge build crow", "senseforge build human-gen"} <= set(recipes)
    assert "--until-signal" in pages["python -m senseforge.llm.loopback"]
