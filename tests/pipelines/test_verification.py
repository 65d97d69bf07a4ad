"""The verification panel's decision table, its answers' confidences, its policies and its figures."""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

import pytest
from pydantic import ValidationError

from senseforge.data.schema import Choice, MCItem
from senseforge.errors import ConfigError
from senseforge.evaluate.policies import (
    AtMost,
    HardWhen,
    Minority,
    NoneRight,
    SkipReview,
    parse_hard_when,
    parse_skip_review,
)
from senseforge.evaluate.records import MCSample
from senseforge.pipelines.panel import Member, PanelAnswer, PanelVerdict, VerificationPanel
from senseforge.pipelines.verification import answer_of, decide, panel_figures, panel_rows, softmax_at
from senseforge.runfolder.figures import Agreement, Table

NEVER, SURE = SkipReview(), SkipReview(0.75)


def answer(
    member: str, prediction: str | None, correct: bool, confidence: float | None, chosen: float | None = None
) -> PanelAnswer:
    """A member's answer; ``chosen`` defaults to ``confidence`` for a right answer."""
    if chosen is None and correct:
        chosen = confidence
    return PanelAnswer(
        member=member, method="loglik", prediction=prediction, correct=correct, confidence=confidence, chosen=chosen
    )


def row(answers: list[PanelAnswer], hard_when: HardWhen, skip: SkipReview, queued: bool = True) -> tuple[str, str]:
    verdict = decide(answers, hard_when, skip, queued_without=queued)
    assert verdict.right == sum(a.correct for a in answers) and verdict.answers == tuple(answers)
    return verdict.decision, verdict.rule


# --------------------------------------------------------------------------- the decision table


@pytest.mark.parametrize("skip", [NEVER, SURE], ids=["never", "confident"])
def test_an_item_the_policy_does_not_make_hard_is_easy_under_any_skip_rule(skip: SkipReview) -> None:
    one_right = [answer("a", "A", True, 0.05), answer("b", "B", False, 0.01, 0.99), answer("c", "C", False, 0.0, 1.0)]
    assert row(one_right, NoneRight(), skip) == ("easy", "easy")
    verdict = decide(one_right, NoneRight(), skip, queued_without=True)
    assert verdict.hard is False and verdict.saved is True
    assert decide(one_right, NoneRight(), skip, queued_without=False).saved is False
    # the same answers are a Hard candidate under minority and at-most:1
    assert decide(one_right, Minority(), skip, queued_without=True).hard
    assert decide(one_right, AtMost(1), skip, queued_without=True).hard


def test_a_hard_candidate_goes_to_review_when_the_panel_settles_nothing() -> None:
    sure_right = [answer("a", "A", True, 0.99), answer("b", "B", False, 0.01, 0.9), answer("c", "C", False, 0.0, 0.9)]
    sure_wrong = [answer("a", "B", False, 0.01, 0.6), answer("b", "C", False, 0.0, 0.9)]
    assert row(sure_right, Minority(), NEVER) == ("review", "hard")
    assert row(sure_wrong, NoneRight(), NEVER) == ("review", "hard")
    assert decide(sure_wrong, NoneRight(), NEVER, queued_without=True).saved is False


@pytest.mark.parametrize("skip", [NEVER, SURE], ids=["never", "confident"])
def test_every_member_sure_of_the_same_other_option_is_a_likely_wrong_key_people_always_see(skip: SkipReview) -> None:
    threshold = 0.5 if skip.confidence is None else skip.confidence
    same = [answer(m, "B", False, 0.0, threshold) for m in "abc"]  # at the threshold: sure
    assert row(same, NoneRight(), skip) == ("review", "wrong-key")
    assert decide(same, NoneRight(), skip, queued_without=True).saved is False
    # one member a little less sure: not a wrong key; under confident:P every answer is sure the key is wrong
    unsure = [*same[:2], answer("c", "B", False, 0.0, threshold - 0.01)]
    assert row(unsure, NoneRight(), skip) == (("review", "hard") if skip is NEVER else ("rejected", "confident-wrong"))
    # two options, or one member unreadable: not a wrong key either
    split = [*same[:2], answer("c", "C", False, 0.0, 1.0)]
    assert row(split, NoneRight(), skip)[1] != "wrong-key"
    unread = [*same[:2], answer("c", None, False, 0.0, None)]
    assert row(unread, NoneRight(), skip)[1] != "wrong-key"


