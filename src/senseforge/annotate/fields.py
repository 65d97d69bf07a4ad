"""What every task type shares: the submission error, reading form or JSON fields, and the task-type protocol.

A task type reads the fields of a form (every value a list of strings) or of a JSON body
(values of any JSON type) with these helpers, collects every problem, and raises
:class:`InvalidSubmission` with all of them (the app answers 422).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from pydantic import BaseModel

from senseforge.data.schema import Judgement
from senseforge.evaluate.policies import Policy

MAX_COMMENT = 2000


class InvalidSubmission(ValueError):
    """A submission that does not fit its task type; ``problems`` lists each one."""

    def __init__(self, problems: Sequence[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = list(problems)


def values_of(fields: Mapping[str, Any], name: str) -> list[str]:
    value = fields.get(name)
    if value is None:
        return []
    if isinstance(value, list | tuple):
        return [str(v) for v in value]
    return [str(value)]


def one(fields: Mapping[str, Any], name: str) -> str | None:
    values = values_of(fields, name)
    return values[0].strip() if values else None


def yes_no(fields: Mapping[str, Any], name: str, problems: list[str], *, required: bool) -> bool | None:
    raw = fields.get(name)
    if isinstance(raw, bool):
        return raw
    value = one(fields, name)
    if value in (None, ""):
        if required:
            problems.append(f"{name}: required (yes or no)")
        return None
    lowered = value.lower()
    if lowered in ("yes", "true", "1", "y"):
        return True
    if lowered in ("no", "false", "0", "n"):
        return False
    problems.append(f"{name}: expected yes or no, got {value[:40]!r}")
    return None


def comment_of(fields: Mapping[str, Any], name: str, problems: list[str]) -> str | None:
    text = one(fields, name)
    if text and len(text) > MAX_COMMENT:
        problems.append(f"{name}: at most {MAX_COMMENT} characters")
    return text or None


def choice_of(fields: Mapping[str, Any], name: str, allowed: Sequence[str], problems: list[str]) -> str | None:
    value = one(fields, name)
    if not value:
        problems.append(f"{name}: required (one of {', '.join(allowed)})")
        return None
    if value not in allowed:
        problems.append(f"{name}: {value[:30]!r} is not one of {', '.join(allowed)}")
        return None
    return value


class TaskType(Protocol):
    """A task type: its input, how it is shown and read, and what its judgements are for.

    The task types of :mod:`~senseforge.annotate.tasktypes` subclass it to take the defaults
    of the declared properties below.
    """

    name: str
    input_model: type[BaseModel]
    """What a task of this type holds (validated when the store reads it back)."""
    policy: Policy | None
    """How several judgements of one item are decided (``None``: the one judgement decides)."""

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

    def view(self, task: Any) -> dict[str, Any]:
        """The task's input as the annotator may see it (JSON-ready)."""
        ...

    def parse(self, task: Any, fields: Mapping[str, Any]) -> Judgement:
        """The judgement body the fields make (annotator ``?``: the store stamps who).

        Raises:
            InvalidSubmission: with every problem.
        """
        ...
