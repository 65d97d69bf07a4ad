"""What both tools share: the form of each task type, what a task shows and carries, and reading annotations back
(see :mod:`senseforge.annotate.interop`).

A tool's form is derived from the task type's declared form (:mod:`senseforge.annotate.forms`),
never written per task type: a ``choice`` or ``rating`` is a single choice, a ``multi-choice``
or ``flags`` a multiple one, a ``text`` free text; a ``texts`` field (create's options) is one
text per row (``option_A`` …) and a ``triples`` field (cka's knowledge) is a head, relation and
tail per row (``head_1``, ``relation_1``, ``tail_1`` …) with the negated rows ticked in
``negated``. :func:`fields_for_parse` folds the tool's answers back into the fields ``parse``
reads.
"""

from __future__ import annotations

import importlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ValidationError

from senseforge.annotate import forms
from senseforge.annotate.drafting import LABELS
from senseforge.annotate.forms import Shown
from senseforge.annotate.tasktypes import TASK_TYPES, InvalidSubmission, TaskType
from senseforge.data.io import json_problem
from senseforge.data.schema import Judgement, MCItem
from senseforge.errors import ConfigError, DataValidationError, MissingDependencyError

if TYPE_CHECKING:
    from senseforge.annotate.store import AnnotationStore

FieldKind = Literal["single", "multiple", "text"]
YES_NO: tuple[str, ...] = forms.YES_NO
DEFAULT_OPTIONS = 5
"""How many rows (create's options) a form offers when there are no inputs to count them from."""
DEFAULT_TRIPLES = 5
"""How many triple rows a form offers when there are no inputs to count them from."""
MAX_TRIPLE_ROWS = 20
"""The most triple rows an import reads (a row past a task's own is read, and ``parse`` refuses it)."""
EMPTY = "—"
"""What is shown for a piece of text the input does not have (both tools want every shown text)."""
LABEL_STUDIO_PREFIX = "ls:"
ARGILLA_PREFIX = "argilla:"
BOOKKEEPING = "senseforge"
"""The key of our task type, input id and input in a Label Studio task's ``data`` (and ``meta``)."""
ARGILLA_META = ("senseforge_task_type", "senseforge_input_id", "senseforge_input")
"""Record metadata keys: our task type, the input id and the input as JSON."""
ARGILLA_NAME = re.compile(r"^(?=.*[a-z0-9])[a-z0-9_-]+$")
"""The names an Argilla server accepts for fields and questions."""
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
"""Characters XML 1.0 cannot carry at all, escaped or not."""
_SUBMITTED = "submitted"
_SKIPPED_STATUSES = frozenset({"draft", "discarded"})


@dataclass(frozen=True)
class FormField:
    """One field of a tool's form: a single choice, a multiple choice or free text.

    ``source`` is the declared field it comes from (itself, unless a row of a ``texts`` or
    ``triples`` field), ``row`` its row (0-based) and ``part`` its part of a triple.
    """

    name: str
    kind: FieldKind
    title: str
    options: tuple[str, ...] = ()
    required: bool = False
    option_texts: tuple[str, ...] = ()
    """What the tool shows for each option (default: the option)."""
    source: str = ""
    row: int | None = None
    part: str = ""

    def text_of(self, option: str) -> str:
        if len(self.option_texts) == len(self.options) and option in self.options:
            return self.option_texts[self.options.index(option)]
        return option

    @property
    def argilla_name(self) -> str:
        """The name in Argilla, which takes lower-case names only (``option_A`` → ``option_a``)."""
        return self.name.lower()


@dataclass(frozen=True)
class Form:
    """What a task type shows and asks, the same for every tool."""

    task_type: str
    instructions: str
    shown: tuple[Shown, ...]
    fields: tuple[FormField, ...]

    def field(self, name: str) -> FormField | None:
        return next((f for f in self.fields if f.name == name), None)

    @property
    def anchor(self) -> str:
        """The shown text every Label Studio control points at (``toName``)."""
        return self.shown[0].key


@dataclass(frozen=True)
class Rejection:
    """An annotation that did not become a judgement, with where it is and why."""

    location: str
    item_id: str | None
    annotator: str | None
    problems: list[str]

    def __str__(self) -> str:
        who = f" by {self.annotator}" if self.annotator else ""
        item = f" (item {self.item_id})" if self.item_id else ""
        return f"{self.location}{item}{who}: {'; '.join(self.problems)}"


@dataclass
class Imported:
    """What an import made: the judgements, the rejected annotations, and how many were skipped."""

    judgements: list[Judgement] = field(default_factory=list)
    rejected: list[Rejection] = field(default_factory=list)
    skipped: int = 0
    """Annotations the annotator skipped (Label Studio) or left as draft or discarded (Argilla)."""


