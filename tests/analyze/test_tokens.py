"""Tokens for the lexical studies: normalisation, the word rule, fugashi/jieba, bigrams within one text, fields."""

from __future__ import annotations

import importlib.util
import itertools
import sys

import pytest

from senseforge.analyze import tokens
from senseforge.analyze.tokens import (
    bigrams,
    item_texts,
    normalize,
    parse_fields,
    primary_lang,
    tokenize,
    vocabulary,
)
from senseforge.data.schema import MCItem
from senseforge.errors import ConfigError, MissingDependencyError
from senseforge.kb.words import japanese_words

_ids = itertools.count()


def item(question: str, *choices: str, concept: str | None = None, lang: str = "id") -> MCItem:
    return MCItem(
        id=f"q{next(_ids)}",
        lang=lang,
        question=question,
        question_concept=concept,
        choices=[{"label": chr(65 + i), "text": text} for i, text in enumerate(choices)],
    )


def test_normalize_is_nfkc_then_casefold() -> None:
    assert normalize("ＫＯＭＯＤＯ Straße") == "komodo strasse"
    assert normalize("e\u0301") == "é"  # a combining accent composes


def test_punctuation_and_quotes_are_not_tokens() -> None:
    assert tokenize("Di mana 'air mancur' biasanya?", "id") == ["di", "mana", "air", "mancur", "biasanya"]
    assert tokenize("(A) / B & C, D. -- E!", "en") == ["a", "b", "c", "d", "e"]
    assert tokenize("?!…", "en") == []


def test_a_hyphen_or_apostrophe_inside_a_word_keeps_it_whole() -> None:
    assert tokenize("Anak-anak makan gado-gado di alun-alun", "id") == [
        "anak-anak",
        "makan",
        "gado-gado",
        "di",
        "alun-alun",
    ]
    assert tokenize("Al-Qur'an, don’t", "en") == ["al-qur'an", "don’t"]
    assert tokenize("-x- y- 'z'", "en") == ["x", "y", "z"]  # only between letters


def test_numbers_are_tokens_and_keep_their_decimal_mark() -> None:
    assert tokenize("3,5 kg pukul 10.00. Tahun 1945.", "id") == ["3,5", "kg", "pukul", "10.00", "tahun", "1945"]
    assert tokenize("a, b", "en") == ["a", "b"]  # a comma between letters splits


def test_underscores_are_not_word_characters_and_marks_stay_in_their_word() -> None:
    assert tokenize("fill the ___ in", "en") == ["fill", "the", "in"]
    assert tokenize("snake_case", "en") == ["snake", "case"]
    assert tokenize("हिन्दी भाषा", "hi") == ["हिन्दी", "भाषा"]  # vowel signs and virama are marks


def test_primary_lang() -> None:
    assert [primary_lang(t) for t in ("zh-Hant", "ja", "id", "SU")] == ["zh", "ja", "id", "su"]


@pytest.mark.skipif(importlib.util.find_spec("fugashi") is None, reason="fugashi (the kb extra) is not installed")
def test_japanese_is_split_by_fugashi_without_punctuation() -> None:
    words = tokenize("東京に行きました。ＡＢＣ", "ja")
    assert words[:2] == ["東京", "に"]
    assert "。" not in words and words[-1] == "abc"  # normalised before splitting


@pytest.mark.skipif(importlib.util.find_spec("jieba") is None, reason="jieba (the kb extra) is not installed")
def test_chinese_is_split_by_jieba_without_punctuation() -> None:
    words = tokenize("我们去北京天安门吧！", "zh-Hans")
    assert "北京" in words and "我们" in words
    assert all(w not in words for w in ("！", "!"))


def test_a_missing_tokenizer_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "fugashi", None)  # makes `import fugashi` fail
    tokens._japanese.cache_clear()
    japanese_words.cache_clear()  # the knowledge layer's segmenter, which tokens uses
    try:
        with pytest.raises(MissingDependencyError, match=r"senseforge\[kb\]"):
            tokenize("東京", "ja")
    finally:
        tokens._japanese.cache_clear()
        japanese_words.cache_clear()


def test_bigrams_are_consecutive_pairs() -> None:
    assert bigrams(["a", "b", "c"]) == [("a", "b"), ("b", "c")]
    assert bigrams(["a"]) == [] and bigrams([]) == []


def test_bigrams_never_cross_from_one_text_to_another() -> None:
    vocab = vocabulary([item("Where is it?", "in the box", "bed")])
    assert set(vocab.bigrams) == {("where", "is"), ("is", "it"), ("in", "the"), ("the", "box")}
    assert ("it", "in") not in vocab.bigrams and ("box", "bed") not in vocab.bigrams
    assert vocab.texts == 3 and vocab.tokens == 7
    assert vocab.unigrams["the"] == 1


def test_fields_choose_the_texts() -> None:
    one = item("Q text", "a", "b", concept="komodo")
    assert item_texts(one) == ["Q text", "a", "b"]
    assert item_texts(one, ("concept", "question")) == ["komodo", "Q text"]
    assert item_texts(item("Q", "a", "b"), ("concept",)) == []  # no concept, no text
    assert set(vocabulary([one], ("question", "concept")).unigrams) == {"q", "text", "komodo"}


def test_parse_fields() -> None:
    assert parse_fields("question,choices") == ("question", "choices")
    assert parse_fields(" Choices , question,choices ") == ("choices", "question")
    assert parse_fields(["concept"]) == ("concept",)
    with pytest.raises(ConfigError, match=r"answers.*choose from question, choices, concept"):
        parse_fields("question,answers")
    with pytest.raises(ConfigError):
        parse_fields(" , ")
