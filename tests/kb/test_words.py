"""Word counts for concept texts: spaces, and real tokenizers for Japanese and Chinese."""

from __future__ import annotations

import pytest

from senseforge.kb.words import count_words


@pytest.mark.parametrize(
    ("text", "lang", "words"),
    [
        ("revolving door", "en", 2),
        ("a very big old house", "en", 5),
        ("pomme de terre", "fr", 3),
        # Japanese concepts as they appear in ConceptNet, counted by fugashi + unidic-lite
        ("冷蔵庫", "ja", 2),  # UniDic short units: 冷蔵 + 庫
        ("味噌汁", "ja", 2),
        ("勉強する", "ja", 2),
        ("電子レンジで温める", "ja", 4),
        ("自転車に乗って学校へ行く", "ja", 8),
        # real concepts from the bundled ConceptNet sample
        ("アメリカ合衆国の教育", "ja", 5),
        ("名前を書くこと", "ja", 4),
        ("ロールシャッハテスト", "ja", 2),
        ("抜き打ち テスト", "ja", 2),
        # Chinese concepts, counted by jieba
        ("筷子", "zh", 1),
        ("骑自行车", "zh", 2),
        ("在厨房里做饭吃", "zh", 4),
        ("美国教育", "zh", 2),  # real concepts from the bundled ConceptNet sample
        ("走到飲水機", "zh", 2),
        ("马可波罗", "zh", 1),
    ],
)
def test_counts(text: str, lang: str, words: int) -> None:
    assert count_words(text, lang) == words