# --- the form of each task type ----------------------------------------------------------


def _task_type(name: str) -> TaskType:
    if name not in TASK_TYPES:
        raise ConfigError(f"unknown task type {name!r}: one of {', '.join(TASK_TYPES)}")
    return TASK_TYPES[name]


def _inputs(task_type: str, inputs: Iterable[BaseModel | Mapping[str, Any]]) -> list[BaseModel]:
    model = _task_type(task_type).input_model
    out: list[BaseModel] = []
    for index, given in enumerate(inputs):
        if isinstance(given, model):
            out.append(given)
            continue
        raw = given.model_dump(mode="json") if isinstance(given, BaseModel) else given
        try:
            out.append(model.model_validate(raw))
        except ValidationError as exc:
            raise DataValidationError(f"input {index + 1}: not a {model.__name__}: {exc}") from exc
    return out


def _union(groups: Iterable[Iterable[str]]) -> tuple[str, ...]:
    """Every value of the groups once, in the order first seen."""
    seen: dict[str, None] = {}
    for group in groups:
        for value in group:
            seen.setdefault(str(value), None)
    return tuple(seen)


_KINDS: dict[str, FieldKind] = {
    "choice": "single",
    "rating": "single",
    "multi-choice": "multiple",
    "flags": "multiple",
    "text": "text",
}


def _rows(declared: forms.FormField, views: Sequence[Mapping[str, Any]], default: int) -> tuple[int, int]:
    """The fewest and the most rows a ``texts`` or ``triples`` field has over the views."""
    counts = [declared.rows(view) for view in views] if declared.rows is not None else []
    return (min(counts), max(counts)) if counts else (default, default)


def _tool_fields(
    declared: forms.FormField, views: Sequence[Mapping[str, Any]], *, rows: int | None = None
) -> list[FormField]:
    """The tool's fields for one declared field over these views (``rows``: that many rows of a triples field)."""
    name = declared.name
    if declared.kind == "texts":
        always, most = _rows(declared, views, DEFAULT_OPTIONS)
        singular = name.removesuffix("s")
        return [
            FormField(f"{singular}_{LABELS[i]}", "text", f"{singular.capitalize()} {LABELS[i]}", required=i < always,
                      source=name, row=i)
            for i in range(min(most, len(LABELS)))
        ]  # fmt: skip
    if declared.kind == "triples":
        most = rows if rows is not None else _rows(declared, views, DEFAULT_TRIPLES)[1]
        out: list[FormField] = []
        for i in range(most):
            out += [
                FormField(f"head_{i + 1}", "text", f"Triple {i + 1}: head (words of the text, or a short phrase)",
                          source=name, row=i, part="head"),
                FormField(f"relation_{i + 1}", "single", f"Triple {i + 1}: relation", declared.options,
                          source=name, row=i, part="relation"),
                FormField(f"tail_{i + 1}", "text", f"Triple {i + 1}: tail", source=name, row=i, part="tail"),
            ]  # fmt: skip
        numbers = tuple(str(i + 1) for i in range(most))
        out.append(FormField("negated", "multiple", "Triples whose relation is negated (their numbers)", numbers,
                             source=name, part="negated"))  # fmt: skip
        return out
    options = _union(declared.options_for(view) for view in views) if views else declared.options_for(None)
    texts = tuple(declared.text_of(o) for o in options)
    return [FormField(name, _KINDS[declared.kind], declared.title, options, declared.required, texts, source=name)]


def form_of(task_type: str, inputs: Sequence[BaseModel] = ()) -> Form:
    """The tool form of a task type over these inputs, derived from its declared form.

    The options taken from a task's view (answer labels, flags) are those of all the
    inputs; without inputs, the declared static ones.

    Raises:
        ConfigError: unknown task type.
    """
    kind = _task_type(task_type)
    views = [kind.view(i) for i in inputs]
    declared = kind.form
    fields = [made for item in declared.fields for made in _tool_fields(item, views)]
    return Form(task_type, declared.instructions, declared.shown, tuple(fields))


def _text(value: Any) -> str:
    text = "" if value is None else str(value)
    return text if text.strip() else EMPTY


def shown_texts(task_type: str, task: BaseModel) -> dict[str, str]:
    """The texts a task shows, by :class:`Shown` key (never empty: a missing one is ``—``)."""
    kind = _task_type(task_type)
    view = kind.view(task)
    return {shown.key: _text(shown.render(view)) for shown in kind.form.shown}


def _input_id(task: BaseModel) -> str:
    return str(getattr(task, "id"))  # noqa: B009 — every task input model has an id


