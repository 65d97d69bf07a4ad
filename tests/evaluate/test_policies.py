"""Review policies and agreement statistics: hand-made cases, published examples, Putri et al.'s ties."""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from senseforge.data.schema import Judgement, judgement
from senseforge.errors import ConfigError
from senseforge.evaluate.metrics import fleiss_kappa
from senseforge.evaluate.policies import (
    AtLeast,
    ExcludeAmbiguous,
    Majority,
    Unanimous,
    agreement,
    ambiguity_flagged,
    at_least,
    decide,
    exclude_ambiguous,
    krippendorff_alpha_nominal,
    majority,
    parse_policy,
    unanimous,
    votes_of,
)

FIXTURE = Path(__file__).parents[1] / "fixtures" / "putri_human_gen_ties.json"


def verify(*accepts: bool | None, item: str = "q1", flags: dict[int, list[str]] | None = None) -> list[Judgement]:
    """Verify judgements by annotators a0, a1, … in that order."""
    flags = flags or {}
    return [
        judgement(item_id=item, annotator=f"a{i}", task="verify", accept=a, flags=flags.get(i, []))
        for i, a in enumerate(accepts)
    ]


def answers(*choices: str, item: str = "q1") -> list[Judgement]:
    """Answer judgements by annotators a0, a1, … in that order."""
    return [judgement(item_id=item, annotator=f"a{i}", task="answer", choice=c) for i, c in enumerate(choices)]


# --------------------------------------------------------------------------- unanimous


def test_unanimous_waits_for_k_votes() -> None:
    decision = unanimous(verify(True), k=2)
    assert decision.status == "pending"
    assert not decision.decided
    assert dict(decision.votes) == {"accept": 1, "reject": 0}


def test_unanimous_accepts_when_the_first_k_accept() -> None:
    decision = unanimous(verify(True, True), k=2)
    assert decision.status == "accepted"
    assert decision.decided
    assert decision.value is None


def test_unanimous_rejects_on_one_rejection_among_the_first_k() -> None:
    assert unanimous(verify(True, False), k=2).status == "rejected"
    assert unanimous(verify(False, True, True), k=3).status == "rejected"


def test_unanimous_looks_only_at_the_first_k() -> None:
    decision = unanimous(verify(True, True, False), k=2)
    assert decision.status == "accepted"
    assert dict(decision.votes) == {"accept": 2, "reject": 0}


def test_unanimous_even_an_early_rejection_waits_for_k() -> None:
    assert unanimous(verify(False), k=2).status == "pending"


def test_votes_skip_abstentions_and_repeats() -> None:
    judgements = [
        judgement(item_id="q1", annotator="ana", task="verify", accept=None, flags=["offensive"]),
        judgement(item_id="q1", annotator="ana", task="verify", accept=True),
        judgement(item_id="q1", annotator="ana", task="verify", accept=False),
        judgement(item_id="q1", annotator="budi", task="verify", accept=True),
    ]
    assert votes_of(judgements) == [("ana", "accept"), ("budi", "accept")]
    assert unanimous(judgements).status == "accepted"


def test_rules_refuse_mixed_items_and_kinds() -> None:
    with pytest.raises(ValueError, match="one item at a time"):
        majority(answers("A", item="q1") + answers("B", item="q2"))
    mixed = [*answers("A"), judgement(item_id="q1", annotator="z", task="verify", accept=True)]
    with pytest.raises(ValueError, match="split them by task"):
        majority(mixed)
    with pytest.raises(ValueError, match="verify judgements"):
        unanimous(answers("A", "A"))
    with pytest.raises(ValueError, match="k >= 1"):
        unanimous(verify(True), k=0)


# --------------------------------------------------------------------------- at_least


@pytest.mark.parametrize(
    ("accepts", "status"),
    [
        ((True, True, True, False, False), "accepted"),
        ((False, True, False, True, True), "accepted"),
        ((True, True, False, False, False), "rejected"),
        ((True, True, True, True), "pending"),
        ((True, False, True, False, False, True, True), "rejected"),  # only the first five count
    ],
)
def test_at_least_three_of_five(accepts: tuple[bool, ...], status: str) -> None:
    assert at_least(3, 5)(verify(*accepts)).status == status


@pytest.mark.parametrize(("m", "k"), [(0, 2), (3, 2), (-1, 1)])
def test_at_least_checks_its_bounds(m: int, k: int) -> None:
    with pytest.raises(ConfigError, match="1 <= m <= k"):
        at_least(m, k)


