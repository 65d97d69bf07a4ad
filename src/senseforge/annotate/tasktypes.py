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
* :attr:`TaskType.policy` — how several judgements of one item become a decision (the
  shared policies of :mod:`senseforge.evaluate.policies`; ``None``: one judgement is the
  decision).
* what its judgements are for, declared (:class:`~senseforge.annotate.fields.TaskType`'s
  ``votes``, ``writes_items``, ``checks_drafts``, ``revises_drafts``) so that the app, the
  QC queue, the Label Studio and Argilla exports and the templates read these instead of
  naming task types.

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
from senseforge.annotate.fields import InvalidSubmission, TaskType
from senseforge.annotate.fields import choice_of as _choice_of
from senseforge.annotate.fields import comment_of as _comment
from senseforge.annotate.fields import one as _one
from senseforge.annotate.fields import values_of as _values
from senseforge.annotate.fields import yes_no as _yes_no
from senseforge.data.matching import concept_appears
from senseforge.data.schema import (
    AdaptCheckJudgement,
    AdaptError,
    AdaptVerdict,
    AnswerJudgement,
    Choice,
    ConceptSlot,
    CreateJudgement,
    Draft,
    DraftItem,
    Judgement,
    LabelErrorsJudgement,
    MCItem,
    OpenAnswer,
    OpenJudgeJudgement,
    OpenVerdict,
    OptionsError,
    QCJudgement,
    QuestionError,
    ReviseJudgement,
    VerifyJudgement,
)
from senseforge.data.text import fold
from senseforge.evaluate.policies import Majority, Policy, exclude_ambiguous, parse_policy

MAX_QUESTION = 1000
MAX_OPTION = 300
VERIFY_FLAGS: tuple[str, ...] = ("ambiguous-question", "several-right", "offensive", "wrong-language")


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
    policy: Policy | None = parse_policy("unanimous")
    flags: tuple[str, ...] = VERIFY_FLAGS

    def view(self, task: MCItem) -> dict[str, Any]:
        return {**_item_view(task), "answer": task.answer, "flags": list(self.flags)}

    def parse(self, task: MCItem, fields: Mapping[str, Any]) -> Judgement:
        problems: list[str] = []
        accept = _yes_no(fields, "accept", problems, required=True)
        flags = _values(fields, "flags")
        unknown = [f for f in flags if f not in self.flags]
        if unknown:
            problems.append(f"flags: unknown {unknown[:3]} (known: {', '.join(self.flags)})")
        comment = _comment(fields, "comment", problems)
        if problems:
            raise InvalidSubmission(problems)
        return VerifyJudgement(item_id=task.id, annotator="?", accept=accept, flags=sorted(set(flags)), comment=comment)


class Answer(TaskType):
    """Blind answering: the annotator picks the right choice without seeing the answer."""

    name: str = "answer"
    input_model: type[BaseModel] = MCItem
    policy: Policy | None = exclude_ambiguous(3, Majority())

    def view(self, task: MCItem) -> dict[str, Any]:
        """The item without its answer, its creator or anyone's answers: answering is blind."""
        flags = ["ambiguous-question", *(f"ambiguous-option:{c.label}" for c in task.choices)]
        return {**_item_view(task), "flags": flags}

    def parse(self, task: MCItem, fields: Mapping[str, Any]) -> Judgement:
        problems: list[str] = []
        labels = [c.label for c in task.choices]
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
        return AnswerJudgement(
            item_id=task.id, annotator="?", choice=choice, certain=certain, flags=sorted(set(flags)), reason=reason
        )


__all__ = ["TASK_TYPES", "InvalidSubmission", "TaskType", "task_type"]

LABELS = "ABCDEFGHIJ"
"""Option labels by position."""


