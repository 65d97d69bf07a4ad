"""CRoW's minimal-edit check: word-level edit distance and the negation-only test."""

from __future__ import annotations

import pytest

from senseforge.kb.edits import (
    EditCheck,
    check_rewrite,
    edit_ops,
    is_negation_only,
    word_edits,
    words,
)

ORIGINAL_EN = "Find a building and close your eyes quickly now please."


def test_five_substituted_words_are_within_the_limit() -> None:
    # find→enter, building→room, close→open, eyes→mouth, quickly→slowly
    check = check_rewrite(ORIGINAL_EN, "Enter a room and open your mouth slowly now please.", "en")
    assert check == EditCheck(edits=5, limit=5, within=True, unchanged=False, negation_only=False)


def test_six_substituted_words_are_not() -> None:
    # ... and now→then
    check = check_rewrite(ORIGINAL_EN, "Enter a room and open your mouth slowly then please.", "en")
    assert check.edits == 6
    assert not check.within


def test_insertions_and_deletions_count() -> None:
    assert check_rewrite("Close your eyes.", "Close both of your eyes now.", "en").edits == 3
    assert check_rewrite("Close both of your eyes now.", "Close your eyes.", "en").edits == 3
    assert check_rewrite("Close your eyes.", "Close your eyes.", "en", limit=0).within


def test_case_and_punctuation_do_not_count() -> None:
    check = check_rewrite("Eat it.", "eat it", "en")
    assert check.edits == 0
    assert check.unchanged
    assert not check.negation_only


def test_words_normalise() -> None:
    assert words("Don't — STOP!", "en") == ["dont", "stop"]
    assert words("Je n'aime pas ça.", "fr") == ["je", "n", "aime", "pas", "ça"]
    assert words("¿Jamás?", "es") == ["jamás"]
    assert words("「你好」，他说！", "zh") == ["你好", "他", "说"]
    assert words("「こんにちは」と言った！", "ja") == ["こんにちは", "と", "言っ", "た"]


def test_chinese_five_words_within_six_not() -> None:
    original = words("我今天在公园里看见了一只小狗。", "zh")
    five = words("他昨天在学校里看见了两只小猫。", "zh")
    six = words("他昨天在学校里听见了两只小猫。", "zh")
    assert original == ["我", "今天", "在", "公园", "里", "看见", "了", "一只", "小狗"]
    assert five == ["他", "昨天", "在", "学校", "里", "看见", "了", "两只", "小猫"]
    assert six == ["他", "昨天", "在", "学校", "里", "听见", "了", "两只", "小猫"]
    assert check_rewrite("我今天在公园里看见了一只小狗。", "他昨天在学校里看见了两只小猫。", "zh").within
    check = check_rewrite("我今天在公园里看见了一只小狗。", "他昨天在学校里听见了两只小猫。", "zh")
    assert (check.edits, check.within) == (6, False)


def test_japanese_one_substitution() -> None:
    assert words("私は肉を食べない。", "ja") == ["私", "は", "肉", "を", "食べ", "ない"]
    check = check_rewrite("私は肉を食べない。", "私は魚を食べない。", "ja")
    assert (check.edits, check.within, check.negation_only) == (1, True, False)


def test_japanese_polite_negation_is_negation_only() -> None:
    assert check_rewrite("毎日食べます。", "毎日食べません。", "ja").negation_only


@pytest.mark.parametrize(
    ("original", "rewrite", "expected"),
    [
        ("Do not eat it.", "Eat it.", True),
        ("Do not eat it.", "Eat it up.", False),  # "up" is added too
        ("He can swim.", "He can't swim.", True),
        ("He can swim.", "He cannot swim.", True),
        ("It is safe.", "It isn't safe.", True),
        ("He will come.", "He won't come.", True),
        ("She eats meat.", "She doesn't eat meat.", False),  # eats → eat: the verb changes too
        ("She does eat meat.", "She doesn't eat meat.", False),
        ("It is safe.", "It isn't dangerous.", False),  # a substitution plus a negation
        ("It is not safe.", "It isn't safe.", False),  # negated both times: a paraphrase
        ("Do not eat it.", "Never eat it.", False),  # one negation swapped for another
        ("Eat it.", "eat it", False),  # unchanged
    ],
)
def test_english_negation_only(original: str, rewrite: str, expected: bool) -> None:
    assert check_rewrite(original, rewrite, "en").negation_only is expected


@pytest.mark.parametrize(
    ("original", "rewrite", "lang"),
    [
        ("他喜欢茶", "他不喜欢茶", "zh"),
        ("他有钱", "他没有钱", "zh"),  # jieba: 有钱 vs 没有 / 钱
        ("他是学生", "他不是学生", "zh"),
        ("Ich habe eine Katze.", "Ich habe keine Katze.", "de"),
        ("J'aime le thé.", "Je n'aime pas le thé.", "fr"),
        ("Dia makan nasi.", "Dia tidak makan nasi.", "id"),
        ("Он знает.", "Он не знает.", "ru"),
    ],
)
def test_negation_only_in_other_languages(original: str, rewrite: str, lang: str) -> None:
    assert check_rewrite(original, rewrite, lang).negation_only


def test_chinese_substitution_plus_negation_is_not_negation_only() -> None:
    assert not check_rewrite("他喜欢茶", "他不喜欢咖啡", "zh").negation_only


def test_unknown_language_is_never_negation_only() -> None:
    assert not is_negation_only(["eat", "it"], ["not", "eat", "it"], "xx")
    assert is_negation_only(["eat", "it"], ["not", "eat", "it"], "en")


def test_edit_ops_are_deterministic() -> None:
    a, b = ["a", "b", "c"], ["b", "c", "d"]
    ops = edit_ops(a, b)
    assert ops == [("delete", "a", None), ("insert", None, "d")]
    assert edit_ops(a, b) == ops
    assert len(ops) == word_edits(a, b) == 2
    # equal-cost alternatives (delete-then-insert vs substitute): the substitution wins
    assert edit_ops(["x"], ["y"]) == [("substitute", "x", "y")]
    assert edit_ops([], ["y", "z"]) == [("insert", None, "y"), ("insert", None, "z")]
    assert edit_ops(["y", "z"], []) == [("delete", "y", None), ("delete", "z", None)]


def test_negative_limit_is_refused() -> None:
    with pytest.raises(ValueError, match="limit"):
        check_rewrite("a", "b", "en", limit=-1)