def carried(task_type: str, task: BaseModel) -> dict[str, Any]:
    """The input a task carries to the tool and back (JSON-ready): all of it, unless its view hides parts.

    An item whose view leaves its answer out (blind answering) travels as what the view
    shows: id, language, question and choices, which is all its ``parse`` reads. The tools
    hand the whole task data to the annotator's browser, so the answer, the creator and
    the rest of the metadata stay at home.
    """
    if isinstance(task, MCItem) and "answer" not in _task_type(task_type).view(task):
        task = MCItem(id=task.id, lang=task.lang, question=task.question, choices=task.choices)
    return task.model_dump(mode="json")


def _current_draft(task: BaseModel) -> dict[str, Any]:
    """A revise task's current draft as form values: what the creator starts editing from."""
    draft = getattr(task, "draft")  # noqa: B009 — revise inputs are DraftItems
    values: dict[str, Any] = {"question": draft.question, "answer": draft.answer, "distractor": draft.distractor}
    for index, choice in enumerate(draft.choices[: len(LABELS)]):
        values[f"option_{LABELS[index]}"] = choice.text
    if draft.concept_form:
        values["concept_form"] = draft.concept_form
    return values


# --- Label Studio ------------------------------------------------------------------------


def _who(raw: Any) -> str | None:
    """The user behind a ``completed_by`` (an id, or a user object): email, else username, else id."""
    if isinstance(raw, Mapping):
        for key in ("email", "username", "id"):
            value = raw.get(key)
            if value not in (None, ""):
                return str(value).strip() or None
        return None
    if raw is None or isinstance(raw, bool):
        return None
    return str(raw).strip() or None


def _annotator(who: str | None, prefix: str, names: Mapping[str, str] | None) -> str | None:
    if who is None:
        return None
    if names and who in names and str(names[who]).strip():
        return str(names[who]).strip()
    return f"{prefix}{who}"


def _known_inputs(task_type: str, store: AnnotationStore | None) -> dict[str, BaseModel] | None:
    if store is None:
        return None
    return {_input_id(task): task for task, _k, _group in store.inputs(task_type)}


def _resolve_input(
    task_type: str, bookkeeping: Any, fallback_id: Any, known: dict[str, BaseModel] | None
) -> tuple[BaseModel | None, str | None, list[str]]:
    """The task's input (from the store when given, else from the exported copy), its id, and problems."""
    entry = bookkeeping if isinstance(bookkeeping, Mapping) else {}
    stated = entry.get("task_type")
    raw_id = entry.get("input_id", fallback_id)
    input_id = None if raw_id in (None, "") else str(raw_id)
    if stated is not None and stated != task_type:
        return None, input_id, [f"a {stated} task, not {task_type}"]
    if input_id is None:
        return None, None, ["no senseforge input id (was this file exported by `senseforge annotate export`?)"]
    if known is not None:
        found = known.get(input_id)
        if found is None:
            return None, input_id, [f"no {task_type} task {input_id!r} in the run store"]
        return found, input_id, []
    raw = entry.get("input")
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError as exc:
            return None, input_id, [f"the input JSON does not parse: {exc}"]
    if not isinstance(raw, Mapping):
        return None, input_id, ["no input with the task (import it into the run it came from instead)"]
    model = _task_type(task_type).input_model
    try:
        return model.model_validate(raw), input_id, []
    except ValidationError as exc:
        return None, input_id, [f"the input is not a {model.__name__}: {exc.error_count()} problem(s)"]


def readable_fields(form: Form) -> dict[str, FormField]:
    """The tool fields an import reads for a form, by name: its own, and rows past a task's own.

    An export's form spans every task exported, so an annotation may fill a row (an option,
    a triple) its own task does not have; it is read, and ``parse`` says there are too many.
    """
    out = {item.name: item for item in form.fields}
    for item in _task_type(form.task_type).form.fields:
        if item.kind == "texts":
            singular = item.name.removesuffix("s")
            for i, label in enumerate(LABELS):
                out[f"{singular}_{label}"] = FormField(f"{singular}_{label}", "text", "", source=item.name, row=i)
        elif item.kind == "triples":
            for tool in _tool_fields(item, [], rows=MAX_TRIPLE_ROWS):
                out[tool.name] = tool
    return out