def test_a_wrong_key_is_never_rejected_however_sure_the_panel_is() -> None:
    certain = [answer(m, "D", False, 0.0, 1.0) for m in "ab"]
    assert row(certain, NoneRight(), SkipReview(0.99)) == ("review", "wrong-key")


def test_confident_right_members_make_a_hard_candidate_easy() -> None:
    """Every right member at P or more: Easy, whatever the wrong ones said; one right member below P: review."""
    answers = [answer("a", "A", True, 0.75), answer("b", "B", False, 0.2, 0.8), answer("c", "C", False, 0.5, 0.5)]
    assert row(answers, Minority(), SURE) == ("easy", "confident-right")
    verdict = decide(answers, Minority(), SURE, queued_without=True)
    assert verdict.hard and verdict.saved
    assert decide(answers, Minority(), SURE, queued_without=False).saved is False
    below = [answer("a", "A", True, 0.7499), *answers[1:]]
    assert row(below, Minority(), SURE) == ("review", "hard")
    two = [answer("a", "A", True, 0.9), answer("b", "A", True, 0.6), *answers[1:]]  # at-most:2 of 4
    assert row(two, AtMost(2), SURE) == ("review", "hard")
    assert row([two[0], two[0].model_copy(update={"member": "b"}), *answers[1:]], AtMost(2), SURE)[1] == (
        "confident-right"
    )


def test_every_member_sure_the_key_is_wrong_rejects_the_item() -> None:
    """All wrong, each giving the answer 1 − P or less (and not one shared option): rejected; one above: review."""
    answers = [answer("a", "B", False, 0.25, 0.5), answer("b", "C", False, 0.1, 0.9)]
    assert row(answers, NoneRight(), SURE) == ("rejected", "confident-wrong")
    verdict = decide(answers, NoneRight(), SURE, queued_without=True)
    assert verdict.saved and not decide(answers, NoneRight(), SURE, queued_without=False).saved
    above = [answer("a", "B", False, 0.2501, 0.5), answers[1]]
    assert row(above, NoneRight(), SURE) == ("review", "hard")


def test_an_unknown_confidence_is_never_confident() -> None:
    """A generated answer without top log-probabilities settles nothing: right or wrong, the item goes to review."""
    right = [answer("a", "A", True, None), answer("b", "B", False, 0.0, 1.0), answer("c", "C", False, 0.0, 1.0)]
    assert row(right, Minority(), SURE) == ("review", "hard")
    wrong = [answer("a", "B", False, None, None), answer("b", "C", False, 0.0, 1.0)]
    assert row(wrong, NoneRight(), SURE) == ("review", "hard")
    same = [answer("a", "B", False, None, None), answer("b", "B", False, 0.0, 1.0)]
    assert row(same, NoneRight(), SURE) == ("review", "hard")  # a wrong key needs every member sure of it


# --------------------------------------------------------------------------- confidences


def test_softmax_at() -> None:
    assert softmax_at([0.0, 0.0, 0.0], 2) == pytest.approx(1 / 3)
    assert softmax_at([1.0, 0.0], 0) == pytest.approx(math.e / (math.e + 1))
    assert softmax_at([-1000.0, -1001.0], 0) == pytest.approx(math.e / (math.e + 1))  # no underflow
    assert softmax_at([1000.0, 0.0], 0) == pytest.approx(1.0)  # no overflow
    assert softmax_at([-math.inf, 0.0], 0) == 0.0
    assert softmax_at([-math.inf, -math.inf], 1) == 0.5  # a failed scoring of every choice: no choice preferred