@given(st.integers(1, 4), st.lists(st.booleans(), max_size=7))
def test_at_least_k_of_k_is_unanimous(k: int, accepts: list[bool]) -> None:
    judgements = verify(*accepts)
    assert at_least(k, k)(judgements).status == unanimous(judgements, k).status


# --------------------------------------------------------------------------- majority


def test_majority_most_votes_win() -> None:
    decision = majority(answers("B", "A", "A", "C", "A"))
    assert decision.status == "accepted"
    assert decision.value == "A"
    assert dict(decision.votes) == {"A": 3, "B": 1, "C": 1}
    assert "most votes" in decision.reason


@pytest.mark.parametrize(
    ("choices", "winner"),
    [
        (("D", "C", "D", "C", "B"), "D"),
        (("B", "C", "D", "C", "D"), "C"),  # the first annotator is not among the tied choices
        (("A", "B", "C"), "A"),
        (("E", "B", "B", "E", "C"), "E"),
    ],
)
def test_majority_tie_goes_to_the_earliest_annotator(choices: tuple[str, ...], winner: str) -> None:
    decision = majority(answers(*choices))
    assert decision.value == winner
    assert "tie" in decision.reason


def test_majority_on_verify_votes() -> None:
    assert majority(verify(False, True, True)).status == "accepted"
    assert majority(verify(True, False, False)).status == "rejected"
    tie = majority(verify(False, True))
    assert tie.status == "rejected"
    assert tie.value is None


def test_majority_without_votes_is_pending() -> None:
    assert majority([]).status == "pending"
    assert majority(verify(None, None)).status == "pending"


@given(st.lists(st.sampled_from("ABCDE"), min_size=1, max_size=9))
def test_majority_winner_has_most_votes_and_is_earliest_of_the_tied(choices: list[str]) -> None:
    decision = majority(answers(*choices))
    counts = Counter(choices)
    top = max(counts.values())
    assert decision.value is not None
    assert counts[decision.value] == top
    assert all(counts[c] < top for c in choices[: choices.index(decision.value)])


# --------------------------------------------------------------------------- exclude ambiguous


def test_exclude_ambiguous_needs_more_than_n_flaggers() -> None:
    policy = exclude_ambiguous(3, Majority())
    flags = {0: ["ambiguous-question"], 1: ["ambiguous-option:B"], 2: ["ambiguous-question", "ambiguous-option:A"]}
    three = verify(True, True, True, False, True, flags=flags)
    assert policy(three).status == "accepted"
    four = verify(True, True, True, False, True, flags={**flags, 4: ["ambiguous-option:E"]})
    decision = policy(four)
    assert decision.status == "excluded"
    assert dict(decision.votes) == {"accept": 4, "reject": 1}
    assert "4 annotators" in decision.reason


def test_exclude_ambiguous_counts_people_not_flags() -> None:
    flagged = verify(True, True, flags={0: ["ambiguous-question", "ambiguous-option:A", "ambiguous-option:B"]})
    assert ambiguity_flagged(flagged) == 1
    assert ambiguity_flagged(verify(True, flags={0: ["offensive", "several-right"]})) == 0
    assert exclude_ambiguous(0, Unanimous())(flagged).status == "excluded"
    assert exclude_ambiguous(1, Unanimous())(flagged).status == "accepted"


def test_exclude_ambiguous_applies_before_enough_votes() -> None:
    judgements = verify(None, True, flags={0: ["ambiguous-question"], 1: ["ambiguous-question"]})
    assert exclude_ambiguous(1, Unanimous(k=3))(judgements).status == "excluded"
    assert exclude_ambiguous(2, Unanimous(k=3))(judgements).status == "pending"


def test_decide_maps_every_item() -> None:
    by_item = {"q1": verify(True, True, item="q1"), "q2": verify(True, False, item="q2"), "q3": []}
    assert {k: d.status for k, d in decide(Unanimous(), by_item).items()} == {
        "q1": "accepted",
        "q2": "rejected",
        "q3": "pending",
    }


# --------------------------------------------------------------------------- parsing


@pytest.mark.parametrize(
    ("text", "policy"),
    [
        ("unanimous", Unanimous(2)),
        ("unanimous:3", Unanimous(3)),
        ("majority", Majority()),
        ("at-least:3/5", AtLeast(3, 5)),
        (" At-Least: 3/5 ", AtLeast(3, 5)),
        ("majority,exclude-ambiguous:3", ExcludeAmbiguous(3, Majority())),
        ("unanimous, exclude-ambiguous:0", ExcludeAmbiguous(0, Unanimous(2))),
    ],
)
def test_parse_policy(text: str, policy: object) -> None:
    parsed = parse_policy(text)
    assert parsed == policy
    assert parse_policy(parsed.spec) == parsed


