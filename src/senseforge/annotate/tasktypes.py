"""Task types: what an annotator is given and shown, what a valid answer is, and how answers combine.

A task type is one object (and one template, ``templates/<name>.html``):

* :attr:`TaskType.input_model` — what a task holds (an :class:`~senseforge.data.schema.MCItem`
  to verify or answer, a :class:`~senseforge.data.schema.ConceptSlot` to write from, a
  :class:`~senseforge.data.schema.DraftItem` to check or revise); the store keeps it as JSON
  and gives it back validated;
* :meth:`TaskType.view` — the input as the annotator may see it (an ``answer`` task never
  shows the answer, the creator, or anyone else's answer);
* :meth:`TaskType.parse` — form or JSON fields → the task's judgement body (one member of
  :data:`~senseforge.data.schema.Judgement`), or :class:`InvalidSubmission` with every
  problem, answered 422;
* :attr:`TaskType.form` — what the task shows and asks, declared once
  (:mod:`senseforge.annotate.forms`): ``parse`` reads a submission by it, the Label
  Studio and Argilla forms are derived from it;
* what its judgements are for, declared (:class:`~senseforge.annotate.fields.TaskType`'s
  ``votes``, ``writes_items``, ``checks_drafts``, ``revises_drafts``) so that the app, the
  QC queue, the Label Studio and Argilla exports and the templates read these instead of
  naming task types.

How several judgements of one item become a decision is not the task type's to say: the
recipe's config and panel hold the one policy (:mod:`senseforge.evaluate.policies`).

``verify``
    Does the marked answer follow from common sense, and is it the only right one?
    ``accept`` (yes/no), optional flags (``ambiguous-question``, ``several-right``,
    ``offensive``, ``wrong-language``), an optional comment.
``answer``
    Blind answering (human baselines, Human_Gen): a ``choice`` among the item's labels,
    ``certain`` (yes/no), the question clear or ambiguous and each option clear or
    ambiguous (flags ``ambiguous-question``, ``ambiguous-option:B``), an optional reason.
``create``
    From (category, concept) the annotator writes a question, its options (five by
    default), marks the answer and one hard distractor. The concept must appear in the
    question, or the form of it the annotator types (``concept_form``: ``kunjungan`` for
    ``berkunjung``) must, and must be a variant of the concept (same word, or same stem).
``qc``
    A checker marks a written item ``complete`` or ``needs_revision`` (with a comment
    saying what to change).
``revise``
    The creator sees the checker's comment and edits the item (checked as ``create``).
``adapt-check``
    An item culture-adapt adapted, beside its source (Putri et al.'s Tables 2, 8 and 9):
    ``verdict`` ``correct-major``, ``correct-minor`` or ``wrong``; a wrong one names its
    ``error`` (``translation``, ``phrase-structure``, ``typo-mechanics``); a comment.
``label-errors``
    One primary error label for the question and one for the options (Putri et al.'s
    Tables 3–6) and a comment.
``open-judge``
    A model's free answer (``--formulation open``) beside the question and the reference
    answer: ``verdict`` ``correct`` or ``incorrect``, and a comment. It checks the LM judge.
``cka``, ``ckv``, ``wsg`` and ``wsv``
    CRoW's stages (:mod:`senseforge.annotate.crowtasks`): knowledge written as triples, a
    triple ticked or not, a minimal rewrite written, a rewrite checked on four conditions.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, get_args

from pydantic import BaseModel

from senseforge.annotate.crowtasks import AnnotateKnowledge, CheckKnowledge, CheckSchema, WriteRewrite
from senseforge.annotate.drafting import QC, Create, Revise
from senseforge.annotate.fields import InvalidSubmission, TaskType, TaskTypeRegistry
from senseforge.annotate.forms import (
    DIGITS,
    ITEM_SHOWN,
    YES_NO_KEYS,
    Form,
    FormField,
    Shown,
    When,
    choices_text,
    comment_field,
    label_text,
    view_list,
    yes_no_field,
)
from senseforge.data.schema import (
    AdaptCheckJudgement,
    AdaptError,
    AdaptVerdict,
    AnswerJudgement,
    Judgement,
    LabelErrorsJudgement,
    MCItem,
    OpenAnswer,
    OpenJudgeJudgement,
    OpenVerdict,
    OptionsError,
    QuestionError,
    VerifyJudgement,
)

VERIFY_FLAGS: tuple[str, ...] = ("ambiguous-question", "several-right", "offensive", "wrong-language")
VERIFY_FLAG_TEXTS: tuple[str, ...] = (
    "The question is ambiguous",
    "More than one option is right",
    "Offensive",
    "Not in the item's language",
)
"""What the verify page says for each of :data:`VERIFY_FLAGS`, by position."""
VERIFY_FLAG_KEYS: tuple[tuple[str, ...], ...] = (("a",), ("s",), ("o",), ("l",))
"""The keys that tick each of :data:`VERIFY_FLAGS` on the verify page."""


"""What a task over an item shows of it: the question and the options."""


def _item_view(item: MCItem) -> dict[str, Any]:
    """What every task type over an item shows of it: its id, language, question and choices."""
    return {
        "id": item.id,
        "lang": item.lang,
        "question": item.question,
        "choices": [{"label": c.label, "text": c.text} for c in item.choices],
    }


class Verify(TaskType):
    """Verification of an item's marked answer (mCSQA's human review)."""

    name: str = "verify"
    input_model: type[BaseModel] = MCItem
    flags: tuple[str, ...] = VERIFY_FLAGS
    form: Form = Form(
        "Does the marked answer follow from common sense, and is it the only right one?",
        (*ITEM_SHOWN, Shown("item_answer", "Marked answer", label_text("answer"))),
        (
            yes_no_field("accept", "Accept the marked answer?"),
            FormField(
                "flags",
                "flags",
                "Problems (any that apply)",
                VERIFY_FLAGS,
                option_texts=VERIFY_FLAG_TEXTS,
                keys=VERIFY_FLAG_KEYS,
                options_from=view_list("flags"),
            ),
            comment_field(),
        ),
    )

    def view(self, task: MCItem) -> dict[str, Any]:
        return {**_item_view(task), "answer": task.answer, "flags": list(self.flags)}

    def parse(self, task: MCItem, fields: Mapping[str, Any]) -> Judgement:
        values, problems = self.form.read(self.view(task), fields)
        if problems:
            raise InvalidSubmission(problems)
        return VerifyJudgement(
            item_id=task.id, annotator="?", accept=values["accept"], flags=sorted(values["flags"]),
            comment=values["comment"],
        )  # fmt: skip


class Answer(TaskType):
    """Blind answering: the annotator picks the right choice without seeing the answer."""

    name: str = "answer"
    input_model: type[BaseModel] = MCItem
    form: Form = Form(
        "Pick the right option. Flag the question or an option when it is unclear.",
        ITEM_SHOWN,
        (
            FormField(
                "choice", "choice", "Your answer", tuple("ABCDE"), options_from=view_list("choices", "label"),
                keys=DIGITS, required=True,
            ),
            yes_no_field("certain", "Are you sure?", texts=("Sure", "Not sure")),
            FormField(
                "flags", "flags", "Unclear (any that apply)",
                ("ambiguous-question", *(f"ambiguous-option:{label}" for label in "ABCDE")),
                option_texts=("The question", *(f"Option {label}" for label in "ABCDE")),
                keys=(("q",), *((f"shift+{n}",) for n in range(1, 10))), options_from=view_list("flags"),
            ),
            comment_field("reason", "Why (optional)"),
        ),
    )  # fmt: skip

    def view(self, task: MCItem) -> dict[str, Any]:
        """The item without its answer, its creator or anyone's answers: answering is blind."""
        flags = ["ambiguous-question", *(f"ambiguous-option:{c.label}" for c in task.choices)]
        return {**_item_view(task), "flags": flags}

    def parse(self, task: MCItem, fields: Mapping[str, Any]) -> Judgement:
        values, problems = self.form.read(self.view(task), fields)
        if problems:
            raise InvalidSubmission(problems)
        return AnswerJudgement(
            item_id=task.id, annotator="?", choice=values["choice"], certain=values["certain"],
            flags=sorted(values["flags"]), reason=values["reason"],
        )  # fmt: skip


