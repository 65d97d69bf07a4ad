"""Label Studio and Argilla 2.x: our annotation tasks out to them, their annotations back in as judgements.

Every task type has one *form*: the pieces of text an annotator is shown (from the task
type's :meth:`~senseforge.annotate.tasktypes.TaskType.view`) and the fields its
:meth:`~senseforge.annotate.tasktypes.TaskType.parse` reads, each a single choice, a
multiple choice or free text (:func:`form_of`). Both tools get that form in their own
terms, and both ways go through the same ``parse`` as the app, so a judgement made in
Label Studio or Argilla is exactly the judgement the same answers make in our app.

Label Studio
    :func:`label_studio_export` gives tasks in Label Studio's import format (``data``:
    the texts shown, and under ``data.senseforge`` our task type, the input id and the
    input) and a labeling config (``View``/``Header``/``Text`` for what is shown,
    ``Choices`` and ``TextArea`` named as our fields). The config is built with
    :mod:`xml.etree.ElementTree`, so an option taken from an item (an answer label) is
    escaped, never spliced in; item texts travel only in the JSON. A ``revise`` task comes
    with the current draft as a prediction, so the creator edits it rather than retyping.
    :func:`label_studio_import` reads Label Studio's JSON export (tasks with
    ``annotations``); skipped annotations (``was_cancelled``) are left out.
Argilla 2.x
    :func:`argilla_export` gives dataset settings in the shape ``rg.Settings.from_json``
    reads (text fields; label, multi-label and text questions) and records in the shape
    ``rg.Record.from_dict`` reads (id = our input id; metadata: our task type, input id and
    input JSON). Argilla wants lower-case names, so ``option_A`` is ``option_a`` there.
    A ``revise`` record suggests the current draft. :func:`argilla_import` reads records
    as Argilla exports them: nested (``Record.to_dict()``: ``responses`` per question, each
    with ``user_id``, ``value`` and, when the exporter kept it, ``status``) or flat
    (``records.to_list(flatten=True)``: ``<question>.responses``, ``.users`` and
    ``.status``). Only ``submitted`` responses become judgements; ``draft`` and
    ``discarded`` ones are skipped, and a response without a status is rejected
    (``Record.to_dict()`` drops it, so a draft could not be told from a submission).

A task carries its whole input, so an import needs nothing else, except where the
task type's view hides part of it: a blind ``answer`` item travels without its answer,
creator and metadata (the tools hand all task data to the annotator's browser), which
its ``parse`` never reads (:func:`carried`).

Annotators are named ``<prefix><who>``: for Label Studio ``who`` is the ``completed_by``
user's email, else username, else id (prefix ``ls:``); for Argilla the ``user_id``
(prefix ``argilla:``). ``names`` maps a tool's user (email, username or id) to one of
our annotator names instead (the creator of a draft must be the one who revises it).

Nothing here needs ``label-studio-sdk`` or ``argilla``: the files are plain JSON and
XML. :func:`check_label_studio` and :func:`check_argilla` validate them with the tools'
own packages (``pip install 'senseforge[interop]'``) when those are installed.

An annotation that ``parse`` refuses, or that does not fit the form, becomes a
:class:`Rejection` (where it is, who made it, every problem); it never stops an import.
"""

from __future__ import annotations

import importlib
import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ValidationError

from senseforge.annotate.tasktypes import (
    ADAPT_ERRORS,
    ADAPT_VERDICTS,
    LABELS,
    OPTION_ERRORS,
    QC_VERDICTS,
    QUESTION_ERRORS,
    TASK_TYPES,
    VERIFY_FLAGS,
    InvalidSubmission,
    TaskType,
)
from senseforge.data.io import atomic_open
from senseforge.data.schema import Judgement, MCItem
from senseforge.errors import ConfigError, DataValidationError, MissingDependencyError

if TYPE_CHECKING:
    from senseforge.annotate.store import AnnotationStore

FieldKind = Literal["single", "multiple", "text"]
YES_NO: tuple[str, ...] = ("yes", "no")
DEFAULT_OPTIONS = 5
"""How many option labels a form offers when there are no inputs to count them from."""
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
class Shown:
    """A piece of text the annotator reads: a Label Studio ``Text``, an Argilla text field."""

    key: str
    title: str


