"""MkDocs hooks: the pages' generated parts, made from the code at build time so they cannot drift.

A page asks for a generated part with a marker on a line of its own:

- ``<!-- generated: settings RECIPE -->``: the recipe's settings (``RecipeConfig.settings()``) with the flag
  ``senseforge build RECIPE`` makes for each, its type, default and description;
- ``<!-- generated: build-options RECIPE -->``: every option of ``senseforge build RECIPE --help``;
- ``<!-- generated: cli -->``: the whole command-line reference, walked from the Typer app;
- ``<!-- generated: layers -->``: the import-linter contracts of ``pyproject.toml``;
- ``<!-- generated: gallery -->``: every task type of the annotation app with its committed screenshot;
- ``<!-- generated: funnel PATH -->``: the funnel of a real run (a ``funnel.json`` under ``tests/fixtures/golden``);
- ``<!-- generated: stages RECIPE -->``: the recipe's source and stages in order, each with its kind and the first
  line of its docstring, read from ``Recipe.stages``, beside the paper's step it carries out (:data:`PAPER_STEPS`).

The build runs with ``src`` importable (``PYTHONPATH=src`` or an installed senseforge).
"""

from __future__ import annotations

import re
from typing import Any

_MARKER = re.compile(r"^<!-- generated: ([a-z-]+)(?: (\S+))? -->$", re.MULTILINE)


def _cell(text: object) -> str:
    """One table cell: one line, reST roles and double backticks as Markdown."""
    plain = re.sub(r":[a-z]+:`~?([^`]+)`", r"`\1`", " ".join(str(text).split()).replace("``", "`"))
    return plain.replace("|", "\\|")


def _root() -> Any:
    import typer

    from senseforge.cli.main import app

    return typer.main.get_command(app)


def _context(command: Any, name: str, parent: Any = None) -> Any:
    import typer

    return typer.Context(command, parent=parent, info_name=name)


def _build_command(recipe: str) -> Any:
    root = _root()
    ctx = _context(root, "senseforge")
    build = root.get_command(ctx, "build")
    command = build.get_command(_context(build, "build", ctx), recipe)
    if command is None:
        raise ValueError(f"no recipe {recipe!r} under `senseforge build`")
    return command


def _flag(param: Any) -> str:
    if param.param_type_name != "option":
        return f"`{(param.name or '').upper()}`"
    names = [*param.opts, *param.secondary_opts]
    return ", ".join(f"`{name}`" for name in names)


def _default(param: Any) -> str:
    if param.param_type_name == "option" and param.is_flag and not param.default:
        return ""
    default = param.default
    if default is None or default == () or callable(default):
        return ""
    return f"`{default}`"


def settings_table(recipe: str) -> str:
    """The recipe's settings, each with its flag, type, default and description."""
    from senseforge.pipelines.recipes import get_recipe

    model = get_recipe(recipe).config_model
    params = {param.name: param for param in _build_command(recipe).params}
    rows = ["| setting | flag | type | default | what it does |", "|---|---|---|---|---|"]
    for name, info in model.settings().items():
        if name == "recipe":
            continue
        param = params.get(name)
        flag = _flag(param) if param is not None else "`--set " + name + "=…`"
        annotation = info.annotation
        shown = annotation.__name__ if isinstance(annotation, type) else str(annotation).replace("typing.", "")
        default: Any = info.get_default(call_default_factory=True)
        rows.append(f"| `{name}` | {flag} | `{_cell(shown)}` | `{_cell(default)}` | {_cell(info.description or '')} |")
    return "\n".join(rows)


def options_table(command: Any) -> str:
    """A command's arguments and options as a table."""
    rows = ["| option | default | help |", "|---|---|---|"]
    for param in command.params:
        help_text = getattr(param, "help", None) or ""
        rows.append(f"| {_flag(param)} | {_default(param)} | {_cell(help_text)} |")
    return "\n".join(rows) if len(rows) > 2 else "(no options)"


def cli_reference() -> str:
    """Every command of ``senseforge``, depth first, with its usage, help and options."""
    out: list[str] = []

    def walk(command: Any, ctx: Any, depth: int) -> None:
        path = ctx.command_path
        usage = command.collect_usage_pieces(ctx)
        out.append(f"{'#' * min(depth + 2, 6)} `{path}`\n")
        out.append(f"```text\nUsage: {path} {' '.join(usage)}\n```\n")
        if command.help:
            out.append(command.help.strip() + "\n")
        if command.params:
            out.append(options_table(command) + "\n")
        if hasattr(command, "list_commands"):
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                if sub is not None and not sub.hidden:
                    walk(sub, _context(sub, name, ctx), depth + 1)

    root = _root()
    walk(root, _context(root, "senseforge"), 0)
    return "\n".join(out)


