"""The rule-based question and distractor filters: crafted bad outputs, and good ones that pass."""

from __future__ import annotations

import pytest

from senseforge.data.literals import MissingLiteralError
from senseforge.pipelines.mcsqa.filters import (
    DEGENERATE,
    DISTRACTOR_REASONS,
    DUPLICATE,
    EMPTY,
    MAX_CHARS,
    MULTIPLE_SENTENCES,
    NEAR_DUPLICATE,
    NO_QUESTION_MARK,
    QUESTION_REASONS,
    TARGET_IN_QUESTION,
    WRONG_COUNT,
    check_distractors,
    check_question,
    choice_key,
    similarity,
)
from senseforge.pipelines.moderation import INAPPROPRIATE, WordListModerator

EN = ("dog", "cat", "cow")


@pytest.mark.parametrize(
    ("question", "targets", "lang"),
    [
        ("What animal barks at strangers?", EN, "en"),
        ("Where would you keep milk cold?", ("refrigerator", "oven", "sink"), "en"),
        ("What do you use to open a locked door, e.g. at home?", ("key", "hammer", "saw"), "en"),
        ("What would Mr. Smith carry in the rain?", ("umbrella", "towel", "hat"), "en"),
        ("What costs about 2.5 dollars at a U.S. cafe?", ("coffee", "tea", "juice"), "en"),
        ('What does a child shout after saying "Ready!" in hide and seek?', ("go", "stop", "wait"), "en"),
        ("What catches mice in a barn?", ("dog", "owl", "horse"), "en"),  # "catches" is not "cat"
        ("What would you find in a category of pets?", EN, "en"),  # "cat" inside a word is no match
        ("冷たい飲み物を入れておく場所はどこ？", ("冷蔵庫", "オーブン", "流し台"), "ja"),
        ("雨の日に外出するとき、何を持っていきますか?", ("傘", "帽子", "靴"), "ja"),
        ("「いただきます」と言うのはいつ？", ("食事", "睡眠", "仕事"), "ja"),
        ("人们用什么来吃米饭？", ("筷子", "刀", "勺子"), "zh"),
        ("下雨天出门时应该带什么?", ("雨伞", "帽子", "鞋"), "zh"),
        ("Was benutzt man, um einen Nagel in die Wand zu schlagen?", ("Hammer", "Säge", "Zange"), "de"),
        ("Wo bewahrt man z.B. Milch auf?", ("Kühlschrank", "Ofen", "Keller"), "de"),
        ("Apa yang biasa dipakai untuk makan sup?", ("sendok", "garpu", "pisau"), "id"),
        ("Di mana orang biasa membeli sayur, buah, dll. setiap pagi?", ("pasar", "sekolah", "kantor"), "id"),
        ("What would you use to write on paper?", ("pen", "brush", "knife"), "en-GB"),
    ],
)
def test_good_questions_pass(question: str, targets: tuple[str, ...], lang: str) -> None:
    assert check_question(question, targets, lang) is None


