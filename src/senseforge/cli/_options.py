"""Command-line options generated from a config model: ``build RECIPE`` and ``eval run`` alike.

Every field of the model becomes ``--field-name`` (or the :class:`Flag`'s own name): its
type, help (the field's docstring) and default come from the field; lists are
comma-separated (or repeated); a switch is ``--x/--no-x``. Every option defaults to
``None`` on the command line, so a command passes on only what was given
(:func:`given`) and the model's defaults, validation and messages stay the model's.
"""

from __future__ import annotations

import inspect
import re
import types
import typing
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

import typer
from pydantic.fields import FieldInfo

from senseforge.pipelines.recipe import Flag

Fields = dict[str, tuple[str, str, Flag]]
"""Per generated parameter: ``(field, kind, flag)``."""


def _literals(annotation: Any) -> tuple[Any, ...] | None:
    """The values of a ``Literal`` (or a union of them, ``None`` aside); ``None`` when it is none."""
    if typing.get_origin(annotation) is typing.Literal:
        return typing.get_args(annotation)
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        parts = [_literals(a) for a in typing.get_args(annotation) if a is not type(None)]
        if parts and all(p is not None for p in parts):
            return tuple(value for part in parts for value in part or ())
    return None


def _kind(annotation: Any) -> tuple[str, type]:
    """How a field is read from the command line: ``(kind, click type)``."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    origin = typing.get_origin(annotation)
    if _literals(annotation) is not None:
        return "choice", str
    if origin in (typing.Union, types.UnionType) and len(args) == 1:
        return _kind(args[0])
    if annotation is bool:
        return "bool", bool
    if annotation in (int, float, str):
        return "scalar", annotation
    if origin in (tuple, list):
        return "list", str
    return "skip", str


_SEE = re.compile(r"\s*\(see\s+:\w+:`[^`]+`\)|[:;,]?\s*\bsee\s+:\w+:`[^`]+`")
"""A pointer into the code for its readers ("see :mod:`x`"): nothing a user of the command line can follow."""
_ROLE = re.compile(r":\w+:`(~?)([^`<]*?)(?:\s*<[^>]*>)?`")
_LITERAL = re.compile(r"``(.+?)``")


def plain(text: str) -> str:
    """A docstring's Sphinx markup as the plain text a ``--help`` page shows.

    Pointers into the code ("see :mod:`x`") go; any other role keeps its text (the last
    part of a ``~`` name); double backquotes go, their contents stay.

    >>> plain("Records per batch (they stream: see :mod:`senseforge.pipelines.flow`).")
    'Records per batch (they stream).'
    >>> plain("Read by :func:`~senseforge.data.io.read_jsonl`, ``base_url`` included.")
    'Read by read_jsonl, base_url included.'
    """
    text = _SEE.sub("", text)
    text = _ROLE.sub(lambda m: m.group(2).rsplit(".", 1)[-1] if m.group(1) else m.group(2), text)
    return " ".join(_LITERAL.sub(r"\1", text).split())


def _describe(name: str, info: FieldInfo, flag: Flag, kind: str) -> str:
    text = plain(flag.help or info.description or name.replace("_", " "))
    if kind == "choice" and not flag.help:
        text += " One of: " + ", ".join(map(str, _literals(info.annotation) or ())) + "."
    if kind == "list":
        text += " Repeatable." if flag.repeat else " Comma-separated."
    default = info.get_default(call_default_factory=True)
    if flag.show_default and default not in (None, (), [], {}) and not info.is_required():
        shown = ", ".join(map(str, default)) if isinstance(default, tuple | list) else default  # wraps at commas
        text += f" (default: {shown})"
    return text


def long_name(name: str, flag: Flag) -> str:
    """The option a field is given by: the flag's own name, or ``--field-name``."""
    return flag.name or "--" + name.replace("_", "-")


def config_params(
    settings: Mapping[str, FieldInfo], flags: Mapping[str, Flag], order: Sequence[str], skip: Collection[str] = ()
) -> tuple[list[inspect.Parameter], Fields]:
    """The options of the fields named in ``order`` (less ``skip``), and what each parameter stands for."""
    params: list[inspect.Parameter] = []
    fields: Fields = {}
    for name in order:
        info = settings[name]
        if name in skip:
            continue
        flag = flags.get(name, Flag())
        kind, click_type = _kind(info.annotation)
        if kind == "skip":
            continue
        long = long_name(name, flag)
        help_text = _describe(name, info, flag, kind)
        aliases = [f"{n}/--no-{n.removeprefix('--')}" for n in flag.aliases] if kind == "bool" else []
        names = [f"{long}/--no-{long.removeprefix('--')}"] if kind == "bool" else [long, *flag.aliases]
        if aliases:  # a switch's aliases go in their own hidden option: four names overflow a help line
            help_text = f"{help_text} Also {', '.join(flag.aliases)}."
        if flag.short:
            names.append(flag.short)
        option = typer.Option(None, *names, help=help_text)
        annotation = (bool | None) if kind == "bool" else (click_type | None)
        if kind == "list" and flag.repeat:
            annotation = list[str] | None
        params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=option, annotation=annotation))
        fields[name] = (name, kind, flag)
        if aliases:
            alias = typer.Option(None, *aliases, hidden=True)
            params.append(
                inspect.Parameter(
                    f"_alias_{name}", inspect.Parameter.KEYWORD_ONLY, default=alias, annotation=bool | None
                )
            )
            fields[f"_alias_{name}"] = (name, kind, flag)
        if flag.none_flag:
            none_name = f"_none_{name}"
            params.append(
                inspect.Parameter(
                    none_name,
                    inspect.Parameter.KEYWORD_ONLY,
                    default=typer.Option(False, flag.none_flag, help=flag.none_help),
                    annotation=bool,
                )
            )
            fields[none_name] = (name, "none", flag)
    return params, fields


def given(values: Mapping[str, Any], fields: Fields) -> dict[str, Any]:
    """The settings given on the command line (``None``: not given)."""
    out: dict[str, Any] = {}
    for param, (name, kind, flag) in fields.items():
        value = values.get(param)
        if kind == "none":
            if value:
                out[name] = None
            continue
        if value is None or name in out:
            continue
        if kind == "list" and flag.repeat:
            value = tuple(str(Path(v).resolve()) if flag.path else v for v in value)
            if not value:
                continue
        elif kind == "list":
            value = tuple(part.strip() for part in str(value).split(",") if part.strip())
        elif flag.path:
            value = str(Path(value).resolve())
        out[name] = value
    return out
