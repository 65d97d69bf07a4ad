"""What every task type shares: the submission error and the task-type protocol.

A task type reads the fields of a form (every value a list of strings) or of a JSON body
(values of any JSON type) by its declared :class:`~senseforge.annotate.forms.Form`, adds
the cross-field rules only it knows, and raises :class:`InvalidSubmission` with every
problem (the app answers 422).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Protocol

from pydantic import BaseModel

from senseforge.annotate.forms import MAX_COMMENT, Form, one, values_of
from senseforge.data.schema import Judgement

__all__ = ["MAX_COMMENT", "InvalidSubmission", "TaskType", "TaskTypeRegistry", "one", "values_of"]


class InvalidSubmission(ValueError):
    """A submission that does not fit its task type; ``problems`` lists each one."""

    def __init__(self, problems: Sequence[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = list(problems)


class TaskType(Protocol):
    """A task type: its input, how it is shown and read, and what its judgements are for.

    The task types of :mod:`~senseforge.annotate.tasktypes` subclass it to take the defaults
    of the declared properties below.
    """

    name: str
    input_model: type[BaseModel]
    """What a task of this type holds (validated when the store reads it back)."""
    form: Form
    """What the task shows and asks, declared once: the page's keys, the reader of submissions, the tools' forms.

    A task type has no aggregation policy of its own: how several judgements of one
    item become a decision is the recipe's to say (its config's and panel's ``policy``).
    """

    # What a task type's judgements are for, declared so that the app, the store's oversight,
    # the interop exports and the templates read them instead of naming task types. A class
    # that subclasses this protocol gets these defaults and declares only where it differs.
    votes: bool = True
    """Its judgements are votes: they count in agreement, and people splitting on an item go to adjudication."""
    writes_items: bool = False
    """The annotator writes an item (question, options, answer, hard distractor): ``create`` and ``revise``."""
    checks_drafts: bool = False
    """Its judgements are verdicts on written drafts, each round a task ``<item>@<round>``: ``qc``.

    The QC queue (:meth:`~senseforge.annotate.oversight.Oversight.qc_queue`) reads these tasks.
    """
    revises_drafts: bool = False
    """The creator revises a draft that a check sent back, the current version filled in: ``revise``.

    The QC queue counts these judgements as revisions; the Label Studio and Argilla exports
    pre-fill the current draft.
    """

    page_note: str | None = None
    """A line the page built from the form (``task.html``, for a type without a template of its own) shows
    below the task's texts; ``None``: none."""

    def view(self, task: Any) -> dict[str, Any]:
        """The task's input as the annotator may see it (JSON-ready)."""
        ...

    def parse(self, task: Any, fields: Mapping[str, Any]) -> Judgement:
        """The judgement body the fields make (annotator ``?``: the store stamps who).

        Raises:
            InvalidSubmission: with every problem.
        """
        ...


_NAME = re.compile(r"[a-z][a-z0-9-]{0,39}")
"""A task type's name: it is a path segment of the app (``/t/<name>``) and a file name (``<name>.html``)."""
_TAKEN = frozenset({"all", "task", "base", "home", "done", "error", "admin", "adjudicate"})
"""Names the app uses otherwise (``/export/all.jsonl``) or its pages' templates hold."""


class TaskTypeRegistry(Mapping[str, TaskType]):
    """The task types the app serves, by name, in the order they registered.

    Adding a task type is defining it and registering it (:meth:`register`), beside its
    judgement body's registration (``JUDGEMENTS.register``): the app serves it (its own
    ``templates/<name>.html``, or the page built from its form), the interop exports and
    imports it, and a recipe's people stage may queue it. Everything that names task
    types reads this mapping.
    """

    def __init__(self) -> None:
        self._types: dict[str, TaskType] = {}

    def register(self, task_type: TaskType) -> TaskType:
        """Register a task type under its ``name`` (registering the same object again changes nothing).

        Raises:
            ValueError: a name that cannot be a path segment, or one another task type holds.
        """
        name = task_type.name
        if not isinstance(name, str) or not _NAME.fullmatch(name) or name in _TAKEN:
            raise ValueError(
                f"task type name {name!r}: lower-case letters, digits and '-', starting with a letter, "
                f"none of {', '.join(sorted(_TAKEN))}"
            )
        known = self._types.get(name)
        if known is not None and known is not task_type:
            raise ValueError(f"task type {name!r} is already registered ({type(known).__name__})")
        self._types[name] = task_type
        return task_type

    def unregister(self, name: str) -> TaskType:
        """Remove a task type (a test's own, once it is done) and give it back.

        Raises:
            KeyError: no task type of that name.
        """
        return self._types.pop(name)

    def __getitem__(self, name: str) -> TaskType:
        return self._types[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._types)

    def __len__(self) -> int:
        return len(self._types)
