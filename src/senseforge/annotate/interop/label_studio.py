"""Label Studio: tasks and a labeling config out, its JSON export back in as judgements."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from senseforge.data.io import atomic_open
from senseforge.errors import DataValidationError

if TYPE_CHECKING:
    from senseforge.annotate.store import AnnotationStore

from senseforge.annotate.interop.common import (
    _NOT_XML,
    BOOKKEEPING,
    LABEL_STUDIO_PREFIX,
    Form,
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
    _who,
    carried,
    form_of,
    shown_texts,
)


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
        if _task_type(task_type).revises_drafts:  # the current draft, filled in
            current = _current_draft(task)
            result = [_ls_result(form, name, value) for name, value in current.items() if form.field(name)]
            entry["predictions"] = [{"model_version": "current draft", "result": result}]
        tasks.append(entry)
    return tasks, config


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