@pytest.mark.parametrize(
    ("question", "targets", "lang", "reason"),
    [
        # empty
        ("", EN, "en", EMPTY),
        ("   \n\t ", EN, "en", EMPTY),
        ("　", EN, "ja", EMPTY),  # ideographic space
        # degenerate
        ("???", EN, "en", DEGENERATE),
        ("？！…", EN, "ja", DEGENERATE),
        ("aaaaaaa?", EN, "en", DEGENERATE),
        ("what what what?", EN, "en", DEGENERATE),
        ("What is is is this animal?", EN, "en", DEGENERATE),
        ("Why?", EN, "en", DEGENERATE),
        ("Question:", EN, "en", DEGENERATE),
        ("Question: ?", EN, "en", DEGENERATE),
        ("Frage:", EN, "de", DEGENERATE),
        ("質問：", ("犬", "猫", "牛"), "ja", DEGENERATE),
        ("何？", ("犬", "猫", "牛"), "ja", DEGENERATE),
        ("なになになに？", ("犬", "猫", "牛"), "ja", DEGENERATE),
        ("What " + "big " * 80 + "animal barks?", EN, "en", DEGENERATE),
        ("哪种动物" + "非常" * 80 + "会叫？", ("狗", "猫", "牛"), "zh", DEGENERATE),
        # the answer (or another target) in the question
        ("Which animal is a dog's best friend?", EN, "en", TARGET_IN_QUESTION),
        ("What animal chases CATS?", EN, "en", TARGET_IN_QUESTION),
        ("Which animals live with dogs and cats?", EN, "en", TARGET_IN_QUESTION),
        ("Where do people buy boxes of tissues?", ("box", "bag", "cup"), "en", TARGET_IN_QUESTION),
        ("What do bunnies eat most?", ("bunny", "horse", "goat"), "en", TARGET_IN_QUESTION),
        ("What do you put on before shoe laces are tied?", ("shoes", "gloves", "hats"), "en", TARGET_IN_QUESTION),
        ("Where is a revolving  door found?", ("revolving door", "gate", "window"), "en", TARGET_IN_QUESTION),
        ("Where is a revolving door found?", ("revolving_door", "gate", "window"), "en", TARGET_IN_QUESTION),
        ("Ｄｏｇ owners walk what every day?", EN, "en", TARGET_IN_QUESTION),
        ("Welche Tiere bellen wie Hunde?", ("Hund", "Katze", "Kuh"), "de", TARGET_IN_QUESTION),
        ("Hewan apa yang suka mengejar kucing-kucing?", ("kucing", "anjing", "sapi"), "id", TARGET_IN_QUESTION),
        ("冷蔵庫の中に何を入れますか？", ("冷蔵庫", "オーブン", "流し台"), "ja", TARGET_IN_QUESTION),
        ("人们用筷子吃什么？", ("筷子", "刀", "勺子"), "zh", TARGET_IN_QUESTION),
        # no question mark
        ("What animal barks at strangers", EN, "en", NO_QUESTION_MARK),
        ("Name the animal that barks at strangers.", EN, "en", NO_QUESTION_MARK),
        ("What animal barks? A loud one.", EN, "en", NO_QUESTION_MARK),
        ("What animal barks at strangers？", EN, "en", NO_QUESTION_MARK),  # full-width only for ja/zh
        ("冷たい飲み物を入れておく場所はどこ。", ("冷蔵庫", "オーブン", "流し台"), "ja", NO_QUESTION_MARK),
        # more than one sentence
        ("It is night. What animal barks at strangers?", EN, "en", MULTIPLE_SENTENCES),
        ("Think carefully! What animal barks at strangers?", EN, "en", MULTIPLE_SENTENCES),
        ("Is it loud? What animal barks at strangers?", EN, "en", MULTIPLE_SENTENCES),
        ("What animal barks?\nWhat animal meows?", EN, "en", MULTIPLE_SENTENCES),
        ("What animal barks\nat strangers in the night?", EN, "en", MULTIPLE_SENTENCES),
        ("Es ist Nacht. Welches Tier bellt laut?", ("Hund", "Katze", "Kuh"), "de", MULTIPLE_SENTENCES),
        ("夜です。どの動物がほえますか？", ("犬", "猫", "牛"), "ja", MULTIPLE_SENTENCES),
        ("天很冷？人们穿什么？", ("外套", "短裤", "拖鞋"), "zh", MULTIPLE_SENTENCES),
        ("天很冷?人们穿什么?", ("外套", "短裤", "拖鞋"), "zh", MULTIPLE_SENTENCES),
        # inappropriate words
        ("What the fuck barks at strangers?", EN, "en", INAPPROPRIATE),
        ("Welches Tier macht Scheiße im Garten?", ("Hund", "Katze", "Kuh"), "de", INAPPROPRIATE),
        ("くそったれの動物は何？", ("犬", "猫", "牛"), "ja", INAPPROPRIATE),
        ("他妈的什么动物会叫？", ("狗", "猫", "牛"), "zh", INAPPROPRIATE),
        ("Hewan apa yang bangsat sekali?", ("kucing", "anjing", "sapi"), "id", INAPPROPRIATE),
    ],
)
def test_bad_questions_rejected(question: str, targets: tuple[str, ...], lang: str, reason: str) -> None:
    assert check_question(question, targets, lang) == reason


def test_first_failing_check_wins() -> None:
    # an answer word, no question mark and two sentences: the target check comes first
    assert check_question("A dog barks. What is it", EN, "en") == TARGET_IN_QUESTION
    assert QUESTION_REASONS.index(TARGET_IN_QUESTION) < QUESTION_REASONS.index(NO_QUESTION_MARK)


def test_length_limit_is_on_characters() -> None:
    question = "What animal " + "x" * (MAX_CHARS - len("What animal ?") - 1) + "?"
    assert len(question) < MAX_CHARS and check_question(question, EN, "en") is None
    assert check_question("What animal " + "x" * MAX_CHARS + "?", EN, "en") == DEGENERATE