def layers_table() -> str:
    """The import-linter contracts of ``pyproject.toml``: each contract, and a layers contract's layers top down."""
    import tomllib
    from pathlib import Path

    config = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text(encoding="utf-8"))
    out: list[str] = []
    for contract in config["tool"]["importlinter"]["contracts"]:
        out.append(f"**{contract['name']}** (`{contract['type']}`)\n")
        if contract["type"] == "layers":
            out.append("| layer (top first) | modules |\n|---|---|")
            for number, layer in enumerate(contract["layers"], 1):
                names = ", ".join(f"`senseforge.{name.strip()}`" for name in layer.split("|"))
                out.append(f"| {number} | {names} |")
            out.append("")
        else:
            for key, value in contract.items():
                if key not in {"id", "name", "type"}:
                    out.append(f"- {key}: {', '.join(f'`{v}`' for v in value) if isinstance(value, list) else value}")
            out.append("")
    return "\n".join(out)


def funnel_table(path: str) -> str:
    """A stored run's funnel: records into and out of each stage, and why the rest were dropped."""
    import json
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    file = (root / path).resolve()
    if root / "tests" / "fixtures" / "golden" not in file.parents:
        raise ValueError(f"funnel {path!r}: name a funnel.json under tests/fixtures/golden")
    doc = json.loads(file.read_text(encoding="utf-8"))
    rows = ["| stage | in | out | dropped, and why |", "|---|---:|---:|---|"]
    for stage in doc["stages"]:
        why = ", ".join(f"{reason} {count}" for reason, count in sorted(stage.get("rejected", {}).items()))
        rows.append(f"| {stage['stage']} | {stage['in']} | {stage['out']} | {_cell(why)} |")
    unit = doc.get("kept_unit", "item")
    rows.append(f"\nkept: **{doc['kept']}** {unit}(s); splits: {doc.get('splits') or {}}  \n(`{path}`)")
    return "\n".join(rows)


PAPER_STEPS: dict[str, dict[str, str]] = {
    "mcsqa": {
        "select": "1. question sets from ConceptNet: an anchor, a relation, three target concepts",
        "generate": "2. the LM writes one question per set, one target as the answer",
        "filter": "2. the rule-based filter on the written question",
        "refine": "3. the LM keeps or rewrites the question",
        "filter_refined": "3. the filter again, after refining",
        "contamination": "(ours, with `--registry`) copies of a registered benchmark's items",
        "distractors": "4. the LM adds two distractors from the three choices alone",
        "shuffle": "5. the five choices shuffled and labelled A–E",
        "verify": "6. LM verification: answered right → Easy, wrong → human review",
        "review": "7. human verification: all reviewers accept → Hard, else removed",
        "moderate": "8. the moderation filter",
        "split": "9. 80/10/10 split, stratified by difficulty",
    },
    "culture-gen": {
        "batches": "§4.3 input: concepts per category, at most five to a call",
        "generate": "§4.3 the LM writes the questions directly in the target language",
        "check": "§4.3 the multiple-choice shape and the concept in the question",
        "dedup": "§4.3 no exact duplicate item",
        "contamination": "(ours, with `--registry`) copies of a registered benchmark's items",
        "language": "(ours) the language the question is in, recorded only",
        "moderate": "(ours) the moderation filter",
    },
    "culture-adapt": {
        "source": "§4.1 input: the English CommonsenseQA items with their splits",
        "screen": "§4.1 offensive words and ambiguous options dropped",
        "extract": "§4.1 the person names and places of an item",
        "relevance": "§4.1 concept, names and places judged by five prompts each",
        "adapt": "§4.1 an irrelevant element → the item rewritten (or only its names)",
        "check": "(ours) the multiple-choice shape kept after rewriting",
        "localize": "§4.1 the item in the first target language",
        "translate": "§4.1 translation into the second language",
        "back_translate": "§4.1 back-translation",
        "contamination": "(ours, with `--registry`) copies of a registered benchmark's items",
        "keep": "§4.1 the concept still present and the translation faithful, in every language or none",
        "self_duplicates": "(ours, with `--registry`) copies among the build's own items",
    },
    "human-gen": {
        "slots": "§4.2 each annotator's (category, concept) assignments",
        "create": "§4.2 an annotator writes the question, five options, the answer and a hard distractor",
        "qc": "App. C quality control and revision rounds",
        "contamination": "(ours, with `--registry`) copies of a registered benchmark's items",
        "answer": "§4.2 the other pool members answer blind; ambiguity exclusion; majority",
        "self_duplicates": "(ours, with `--registry`) copies among the build's own items",
    },
    "crow": {
        "contexts": "the task examples, split into context and target",
        "cka": "1. commonsense knowledge annotation (CKA)",
        "ckv": "2. knowledge validation (CKV): kept with at least two of three validators",
        "wsg": "3. Winograd-style schema generation (WSG): a minimal rewrite that breaks a triple",
        "edits": "3. WSG's rule: at most five words changed",
        "dedup": "(ours) identical rewrites of a context merged",
        "contamination": "(ours, with `--registry`) copies of a registered benchmark's items",
        "wsv": "4. schema validation (WSV): kept with at least two of three validators",
    },
}
"""The paper's step each stage carries out, by recipe and stage name (hand-written; "(ours)" where the paper has
none). A stage missing here fails the build, so a new stage cannot slip onto a page without its row."""