@dataclass(frozen=True)
class FormField:
    """One field ``parse`` reads: a single choice, a multiple choice or free text."""

    name: str
    kind: FieldKind
    title: str
    options: tuple[str, ...] = ()
    required: bool = False

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


def _labels(views: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    """The choice labels of the items (answer's choice), or A–E with no items."""
    found = _union([c["label"] for c in view["choices"]] for view in views)
    return found or tuple(LABELS[:DEFAULT_OPTIONS])


def _draft_fields(views: Sequence[Mapping[str, Any]], verb: str) -> tuple[FormField, ...]:
    """The fields of create and revise: the question, one text per option, the answer, the distractor."""
    counts = [int(view["options"]) for view in views] or [DEFAULT_OPTIONS]
    labels = tuple(LABELS[: max(counts)])
    always = min(counts)
    question = f"{verb} question (it must contain the concept, or the form of it you give below)"
    distractor = "The hard distractor (an option that could pass for the answer)"
    options = [
        FormField(f"option_{label}", "text", f"Option {label}", required=i < always) for i, label in enumerate(labels)
    ]
    return (
        FormField("question", "text", question, required=True),
        *options,
        FormField("answer", "single", "The right option", labels, required=True),
        FormField("distractor", "single", distractor, labels, required=True),
        FormField("concept_form", "text", "The form of the concept the question uses, if not the concept as given"),
        FormField("comment", "text", "Comment (optional)"),
    )


_ITEM: tuple[Shown, ...] = (Shown("item_question", "Question"), Shown("item_choices", "Options"))
_DRAFT: tuple[Shown, ...] = (
    Shown("item_question", "Question"),
    Shown("item_choices", "Options"),
    Shown("item_answer", "Answer"),
    Shown("item_distractor", "Hard distractor"),
    Shown("item_concept_form", "Form of the concept used"),
)


def form_of(task_type: str, inputs: Sequence[BaseModel] = ()) -> Form:
    """The form of a task type over these inputs (the answer labels and option count come from them).

    Raises:
        ConfigError: unknown task type.
    """
    kind = _task_type(task_type)
    views = [kind.view(i) for i in inputs]
    if task_type == "verify":
        verify_flags = _union(view["flags"] for view in views) or VERIFY_FLAGS
        return Form(
            task_type,
            "Does the marked answer follow from common sense, and is it the only right one?",
            (*_ITEM, Shown("item_answer", "Marked answer")),
            (
                FormField("accept", "single", "Accept the marked answer?", YES_NO, required=True),
                FormField("flags", "multiple", "Problems (any that apply)", verify_flags),
                FormField("comment", "text", "Comment (optional)"),
            ),
        )
    if task_type == "answer":
        labels = _labels(views)
        flags = _union([view["flags"] for view in views]) or (
            "ambiguous-question",
            *(f"ambiguous-option:{label}" for label in labels),
        )
        return Form(
            task_type,
            "Pick the right option. Flag the question or an option when it is unclear.",
            _ITEM,
            (
                FormField("choice", "single", "Your answer", labels, required=True),
                FormField("certain", "single", "Are you sure?", YES_NO, required=True),
                FormField("flags", "multiple", "Unclear (any that apply)", flags),
                FormField("reason", "text", "Why (optional)"),
            ),
        )
    if task_type == "create":
        return Form(
            task_type,
            "Write a question about the concept, its options, and mark the right one and one hard distractor.",
            (Shown("concept", "Concept"), Shown("category", "Category"), Shown("lang", "Language"),
             Shown("brief", "What to write")),
            _draft_fields(views, "Your"),
        )  # fmt: skip
    if task_type == "qc":
        return Form(
            task_type,
            "Check the written item: complete, or back to its creator with what to change.",
            (*_DRAFT, Shown("concept", "Concept"), Shown("category", "Category"), Shown("history", "History")),
            (
                FormField("verdict", "single", "Verdict", tuple(QC_VERDICTS), required=True),
                FormField("comment", "text", "What to change (required when it needs revision)"),
            ),
        )
    if task_type == "revise":
        return Form(
            task_type,
            "The checker sent this item back: revise it (the current version is filled in).",
            (Shown("feedback", "The checker's comment"), *_DRAFT, Shown("concept", "Concept"),
             Shown("category", "Category")),
            _draft_fields(views, "The revised"),
        )  # fmt: skip
    if task_type == "adapt-check":
        return Form(
            task_type,
            "Is the adapted item right for the culture, beside its source? A wrong one names its error.",
            (*_ITEM, Shown("item_answer", "Answer"), Shown("item_concept", "Concept"),
             Shown("source_question", "Source question"), Shown("source_choices", "Source options"),
             Shown("source_answer", "Source answer"), Shown("source_concept", "Source concept")),
            (
                FormField("verdict", "single", "Verdict", tuple(ADAPT_VERDICTS), required=True),
                FormField("error", "single", "Error of a wrong adaptation", tuple(ADAPT_ERRORS)),
                FormField("comment", "text", "Comment (optional)"),
            ),
        )  # fmt: skip
    if task_type == "label-errors":
        return Form(
            task_type,
            "Name the primary error of the question and of its options (none when there is none).",
            (*_ITEM, Shown("item_answer", "Marked answer")),
            (
                FormField("question", "single", "Primary error of the question", tuple(QUESTION_ERRORS), required=True),
                FormField("options", "single", "Primary error of the options", tuple(OPTION_ERRORS), required=True),
                FormField("comment", "text", "Comment (optional)"),
            ),
        )
    raise ConfigError(f"task type {task_type!r} has no form for Label Studio and Argilla yet")


def _text(value: Any) -> str:
    text = "" if value is None else str(value)
    return text if text.strip() else EMPTY


def _choices_text(choices: Sequence[Mapping[str, Any]]) -> str:
    return "\n".join(f"{c['label']}. {c['text']}" for c in choices) or EMPTY


def _label_text(label: Any, choices: Sequence[Mapping[str, Any]]) -> str:
    if label in (None, ""):
        return EMPTY
    text = next((c["text"] for c in choices if c["label"] == label), None)
    return f"{label}. {text}" if text is not None else str(label)


def shown_texts(task_type: str, task: BaseModel) -> dict[str, str]:
    """The texts a task shows, by :class:`Shown` key (never empty: a missing one is ``—``)."""
    view = _task_type(task_type).view(task)
    texts: dict[str, str] = {}
    if "choices" in view:
        texts["item_question"] = _text(view.get("question"))
        texts["item_choices"] = _choices_text(view["choices"])
        texts["item_answer"] = _label_text(view.get("answer"), view["choices"])
    if "distractor" in view:
        texts["item_distractor"] = _label_text(view.get("distractor"), view["choices"])
        texts["item_concept_form"] = _text(view.get("concept_form"))
    for key in ("concept", "category", "lang", "feedback"):
        if key in view:
            texts[key] = _text(view.get(key))
    if task_type == "create":
        labels = ", ".join(view["labels"])
        texts["brief"] = f"{view['options']} options ({labels}), one right answer, one hard distractor"
    if "history" in view:
        lines = [
            f"round {e['round']}: {e['status']} by {e['by']}" + (f": {e['comment']}" if e.get("comment") else "")
            for e in view["history"]
        ]
        texts["history"] = "\n".join(lines) or EMPTY
    if task_type == "adapt-check":
        source = view["source"]
        texts["item_concept"] = _text(view.get("concept"))
        texts["source_question"] = _text(source.get("question"))
        texts["source_choices"] = _choices_text(source.get("choices") or [])
        texts["source_answer"] = _label_text(source.get("answer"), source.get("choices") or [])
        texts["source_concept"] = _text(source.get("concept"))
    form = form_of(task_type)
    return {s.key: texts.get(s.key, EMPTY) for s in form.shown}


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


def _xml_safe(text: str, where: str) -> str:
    if _NOT_XML.search(text):
        raise DataValidationError(f"{where}: {text[:40]!r} has characters an XML labeling config cannot carry")
    return text


def label_studio_config(form: Form) -> str:
    """The labeling config of a form: a Header and a Text per shown piece, a control per field."""
    root = ET.Element("View")
    ET.SubElement(root, "Header", value=form.instructions)
    for shown in form.shown:
        ET.SubElement(root, "Header", value=shown.title, size="5")
        ET.SubElement(root, "Text", name=shown.key, value=f"${shown.key}")
    for item in form.fields:
        ET.SubElement(root, "Header", value=item.title, size="5")
        attrib = {"name": item.name, "toName": form.anchor}
        if item.required:
            attrib["required"] = "true"
        if item.kind == "text":
            rows = "3" if item.name in ("question", "comment", "reason") else "1"
            ET.SubElement(root, "TextArea", {**attrib, "maxSubmissions": "1", "editable": "true", "rows": rows})
            continue
        control = ET.SubElement(root, "Choices", {**attrib, "choice": item.kind, "showInline": "true"})
        for option in item.options:
            ET.SubElement(control, "Choice", value=_xml_safe(option, f"{form.task_type}: {item.name} option"))
    ET.indent(root)
    return ET.tostring(root, encoding="unicode") + "\n"


def _ls_result(form: Form, name: str, value: Any) -> dict[str, Any]:
    item = form.field(name)
    assert item is not None
    if item.kind == "text":
        return {"from_name": name, "to_name": form.anchor, "type": "textarea", "value": {"text": [str(value)]}}
    picked = value if isinstance(value, list) else [value]
    return {"from_name": name, "to_name": form.anchor, "type": "choices", "value": {"choices": picked}}


def label_studio_export(
    task_type: str, inputs: Iterable[BaseModel | Mapping[str, Any]]
) -> tuple[list[dict[str, Any]], str]:
    """Tasks in Label Studio's import format, and the labeling config for them.

    Each task's ``data`` holds the texts shown (by :class:`Shown` key) and, under
    ``senseforge``, the task type, the input id and the input (:func:`carried`): an
    import needs nothing else. ``meta`` repeats the type and id.

    Raises:
        ConfigError: unknown task type.
        DataValidationError: an input that is not the task type's input model.
    """
    tasks_in = _inputs(task_type, inputs)
    form = form_of(task_type, tasks_in)
    config = label_studio_config(form)
    tasks: list[dict[str, Any]] = []
    for task in tasks_in:
        input_id = _input_id(task)
        entry: dict[str, Any] = {
            "data": {
                **shown_texts(task_type, task),
                BOOKKEEPING: {"task_type": task_type, "input_id": input_id, "input": carried(task_type, task)},
            },
            "meta": {BOOKKEEPING: {"task_type": task_type, "input_id": input_id}},
        }
        if task_type == "revise":
            current = _current_draft(task)
            result = [_ls_result(form, name, value) for name, value in current.items() if form.field(name)]
            entry["predictions"] = [{"model_version": "current draft", "result": result}]
        tasks.append(entry)
    return tasks, config


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


def fields_for_parse(form: Form, task: BaseModel, values: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """A tool's answers (by our field name) → the fields ``parse`` reads, and what does not fit the form.

    A single choice becomes a string, a multiple choice a list, a text one string (several
    texts joined by new lines); create and revise option texts become ``options``, one per
    option the task has (more when more were written, so ``parse`` says so).
    """
    problems: list[str] = []
    fields: dict[str, Any] = {}
    drafting = any(f.name.startswith("option_") for f in form.fields)
    option_fields = [f"option_{label}" for label in LABELS] if drafting else []
    for name, value in values.items():
        item = form.field(name)
        if item is None and name in option_fields:
            item = FormField(name, "text", f"Option {name.removeprefix('option_')}")
        if item is None:
            problems.append(f"{name}: not a field of the {form.task_type} form")
            continue
        given = value if isinstance(value, list | tuple) else [value]
        given = [v for v in given if v is not None]
        if item.kind == "single":
            picked = [str(v) for v in given if str(v) != ""]
            if len(picked) > 1:
                problems.append(f"{name}: pick one (got {len(picked)})")
            elif picked:
                fields[name] = picked[0]
        elif item.kind == "multiple":
            fields[name] = [str(v) for v in given]
        else:
            fields[name] = "\n".join(str(v) for v in given)
    if drafting:
        texts = [str(fields.pop(name, "") or "") for name in option_fields]
        written = [i for i, text in enumerate(texts) if text.strip()]
        view = _task_type(form.task_type).view(task)
        wanted = int(view["options"])
        fields["options"] = texts[: max(wanted, written[-1] + 1 if written else 0)]
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


def _ls_values(result: Any) -> tuple[dict[str, Any], list[str]]:
    """The answers of one Label Studio annotation, by our field name."""
    values: dict[str, Any] = {}
    problems: list[str] = []
    if not isinstance(result, list):
        return values, ["result: not a list"]
    for region in result:
        if not isinstance(region, Mapping):
            problems.append("result: an entry that is not an object")
            continue
        name = str(region.get("from_name", ""))
        value = region.get("value")
        value = value if isinstance(value, Mapping) else {}
        kind = str(region.get("type", "")).lower()
        key = {"choices": "choices", "textarea": "text"}.get(kind)
        if key is None:
            problems.append(f"{name or '?'}: a {kind or 'untyped'} result, not choices or textarea")
            continue
        given = value.get(key)
        values[name] = list(given) if isinstance(given, list) else [] if given is None else [given]
    return values, problems


def label_studio_import(
    task_type: str,
    exported: Any,
    store: AnnotationStore | None = None,
    *,
    prefix: str = LABEL_STUDIO_PREFIX,
    names: Mapping[str, str] | None = None,
) -> Imported:
    """Judgements from Label Studio's JSON export of tasks this module exported.

    Each annotation's results are mapped to our fields and go through the task type's
    ``parse``; a refused or ill-fitting one becomes a rejection, a skipped one
    (``was_cancelled``) is counted and left out. With ``store``, each task's input is the
    store's (a task it does not have is rejected); without, the copy in the file.
    """
    collector = _Collector()
    if not isinstance(exported, list):
        collector.reject("file", None, None, ["expected Label Studio's JSON export: a list of tasks"])
        return collector.done()
    known = _known_inputs(task_type, store)
    for index, task in enumerate(exported):
        where = f"task {index + 1}"
        if not isinstance(task, Mapping):
            collector.reject(where, None, None, ["not a task object"])
            continue
        if task.get("id") is not None:
            where += f" (Label Studio id {task['id']})"
        annotations = task.get("annotations") or []
        if not annotations:
            continue
        data = task.get("data") if isinstance(task.get("data"), Mapping) else {}
        meta = task.get("meta") if isinstance(task.get("meta"), Mapping) else {}
        assert isinstance(data, Mapping) and isinstance(meta, Mapping)
        bookkeeping = data.get(BOOKKEEPING, meta.get(BOOKKEEPING))
        found, item_id, problems = _resolve_input(task_type, bookkeeping, None, known)
        if found is None:
            collector.reject(where, item_id, None, problems)
            continue
        assert item_id is not None
        form = form_of(task_type, [found])
        for number, annotation in enumerate(annotations, 1):
            at = f"{where}, annotation {number}"
            if not isinstance(annotation, Mapping):
                collector.reject(at, item_id, None, ["not an annotation object"])
                continue
            if annotation.get("id") is not None:
                at += f" (id {annotation['id']})"
            if annotation.get("was_cancelled"):
                collector.result.skipped += 1
                continue
            annotator = _annotator(_who(annotation.get("completed_by")), prefix, names)
            if annotator is None:
                collector.reject(at, item_id, None, ["completed_by: no user to name the annotator after"])
                continue
            values, problems = _ls_values(annotation.get("result"))
            made, parse_problems = (None, problems) if problems else _parse(form, found, values, annotator)
            if made is None:
                collector.reject(at, item_id, annotator, parse_problems)
                continue
            collector.keep(made, at)
    return collector.done()


def write_label_studio(
    folder: str | Path, task_type: str, inputs: Iterable[BaseModel | Mapping[str, Any]]
) -> tuple[Path, Path]:
    """``tasks.json`` and ``label_config.xml`` in ``folder``, each written atomically."""
    tasks, config = label_studio_export(task_type, inputs)
    base = Path(folder)
    tasks_path, config_path = base / "tasks.json", base / "label_config.xml"
    with atomic_open(tasks_path) as handle:
        handle.write(json.dumps(tasks, ensure_ascii=False, indent=2) + "\n")
    with atomic_open(config_path) as handle:
        handle.write(config)
    return tasks_path, config_path


# --- Argilla -----------------------------------------------------------------------------


def _argilla_options(options: Sequence[str]) -> dict[str, Any]:
    # Argilla shows every option when it is given fewer than three to show (its own default)
    return {
        "options": [{"value": o, "text": o} for o in options],
        "visible_options": len(options) if len(options) >= 3 else None,
    }


def _argilla_question(item: FormField) -> dict[str, Any]:
    settings: dict[str, Any]
    if item.kind == "single":
        settings = {"type": "label_selection", **_argilla_options(item.options)}
    elif item.kind == "multiple":
        settings = {"type": "multi_label_selection", **_argilla_options(item.options), "options_order": "natural"}
    else:
        settings = {"type": "text", "use_markdown": False}
    return {
        "name": item.argilla_name,
        "title": item.title,
        "description": None,
        "required": item.required,
        "settings": settings,
    }


def argilla_settings(form: Form, *, min_submitted: int = 1) -> dict[str, Any]:
    """Dataset settings in the shape ``rg.Settings.from_json`` reads (plain text fields, no markdown)."""
    return {
        "guidelines": form.instructions,
        "fields": [
            {"name": s.key, "title": s.title, "required": True, "description": None,
             "settings": {"type": "text", "use_markdown": False}}
            for s in form.shown
        ],
        "questions": [_argilla_question(item) for item in form.fields],
        "vectors": [],
        "metadata": [],
        "allow_extra_metadata": True,
        "distribution": {"strategy": "overlap", "min_submitted": max(1, min_submitted)},
        "mapping": None,
    }  # fmt: skip


def argilla_export(
    task_type: str, inputs: Iterable[BaseModel | Mapping[str, Any]], *, min_submitted: int = 1
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Settings and records for an Argilla 2.x dataset (the dict forms of ``rg.Settings`` and ``rg.Record``).

    A record's id is our input id; its metadata carries the task type, the input id and
    the input as JSON. ``min_submitted`` is how many submitted responses complete a record.

    Raises:
        ConfigError: unknown task type.
        DataValidationError: an input that is not the task type's input model.
    """
    tasks_in = _inputs(task_type, inputs)
    form = form_of(task_type, tasks_in)
    records: list[dict[str, Any]] = []
    for task in tasks_in:
        input_id = _input_id(task)
        suggestions: dict[str, Any] = {}
        if task_type == "revise":
            for name, value in _current_draft(task).items():
                item = form.field(name)
                if item is not None:
                    suggestions[item.argilla_name] = {"value": value, "score": None, "agent": "current draft"}
        records.append(
            {
                "id": input_id,
                "fields": shown_texts(task_type, task),
                "metadata": dict(
                    zip(ARGILLA_META, (task_type, input_id, json.dumps(carried(task_type, task))), strict=True)
                ),
                "suggestions": suggestions,
                "responses": {},
                "vectors": {},
            }
        )
    return argilla_settings(form, min_submitted=min_submitted), records


def _argilla_responses(record: Mapping[str, Any]) -> tuple[dict[str, dict[str, Any]], dict[str, set[str | None]]]:
    """Per user: their answer to each question (by Argilla name), and the statuses their responses carry."""
    answers: dict[str, dict[str, Any]] = {}
    statuses: dict[str, set[str | None]] = {}

    def add(question: str, user: Any, value: Any, status: Any) -> None:
        who = "" if user is None else str(user).strip()
        answers.setdefault(who, {})[question] = value
        text = getattr(status, "value", status)
        statuses.setdefault(who, set()).add(None if text in (None, "") else str(text))

    nested = record.get("responses")
    if isinstance(nested, Mapping):
        for question, entries in nested.items():
            for entry in entries if isinstance(entries, list) else []:
                if isinstance(entry, Mapping):
                    add(str(question), entry.get("user_id"), entry.get("value"), entry.get("status"))
    for key, values in record.items():
        if not (isinstance(key, str) and key.endswith(".responses")) or not isinstance(values, list):
            continue
        users = record.get(f"{key}.users")
        states = record.get(f"{key}.status")
        users = users if isinstance(users, list) else []
        states = states if isinstance(states, list) else []
        for position, value in enumerate(values):
            user = users[position] if position < len(users) else None
            state = states[position] if position < len(states) else None
            add(key.removesuffix(".responses"), user, value, state)
    return answers, statuses


def argilla_import(
    task_type: str,
    records: Any,
    store: AnnotationStore | None = None,
    *,
    prefix: str = ARGILLA_PREFIX,
    names: Mapping[str, str] | None = None,
) -> Imported:
    """Judgements from Argilla records with responses (nested or flat export, see the module doc).

    Each user's submitted answers go through the task type's ``parse``; a refused or
    ill-fitting one becomes a rejection, a draft or discarded one is counted and left out,
    one without a status is rejected. With ``store``, each record's input is the store's
    (a record it does not have is rejected); without, the copy in its metadata.
    """
    collector = _Collector()
    if not isinstance(records, list):
        collector.reject("file", None, None, ["expected a list of Argilla records"])
        return collector.done()
    known = _known_inputs(task_type, store)
    for index, record in enumerate(records):
        where = f"record {index + 1}"
        if not isinstance(record, Mapping):
            collector.reject(where, None, None, ["not a record object"])
            continue
        if record.get("id") is not None:
            where += f" (id {record['id']})"
        answers, statuses = _argilla_responses(record)
        if not answers:
            continue
        metadata = record.get("metadata")
        meta = metadata if isinstance(metadata, Mapping) else record  # flat exports put metadata on top
        bookkeeping = {
            "task_type": meta.get(ARGILLA_META[0]),
            "input_id": meta.get(ARGILLA_META[1]),
            "input": meta.get(ARGILLA_META[2]),
        }
        found, item_id, problems = _resolve_input(task_type, bookkeeping, record.get("id"), known)
        if found is None:
            collector.reject(where, item_id, None, problems)
            continue
        assert item_id is not None
        form = form_of(task_type, [found])
        by_argilla = {item.argilla_name: item.name for item in form.fields}
        for user, given in answers.items():
            at = f"{where}, user {user or '?'}"
            state = statuses.get(user, set())
            if state & _SKIPPED_STATUSES and _SUBMITTED not in state:
                collector.result.skipped += 1
                continue
            annotator = _annotator(user or None, prefix, names)
            if annotator is None:
                collector.reject(at, item_id, None, ["a response without a user_id"])
                continue
            if state != {_SUBMITTED}:
                collector.reject(
                    at, item_id, annotator,
                    ["responses without a submitted status (export with records.to_list(flatten=True), "
                     "which keeps each response's status, so drafts and discarded ones can be left out)"],
                )  # fmt: skip
                continue
            values: dict[str, Any] = {}
            unknown: list[str] = []
            for question, value in given.items():
                if question in by_argilla:
                    values[by_argilla[question]] = value
                else:
                    unknown.append(f"{question}: not a question of the {task_type} form")
            made, parse_problems = (None, unknown) if unknown else _parse(form, found, values, annotator)
            if made is None:
                collector.reject(at, item_id, annotator, parse_problems)
                continue
            collector.keep(made, at)
    return collector.done()


def write_argilla(
    folder: str | Path, task_type: str, inputs: Iterable[BaseModel | Mapping[str, Any]], *, min_submitted: int = 1
) -> tuple[Path, Path]:
    """``settings.json`` and ``records.json`` in ``folder``, each written atomically."""
    settings, records = argilla_export(task_type, inputs, min_submitted=min_submitted)
    base = Path(folder)
    settings_path, records_path = base / "settings.json", base / "records.json"
    with atomic_open(settings_path) as handle:
        handle.write(json.dumps(settings, ensure_ascii=False, indent=2) + "\n")
    with atomic_open(records_path) as handle:
        handle.write(json.dumps(records, ensure_ascii=False, indent=2) + "\n")
    return settings_path, records_path


# --- reading exports, checking with the tools' packages -----------------------------------


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
            raise DataValidationError(f"{source}:1: not JSON: {whole.msg}") from whole
        rows: list[Any] = []
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise DataValidationError(f"{source}:{number}: not JSON (nor JSON Lines): {exc.msg}") from exc
        return rows


def _optional(module: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        package = module.split(".", 1)[0].replace("_", "-")
        raise MissingDependencyError(f"checking the files needs {package}: pip install 'senseforge[interop]'") from exc


def check_label_studio(tasks: Sequence[Mapping[str, Any]], config: str) -> list[str]:
    """Problems label-studio-sdk finds in a labeling config and its tasks (none: Label Studio takes them).

    Raises:
        MissingDependencyError: label-studio-sdk is not installed.
    """
    sdk = _optional("label_studio_sdk.label_interface")
    try:
        interface = sdk.LabelInterface(config)
        interface.validate()
    except Exception as exc:  # the SDK raises its own error types, and lxml's
        return [f"label config: {exc}"]
    problems: list[str] = []
    for index, task in enumerate(tasks, 1):
        data = task.get("data")
        if not isinstance(data, Mapping) or not interface.validate_task({"data": dict(data)}):
            problems.append(f"task {index}: its data lacks a text the config shows")
        for number, prediction in enumerate(task.get("predictions") or [], 1):
            for problem in interface.validate_prediction(prediction, return_errors=True):
                problems.append(f"task {index}: prediction {number}: {problem}")
    return problems


def check_argilla(settings: Mapping[str, Any], records: Sequence[Mapping[str, Any]]) -> list[str]:
    """Problems the argilla package (and the naming rule of its server) finds in settings and records.

    Without a server: the settings' fields and questions through argilla's own models, each
    record through ``rg.Record.from_dict`` and the API model it would be sent as, and every
    record's fields and suggestions against the settings.

    Raises:
        MissingDependencyError: argilla is not installed.
    """
    rg = _optional("argilla")
    models = _optional("argilla._models")
    problems: list[str] = []
    names: list[str] = []
    options: dict[str, set[str] | None] = {}
    for kind, model, entries in (
        ("field", models.FieldModel, settings.get("fields") or []),
        ("question", models.QuestionModel, settings.get("questions") or []),
    ):
        if not entries:
            problems.append(f"settings: no {kind}s")
        for entry in entries:
            name = str(entry.get("name"))
            names.append(name)
            if not ARGILLA_NAME.match(name):
                problems.append(f"settings: {kind} name {name!r}: Argilla takes a-z, 0-9, _ and - only")
            try:
                model(**entry)
            except (ValidationError, TypeError, ValueError) as exc:
                problems.append(f"settings: {kind} {name!r}: {exc}")
            if kind == "question":
                given = (entry.get("settings") or {}).get("options")
                options[name] = None if given is None else {str(o.get("value")) for o in given}
    doubled = sorted({n for n in names if names.count(n) > 1})
    if doubled:
        problems.append(f"settings: names used twice: {', '.join(doubled)}")
    fields = {str(f.get("name")) for f in settings.get("fields") or []}
    for index, record in enumerate(records, 1):
        try:
            rg.Record.from_dict(dict(record)).api_model()
        except Exception as exc:  # argilla raises its own error types beside pydantic's
            problems.append(f"record {index}: {exc}")
            continue
        given_fields = set((record.get("fields") or {}).keys())
        if given_fields != fields:
            problems.append(f"record {index}: fields {sorted(given_fields)} are not the settings' {sorted(fields)}")
        for question, suggestion in (record.get("suggestions") or {}).items():
            value = suggestion.get("value") if isinstance(suggestion, Mapping) else None
            picked = {str(v) for v in (value if isinstance(value, list) else [value])}
            if question not in options:
                problems.append(f"record {index}: a suggestion for {question!r}, which is no question")
                continue
            allowed = options[question]
            if allowed is not None and not picked <= allowed:
                problems.append(f"record {index}: suggestion {value!r} is not an option of {question!r}")
    return problems


__all__: Sequence[str] = [
    "ARGILLA_PREFIX",
    "LABEL_STUDIO_PREFIX",
    "Form",
    "FormField",
    "Imported",
    "Rejection",
    "Shown",
    "argilla_export",
    "argilla_import",
    "argilla_settings",
    "check_argilla",
    "check_label_studio",
    "fields_for_parse",
    "form_of",
    "label_studio_config",
    "label_studio_export",
    "label_studio_import",
    "read_export",
    "shown_texts",
    "write_argilla",
    "write_label_studio",
]
