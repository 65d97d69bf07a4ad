"""The tolerant JSON extractor finds JSON in model output, and refuses what is not there."""

from __future__ import annotations

import pytest

from senseforge.llm.base import Completion
from senseforge.llm.jsonx import JSONExtractionError, extract_json


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"question": "Where?", "answer": "A"}', {"question": "Where?", "answer": "A"}),
        ('```json\n{"a": [1, 2]}\n```', {"a": [1, 2]}),
        ('Here you go:\n{"a": 1}\nLet me know!', {"a": 1}),
        ('{"a": 1,}', {"a": 1}),
        ("Sure. [1, 2, 3,] done", [1, 2, 3]),
        ('prefix {not json} then {"ok": true}', {"ok": True}),
        ('{"q": "日本語の質問？"}', {"q": "日本語の質問？"}),
    ],
)
def test_extracts(text: str, expected: object) -> None:
    assert extract_json(text) == expected


@pytest.mark.parametrize("text", ["", "   ", "I cannot help with that.", '{"a": 1, "b": [2, 3'])
def test_refuses_missing_or_truncated_json(text: str) -> None:
    with pytest.raises(JSONExtractionError):
        extract_json(text)


def test_completion_json_uses_the_extractor() -> None:
    assert Completion(text='```\n{"x": 2}\n```').json() == {"x": 2}
    with pytest.raises(ValueError):
        Completion(text="no").json()