def _kind(stage: Any) -> str:
    from senseforge.pipelines.stage import ModelStage, PeopleStage, Route

    if isinstance(stage, PeopleStage):
        return "people"
    if isinstance(stage, ModelStage):
        return "model"
    if isinstance(stage, Route):
        return f"{_kind(stage.chosen)}, one of two ways per item"
    return "rule"


def _described(stage: Any) -> type:
    """The class whose docstring says what a stage does: a route's own is generic, so its chosen stage's."""
    from senseforge.pipelines.stage import Route

    return _described(stage.chosen) if isinstance(stage, Route) else type(stage)


def stages_table(recipe: str) -> str:
    """The recipe's source and stages in order: kind, what the code says it does, and the paper's step.

    The stages are those of a config with every optional stage the hook can switch on without a file (the
    contamination gate, given a registry); review stages other settings add are named in the page's text.
    """
    from senseforge.pipelines.recipes import get_recipe

    found = get_recipe(recipe)
    model = found.config_model
    values: dict[str, Any] = {"recipe": recipe}
    if "lang" in model.model_fields:
        values["lang"] = "en"
    if "registry" in model.model_fields:
        values["registry"] = "registry"
    config = model(**values)
    steps = PAPER_STEPS.get(recipe, {})
    source = found.source(config)
    rows = ["| # | stage | kind | what it does (from the code) | the paper's step |", "|---:|---|---|---|---|"]
    pieces = [(source.name, "source", type(source)), *((s.name, _kind(s), _described(s)) for s in found.stages(config))]
    for number, (name, kind, cls) in enumerate(pieces):
        if name not in steps:
            raise ValueError(f"stages {recipe}: no paper step for stage {name!r} in tools/docs_hooks.py PAPER_STEPS")
        doc = _cell((cls.__doc__ or "").strip().split("\n\n")[0])
        rows.append(f"| {number} | `{name}` | {kind} | {doc} | {_cell(steps[name])} |")
    return "\n".join(rows)


def gallery() -> str:
    """Every registered task type with its screenshot (``docs/img/tasks/NAME.png``, written by ``make screenshots``)."""
    from pathlib import Path

    from senseforge.annotate.tasktypes import TASK_TYPES

    folder = Path(__file__).resolve().parents[1] / "docs" / "img" / "tasks"
    out: list[str] = []
    for name, task in sorted(TASK_TYPES.items()):
        summary = _cell((type(task).__doc__ or "").strip().split("\n")[0])
        out.append(f"## `{name}`\n\n{summary}\n")
        if (folder / f"{name}.png").is_file():
            out.append(f"![The {name} page](../img/tasks/{name}.png)\n")
        else:
            raise ValueError(f"no screenshot of task type {name!r}: run `make screenshots`")
    return "\n".join(out)


def render(kind: str, arg: str | None) -> str:
    """The generated text for one marker."""
    if kind == "settings" and arg:
        return settings_table(arg)
    if kind == "build-options" and arg:
        return options_table(_build_command(arg))
    if kind == "funnel" and arg:
        return funnel_table(arg)
    if kind == "stages" and arg:
        return stages_table(arg)
    if kind == "gallery":
        return gallery()
    if kind == "layers":
        return layers_table()
    if kind == "cli":
        return cli_reference()
    raise ValueError(f"unknown generated part {kind!r} {arg or ''}")


def on_page_markdown(markdown: str, **_: Any) -> str:
    """MkDocs hook: replace every marker in a page with what it asks for."""
    return _MARKER.sub(lambda match: render(match.group(1), match.group(2)), markdown)