__all__ = ["TASK_TYPES", "InvalidSubmission", "TaskType", "TaskTypeRegistry", "task_type"]

ADAPT_VERDICTS: tuple[str, ...] = get_args(AdaptVerdict)
ADAPT_ERRORS: tuple[str, ...] = get_args(AdaptError)


class AdaptCheck(TaskType):
    """The check of an adapted item against its source (culture-adapt's ``adapt-check`` queue)."""

    name: str = "adapt-check"
    input_model: type[BaseModel] = MCItem
    form: Form = Form(
        "Is the adapted item right for the culture, beside its source? A wrong one names its error.",
        (
            *ITEM_SHOWN,
            Shown("item_answer", "Answer", label_text("answer")),
            Shown("item_concept", "Concept", lambda view: view.get("concept")),
            Shown("source_question", "Source question", lambda view: view["source"]["question"]),
            Shown("source_choices", "Source options", lambda view: choices_text()(view["source"])),
            Shown("source_answer", "Source answer", lambda view: label_text("answer")(view["source"])),
            Shown("source_concept", "Source concept", lambda view: view["source"]["concept"]),
        ),
        (
            FormField(
                "verdict", "choice", "Verdict", ADAPT_VERDICTS, keys=DIGITS[:3], required=True,
                option_texts=("Right, changed to fit the culture", "Right, little more than a translation", "Wrong"),
            ),
            FormField(
                "error", "choice", "Error of a wrong adaptation", ADAPT_ERRORS,
                option_texts=("Translation", "Phrase structure", "Typo or mechanics"), keys=(("t",), ("p",), ("m",)),
                required_when=When(
                    "verdict", ("wrong",), f"a wrong adaptation names its error ({', '.join(ADAPT_ERRORS)})"
                ),
                only_when=When("verdict", ("wrong",), "only a wrong adaptation has an error type"),
            ),
            comment_field(),
        ),
    )  # fmt: skip

    def view(self, task: MCItem) -> dict[str, Any]:
        """The adapted item, its answer and concept, and the source it came from."""
        source = task.metadata.get("source")
        shown = source if isinstance(source, Mapping) else {}
        raw = shown.get("choices")
        choices = (
            [{"label": str(c[0]), "text": str(c[1])} for c in raw if isinstance(c, list) and len(c) == 2]
            if isinstance(raw, list)
            else []
        )
        return {
            **_item_view(task),
            "answer": task.answer,
            "concept": task.question_concept,
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

    def parse(self, task: MCItem, fields: Mapping[str, Any]) -> Judgement:
        values, problems = self.form.read(self.view(task), fields)
        if problems:
            raise InvalidSubmission(problems)
        return AdaptCheckJudgement.model_validate(
            {"item_id": task.id, "annotator": "?", "verdict": values["verdict"], "error": values["error"],
             "comment": values["comment"]}
        )  # fmt: skip


QUESTION_ERRORS: tuple[str, ...] = get_args(QuestionError)
OPTION_ERRORS: tuple[str, ...] = get_args(OptionsError)


class LabelErrors(TaskType):
    """The primary error of an item's question and of its options (the error taxonomy of Putri et al.)."""

    name: str = "label-errors"
    input_model: type[BaseModel] = MCItem
    form: Form = Form(
        "Name the primary error of the question and of its options (none when there is none).",
        (*ITEM_SHOWN, Shown("item_answer", "Marked answer", label_text("answer"))),
        (
            FormField(
                "question", "choice", "Primary error of the question", QUESTION_ERRORS, keys=DIGITS, required=True
            ),
            FormField(
                "options", "choice", "Primary error of the options", OPTION_ERRORS,
                keys=tuple((key,) for key in "abcdefghi"), required=True,
            ),
            comment_field(),
        ),
    )  # fmt: skip

    def view(self, task: MCItem) -> dict[str, Any]:
        """The item with its marked answer (invalid options are judged against it) and the two label sets."""
        return {
            **_item_view(task),
            "answer": task.answer,
            "question_errors": list(QUESTION_ERRORS),
            "option_errors": list(OPTION_ERRORS),
        }

    def parse(self, task: MCItem, fields: Mapping[str, Any]) -> Judgement:
        values, problems = self.form.read(self.view(task), fields)
        if problems:
            raise InvalidSubmission(problems)
        return LabelErrorsJudgement.model_validate(
            {"item_id": task.id, "annotator": "?", "question_error": values["question"],
             "options_error": values["options"], "comment": values["comment"]}
        )  # fmt: skip


OPEN_VERDICTS: tuple[str, ...] = get_args(OpenVerdict)


class OpenJudge(TaskType):
    """A person's verdict on a model's free answer, to set beside the LM judge's (``annotate open-agreement``)."""

    name: str = "open-judge"
    input_model: type[BaseModel] = OpenAnswer
    form: Form = Form(
        "Does the model's answer mean the reference answer? Judge the meaning, not the wording.",
        (Shown("question", "Question"), Shown("gold", "Reference answer"), Shown("answer", "The answer to judge")),
        (
            FormField(
                "verdict", "choice", "Verdict", OPEN_VERDICTS, option_texts=("Correct", "Incorrect"),
                keys=YES_NO_KEYS, required=True,
            ),
            comment_field(),
        ),
    )  # fmt: skip

    def view(self, task: OpenAnswer) -> dict[str, Any]:
        """The question, the reference answer and the answer to grade; never the LM judge's verdict."""
        return {
            "id": task.id,
            "lang": task.lang,
            "question": task.question,
            "gold": task.gold,
            "answer": task.answer,
            "verdicts": list(OPEN_VERDICTS),
        }

    def parse(self, task: OpenAnswer, fields: Mapping[str, Any]) -> Judgement:
        values, problems = self.form.read(self.view(task), fields)
        if problems:
            raise InvalidSubmission(problems)
        return OpenJudgeJudgement.model_validate(
            {"item_id": task.id, "annotator": "?", "verdict": values["verdict"], "comment": values["comment"]}
        )


TASK_TYPES = TaskTypeRegistry()
"""The task types the app serves, by name (each has ``templates/<name>.html``; a registered one without is
shown the page built from its form)."""
for _task in (
    Verify(),
    Answer(),
    Create(),
    QC(),
    Revise(),
    AdaptCheck(),
    LabelErrors(),
    OpenJudge(),
    AnnotateKnowledge(),
    CheckKnowledge(),
    WriteRewrite(),
    CheckSchema(),
):
    TASK_TYPES.register(_task)
del _task


def task_type(name: str) -> TaskType:
    """A task type by name.

    Raises:
        KeyError: unknown task type.
    """
    return TASK_TYPES[name]
