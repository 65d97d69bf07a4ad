"""The task types over written items (Putri et al.'s Human_Gen): ``create`` (an annotator writes an item from a
concept), ``qc`` (a checker marks it complete or sends it back) and ``revise`` (its creator revises it); what a
written item must be (:func:`parse_draft`, :func:`is_variant`). Registered in :mod:`senseforge.annotate.tasktypes`
beside the others.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from senseforge.annotate.fields import InvalidSubmission, TaskType
from senseforge.annotate.forms import (
    DIGITS,
    ITEM_SHOWN,
    MAX_COMMENT,
    Form,
    FormField,
    Shown,
    When,
    comment_field,
    label_text,
    view_list,
)
from senseforge.annotate.i18n import N_, Said
from senseforge.data.matching import concept_appears
from senseforge.data.schema import (
    Choice,
    ConceptSlot,
    CreateJudgement,
    Draft,
    DraftItem,
    Judgement,
    QCJudgement,
    ReviseJudgement,
)
from senseforge.data.text import fold

MAX_QUESTION = 1000
MAX_OPTION = 300


LABELS = "ABCDEFGHIJ"
"""Option labels by position."""


def draft_fields(verb: str) -> tuple[FormField, ...]:
    """The fields of create and revise: the question, its options, the answer, the distractor, the concept's form."""
    shift_digits = tuple((f"shift+{n}",) for n in range(1, 10))
    return (
        FormField(
            "question", "text", f"{verb} question (it must contain the concept, or the form of it you give below)",
            required=True, squash=True, max_length=MAX_QUESTION,
        ),
        FormField("options", "texts", "Options", max_length=MAX_OPTION, rows=lambda view: int(view["options"])),
        FormField(
            "answer", "choice", "The right option", tuple(LABELS[:5]), options_from=view_list("labels"), keys=DIGITS,
            required=True,
        ),
        FormField(
            "distractor", "choice", "The hard distractor (an option that could pass for the answer)",
            tuple(LABELS[:5]), options_from=view_list("labels"), keys=shift_digits, required=True,
        ),
        FormField(
            "concept_form", "text", "The form of the concept the question uses, if not the concept as given",
            squash=True,
        ),
        comment_field(),
    )  # fmt: skip


_NASAL_DROPS = frozenset("kpts")
"""Initial consonants that Indonesian and Sundanese nasal prefixes replace (kunjung → mengunjungi, sapu → nyapu)."""


def is_variant(form: str, concept: str, lang: str) -> bool:
    """Whether ``form`` is a morphological variant of ``concept``.

    The lenient matcher of culture-adapt (a shared non-stopword word, or a shared stem where
    the language has a stemmer), or a concept word of four letters or more whose initial
    k/p/t/s a nasal prefix replaced, found inside the form (``kunjung`` in ``mengunjungi``,
    which Sastrawi stems to ``unjung``).

    >>> is_variant("mengunjungi", "berkunjung", "id"), is_variant("menari", "tari", "id")
    (True, True)
    >>> is_variant("makan", "minum", "id")
    False
    """
    if concept_appears(form, concept, lang):
        return True
    folded = fold(form)
    for word in fold(concept).split():
        root = word.removeprefix("ber") if word.startswith("ber") and len(word) > 6 else word
        if len(root) >= 4 and root[0] in _NASAL_DROPS and root[1:] in folded:
            return True
    return False


def parse_draft(values: Mapping[str, Any], *, concept: str, lang: str, problems: list[str]) -> Draft | None:
    """A written item from the values of create or revise (:func:`draft_fields`), or ``None`` with its problems added.

    The answer is not the distractor. The concept must appear in the question (folded),
    or the typed ``concept_form`` must, and be a variant of the concept: the lenient
    matcher of culture-adapt (a shared non-stopword word, or a shared stem where the
    language has a stemmer) between the form and the concept.
    """
    question: str | None = values["question"]
    texts: list[str] = values["options"]
    answer: str | None = values["answer"]
    distractor: str | None = values["distractor"]
    form: str | None = values["concept_form"]
    if answer and distractor and answer == distractor:
        problems.append(N_("distractor: the hard distractor is another option than the answer"))
    if question:
        if form is None:
            if fold(concept) not in fold(question):
                problems.append(
                    Said(
                        N_(
                            "question: the concept %(concept)s does not appear in it; write it in, "
                            "or type the form you used in concept_form"
                        ),
                        concept=repr(concept),
                    )
                )
        elif fold(form) not in fold(question):
            problems.append(Said(N_("concept_form: %(form)s does not appear in the question"), form=repr(form[:60])))
        elif not is_variant(form, concept, lang):
            problems.append(
                Said(
                    N_("concept_form: %(form)s is not a form of the concept %(concept)s"),
                    form=repr(form[:60]),
                    concept=repr(concept),
                )
            )
    if problems:
        return None
    assert question is not None and answer is not None and distractor is not None
    return Draft(
        question=question,
        choices=[Choice(label=LABELS[i], text=text) for i, text in enumerate(texts)],
        answer=answer,
        distractor=distractor,
        concept_form=form,
    )


