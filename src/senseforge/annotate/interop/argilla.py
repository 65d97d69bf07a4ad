"""Argilla 2.x: dataset settings and records out, submitted responses back in as judgements."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from senseforge.data.io import atomic_open

if TYPE_CHECKING:
    from senseforge.annotate.store import AnnotationStore

from senseforge.annotate.interop.common import (
    _SKIPPED_STATUSES,
    _SUBMITTED,
    ARGILLA_META,
    ARGILLA_NAME,
    ARGILLA_PREFIX,
    Form,
    FormField,
    Imported,
    _annotator,
    _Collector,
    _current_draft,
    _input_id,
    _inputs,
    _known_inputs,
    _optional,
    _parse,
    _resolve_input,
    _task_type,
    carried,
    form_of,
    readable_fields,
    shown_texts,
)


def _argilla_options(item: FormField) -> dict[str, Any]:
    # Argilla shows every option when it is given fewer than three to show (its own default)
    options = item.options
    return {
        "options": [{"value": o, "text": item.text_of(o)} for o in options],
        "visible_options": len(options) if len(options) >= 3 else None,
    }


def _argilla_question(item: FormField) -> dict[str, Any]:
    settings: dict[str, Any]
    if item.kind == "single":
        settings = {"type": "label_selection", **_argilla_options(item)}
    elif item.kind == "multiple":
        settings = {"type": "multi_label_selection", **_argilla_options(item), "options_order": "natural"}
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
        if _task_type(task_type).revises_drafts:  # the current draft, filled in
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
        by_argilla = {item.argilla_name: item.name for item in readable_fields(form).values()}
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
