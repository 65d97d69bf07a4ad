"""The record models: validation rules and helpers."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import ValidationError

from senseforge.data.schema import (
    JUDGEMENT,
    AdaptCheckJudgement,
    AnswerJudgement,
    BinaryExample,
    Choice,
    CreateJudgement,
    Draft,
    LabelErrorsJudgement,
    MCItem,
    Provenance,
    QCJudgement,
    QuestionSet,
    Triple,
    VerifyJudgement,
    judgement,
)


def _item(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": "q1",
        "lang": "en",
        "question": "Where do you keep milk cold?",
        "question_concept": "milk",
        "choices": [
            {"label": "A", "text": "refrigerator"},
            {"label": "B", "text": "oven"},
            {"label": "C", "text": "bookshelf"},
        ],
        "answer": "A",
    }
    base.update(overrides)
    return base


def _errors(exc: pytest.ExceptionInfo[ValidationError]) -> list[tuple[tuple[Any, ...], str]]:
    return [(tuple(e["loc"]), e["msg"]) for e in exc.value.errors()]


# --- MCItem -------------------------------------------------------------------------


def test_mcitem_valid_and_defaults() -> None:
    item = MCItem.model_validate(_item())
    assert item.answer == "A"
    assert [c.label for c in item.choices] == ["A", "B", "C"]
    assert all(isinstance(c, Choice) for c in item.choices)
    assert item.difficulty is None
    assert item.provenance == Provenance()
    assert item.provenance.source_ids == []
    assert item.metadata == {}


def test_mcitem_normalises_lang() -> None:
    assert MCItem.model_validate(_item(lang="ZH-hant-tw")).lang == "zh-Hant-TW"


def test_mcitem_answer_may_be_withheld() -> None:
    item = MCItem.model_validate(_item(answer=None))
    assert item.answer is None
    assert item.answer_text() is None


def test_mcitem_answer_text() -> None:
    assert MCItem.model_validate(_item(answer="C")).answer_text() == "bookshelf"


def test_mcitem_rejects_answer_that_is_not_a_label() -> None:
    with pytest.raises(ValidationError, match=r"answer 'D' is not one of the choice labels \['A', 'B', 'C'\]"):
        MCItem.model_validate(_item(answer="D"))


def test_mcitem_rejects_empty_answer_string() -> None:
    # "" is not a withheld answer (that is None); adapters map "" to None before this.
    with pytest.raises(ValidationError, match="is not one of the choice labels"):
        MCItem.model_validate(_item(answer=""))


def test_mcitem_answer_checked_on_assignment() -> None:
    item = MCItem.model_validate(_item())
    with pytest.raises(ValidationError, match="is not one of the choice labels"):
        item.answer = "Z"
    item.answer = "B"
    assert item.answer_text() == "oven"


def test_mcitem_rejects_duplicate_labels() -> None:
    choices = [{"label": "A", "text": "x"}, {"label": "B", "text": "y"}, {"label": "A", "text": "z"}]
    with pytest.raises(ValidationError, match="choice labels must be unique"):
        MCItem.model_validate(_item(choices=choices, answer="B"))


@pytest.mark.parametrize("n", [0, 1])
def test_mcitem_needs_two_choices(n: int) -> None:
    choices = [{"label": "A", "text": "only"}][:n]
    with pytest.raises(ValidationError) as exc:
        MCItem.model_validate(_item(choices=choices, answer=None))
    assert _errors(exc)[0][0] == ("choices",)
    assert "at least 2" in _errors(exc)[0][1]


def test_mcitem_two_choices_is_enough() -> None:
    choices = [{"label": "1", "text": "yes"}, {"label": "2", "text": "no"}]
    assert MCItem.model_validate(_item(choices=choices, answer="2")).answer_text() == "no"


@pytest.mark.parametrize("lang", ["english", "", "en_US", "e"])
def test_mcitem_rejects_bad_lang(lang: str) -> None:
    with pytest.raises(ValidationError) as exc:
        MCItem.model_validate(_item(lang=lang))
    assert _errors(exc)[0][0] == ("lang",)


def test_mcitem_rejects_unknown_fields() -> None:
    with pytest.raises(ValidationError) as exc:
        MCItem.model_validate(_item(answerKey="A"))
    assert _errors(exc) == [(("answerKey",), "Extra inputs are not permitted")]


def test_nested_records_reject_unknown_fields() -> None:
    choices = [{"label": "A", "text": "x", "score": 1}, {"label": "B", "text": "y"}]
    with pytest.raises(ValidationError) as exc:
        MCItem.model_validate(_item(choices=choices, answer=None))
    assert _errors(exc)[0][0] == ("choices", 0, "score")

    with pytest.raises(ValidationError) as exc:
        MCItem.model_validate(_item(provenance={"recipe": "mcsqa", "author": "me"}))
    assert _errors(exc)[0][0] == ("provenance", "author")


def test_mcitem_rejects_empty_label_and_id() -> None:
    with pytest.raises(ValidationError) as exc:
        MCItem.model_validate(_item(choices=[{"label": "", "text": "x"}, {"label": "B", "text": "y"}], answer=None))
    assert _errors(exc)[0][0] == ("choices", 0, "label")
    with pytest.raises(ValidationError) as exc:
        MCItem.model_validate(_item(id=""))
    assert _errors(exc)[0][0] == ("id",)


def test_mcitem_rejects_unknown_difficulty() -> None:
    assert MCItem.model_validate(_item(difficulty="hard")).difficulty == "hard"
    with pytest.raises(ValidationError) as exc:
        MCItem.model_validate(_item(difficulty="medium"))
    assert _errors(exc)[0][0] == ("difficulty",)


# --- QuestionSet ----------------------------------------------------------------------


def _qset(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": "qs-1",
        "lang": "ja",
        "anchor": "回転ドア",
        "relation": "AtLocation",
        "direction": "forward",
        "targets": ["銀行", "図書館", "デパート"],
    }
    base.update(overrides)
    return base


def test_question_set_valid() -> None:
    qs = QuestionSet.model_validate(_qset(source_lang="jpn"))
    assert qs.targets == ["銀行", "図書館", "デパート"]
    assert qs.source_uris == []
    assert qs.source_lang == "jpn"


def test_question_set_needs_three_distinct_targets() -> None:
    with pytest.raises(ValidationError, match="targets must be three distinct concepts"):
        QuestionSet.model_validate(_qset(targets=["銀行", "銀行", "デパート"]))


@pytest.mark.parametrize("targets", [["a", "b"], ["a", "b", "c", "d"], []])
def test_question_set_needs_exactly_three_targets(targets: list[str]) -> None:
    with pytest.raises(ValidationError) as exc:
        QuestionSet.model_validate(_qset(targets=targets))
    assert _errors(exc)[0][0] == ("targets",)


def test_question_set_rejects_bad_direction() -> None:
    with pytest.raises(ValidationError) as exc:
        QuestionSet.model_validate(_qset(direction="sideways"))
    assert _errors(exc)[0][0] == ("direction",)


# --- Triple / BinaryExample -----------------------------------------------------------


def test_binary_example_with_knowledge_triples() -> None:
    example = BinaryExample.model_validate(
        {
            "id": "dlg-1-0",
            "context_id": "dlg-1",
            "context": "A: I left the ice cream in the car all afternoon.",
            "target": "B: It must have melted.",
            "label": True,
            "task": "dialogue",
            "lang": "en",
            "knowledge": [
                {"head": "ice cream", "relation": "HasProperty", "tail": "melts in heat", "dimension": "physical"},
                {"head": "car", "relation": "AtLocation", "tail": "sun", "dimension": "spatial", "weight": 1.5},
            ],
        }
    )
    assert example.label is True
    assert all(isinstance(t, Triple) for t in example.knowledge)
    assert [t.dimension for t in example.knowledge] == ["physical", "spatial"]
    assert example.knowledge[1].weight == 1.5
    assert example.knowledge[0].lang is None


def test_binary_example_rejects_bad_triple() -> None:
    with pytest.raises(ValidationError) as exc:
        BinaryExample(
            id="x",
            context_id="c",
            context="ctx",
            target="t",
            label=False,
            task="mt-zh-en",
            knowledge=[Triple(head="a", relation="r", tail="b"), {"head": "a", "relation": "", "tail": "b"}],
        )
    assert _errors(exc)[0][0] == ("knowledge", 1, "relation")


def test_triple_normalises_lang_and_forbids_extra() -> None:
    assert Triple(head="犬", relation="IsA", tail="動物", lang="JA").lang == "ja"
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        Triple.model_validate({"head": "a", "relation": "r", "tail": "b", "surface": "x"})


# --- Judgement ------------------------------------------------------------------------


def test_judgement_with_datetime() -> None:
    j = JUDGEMENT.validate_python(
        {
            "item_id": "q1",
            "annotator": "openai/gpt-4o-mini",
            "task": "answer",
            "choice": "B",
            "certain": True,
            "flags": ["ambiguous-option:B"],
            "created_at": "2024-05-01T12:30:00Z",
        }
    )
    assert isinstance(j, AnswerJudgement)
    assert j.created_at == datetime(2024, 5, 1, 12, 30, tzinfo=UTC)
    assert j.created_at.tzinfo is not None
    assert j.option_ambiguous("B") and not j.question_ambiguous
    assert j.vote() == "B" and j.ambiguous()


def test_judgement_rejects_bad_datetime_extra_and_unknown_task() -> None:
    with pytest.raises(ValidationError) as exc:
        judgement(item_id="q1", annotator="ann1", task="answer", created_at="yesterday")
    assert _errors(exc)[0][0] == ("answer", "created_at")
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        JUDGEMENT.validate_python({"item_id": "q1", "annotator": "ann1", "task": "answer", "score": 3})
    with pytest.raises(ValidationError, match="does not match any of the expected tags"):
        judgement(item_id="q1", annotator="ann1", task="rate")
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        judgement(item_id="q1", annotator="ann1", task="verify", choice="A")  # a verify body has no choice


def test_legacy_judgement_rows_still_read() -> None:
    """Run stores written before bodies were typed hold every field, mostly empty: they still read."""
    old_verify = {
        "item_id": "q",
        "annotator": "a",
        "task": "verify",
        "accept": True,
        "choice": None,
        "certain": None,
        "flags": [],
        "comment": None,
        "created_at": None,
    }
    assert judgement(**old_verify) == VerifyJudgement(item_id="q", annotator="a", accept=True)
    old_answer = {
        **old_verify,
        "task": "answer",
        "accept": None,
        "choice": "C",
        "certain": False,
        "flags": ["ambiguous-question"],
        "comment": "unsure",
    }
    back = judgement(**old_answer)
    assert isinstance(back, AnswerJudgement)
    assert (back.choice, back.certain, back.question_ambiguous, back.reason) == ("C", False, True, "unsure")


def test_bodies_say_how_they_vote() -> None:
    assert VerifyJudgement(item_id="q", annotator="a", accept=False).vote() == "reject"
    assert VerifyJudgement(item_id="q", annotator="a").vote() is None
    assert QCJudgement(item_id="q@1", annotator="a", verdict="needs_revision", comment="x").vote() == "reject"
    check = AdaptCheckJudgement(item_id="q", annotator="a", verdict="wrong", error="translation")
    assert (check.vote(), check.accept, check.vote_kind) == ("wrong", False, "choice")
    labels = LabelErrorsJudgement(item_id="q", annotator="a", question_error="none", options_error="fluency")
    assert (labels.vote(), labels.accept) == ("none/fluency", False)
    with pytest.raises(ValidationError, match="names its error"):
        AdaptCheckJudgement(item_id="q", annotator="a", verdict="wrong")
    with pytest.raises(ValidationError, match="names its error"):
        AdaptCheckJudgement(item_id="q", annotator="a", verdict="correct-minor", error="translation")


def test_draft_checks_its_labels() -> None:
    choices = [Choice(label=x, text=x.lower()) for x in "ABCDE"]
    draft = Draft(question="q?", choices=choices, answer="C", distractor="B")
    created = judgement(item_id="s1", annotator="ana", task="create", draft=draft.model_dump())
    assert isinstance(created, CreateJudgement) and created.draft == draft and created.vote() is None
    with pytest.raises(ValidationError, match="another option"):
        Draft(question="q?", choices=choices, answer="C", distractor="C")
    with pytest.raises(ValidationError, match="not one of the labels"):
        Draft(question="q?", choices=choices, answer="F", distractor="B")