@pytest.mark.parametrize(
    "text",
    [
        "",
        "unanimus",
        "majority:2",
        "at-least:3",
        "at-least:3/x",
        "at-least:6/5",
        "unanimous:0",
        "majority,exclude-ambiguous",
        "majority,exclude-ambiguous:-1",
        "majority,ambiguous:3",
        "majority,exclude-ambiguous:3,majority",
        "exclude-ambiguous:3",
    ],
)
def test_parse_policy_refuses(text: str) -> None:
    with pytest.raises(ConfigError):
        parse_policy(text)


# --------------------------------------------------------------------------- Fleiss' kappa

# The Fleiss (1971) worked example and the undefined cases are in cases/kappa.json.


def test_fleiss_kappa_by_hand() -> None:
    # Two raters, items [a,a], [a,b], [b,b]: P_i = 1, 0, 1 -> P-bar = 2/3;
    # p_a = p_b = 1/2 -> P_e = 1/2; kappa = (2/3 - 1/2) / (1 - 1/2) = 1/3.
    assert fleiss_kappa([["a", "a"], ["a", "b"], ["b", "b"]]) == pytest.approx(1 / 3)
    assert fleiss_kappa([["a"] * 3, ["b"] * 3, ["c"] * 3]) == 1.0
    assert fleiss_kappa([["a", "b"], ["b", "a"]]) == -1.0