def _options(fields: Mapping[str, Any], wanted: int, problems: list[str]) -> list[str]:
    """The option texts of a create or revise form: ``option`` repeated, or JSON ``options`` / ``choices``."""
    raw = fields.get("options", fields.get("option"))
    if raw is None and isinstance(fields.get("choices"), list):
        raw = [c.get("text") if isinstance(c, Mapping) else c for c in fields["choices"]]
    given = [] if raw is None else raw if isinstance(raw, list) else [raw]
    texts = [" ".join(str(t).split()) if t is not None else "" for t in given]
    if len(texts) != wanted:
        problems.append(f"options: write exactly {wanted} options (got {len(texts)})")
    for index, text in enumerate(texts):
        label = LABELS[index] if index < len(LABELS) else str(index + 1)
        if not text:
            problems.append(f"options: option {label} is empty")
        elif len(text) > MAX_OPTION:
            problems.append(f"options: option {label} has more than {MAX_OPTION} characters")
    folded = [fold(t) for t in texts if t]
    if len(set(folded)) != len(folded):
        problems.append("options: two options say the same thing")
    return texts


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


def parse_draft(
    fields: Mapping[str, Any], *, concept: str, lang: str, options: int, problems: list[str]
) -> Draft | None:
    """A written item from create or revise fields, or ``None`` with its problems added.

    The concept must appear in the question (folded), or the typed ``concept_form`` must,
    and be a variant of the concept: the lenient matcher of culture-adapt (a shared
    non-stopword word, or a shared stem where the language has a stemmer) between the form
    and the concept.
    """
    question = " ".join((_one(fields, "question") or "").split())
    if not question:
        problems.append("question: required")
    elif len(question) > MAX_QUESTION:
        problems.append(f"question: at most {MAX_QUESTION} characters")
    texts = _options(fields, options, problems)
    labels = [LABELS[i] for i in range(min(len(texts), len(LABELS)))]
    answer = _choice_of(fields, "answer", labels or ["A"], problems)
    distractor = _choice_of(fields, "distractor", labels or ["A"], problems)
    if answer and distractor and answer == distractor:
        problems.append("distractor: the hard distractor is another option than the answer")
    form = " ".join((_one(fields, "concept_form") or "").split()) or None
    if question:
        if form is None:
            if fold(concept) not in fold(question):
                problems.append(
                    f"question: the concept {concept!r} does not appear in it; write it in, "
                    "or type the form you used in concept_form"
                )
        elif fold(form) not in fold(question):
            problems.append(f"concept_form: {form[:60]!r} does not appear in the question")
        elif not is_variant(form, concept, lang):
            problems.append(f"concept_form: {form[:60]!r} is not a form of the concept {concept!r}")
    if problems:
        return None
    assert answer is not None and distractor is not None
    return Draft(
        question=question,
        choices=[Choice(label=label, text=text) for label, text in zip(labels, texts, strict=True)],
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
    policy: Policy | None = None

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
        problems: list[str] = []
        draft = parse_draft(fields, concept=task.concept, lang=task.lang, options=task.options, problems=problems)
        comment = _comment(fields, "comment", problems)
        if problems or draft is None:
            raise InvalidSubmission(problems)
        return CreateJudgement(item_id=task.id, annotator="?", draft=draft, comment=comment)


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


class QC(TaskType):
    """A checker's verdict on a written item."""

    name: str = "qc"
    checks_drafts: bool = True
    input_model: type[BaseModel] = DraftItem
    policy: Policy | None = None

    def view(self, task: DraftItem) -> dict[str, Any]:
        return {**_draft_view(task), "verdicts": list(QC_VERDICTS)}

    def parse(self, task: DraftItem, fields: Mapping[str, Any]) -> Judgement:
        problems: list[str] = []
        verdict = _choice_of(fields, "verdict", QC_VERDICTS, problems)
        comment = _comment(fields, "comment", problems)
        if verdict == "needs_revision" and not comment:
            problems.append("comment: say what to change when the item goes back to its creator")
        if problems or verdict is None:
            raise InvalidSubmission(problems)
        return QCJudgement(
            item_id=task.id,
            annotator="?",
            verdict="complete" if verdict == "complete" else "needs_revision",
            comment=comment,
        )


class Revise(TaskType):
    """The creator's edit of an item QC sent back, with the checker's comment in view."""

    name: str = "revise"
    votes: bool = False
    writes_items: bool = True
    revises_drafts: bool = True
    input_model: type[BaseModel] = DraftItem
    policy: Policy | None = None

    def view(self, task: DraftItem) -> dict[str, Any]:
        last = task.history[-1] if task.history else None
        return {
            **_draft_view(task),
            "feedback": last.comment if last is not None else None,
            "options": len(task.draft.choices),
            "labels": [c.label for c in task.draft.choices],
        }

    def parse(self, task: DraftItem, fields: Mapping[str, Any]) -> Judgement:
        problems: list[str] = []
        draft = parse_draft(
            fields, concept=task.concept, lang=task.lang, options=len(task.draft.choices), problems=problems
        )
        comment = _comment(fields, "comment", problems)
        if problems or draft is None:
            raise InvalidSubmission(problems)
        return ReviseJudgement(item_id=task.id, annotator="?", draft=draft, comment=comment)


ADAPT_VERDICTS: tuple[str, ...] = get_args(AdaptVerdict)
ADAPT_ERRORS: tuple[str, ...] = get_args(AdaptError)


class AdaptCheck(TaskType):
    """The check of an adapted item against its source (culture-adapt's ``adapt-check`` queue)."""

    name: str = "adapt-check"
    input_model: type[BaseModel] = MCItem
    policy: Policy | None = Majority()

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
        return AdaptCheckJudgement.model_validate(
            {"item_id": task.id, "annotator": "?", "verdict": verdict, "error": error, "comment": comment}
        )


QUESTION_ERRORS: tuple[str, ...] = get_args(QuestionError)
OPTION_ERRORS: tuple[str, ...] = get_args(OptionsError)


class LabelErrors(TaskType):
    """The primary error of an item's question and of its options (the error taxonomy of Putri et al.)."""

    name: str = "label-errors"
    input_model: type[BaseModel] = MCItem
    policy: Policy | None = Majority()

    def view(self, task: MCItem) -> dict[str, Any]:
        """The item with its marked answer (invalid options are judged against it) and the two label sets."""
        return {
            **_item_view(task),
            "answer": task.answer,
            "question_errors": list(QUESTION_ERRORS),
            "option_errors": list(OPTION_ERRORS),
        }

    def parse(self, task: MCItem, fields: Mapping[str, Any]) -> Judgement:
        problems: list[str] = []
        question = _choice_of(fields, "question", QUESTION_ERRORS, problems)
        options = _choice_of(fields, "options", OPTION_ERRORS, problems)
        comment = _comment(fields, "comment", problems)
        if problems:
            raise InvalidSubmission(problems)
        return LabelErrorsJudgement.model_validate(
            {
                "item_id": task.id,
                "annotator": "?",
                "question_error": question,
                "options_error": options,
                "comment": comment,
            }
        )


OPEN_VERDICTS: tuple[str, ...] = get_args(OpenVerdict)


class OpenJudge(TaskType):
    """A person's verdict on a model's free answer, to set beside the LM judge's (``annotate open-agreement``)."""

    name: str = "open-judge"
    input_model: type[BaseModel] = OpenAnswer
    policy: Policy | None = Majority()

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
        problems: list[str] = []
        verdict = _choice_of(fields, "verdict", OPEN_VERDICTS, problems)
        comment = _comment(fields, "comment", problems)
        if problems or verdict is None:
            raise InvalidSubmission(problems)
        return OpenJudgeJudgement(
            item_id=task.id, annotator="?", verdict="correct" if verdict == "correct" else "incorrect", comment=comment
        )


TASK_TYPES: dict[str, TaskType] = {
    task.name: task
    for task in (
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
    )
}
"""The task types the app serves, by name (each has ``templates/<name>.html``)."""


def task_type(name: str) -> TaskType:
    """A task type by name.

    Raises:
        KeyError: unknown task type.
    """
    return TASK_TYPES[name]
