"""Task types: what an annotator is shown, what a valid answer is, and how answers combine.

A task type is one small object: :attr:`TaskType.name`, :meth:`TaskType.view` (the item as
the annotator may see it — an ``answer`` task never shows the answer), :meth:`TaskType.parse`
(form or JSON fields → a :class:`~senseforge.data.schema.Judgement`, or
:class:`InvalidSubmission` with every problem, answered 422) and :meth:`TaskType.decide`
(the judgements of one item → a decision under a policy). Creation, revision, error
taxonomy and the CRoW task types slot in as more of these.

``verify``
    Does the marked answer follow from common sense, and is it the only right one?
    ``accept`` (yes/no), optional flags (``ambiguous-question``, ``several-right``,
    ``offensive``, ``wrong-language``), an optional comment.
``answer``
    Blind answering (human baselines): a ``choice`` among the item's labels, ``certain``
    (yes/no), ambiguity flags for the question and for each option
    (``ambiguous-question``, ``ambiguous-option:B``), an optional reason.
``adapt-check``
    An item culture-adapt adapted, beside its source (Putri et al.'s concept-adaptation
    check, their Tables 2, 8 and 9): ``verdict`` ``correct-major`` (right, and changed to
    fit the culture), ``correct-minor`` (right, little more than a translation) or
    ``wrong``; a wrong one names its ``error`` (``translation``, ``phrase-structure``,
    ``typo-mechanics``); an optional comment. Stored as ``accept`` (not wrong) with the
    flag ``major-change``, ``minor-change`` or ``error:<type>``.
``label-errors``
    One primary error label for the question (``none``, ``translation``,
    ``sentence-structure``, ``fluency``, ``context``, ``subjectivity``, ``typo-mechanics``)
    and one for the options (``none``, ``translation``, ``fluency``, ``context``,
    ``invalid-options``, ``typo-mechanics``) — Putri et al.'s Tables 3–6 — and an optional
    comment. Stored as ``accept`` (both labels ``none``) with the flags
    ``question:<label>`` and ``options:<label>``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from senseforge.data.schema import Judgement, MCItem

MAX_COMMENT = 2000
VERIFY_FLAGS: tuple[str, ...] = ("ambiguous-question", "several-right", "offensive", "wrong-language")


class InvalidSubmission(ValueError):
    """A submission that does not fit its task type; ``problems`` lists each one."""

    def __init__(self, problems: Sequence[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = list(problems)


def _values(fields: Mapping[str, Any], name: str) -> list[str]:
    value = fields.get(name)
    if value is None:
        return []
    if isinstance(value, list | tuple):
        return [str(v) for v in value]
    return [str(value)]


def _one(fields: Mapping[str, Any], name: str) -> str | None:
    values = _values(fields, name)
    return values[0].strip() if values else None


def _yes_no(fields: Mapping[str, Any], name: str, problems: list[str], *, required: bool) -> bool | None:
    raw = fields.get(name)
    if isinstance(raw, bool):
        return raw
    value = _one(fields, name)
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


def _comment(fields: Mapping[str, Any], name: str, problems: list[str]) -> str | None:
    text = _one(fields, name)
    if text and len(text) > MAX_COMMENT:
        problems.append(f"{name}: at most {MAX_COMMENT} characters")
    return text or None


def _item_view(item: MCItem) -> dict[str, Any]:
    """What every task type shows of an item: its id, language, question and choices."""
    return {
        "id": item.id,
        "lang": item.lang,
        "question": item.question,
        "choices": [{"label": c.label, "text": c.text} for c in item.choices],
    }


class TaskType(Protocol):
    name: str

    def view(self, item: MCItem) -> dict[str, Any]: ...

    def parse(self, item: MCItem, fields: Mapping[str, Any]) -> Judgement: ...


class Verify:
    """Verification of an item's marked answer (mCSQA's human review)."""

    name: str = "verify"
    flags: tuple[str, ...] = VERIFY_FLAGS

    def view(self, item: MCItem) -> dict[str, Any]:
        return {**_item_view(item), "answer": item.answer, "flags": list(self.flags)}

    def parse(self, item: MCItem, fields: Mapping[str, Any]) -> Judgement:
        problems: list[str] = []
        accept = _yes_no(fields, "accept", problems, required=True)
        flags = _values(fields, "flags")
        unknown = [f for f in flags if f not in self.flags]
        if unknown:
            problems.append(f"flags: unknown {unknown[:3]} (known: {', '.join(self.flags)})")
        comment = _comment(fields, "comment", problems)
        if problems:
            raise InvalidSubmission(problems)
        return Judgement(
            item_id=item.id, annotator="?", task=self.name, accept=accept, flags=sorted(set(flags)), comment=comment
        )


class Answer:
    """Blind answering: the annotator picks the right choice without seeing the answer."""

    name: str = "answer"

    def view(self, item: MCItem) -> dict[str, Any]:
        """The item without its answer: answering is blind."""
        flags = ["ambiguous-question", *(f"ambiguous-option:{c.label}" for c in item.choices)]
        return {**_item_view(item), "flags": flags}

    def parse(self, item: MCItem, fields: Mapping[str, Any]) -> Judgement:
        problems: list[str] = []
        labels = [c.label for c in item.choices]
        choice = _one(fields, "choice")
        if not choice:
            problems.append("choice: required")
        elif choice not in labels:
            problems.append(f"choice: {choice[:10]!r} is not one of {', '.join(labels)}")
        certain = _yes_no(fields, "certain", problems, required=True)
        allowed = {"ambiguous-question", *(f"ambiguous-option:{label}" for label in labels)}
        flags = _values(fields, "flags")
        unknown = [f for f in flags if f not in allowed]
        if unknown:
            problems.append(f"flags: unknown {unknown[:3]}")
        reason = _comment(fields, "reason", problems)
        if problems:
            raise InvalidSubmission(problems)
        return Judgement(
            item_id=item.id,
            annotator="?",
            task=self.name,
            choice=choice,
            certain=certain,
            flags=sorted(set(flags)),
            comment=reason,
        )


ADAPT_VERDICTS: tuple[str, ...] = ("correct-major", "correct-minor", "wrong")
ADAPT_ERRORS: tuple[str, ...] = ("translation", "phrase-structure", "typo-mechanics")


class AdaptCheck:
    """The check of an adapted item against its source (culture-adapt's ``adapt-check`` queue)."""

    name: str = "adapt-check"

    def view(self, item: MCItem) -> dict[str, Any]:
        """The adapted item, its answer and concept, and the source it came from."""
        source = item.metadata.get("source")
        shown = source if isinstance(source, Mapping) else {}
        raw = shown.get("choices")
        choices = (
            [{"label": str(c[0]), "text": str(c[1])} for c in raw if isinstance(c, list) and len(c) == 2]
            if isinstance(raw, list)
            else []
        )
        return {
            **_item_view(item),
            "answer": item.answer,
            "concept": item.question_concept,
            "source": {
                "lang": str(shown.get("lang") or ""),
                "question": str(shown.get("question") or ""),
                "concept": str(shown.get("concept") or ""),
                "answer": str(shown.get("answer") or ""),
                "choices": choices,
            },
            "verdicts": list(ADAPT_VERDICTS),
            "errors": list(ADAPT_ERRORS),
        }

    def parse(self, item: MCItem, fields: Mapping[str, Any]) -> Judgement:
        problems: list[str] = []
        verdict = _one(fields, "verdict")
        if not verdict:
            problems.append("verdict: required (correct-major, correct-minor or wrong)")
        elif verdict not in ADAPT_VERDICTS:
            problems.append(f"verdict: {verdict[:20]!r} is not one of {', '.join(ADAPT_VERDICTS)}")
        error = _one(fields, "error") or None
        if error is not None and error not in ADAPT_ERRORS:
            problems.append(f"error: {error[:20]!r} is not one of {', '.join(ADAPT_ERRORS)}")
        elif verdict == "wrong" and error is None:
            problems.append(f"error: a wrong adaptation names its error ({', '.join(ADAPT_ERRORS)})")
        elif verdict in ("correct-major", "correct-minor") and error is not None:
            problems.append("error: only a wrong adaptation has an error type")
        comment = _comment(fields, "comment", problems)
        if problems:
            raise InvalidSubmission(problems)
        flag = {"correct-major": "major-change", "correct-minor": "minor-change"}.get(str(verdict), f"error:{error}")
        return Judgement(
            item_id=item.id, annotator="?", task=self.name, accept=verdict != "wrong", flags=[flag], comment=comment
        )


QUESTION_ERRORS: tuple[str, ...] = (
    "none",
    "translation",
    "sentence-structure",
    "fluency",
    "context",
    "subjectivity",
    "typo-mechanics",
)
OPTION_ERRORS: tuple[str, ...] = ("none", "translation", "fluency", "context", "invalid-options", "typo-mechanics")


class LabelErrors:
    """The primary error of an item's question and of its options (the error taxonomy of Putri et al.)."""

    name: str = "label-errors"

    def view(self, item: MCItem) -> dict[str, Any]:
        """The item with its marked answer (invalid options are judged against it) and the two label sets."""
        return {
            **_item_view(item),
            "answer": item.answer,
            "question_errors": list(QUESTION_ERRORS),
            "option_errors": list(OPTION_ERRORS),
        }

    def parse(self, item: MCItem, fields: Mapping[str, Any]) -> Judgement:
        problems: list[str] = []
        labels: dict[str, str | None] = {}
        for name, allowed in (("question", QUESTION_ERRORS), ("options", OPTION_ERRORS)):
            value = _one(fields, name)
            if not value:
                problems.append(f"{name}: required (one of {', '.join(allowed)})")
            elif value not in allowed:
                problems.append(f"{name}: {value[:30]!r} is not one of {', '.join(allowed)}")
            labels[name] = value
        comment = _comment(fields, "comment", problems)
        if problems:
            raise InvalidSubmission(problems)
        clean = labels["question"] == "none" and labels["options"] == "none"
        flags = [f"question:{labels['question']}", f"options:{labels['options']}"]
        return Judgement(item_id=item.id, annotator="?", task=self.name, accept=clean, flags=flags, comment=comment)


TASK_TYPES: dict[str, TaskType] = {
    "verify": Verify(),
    "answer": Answer(),
    "adapt-check": AdaptCheck(),
    "label-errors": LabelErrors(),
}
"""The task types the app serves, by name."""


def task_type(name: str) -> TaskType:
    """A task type by name.

    Raises:
        KeyError: unknown task type.
    """
    return TASK_TYPES[name]
