"""Answer extraction: strict, lenient, tagged, yes/no."""

from __future__ import annotations

import pytest

from senseforge.evaluate.extract import lenient_letter, strict_letter, tagged_answer, yes_no

LETTERS = ["A", "B", "C", "D", "E"]
CHOICES = ["bank", "library", "department store", "mall", "new york"]


@pytest.mark.parametrize(
    ("text", "strict", "lenient"),
    [
        ("B", "B", "B"),
        (" (C) ", "C", "C"),
        ("D.", "D", "D"),
        ("Answer: E", "E", "E"),
        ("The answer is B because banks are secure.", None, "B"),
        ("I think it's the library.", None, "B"),
        ("I cannot answer that.", None, None),
        ("", None, None),
        ("bank or mall, hard to say", None, None),  # two choices quoted: unparsed
        ("Z", None, None),
    ],
)
def test_letters(text: str, strict: str | None, lenient: str | None) -> None:
    assert strict_letter(text, LETTERS) == strict
    assert lenient_letter(text, LETTERS, CHOICES) == lenient


def test_tagged_and_yes_no() -> None:
    assert tagged_answer("thinking... <Answer>yes</Answer> wait <Answer> no </Answer>") == "no"
    assert yes_no("Yes, it fits.", "yes", "no") is True
    assert yes_no("no.", "yes", "no") is False
    assert yes_no("Let me think. <Answer>no</Answer>", "yes", "no") is False
    assert yes_no("maybe", "yes", "no") is None
    assert yes_no("はい、そうです", "はい", "いいえ") is True


def test_an_echoed_option_list_is_unparsed_not_a_guess() -> None:
    echoed = "Question: A revolving door is convenient?\nA. bank\nB. library\nC. mall\nAnswer:"
    assert lenient_letter(echoed, LETTERS, CHOICES) is None
    assert lenient_letter("After thinking, the answer is (D), the mall.", LETTERS, CHOICES) == "D"