def fields_for_parse(form: Form, task: BaseModel, values: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """A tool's answers (by our field name) → the fields ``parse`` reads, and what does not fit the form.

    A single choice becomes a string, a multiple choice a list, a text one string (several
    texts joined by new lines). The rows of a ``texts`` field (``option_A`` …) become its
    list, one per row the task has (more when more were written, so ``parse`` says so);
    the rows of a ``triples`` field become its JSON rows (a negated row's relation
    ``Not <relation>``).
    """
    problems: list[str] = []
    fields: dict[str, Any] = {}
    declared = _task_type(form.task_type).form
    grouped = {f.source for f in form.fields if f.row is not None or f.part}
    readable = readable_fields(form)
    rows: dict[str, dict[int, dict[str, str]]] = {}
    for name, value in values.items():
        item = readable.get(name)
        if item is None:
            problems.append(f"{name}: not a field of the {form.task_type} form")
            continue
        given = value if isinstance(value, list | tuple) else [value]
        given = [v for v in given if v is not None]
        if item.kind == "single":
            picked = [str(v) for v in given if str(v) != ""]
            if len(picked) > 1:
                problems.append(f"{name}: pick one (got {len(picked)})")
            text = picked[0] if picked else None
        elif item.kind == "multiple":
            text = None
            if not item.part:
                fields[name] = [str(v) for v in given]
                continue
            for number in map(str, given):
                if number not in item.options:
                    problems.append(f"{name}: {number[:10]!r} is not one of {', '.join(item.options)}")
                    continue
                rows.setdefault(item.source, {}).setdefault(int(number) - 1, {})["negated"] = "yes"
        else:
            text = "\n".join(str(v) for v in given)
        if text is None:
            continue
        if item.row is not None:
            rows.setdefault(item.source, {}).setdefault(item.row, {})[item.part or "text"] = text
        else:
            fields[name] = text
    view = _task_type(form.task_type).view(task)
    for source in sorted(grouped):
        group = declared.field(source)
        assert group is not None
        found = rows.get(source, {})
        if group.kind == "texts":
            texts = [found.get(i, {}).get("text", "") for i in range(max(found, default=-1) + 1)]
            written = [i for i, text in enumerate(texts) if text.strip()]
            wanted = group.rows(view) if group.rows is not None else len(texts)
            texts += [""] * max(0, wanted - len(texts))
            fields[source] = texts[: max(wanted, written[-1] + 1 if written else 0)]
        else:
            triples = []
            for _, row in sorted(found.items()):
                relation = row.get("relation", "")
                if row.get("negated") and relation:
                    relation = f"Not {relation}"
                if row.get("head", "").strip() or row.get("tail", "").strip():
                    triples.append({"head": row.get("head", ""), "relation": relation, "tail": row.get("tail", "")})
            fields[source] = triples
    return fields, problems


def _parse(
    form: Form, task: BaseModel, values: Mapping[str, Any], annotator: str
) -> tuple[Judgement | None, list[str]]:
    fields, problems = fields_for_parse(form, task, values)
    if problems:
        return None, problems
    try:
        made = _task_type(form.task_type).parse(task, fields)
    except InvalidSubmission as exc:
        return None, list(exc.problems)
    except ValidationError as exc:
        return None, [f"{'.'.join(str(p) for p in e['loc']) or 'judgement'}: {e['msg']}" for e in exc.errors()]
    return made.model_copy(update={"annotator": annotator}), []


class _Collector:
    """Judgements by (item, annotator): a later annotation by the same person replaces an earlier one."""

    def __init__(self) -> None:
        self.result = Imported()
        self._kept: dict[tuple[str, str], tuple[Judgement, str]] = {}

    def reject(self, location: str, item_id: str | None, annotator: str | None, problems: list[str]) -> None:
        self.result.rejected.append(Rejection(location, item_id, annotator, problems))

    def keep(self, judgement: Judgement, location: str) -> None:
        key = (judgement.item_id, judgement.annotator)
        if key in self._kept:
            earlier = self._kept[key][1]
            self.reject(
                earlier, judgement.item_id, judgement.annotator, [f"replaced by the same annotator's {location}"]
            )
        self._kept[key] = (judgement, location)

    def done(self) -> Imported:
        self.result.judgements = [judgement for judgement, _ in self._kept.values()]
        return self.result


def read_export(path: str | Path) -> Any:
    """A tool's export file: one JSON document (a list of tasks or records), or JSON Lines.

    Raises:
        DataValidationError: neither parses (``file:line: problem``).
    """
    source = Path(path)
    try:
        text = source.read_text(encoding="utf-8")
    except OSError as exc:
        raise DataValidationError(f"{source}: cannot read it: {exc.strerror or exc}") from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as whole:
        if whole.lineno == 1:  # one JSON document that does not parse
            raise DataValidationError(f"{source}:1: not JSON at {json_problem(whole)}") from whole
        rows: list[Any] = []
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise DataValidationError(
                    f"{source}:{number}: not JSON (nor JSON Lines) at {json_problem(exc)}"
                ) from exc
        return rows


def _optional(module: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        package = module.split(".", 1)[0].replace("_", "-")
        raise MissingDependencyError(f"checking the files needs {package}: pip install 'senseforge[interop]'") from exc
