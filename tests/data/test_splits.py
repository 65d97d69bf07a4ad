"""Seeded, stratified splits, choice shuffling and leakage checks."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from senseforge.data.schema import Choice, Difficulty, MCItem
from senseforge.data.splits import SPLIT_NAMES, check_leakage, normalize_question, shuffle_choices, split_items
from senseforge.errors import ConfigError, DataValidationError


def _item(
    i: int | str, difficulty: Difficulty | None = None, *, question: str | None = None, answer: str | None = "C"
) -> MCItem:
    return MCItem(
        id=f"q{i:05d}" if isinstance(i, int) else i,
        lang="en",
        question=question if question is not None else f"Question number {i}?",
        choices=[Choice(label=x, text=f"{x.lower()}-{i}") for x in "ABCDE"],
        answer=answer,
        difficulty=difficulty,
    )


def _items(n: int, difficulty: Difficulty | None = None, start: int = 0) -> list[MCItem]:
    return [_item(i, difficulty) for i in range(start, start + n)]


def _mixed(n_easy: int, n_hard: int, n_none: int = 0) -> list[MCItem]:
    return _items(n_easy, "easy") + _items(n_hard, "hard", start=n_easy) + _items(n_none, None, start=n_easy + n_hard)


def _ids(splits: dict[str, list[MCItem]]) -> dict[str, list[str]]:
    return {name: [it.id for it in part] for name, part in splits.items()}


def _sizes(splits: dict[str, list[MCItem]]) -> tuple[int, int, int]:
    return len(splits["train"]), len(splits["validation"]), len(splits["test"])


# --- sizes and the rounding rule -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "expected"),
    [(10, (8, 1, 1)), (11, (9, 1, 1)), (100, (80, 10, 10)), (1001, (801, 100, 100))],
)
def test_sizes_80_10_10(n: int, expected: tuple[int, int, int]) -> None:
    splits = split_items(_items(n, "easy"))
    assert tuple(splits) == SPLIT_NAMES
    assert _sizes(splits) == expected
    for size, ratio in zip(_sizes(splits), (0.8, 0.1, 0.1), strict=True):
        assert abs(size - n * ratio) <= 1


@pytest.mark.parametrize(
    ("n", "expected"),
    [
        (0, (0, 0, 0)),
        (1, (1, 0, 0)),
        (2, (2, 0, 0)),
        (4, (4, 0, 0)),
        (5, (3, 1, 1)),  # 0.5 rounds up
        (14, (12, 1, 1)),
        (15, (11, 2, 2)),
        (25, (19, 3, 3)),
    ],
)
def test_rounding_rule_per_stratum(n: int, expected: tuple[int, int, int]) -> None:
    assert _sizes(split_items(_items(n))) == expected


def test_tiny_inputs() -> None:
    assert split_items([]) == {"train": [], "validation": [], "test": []}
    one = _items(1)
    assert split_items(one) == {"train": one, "validation": [], "test": []}
    two = _items(2, "hard")
    assert split_items(two)["train"] == two


def test_ratios_are_normalised_and_validated() -> None:
    items = _items(100)
    assert _ids(split_items(items, ratios=(8, 1, 1))) == _ids(split_items(items))
    assert _sizes(split_items(items, ratios=(0.7, 0.2, 0.1))) == (70, 20, 10)
    assert _sizes(split_items(items, ratios=(1, 0, 0))) == (100, 0, 0)
    for bad in [(0.8, 0.2), (0, 0, 0), (1.0, -0.1, 0.1), (float("nan"), 0.1, 0.1), (float("inf"), 0.1, 0.1)]:
        with pytest.raises(ConfigError):
            split_items(items, ratios=bad)


def test_equal_eval_ratios_keep_equal_counts_even_when_they_do_not_fit() -> None:
    # round(3 * 0.5) = 2 each would need 4 items; both are capped at 3 // 2 = 1 and train takes the rest
    assert _sizes(split_items(_items(3), ratios=(0, 0.5, 0.5))) == (1, 1, 1)
    # unequal ratios: validation first, test capped at what is left
    assert _sizes(split_items(_items(3), ratios=(0, 0.6, 0.6))) == (1, 1, 1)
    assert _sizes(split_items(_items(3), ratios=(0, 0.7, 0.3))) == (0, 2, 1)


def test_duplicate_ids_are_rejected() -> None:
    items = [*_items(5), _item(3)]
    with pytest.raises(DataValidationError, match="deduplicate"):
        split_items(items)


# --- stratification --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("n_easy", "n_hard", "n_none"), [(70, 30, 0), (63, 37, 11), (5, 995, 0), (1000, 4, 3)])
def test_stratified_by_difficulty(n_easy: int, n_hard: int, n_none: int) -> None:
    splits = split_items(_mixed(n_easy, n_hard, n_none), seed=3)
    counts = {name: Counter(it.difficulty for it in part) for name, part in splits.items()}
    strata: list[tuple[Difficulty | None, int]] = [("easy", n_easy), ("hard", n_hard), (None, n_none)]
    for difficulty, n in strata:
        for name, ratio in zip(SPLIT_NAMES, (0.8, 0.1, 0.1), strict=True):
            assert abs(counts[name][difficulty] - n * ratio) <= 1, (name, difficulty)
        assert counts["validation"][difficulty] == counts["test"][difficulty]
        assert sum(counts[name][difficulty] for name in SPLIT_NAMES) == n


def test_validation_and_test_have_equal_easy_hard_counts() -> None:
    splits = split_items(_mixed(47, 23), seed=11)
    val = Counter(it.difficulty for it in splits["validation"])
    test = Counter(it.difficulty for it in splits["test"])
    assert val == test == Counter({"easy": 5, "hard": 2})


# --- determinism -----------------------------------------------------------------------------------------------------


def test_deterministic_and_input_order_independent() -> None:
    items = _mixed(60, 40, 7)
    expected = _ids(split_items(items, seed=5))
    assert _ids(split_items(items, seed=5)) == expected
    for shuffle_seed in range(5):
        reordered = items[:]
        random.Random(shuffle_seed).shuffle(reordered)
        assert _ids(split_items(reordered, seed=5)) == expected
    assert _ids(split_items(tuple(reversed(items)), seed=5)) == expected


def test_output_is_sorted_by_id_and_keeps_the_objects() -> None:
    items = _mixed(30, 30)
    splits = split_items(items)
    originals = {id(it) for it in items}
    for part in splits.values():
        assert [it.id for it in part] == sorted(it.id for it in part)
        assert all(id(it) in originals for it in part)


def test_different_seeds_give_different_splits() -> None:
    items = _mixed(80, 20)
    results = {tuple(it.id for it in split_items(items, seed=s)["test"]) for s in range(10)}
    assert len(results) == 10


def test_known_split_is_stable() -> None:
    # a regression anchor: changing the seeding scheme changes published splits and choice orders
    splits = split_items(_items(20, "easy"), seed=0)
    assert _ids(splits)["validation"] == ["q00010", "q00018"]
    assert _ids(splits)["test"] == ["q00015", "q00016"]
    shuffled = shuffle_choices(_item(0), seed=0)
    assert [c.text for c in shuffled.choices] == ["b-0", "e-0", "c-0", "d-0", "a-0"]
    assert shuffled.answer == "C"


# --- shuffle_choices -------------------------------------------------------------------------------------------------


def test_shuffle_choices_keeps_answer_text_and_relabels() -> None:
    for i in range(50):
        item = _item(i)
        shuffled = shuffle_choices(item, seed=1)
        assert [c.label for c in shuffled.choices] == list("ABCDE")
        assert shuffled.answer_text() == item.answer_text()
        assert sorted(c.text for c in shuffled.choices) == sorted(c.text for c in item.choices)
        assert shuffled.id == item.id
        assert shuffled.question == item.question
        assert [c.label for c in item.choices] == list("ABCDE")  # input untouched
        assert item.answer == "C"


def test_shuffle_choices_is_deterministic_and_independent_of_other_items() -> None:
    item = _item(7)
    first = shuffle_choices(item, seed=4)
    for other in range(5):
        shuffle_choices(_item(other), seed=4)
    assert shuffle_choices(item, seed=4) == first
    assert shuffle_choices(item.model_copy(deep=True), seed=4) == first


def test_shuffle_choices_differs_across_ids_and_seeds() -> None:
    # same choice texts, different ids: the orders must not all be equal
    def order(item_id: str, seed: int = 0) -> tuple[str, ...]:
        item = MCItem(
            id=item_id,
            lang="en",
            question="Where?",
            choices=[Choice(label=x, text=x.lower()) for x in "ABCDE"],
            answer="A",
        )
        return tuple(c.text for c in shuffle_choices(item, seed=seed).choices)

    assert len({order(f"id-{i}") for i in range(30)}) > 10
    assert len({order("id-0", seed=s) for s in range(30)}) > 10


def test_shuffle_choices_withheld_answer_duplicates_and_relabelling() -> None:
    withheld = _item(1, answer=None)
    assert shuffle_choices(withheld).answer is None
    # duplicate texts: the answer follows its position, and labels other than A-E are replaced
    dup = MCItem(
        id="dup",
        lang="en",
        question="?",
        choices=[Choice(label=x, text="same") for x in "12"] + [Choice(label="3", text="other")],
        answer="2",
    )
    for seed in range(20):
        shuffled = shuffle_choices(dup, seed=seed)
        assert [c.label for c in shuffled.choices] == list("ABC")
        assert shuffled.answer_text() == "same"
    # the two "same" choices are told apart: over seeds the answer lands on both their positions
    positions = {shuffle_choices(dup, seed=s).answer for s in range(40)}
    assert positions == {"A", "B", "C"}


def test_shuffle_choices_rejects_more_than_26_choices() -> None:
    item = MCItem(
        id="many", lang="en", question="?", choices=[Choice(label=str(i), text=str(i)) for i in range(27)], answer="0"
    )
    with pytest.raises(DataValidationError, match="26"):
        shuffle_choices(item)


# --- leakage ---------------------------------------------------------------------------------------------------------


def test_no_leakage_in_a_split() -> None:
    assert check_leakage(split_items(_mixed(50, 50))) == []


def test_leakage_same_id_in_two_splits() -> None:
    a = _item(1)
    b = _item(1, question="Something else entirely?")
    problems = check_leakage({"train": [a], "validation": [], "test": [b]})
    assert problems == ["id 'q00001' is in more than one split: train, test"]


def test_leakage_same_question_text_in_two_splits() -> None:
    a = _item("a", question="Where would you put a  LAMP?")
    b = _item("b", question="where would you put a lamp")
    c = _item("c", question="Where would you put a lamp!")
    problems = check_leakage({"train": [a, c], "validation": [], "test": [b]})
    assert problems == ["question 'where would you put a lamp' is in more than one split: train (a, c), test (b)"]


def test_leakage_duplicate_within_a_split_and_same_question_within_one_split() -> None:
    a = _item(1)
    assert check_leakage({"train": [a, a]}) == ["id 'q00001' occurs 2 times in train"]
    # the same question twice inside one split is not cross-split leakage
    assert check_leakage({"train": [_item("x", question="Q?"), _item("y", question="q")]}) == []
    # empty questions are not compared
    assert check_leakage({"train": [_item("x", question="?")], "test": [_item("y", question="")]}) == []


def test_normalize_question() -> None:
    assert normalize_question("Ｗｈｅｒｅ　is it？") == "where is it"
    assert normalize_question("春节时人们通常在门上贴什么？") == "春节时人们通常在门上贴什么"


# --- properties ------------------------------------------------------------------------------------------------------

_difficulties = st.sampled_from(["easy", "hard", None])


@settings(max_examples=60, deadline=None)
@given(
    difficulties=st.lists(_difficulties, max_size=60),
    seed=st.integers(min_value=0, max_value=2**32),
    perm_seed=st.integers(min_value=0, max_value=1000),
)
def test_property_every_item_exactly_once(difficulties: list[Difficulty | None], seed: int, perm_seed: int) -> None:
    items = [_item(i, d) for i, d in enumerate(difficulties)]
    splits = split_items(items, seed=seed)
    all_ids = [it.id for part in splits.values() for it in part]
    assert sorted(all_ids) == sorted(it.id for it in items)
    assert check_leakage(splits) == []
    for difficulty in ("easy", "hard", None):
        val = sum(it.difficulty == difficulty for it in splits["validation"])
        test = sum(it.difficulty == difficulty for it in splits["test"])
        assert val == test
    reordered = items[:]
    random.Random(perm_seed).shuffle(reordered)
    assert _ids(split_items(reordered, seed=seed)) == _ids(splits)


@settings(max_examples=100, deadline=None)
@given(
    texts=st.lists(st.text(max_size=8), min_size=2, max_size=26),
    answer_index=st.integers(min_value=0, max_value=25),
    item_id=st.text(min_size=1, max_size=10),
    seed=st.integers(),
)
def test_property_answer_text_preserved(texts: list[str], answer_index: int, item_id: str, seed: int) -> None:
    labels = [f"L{i}" for i in range(len(texts))]
    answer = labels[answer_index % len(texts)]
    item = MCItem(
        id=item_id,
        lang="en",
        question="?",
        choices=[Choice(label=lb, text=t) for lb, t in zip(labels, texts, strict=True)],
        answer=answer,
    )
    shuffled = shuffle_choices(item, seed=seed)
    assert [c.label for c in shuffled.choices] == [chr(ord("A") + i) for i in range(len(texts))]
    assert shuffled.answer_text() == item.answer_text()
    assert Counter(c.text for c in shuffled.choices) == Counter(texts)
    assert shuffle_choices(item, seed=seed) == shuffled
