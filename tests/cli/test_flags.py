"""One meaning per short flag across the whole ``senseforge`` CLI.

The whole Typer app is walked (every group and subcommand at every depth) and each short flag
(``-x``) is mapped to the long option it stands for. A short flag that stands for two different
long options anywhere in the CLI is a clash: ``-o`` meaning ``--out`` in one command and
``--option`` in another teaches users a reflex that breaks the next command they type.

The walk is duck-typed (groups have ``.commands``, options have ``param_type_name == "option"``)
because recent Typer releases ship their own copy of click, whose classes are not
``click.Group`` or ``click.Option``.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import typer
from typer.testing import CliRunner

from senseforge.cli.main import app

# short flag -> long name it stands for -> commands ("senseforge eval run") that use it so
FlagUses = dict[str, dict[str, set[str]]]

NO_LONG_NAME = "(no long name)"


def _is_short(opt: str) -> bool:
    return len(opt) >= 2 and opt[0] == "-" and opt[1] != "-"


def _long_name(opts: list[str]) -> str:
    """The long name a flag list stands for: its first ``--name`` (click's display order)."""
    return next((opt for opt in opts if opt.startswith("--")), NO_LONG_NAME)


def iter_options(command: Any, path: str) -> Iterator[tuple[str, Any]]:
    """Every option of a click command and of all its subcommands, at every depth, with its command path.

    ``get_params`` includes the help option, so a ``-h`` added to it would be seen too.
    """
    context = command.context_class(command, info_name=path.rsplit(" ", 1)[-1])
    for param in command.get_params(context):
        if getattr(param, "param_type_name", None) == "option":
            yield path, param
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        yield from iter_options(sub, f"{path} {name}")


def short_flag_uses(command: Any, root: str = "senseforge") -> FlagUses:
    """For each short flag in the command tree: the long names it stands for, and the commands using each."""
    uses: FlagUses = defaultdict(lambda: defaultdict(set))
    for path, option in iter_options(command, root):
        for opts in (option.opts, option.secondary_opts):
            for opt in opts:
                if _is_short(opt):
                    uses[opt][_long_name(opts)].add(path)
    return {short: dict(longs) for short, longs in uses.items()}


def find_clashes(command: Any, root: str = "senseforge") -> FlagUses:
    """The short flags that stand for more than one long option somewhere in the command tree."""
    return {short: longs for short, longs in short_flag_uses(command, root).items() if len(longs) > 1}


def describe(clashes: FlagUses) -> str:
    lines = []
    for short, longs in sorted(clashes.items()):
        lines.append(f"{short} stands for {sorted(longs)}:")
        lines += [f"    {long}: {', '.join(sorted(paths))}" for long, paths in sorted(longs.items())]
    return "\n".join(lines)


def _toy_app() -> typer.Typer:
    """A tiny CLI with deliberate clashes, one of them two groups deep."""
    toy = typer.Typer()
    inner = typer.Typer()
    deeper = typer.Typer()

    @toy.command("write")
    def write(out: str = typer.Option("x", "--out", "-o"), model: str = typer.Option("m", "--model", "-m")) -> None:
        """Uses -o for --out."""

    @toy.command("call")
    def call(
        option: str = typer.Option("k=v", "--option", "-o"), model: str = typer.Option("m", "--model", "-m")
    ) -> None:
        """Uses -o for --option; -m agrees with write."""

    @deeper.command("leaf")
    def leaf(verbose: bool = typer.Option(False, "--verbose", "-v")) -> None:
        """-v for --verbose, two levels down."""

    @deeper.command("other")
    def other(plain: bool = typer.Option(False, "--plain")) -> None:
        """No short flags."""

    @toy.command("top")
    def top(version: bool = typer.Option(False, "--version", "-v")) -> None:
        """-v for --version at the top."""

    inner.add_typer(deeper, name="deeper")
    toy.add_typer(inner, name="inner")
    return toy


def test_find_clashes_reports_each_clash_in_a_toy_app_at_every_depth() -> None:
    clashes = find_clashes(typer.main.get_command(_toy_app()), root="toy")
    assert clashes == {
        "-o": {"--out": {"toy write"}, "--option": {"toy call"}},
        "-v": {"--verbose": {"toy inner deeper leaf"}, "--version": {"toy top"}},
    }
    message = describe(clashes)
    assert "-o stands for ['--option', '--out']" in message
    assert "--verbose: toy inner deeper leaf" in message


def test_find_clashes_sees_secondary_opts_and_accepts_agreeing_uses() -> None:
    toy = typer.Typer()

    @toy.command("a")
    def a(shout: bool = typer.Option(False, "--shout/--quiet", "-s/-q")) -> None:
        """-s for --shout, -q for --quiet (the off switch, in secondary_opts)."""

    @toy.command("b")
    def b(query: str = typer.Option("", "--query", "-q")) -> None:
        """-q for --query."""

    command = typer.main.get_command(toy)
    uses = short_flag_uses(command, root="toy")
    assert uses["-s"] == {"--shout": {"toy a"}}
    assert uses["-q"] == {"--quiet": {"toy a"}, "--query": {"toy b"}}
    assert set(find_clashes(command, root="toy")) == {"-q"}

    toy_uses = short_flag_uses(typer.main.get_command(_toy_app()), root="toy")
    assert toy_uses["-m"] == {"--model": {"toy call", "toy write"}}


def test_every_short_flag_has_one_meaning_across_the_cli() -> None:
    command = typer.main.get_command(app)
    assert sum(1 for _ in iter_options(command, "senseforge")) > 50, "the walk missed the subcommands"
    clashes = find_clashes(command)
    assert not clashes, "short flags with more than one meaning:\n" + describe(clashes)


def test_dash_o_is_option_and_out_has_no_short_form() -> None:
    command = typer.main.get_command(app)
    uses = short_flag_uses(command)
    assert set(uses["-o"]) == {"--option"}, describe({"-o": uses["-o"]})
    assert {"senseforge llm generate", "senseforge eval run", "senseforge build mcsqa"} <= uses["-o"]["--option"]
    out_with_short = sorted(
        f"{path}: {'/'.join(option.opts + option.secondary_opts)}"
        for path, option in iter_options(command, "senseforge")
        if "--out" in option.opts and any(_is_short(opt) for opt in option.opts)
    )
    assert not out_with_short, "--out has a short form in: " + "; ".join(out_with_short)
    outs = {path for path, option in iter_options(command, "senseforge") if "--out" in option.opts}
    assert {"senseforge export hf", "senseforge kb question-sets", "senseforge eval run"} <= outs


def test_build_help_lists_mcsqa() -> None:
    result = CliRunner().invoke(app, ["build", "--help"])
    assert result.exit_code == 0, result.output
    assert "mcsqa" in re.sub(r"\x1b\[[0-9;]*m", "", result.output)