@pytest.mark.parametrize(
    ("ratings", "message"),
    [
        ([["a", "a"], ["a", "b", "b"]], "same number of ratings"),
        ([["a", None], ["a", "b"]], "missing rating"),
        ([], "no items"),
        ([["a"], ["b"]], "at least two"),
    ],
)
def test_fleiss_kappa_refuses(ratings: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        fleiss_kappa(ratings)


@given(
    st.integers(2, 6).flatmap(
        lambda raters: st.lists(
            st.lists(st.sampled_from("abc"), min_size=raters, max_size=raters), min_size=1, max_size=8
        )
    )
)
def test_fleiss_kappa_is_at_most_one(ratings: list[list[str]]) -> None:
    kappa = fleiss_kappa(ratings)
    assert math.isnan(kappa) or kappa <= 1.0 + 1e-12


# --------------------------------------------------------------------------- Krippendorff's alpha


def test_krippendorff_alpha_by_hand() -> None:
    # Units (None = missing): [a,a,b], [a,a], [b,b,-], [a,b], [c] (one value: not pairable).
    # Coincidences, each ordered pair of values in a unit weighted 1/(m_u - 1):
    #   [a,a,b]: o_aa += 2/2, o_ab += 2/2, o_ba += 2/2
    #   [a,a]:   o_aa += 2;  [b,b]: o_bb += 2;  [a,b]: o_ab += 1, o_ba += 1
    # o_aa = 3, o_ab = o_ba = 2, o_bb = 2; n_a = 5, n_b = 4, n = 9.
    # alpha = 1 - (n - 1) * sum_{c!=k} o_ck / sum_{c!=k} n_c n_k = 1 - 8 * 4 / (2 * 5 * 4) = 0.2
    units: list[list[str | None]] = [["a", "a", "b"], ["a", "a"], ["b", "b", None], ["a", "b"], ["c"]]
    assert krippendorff_alpha_nominal(units) == pytest.approx(0.2)


def test_krippendorff_alpha_published_example() -> None:
    # Krippendorff (2011), "Computing Krippendorff's alpha-reliability", nominal data with
    # four observers and missing values: alpha = 0.743.
    rows = [
        [1, 2, 3, 3, 2, 1, 4, 1, 2, None, None, None],
        [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, None, 3],
        [None, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, None],
        [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, None],
    ]
    units = [[None if v is None else str(v) for v in unit] for unit in zip(*rows, strict=True)]
    assert krippendorff_alpha_nominal(units) == pytest.approx(0.743, abs=5e-4)


def test_krippendorff_alpha_perfect_and_systematic() -> None:
    assert krippendorff_alpha_nominal([["a", "a"], ["b", "b", "b"], ["c", "c", None]]) == 1.0
    # Two raters who always disagree, a vs b, on N = 4 units: o_ab = o_ba = 4, n_a = n_b = 4,
    # n = 8: alpha = 1 - 7 * 8 / (2 * 4 * 4) = -0.75.
    assert krippendorff_alpha_nominal([["a", "b"]] * 4) == pytest.approx(-0.75)
    assert math.isnan(krippendorff_alpha_nominal([["a", "a"], ["a", "a", "a"]]))
    with pytest.raises(ValueError, match="two or more ratings"):
        krippendorff_alpha_nominal([["a"], ["b", None]])


units_strategy = st.lists(st.lists(st.sampled_from(["a", "b", "c", None]), min_size=2, max_size=5), min_size=1)


@given(units_strategy, st.randoms(use_true_random=False))
def test_krippendorff_alpha_ignores_rater_and_unit_order(units: list[list[str | None]], rnd: Any) -> None:
    try:
        alpha = krippendorff_alpha_nominal(units)
    except ValueError:
        return
    shuffled = [rnd.sample(unit, len(unit)) for unit in units]
    rnd.shuffle(shuffled)
    again = krippendorff_alpha_nominal(shuffled)
    assert (math.isnan(alpha) and math.isnan(again)) or again == pytest.approx(alpha)


@given(st.lists(st.lists(st.sampled_from("abc"), min_size=3, max_size=3), min_size=2, max_size=10))
def test_alpha_follows_from_kappa_for_complete_data(units: list[list[str]]) -> None:
    # With every item rated by all raters, both use the same observed agreement P-bar, and
    # D_e(alpha) = n / (n - 1) * (1 - P_e) for n values in all, so 1 - alpha = (1 - kappa) * (n - 1) / n.
    kappa = fleiss_kappa(units)
    alpha = krippendorff_alpha_nominal(units)
    assert math.isnan(kappa) == math.isnan(alpha)
    if not math.isnan(kappa):
        n = sum(len(unit) for unit in units)
        assert kappa <= 1.0 + 1e-12
        assert alpha == pytest.approx(kappa + (1 - kappa) / n)


# --------------------------------------------------------------------------- agreement from judgements


def test_agreement_from_judgements() -> None:
    by_item = {
        "q1": answers("A", "A", "B", item="q1"),
        "q2": answers("A", "A", "A", item="q2"),
        "q3": answers("B", "B", "A", item="q3"),
        "q4": answers("C", item="q4"),  # one vote: left out
    }
    units = [["A", "A", "B"], ["A", "A", "A"], ["B", "B", "A"]]
    result = agreement(by_item, "answer")
    assert (result.items, result.ratings) == (3, 9)
    assert result.fleiss_kappa == pytest.approx(fleiss_kappa(units))
    assert result.krippendorff_alpha == pytest.approx(krippendorff_alpha_nominal(units))
    assert agreement(by_item, "verify").items == 0


def test_agreement_is_none_when_undefined() -> None:
    uneven = {"q1": verify(True, False, item="q1"), "q2": verify(True, True, False, item="q2")}
    result = agreement(uneven, "verify")
    assert result.fleiss_kappa is None
    assert result.krippendorff_alpha is not None
    same = agreement({"q1": verify(True, True, item="q1"), "q2": verify(True, True, item="q2")}, "verify")
    assert (same.fleiss_kappa, same.krippendorff_alpha) == (None, None)
    empty = agreement({}, "verify")
    assert (empty.items, empty.fleiss_kappa, empty.krippendorff_alpha) == (0, None, None)


def test_a_panel_is_read_over_the_items_every_judge_voted_on() -> None:
    by_item = {
        "q1": answers("A", "A", "B", item="q1"),
        "q2": answers("A", "A", "A", item="q2"),
        "q3": answers("B", "B", item="q3"),  # a2 did not vote
    }
    crowd, panel = agreement(by_item, "answer"), agreement(by_item, "answer", panel=True)
    assert crowd.fleiss_kappa is None  # 3, 3 and 2 votes
    assert panel.fleiss_kappa == pytest.approx(fleiss_kappa([["A", "A", "B"], ["A", "A", "A"]]))
    assert crowd.krippendorff_alpha == panel.krippendorff_alpha
    assert (panel.items, panel.ratings) == (3, 8)
    by_item["q4"] = [judgement(item_id="q4", annotator="a3", task="answer", choice="A")]
    assert agreement(by_item, "answer", panel=True).fleiss_kappa is None  # nobody else saw q4: no item has all four


@given(st.lists(st.lists(st.sampled_from(["accept", "reject", None]), min_size=4, max_size=4), min_size=1, max_size=8))
def test_a_panel_reads_the_items_by_judges_table(table: list[list[str | None]]) -> None:
    # Rows are items, columns judges (None: no vote). Kappa over the rows without a gap among the
    # judges who voted at all, alpha over the whole table: to the bit.
    by_item = {
        f"q{i}": [
            judgement(item_id=f"q{i}", annotator=f"j{j}", task="verify", accept=vote == "accept")
            for j, vote in enumerate(row)
            if vote is not None
        ]
        for i, row in enumerate(table)
    }
    judges = [j for j in range(4) if any(row[j] is not None for row in table)]
    complete = [[row[j] for j in judges] for row in table if all(row[j] is not None for j in judges)]
    result = agreement(by_item, "verify", panel=True)
    expected_kappa = fleiss_kappa(complete) if complete and len(judges) > 1 else math.nan
    assert result.fleiss_kappa == (None if math.isnan(expected_kappa) else expected_kappa)
    pairable = [row for row in table if sum(v is not None for v in row) >= 2]
    expected_alpha = krippendorff_alpha_nominal(table) if pairable else math.nan
    assert result.krippendorff_alpha == (None if math.isnan(expected_alpha) else expected_alpha)


# --------------------------------------------------------------------------- Putri et al.'s released majorities


def _putri_judgements(row: dict[str, Any]) -> list[Judgement]:
    """The five answerers of one human_gen row as judgements, in the release's annotator order."""
    out = []
    for annotator, choice in row["answers"].items():
        labels = "ABCDEFG"
        flags = ["ambiguous-question"] if row["question_ambiguity"][annotator] == "ambiguous" else []
        options = row["option_ambiguity"][annotator]
        flags += [f"ambiguous-option:{labels[i]}" for i, value in enumerate(options) if value == "ambiguous"]
        certainty = row["answers_uncertainty"][annotator]
        out.append(
            judgement(
                item_id=row["id"],
                annotator=annotator,
                task="answer",
                choice=choice,
                certain={"certain": True, "uncertain": False}.get(certainty),
                flags=flags,
            )
        )
    return out


@pytest.fixture(scope="module")
def putri_rows() -> list[dict[str, Any]]:
    data = json.loads(FIXTURE.read_text(encoding="utf-8"))
    rows: list[dict[str, Any]] = data["ind"] + data["sun"]
    return rows


def _is_tie(row: dict[str, Any]) -> bool:
    counts = Counter(row["answers"].values()).most_common()
    return len(counts) > 1 and counts[0][1] == counts[1][1]


def test_fixture_holds_ties_and_dissenting_first_annotators(putri_rows: list[dict[str, Any]]) -> None:
    assert len(putri_rows) == 33
    assert sum(_is_tie(r) for r in putri_rows) == 7
    first_dissents = [r for r in putri_rows if next(iter(r["answers"].values())) != r["answer_majority"]]
    assert len(first_dissents) == 7


def test_majority_reproduces_every_released_majority(putri_rows: list[dict[str, Any]]) -> None:
    for row in putri_rows:
        decision = majority(_putri_judgements(row))
        assert decision.value == row["answer_majority"], row["id"]
        assert ("tie" in decision.reason) == _is_tie(row), row["id"]


def test_putri_exclusion_rule_on_the_filtered_release(putri_rows: list[dict[str, Any]]) -> None:
    # The release is already filtered by "more than three of five flagged": nothing goes.
    by_item = {row["id"]: _putri_judgements(row) for row in putri_rows}
    putri = parse_policy("majority,exclude-ambiguous:3")
    assert all(d.status == "accepted" for d in decide(putri, by_item).values())
    strict = decide(exclude_ambiguous(2, Majority()), by_item)
    excluded = {item for item, d in strict.items() if d.status == "excluded"}
    assert excluded == {item for item, js in by_item.items() if ambiguity_flagged(js) == 3}
    assert len(excluded) == 3


def test_putri_agreement_is_defined(putri_rows: list[dict[str, Any]]) -> None:
    result = agreement({row["id"]: _putri_judgements(row) for row in putri_rows}, "answer")
    assert (result.items, result.ratings) == (33, 165)
    assert result.fleiss_kappa is not None
    assert result.krippendorff_alpha is not None
    assert -1.0 <= result.fleiss_kappa <= result.krippendorff_alpha <= 1.0