ITEM = MCItem(
    id="q1",
    lang="en",
    question="Where do you keep milk cold?",
    choices=[Choice(label="A", text="fridge"), Choice(label="B", text="oven"), Choice(label="C", text="shelf")],
    answer="A",
)


def sample(**fields: Any) -> MCSample:
    base: dict[str, Any] = {
        "id": "q1",
        "lang": "en",
        "difficulty": None,
        "category": None,
        "recipe": None,
        "review": None,
        "prompt": "Question: Where do you keep milk cold?\nAnswer:",
        "choices": ["fridge", "oven", "shelf"],
        "labels": ["A", "B", "C"],
        "continuations": [" fridge", " oven", " shelf"],
        "gold": "A",
    }
    return MCSample(**(base | fields))


def test_a_scoring_member_answers_with_the_softmax_of_its_scores() -> None:
    scores = [-2.0, -1.0, -3.0]
    got = answer_of(Member.parse("m@loglik"), "loglik", sample(scores=scores, prediction="B", correct=False), ITEM)
    total = sum(math.exp(s) for s in scores)
    assert got.member == "m@loglik" and got.method == "loglik" and got.prediction == "B" and not got.correct
    assert got.confidence == round(math.exp(-2.0) / total, 6) and got.chosen == round(math.exp(-1.0) / total, 6)


def test_a_generating_member_is_as_sure_as_its_letter_probabilities_say_and_unknown_without_them() -> None:
    generated = sample(response="A", prediction="A", correct=True, parsed=True)
    member = Member.parse("chat/model")
    plain = answer_of(member, "generate", generated, ITEM)
    assert plain.correct and plain.prediction == "A" and plain.confidence is None and plain.chosen is None
    with_probs = generated.model_copy(update={"label_probs": {"A": 0.7, "B": 0.2}})
    got = answer_of(member, "generate", with_probs, ITEM)
    assert (got.confidence, got.chosen) == (0.7, 0.7)
    wrong = with_probs.model_copy(update={"prediction": "B", "correct": False})
    got = answer_of(member, "generate", wrong, ITEM)
    assert (got.confidence, got.chosen) == (0.7, 0.2)
    unread = with_probs.model_copy(update={"prediction": None, "correct": None, "parsed": False})
    got = answer_of(member, "generate", unread, ITEM)
    assert got.prediction is None and not got.correct and got.confidence == 0.7 and got.chosen is None


# --------------------------------------------------------------------------- policies and the panel


@pytest.mark.parametrize(
    ("text", "spec"),
    [("none", "none"), (" Minority ", "minority"), ("at-most:0", "at-most:0"), ("AT-MOST:2", "at-most:2")],
)
def test_hard_when_reads_its_forms(text: str, spec: str) -> None:
    assert parse_hard_when(text).spec == spec


@pytest.mark.parametrize("text", ["", "all", "none:1", "minority:2", "at-most", "at-most:", "at-most:x", "at-most:-1"])
def test_hard_when_refuses_anything_else_naming_the_forms(text: str) -> None:
    with pytest.raises(ConfigError, match=r"unknown hard-when policy .*none, minority or at-most:N"):
        parse_hard_when(text)


@pytest.mark.parametrize(("text", "p"), [("never", None), ("confident:0.9", 0.9), ("Confident:1", 1.0)])
def test_skip_review_when_reads_its_forms(text: str, p: float | None) -> None:
    assert parse_skip_review(text).confidence == p


@pytest.mark.parametrize(
    "text", ["", "always", "never:1", "confident", "confident:", "confident:x", "confident:0", "confident:1.5"]
)
def test_skip_review_when_refuses_anything_else_naming_the_forms(text: str) -> None:
    with pytest.raises(ConfigError, match=r"unknown skip-review-when policy .*confident:P \(0 < P <= 1\)"):
        parse_skip_review(text)