def test_echo_of_instructions_is_degenerate() -> None:
    instructions = "Write one question whose answer is dog. Does the question end with a question mark?"
    question = "Does the question end with a question mark?"
    assert check_question(question, ("bird", "cat", "cow"), "en") is None
    assert check_question(question, ("bird", "cat", "cow"), "en", instructions=instructions) == DEGENERATE


def test_custom_moderator() -> None:
    strict = WordListModerator({"en": ["strangers"]}, bundled=False)
    assert check_question("What animal barks at strangers?", EN, "en", moderator=strict) == INAPPROPRIATE


def test_unknown_language_is_an_error() -> None:
    with pytest.raises(MissingLiteralError):
        check_question("Wat is dit?", EN, "xx")


# distractors

EXISTING = ("sock", "hat", "glove")


@pytest.mark.parametrize(
    ("new", "existing", "lang"),
    [
        (["scarf", "belt"], EXISTING, "en"),
        (["Scarf", "seat belt"], EXISTING, "en"),
        (["hatch", "socket"], EXISTING, "en"),  # containing letters of a choice is not containing the word
        (["オーブン", "電子レンジ"], ("冷蔵庫", "流し台", "食器棚"), "ja"),
        (["勺子", "叉子"], ("筷子", "刀", "碗"), "zh"),
        (["Zange", "Schraube"], ("Hammer", "Säge", "Nagel"), "de"),
        (["garpu", "piring"], ("sendok", "pisau", "gelas"), "id"),
    ],
)
def test_good_distractors_pass(new: list[str], existing: tuple[str, ...], lang: str) -> None:
    assert check_distractors(new, existing, lang) is None


@pytest.mark.parametrize(
    ("new", "existing", "lang", "reason"),
    [
        ([], EXISTING, "en", WRONG_COUNT),
        (["scarf"], EXISTING, "en", WRONG_COUNT),
        (["scarf", "belt", "tie"], EXISTING, "en", WRONG_COUNT),
        (["scarf", ""], EXISTING, "en", EMPTY),
        (["  ", "belt"], EXISTING, "en", EMPTY),
        (["...", "belt"], EXISTING, "en", EMPTY),
        (["sock", "belt"], EXISTING, "en", DUPLICATE),
        (["SOCK", "belt"], EXISTING, "en", DUPLICATE),
        ([" Sock. ", "belt"], EXISTING, "en", DUPLICATE),
        (["ｓｏｃｋ", "belt"], EXISTING, "en", DUPLICATE),  # full-width
        (["belt", "Belt!"], EXISTING, "en", DUPLICATE),  # the two new ones
        (["ice-cream", "scarf"], ("ice cream", "cake", "pie"), "en", DUPLICATE),
        (["ｵｰﾌﾞﾝ", "電子レンジ"], ("オーブン", "流し台", "食器棚"), "ja", DUPLICATE),  # half-width katakana
        (["筷子", "叉子"], ("筷子", "刀", "碗"), "zh", DUPLICATE),
        (["socks", "belt"], EXISTING, "en", NEAR_DUPLICATE),  # plural
        (["wool sock", "belt"], EXISTING, "en", NEAR_DUPLICATE),  # one contains the other
        (["belt", "leather belt"], EXISTING, "en", NEAR_DUPLICATE),  # among the new ones
        (["refrigerater", "oven"], ("refrigerator", "sink", "table"), "en", NEAR_DUPLICATE),  # typo: ratio ≥ 0.9
        (["冷蔵庫の中", "電子レンジ"], ("冷蔵庫", "流し台", "食器棚"), "ja", NEAR_DUPLICATE),
        (["木筷子", "叉子"], ("筷子", "刀", "碗"), "zh", NEAR_DUPLICATE),
        (["Hunde", "Maus"], ("Hund", "Katze", "Kuh"), "de", NEAR_DUPLICATE),
        (["shit", "belt"], EXISTING, "en", INAPPROPRIATE),
        (["Zange", "Arschloch"], ("Hammer", "Säge", "Nagel"), "de", INAPPROPRIATE),
    ],
)
def test_bad_distractors_rejected(new: list[str], existing: tuple[str, ...], lang: str, reason: str) -> None:
    assert check_distractors(new, existing, lang) == reason
    assert reason in DISTRACTOR_REASONS


def test_choice_key_and_similarity() -> None:
    assert choice_key("Ｉce-Cream!") == choice_key(" ice cream ") == "icecream"
    assert choice_key("冷蔵庫。") == "冷蔵庫"
    assert similarity("abc", "abc") == 1.0
    assert similarity("abc", "xyz") == 0.0
    assert similarity("refrigerator", "refrigerater") >= 0.9
    assert similarity("dog", "dot") < 0.9
