"""culture-adapt's screen: offensive words and ambiguous options drop an item before any model call."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from senseforge.pipelines.culture_adapt.screen import AMBIGUOUS_OPTIONS, OFFENSIVE, screen
from senseforge.pipelines.moderation import WordListModerator, bundled_terms, default_moderator

CSQA = Path(__file__).parents[2] / "fixtures" / "csqa" / "dev_sample.jsonl"


def _rows() -> dict[str, dict[str, Any]]:
    rows = (json.loads(line) for line in CSQA.read_text(encoding="utf-8").splitlines() if line.strip())
    return {row["id"]: row for row in rows}


def _screen_row(row: dict[str, Any], moderator: WordListModerator | None = None) -> str | None:
    return screen(row["question"], row["question_concept"], row["choices"]["text"], "en", moderator)


def test_clean_commonsenseqa_rows_pass() -> None:
    rows = _rows()
    # "A revolving door is convenient for two direction travel, ..." and "Where would you find magazines ..."
    for row_id in ("1afa02df02c908a558b4036e80242fac", "b8c0a4703079cf661d7261a60a1bcbff"):
        assert _screen_row(rows[row_id]) is None
        assert _screen_row(rows[row_id], default_moderator()) is None


def test_better_profanity_default_list_flags_a_real_row_with_kill() -> None:
    # "What do people aim to do at work?": option "kill animals"; better-profanity lists "kill"
    row = _rows()["a7ab086045575bb497933726e4e6ad28"]
    assert _screen_row(row) == OFFENSIVE


def test_the_fixture_rows_other_than_kill_are_clean() -> None:
    flagged = {row_id for row_id, row in _rows().items() if _screen_row(row) is not None}
    assert flagged == {"a7ab086045575bb497933726e4e6ad28"}


@pytest.mark.parametrize(
    ("question", "concept", "options"),
    [
        ("Where would a bitch sleep at night?", "sleep", ["bed", "couch", "floor"]),
        ("Where would you put a plate?", "plate", ["cupboard", "shit hole", "table"]),
        ("Where would you see an asshole?", "asshole", ["zoo", "park", "office"]),
        ("Where would you find a fork?", "FUCKING fork", ["drawer", "table", "sink"]),
        ("Where does this sh1t go?", "trash", ["bin", "floor", "bag"]),  # a character swap
    ],
    ids=["question", "option", "question-and-concept", "concept-upper-case", "leetspeak"],
)
def test_english_profanity_anywhere_is_offensive(question: str, concept: str, options: list[str]) -> None:
    assert screen(question, concept, options, "en", None) == OFFENSIVE
    assert screen(question, concept, options, "en-US", None) == OFFENSIVE


@pytest.mark.parametrize(
    "question",
    [
        "Where is Scunthorpe?",
        "Where would an assassin hide?",
        "Who plays the bass in a band?",
        "Where would you order a cocktail?",
        "Which county is Sussex in?",
    ],
)
def test_listed_words_inside_longer_words_do_not_count(question: str) -> None:
    """better-profanity compares whole words, so ``cunt``, ``ass`` and ``cock`` inside a word pass."""
    assert screen(question, "place", ["town", "house", "city"], "en", None) is None


def test_a_moderator_also_screens_english() -> None:
    moderator = WordListModerator({"en": ["spork"]}, bundled=False)
    assert screen("Where is the spork kept?", "cutlery", ["drawer", "sink"], "en", moderator) == OFFENSIVE
    assert screen("Where is the spork kept?", "cutlery", ["drawer", "sink"], "en", None) is None


def test_indonesian_uses_the_moderator() -> None:
    assert "bangsat" in bundled_terms("id")
    question = "Di mana bangsat itu biasanya bersembunyi?"
    options = ["pasar", "sawah", "rumah"]
    assert screen(question, "tempat", options, "id", default_moderator()) == OFFENSIVE
    assert screen("Di mana kucing biasanya tidur?", "tempat", options, "id", default_moderator()) is None
    assert screen("Di mana kucing biasanya tidur?", "bangsat", options, "id", default_moderator()) == OFFENSIVE


def test_without_a_moderator_indonesian_is_not_word_checked() -> None:
    # better-profanity is for English only; "bangsat" is not in its list anyway
    assert screen("Di mana bangsat itu biasanya bersembunyi?", "tempat", ["pasar", "sawah"], "id", None) is None


@pytest.mark.parametrize(
    ("concept", "options"),
    [
        ("money", ["Bank", " bank ", "wallet"]),
        ("money", ["piggy  bank", "Piggy Bank", "wallet"]),  # inner spacing too
        ("money", ["ＢＡＮＫ", "bank", "wallet"]),  # full-width letters
        ("revolving door", ["bank", "Revolving Door", "mall"]),  # an option is the concept
        (" Revolving  door", ["bank", "revolving door", "mall"]),
    ],
)
def test_ambiguous_options(concept: str, options: list[str]) -> None:
    assert screen("Where would you find it?", concept, options, "en", None) == AMBIGUOUS_OPTIONS


def test_options_that_only_contain_the_concept_are_fine() -> None:
    assert screen("Where is a door?", "door", ["door frame", "house", "bank"], "en", None) is None


def test_offensive_is_checked_before_ambiguous() -> None:
    assert screen("Where is the damn bank?", "money", ["bank", "Bank"], "en", None) == OFFENSIVE


def test_a_bad_language_tag_is_an_error() -> None:
    with pytest.raises(ValueError, match="BCP-47"):
        screen("Where?", "x", ["a", "b"], "english", None)
