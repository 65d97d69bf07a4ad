"""Label Studio and Argilla 2.x: our annotation tasks out to them, their annotations back in as judgements.

Every task type has one *form*, derived from the form it declares
(:attr:`~senseforge.annotate.tasktypes.TaskType.form`, :mod:`senseforge.annotate.forms`):
the pieces of text an annotator is shown (rendered from the task type's
:meth:`~senseforge.annotate.tasktypes.TaskType.view`) and the fields its
:meth:`~senseforge.annotate.tasktypes.TaskType.parse` reads, each a single choice, a
multiple choice or free text (:func:`form_of`); create's options travel as one text per
option, cka's triples as a head, relation and tail per row. Every task type travels.
Both tools get that form in their own terms, and both ways go through the same ``parse``
as the app, so a judgement made in Label Studio or Argilla is exactly the judgement the same answers make in our app.

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

from senseforge.annotate.forms import Shown
from senseforge.annotate.interop.argilla import (
    argilla_export,
    argilla_import,
    argilla_settings,
    check_argilla,
    write_argilla,
)
from senseforge.annotate.interop.common import (
    ARGILLA_META,
    ARGILLA_NAME,
    ARGILLA_PREFIX,
    BOOKKEEPING,
    DEFAULT_OPTIONS,
    EMPTY,
    LABEL_STUDIO_PREFIX,
    YES_NO,
    Form,
    FormField,
    Imported,
    Rejection,
    fields_for_parse,
    form_of,
    read_export,
    shown_texts,
)
from senseforge.annotate.interop.label_studio import (
    check_label_studio,
    label_studio_config,
    label_studio_export,
    label_studio_import,
    write_label_studio,
)

__all__ = [
    "ARGILLA_META",
    "ARGILLA_NAME",
    "ARGILLA_PREFIX",
    "BOOKKEEPING",
    "DEFAULT_OPTIONS",
    "EMPTY",
    "LABEL_STUDIO_PREFIX",
    "YES_NO",
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