def test_a_panel_refuses_a_member_named_twice_but_takes_one_model_two_ways() -> None:
    with pytest.raises(ValidationError, match=r"--panel names m@letter twice"):
        VerificationPanel(members=("m@letter", "x", " m@letter"))
    panel = VerificationPanel(members=("m@letter", "m@loglik", "m"))
    assert [(m.spec, m.method) for m in panel.parsed()] == [("m", "letter"), ("m", "loglik"), ("m", None)]


@pytest.mark.parametrize(("n", "members"), [(2, 2), (3, 2), (1, 1)])
def test_at_most_n_needs_more_members_than_n(n: int, members: int) -> None:
    with pytest.raises(ValidationError, match=rf"--hard-when at-most:{n} would make every item Hard"):
        VerificationPanel(members=tuple(f"m{i}" for i in range(members)), hard_when=f"at-most:{n}")
    assert VerificationPanel(members=tuple(f"m{i}" for i in range(n + 1)), hard_when=f"at-most:{n}").hard() == AtMost(n)


# --------------------------------------------------------------------------- panel.jsonl and the figures


def answered(item_id: str, answers: list[PanelAnswer]) -> SimpleNamespace:
    """A stored record the panel answered (what ``panel_rows`` and ``panel_figures`` read of one)."""
    verdict = decide(answers, NoneRight(), NEVER, queued_without=True)
    return SimpleNamespace(record_id=item_id, data=SimpleNamespace(panel=verdict))


def test_panel_rows_are_one_per_member() -> None:
    verdict: PanelVerdict = answered("q1", [answer("a", "A", True, 0.9), answer("b", None, False, None)]).data.panel
    assert panel_rows("q1", verdict) == [
        {"id": "q1", "member": "a", "method": "loglik", "prediction": "A", "correct": True, "confidence": 0.9},
        {"id": "q1", "member": "b", "method": "loglik", "prediction": None, "correct": False, "confidence": None},
    ]


def test_panel_figures_on_three_items() -> None:
    """Two members, three items (two kept): accuracy and confidence on the kept ones, agreement over all three."""
    records = [
        answered("q1", [answer("a", "A", True, 0.9), answer("b", "A", True, 0.8)]),
        answered("q2", [answer("a", "A", True, 0.6), answer("b", "B", False, 0.3)]),
        answered("q3", [answer("a", "C", False, 0.1), answer("b", "C", False, None)]),
    ]
    figures = {figure.name: figure for figure in panel_figures(records, ["q1", "q2"])}
    assert set(figures) == {"panel-accuracy", "panel-pairwise", "panel-agreement", "panel-policies"}
    accuracy, pairwise, policies = figures["panel-accuracy"], figures["panel-pairwise"], figures["panel-policies"]
    assert isinstance(accuracy, Table) and isinstance(pairwise, Table) and isinstance(policies, Table)
    assert accuracy.rows == ["a", "b"] and accuracy.values == [[1.0, 0.75], [0.5, 0.55]]
    assert pairwise.values == [[1.0, 0.6667], [0.6667, 1.0]]
    agreement = figures["panel-agreement"]
    assert isinstance(agreement, Agreement)
    (group,) = agreement.groups
    # votes A,A / A,B / C,C: observed agreement 2/3, by chance (1/2)² + (1/6)² + (1/3)² = 7/18, so κ = 5/11; nominal
    # α from the coincidences: 1 − (2/6) / (22/30) = 6/11
    assert (group.items, group.raters, group.ratings) == (3, 2, 6)
    assert group.fleiss_kappa == round(5 / 11, 4) and group.krippendorff_alpha == round(6 / 11, 4)
    assert policies.rows == ["none", "minority", "at-most:1"]
    assert policies.values == [[2, 1], [2, 1], [1, 2]]
    assert panel_figures([], []) == []
