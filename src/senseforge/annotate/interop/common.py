"""What both tools share: the form of each task type, what a task shows and carries, and reading annotations back
(see :mod:`senseforge.annotate.interop`)."""

from __future__ import annotations

import importlib
import json
import re
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
from senseforge.data.io import json_problem
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