class Create(TaskType):
    """Writing a question from (category, concept): Putri et al.'s Human_Gen creation."""

    name: str = "create"
    votes: bool = False
    writes_items: bool = True
    input_model: type[BaseModel] = ConceptSlot
    form: Form = Form(
        "Write a question about the concept, its options, and mark the right one and one hard distractor.",
        (
            Shown("concept", "Concept"),
            Shown("category", "Category"),
            Shown("lang", "Language"),
            Shown(
                "brief", "What to write",
                lambda v: f"{v['options']} options ({', '.join(v['labels'])}), one right answer, one hard distractor",
            ),
        ),
        draft_fields("Your"),
    )  # fmt: skip

    def view(self, task: ConceptSlot) -> dict[str, Any]:
        return {
            "id": task.id,
            "lang": task.lang,
            "category": task.category,
            "concept": task.concept,
            "options": task.options,
            "labels": list(LABELS[: task.options]),
        }

    def parse(self, task: ConceptSlot, fields: Mapping[str, Any]) -> Judgement:
        values, problems = self.form.read(self.view(task), fields)
        draft = parse_draft(values, concept=task.concept, lang=task.lang, problems=problems)
        if problems or draft is None:
            raise InvalidSubmission(problems)
        return CreateJudgement(item_id=task.id, annotator="?", draft=draft, comment=values["comment"])


def _draft_view(task: DraftItem) -> dict[str, Any]:
    draft = task.draft
    return {
        "id": task.id,
        "item_id": task.item_id,
        "lang": task.lang,
        "category": task.category,
        "concept": task.concept,
        "question": draft.question,
        "choices": [{"label": c.label, "text": c.text} for c in draft.choices],
        "answer": draft.answer,
        "distractor": draft.distractor,
        "concept_form": draft.concept_form,
        "history": [{"status": e.status, "round": e.round, "comment": e.comment, "by": e.by} for e in task.history],
    }


QC_VERDICTS: tuple[str, ...] = ("complete", "needs_revision")
DRAFT_SHOWN: tuple[Shown, ...] = (
    *ITEM_SHOWN,
    Shown("item_answer", "Answer", label_text("answer")),
    Shown("item_distractor", "Hard distractor", label_text("distractor")),
    Shown("item_concept_form", "Form of the concept used", lambda view: view.get("concept_form")),
)
"""What a task over a written item shows of it."""


def creator_comment(task: DraftItem) -> str | None:
    """What the item's creator last said with it (on submitting it, or with their latest revision): the QC page
    shows it, labelled as theirs; ``None`` when they said nothing."""
    said = [e.comment for e in task.history if e.status in ("submitted", "revised") and e.by == task.creator]
    return next((c for c in reversed(said) if c), None)


def _history_text(view: Mapping[str, Any]) -> str:
    return "\n".join(
        f"round {e['round']}: {e['status']} by {e['by']}" + (f": {e['comment']}" if e.get("comment") else "")
        for e in view["history"]
    )


class QC(TaskType):
    """A checker's verdict on a written item."""

    name: str = "qc"
    checks_drafts: bool = True
    input_model: type[BaseModel] = DraftItem
    form: Form = Form(
        "Check the written item: complete, or back to its creator with what to change.",
        (*DRAFT_SHOWN, Shown("concept", "Concept"), Shown("category", "Category"),
         Shown("history", "History", _history_text)),
        (
            FormField(
                "verdict", "choice", "Verdict", QC_VERDICTS, option_texts=("Complete", "Needs revision"),
                keys=DIGITS[:2], required=True,
            ),
            FormField(
                "comment", "text", "What to change (required when it needs revision)", max_length=MAX_COMMENT,
                required_when=When(
                    "verdict", ("needs_revision",), "say what to change when the item goes back to its creator"
                ),
            ),
        ),
    )  # fmt: skip

    def view(self, task: DraftItem) -> dict[str, Any]:
        return {**_draft_view(task), "verdicts": list(QC_VERDICTS), "creator_comment": creator_comment(task)}

    def parse(self, task: DraftItem, fields: Mapping[str, Any]) -> Judgement:
        values, problems = self.form.read(self.view(task), fields)
        if problems:
            raise InvalidSubmission(problems)
        return QCJudgement.model_validate(
            {"item_id": task.id, "annotator": "?", "verdict": values["verdict"], "comment": values["comment"]}
        )


class Revise(TaskType):
    """The creator's edit of an item QC sent back, with the checker's comment in view."""

    name: str = "revise"
    votes: bool = False
    writes_items: bool = True
    revises_drafts: bool = True
    input_model: type[BaseModel] = DraftItem
    form: Form = Form(
        "The checker sent this item back: revise it (the current version is filled in).",
        (Shown("feedback", "The checker's comment"), *DRAFT_SHOWN, Shown("concept", "Concept"),
         Shown("category", "Category")),
        draft_fields("The revised"),
    )  # fmt: skip

    def view(self, task: DraftItem) -> dict[str, Any]:
        last = task.history[-1] if task.history else None
        return {
            **_draft_view(task),
            "feedback": last.comment if last is not None else None,
            "options": len(task.draft.choices),
            "labels": [c.label for c in task.draft.choices],
        }

    def parse(self, task: DraftItem, fields: Mapping[str, Any]) -> Judgement:
        values, problems = self.form.read(self.view(task), fields)
        draft = parse_draft(values, concept=task.concept, lang=task.lang, problems=problems)
        if problems or draft is None:
            raise InvalidSubmission(problems)
        return ReviseJudgement(item_id=task.id, annotator="?", draft=draft, comment=values["comment"])
