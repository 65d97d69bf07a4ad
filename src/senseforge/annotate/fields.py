"""What every task type shares: the submission error and the task-type protocol.

A task type reads the fields of a form (every value a list of strings) or of a JSON body
(values of any JSON type) by its declared :class:`~senseforge.annotate.forms.Form`, adds
the cross-field rules only it knows, and raises :class:`InvalidSubmission` with every
problem (the app answers 422).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from pydantic import BaseModel

from senseforge.annotate.forms import MAX_COMMENT, Form, one, values_of
from senseforge.data.schema import Judgement

__all__ = ["MAX_COMMENT", "InvalidSubmission", "TaskType", "one", "values_of"]


class InvalidSubmission(ValueError):
    """A submission that does not fit its task type; ``problems`` lists each one."""

    def __init__(self, problems: Sequence[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = list(problems)


class TaskType(Protocol):
    name: str
    input_model: type[BaseModel]
    """What a task of this type holds (validated when the store reads it back)."""
    form: Form
    """What the task shows and asks, declared once: the page's keys, the reader of submissions, the tools' forms.

    A task type has no aggregation policy of its own: how several judgements of one
    item become a decision is the recipe's to say (its config's and panel's ``policy``).
    """

    def view(self, task: Any) -> dict[str, Any]:
        """The task's input as the annotator may see it (JSON-ready)."""
        ...

    def parse(self, task: Any, fields: Mapping[str, Any]) -> Judgement:
        """The judgement body the fields make (annotator ``?``: the store stamps who).

        Raises:
            InvalidSubmission: with every problem.
        """
        ...
