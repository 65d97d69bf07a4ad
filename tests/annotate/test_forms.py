"""Forms as data: every task type declares its form once, and one reader validates submissions by it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from senseforge.annotate.forms import (
    DIGITS,
    Form,
    FormField,
    When,
    comment_field,
    rating_options,
    view_list,
    yes_no_field,
)
from senseforge.annotate.tasktypes import TASK_TYPES

FORM = Form(
    "A test form.",
    (),
    (
        FormField("verdict", "choice", "Verdict", ("ok", "bad"), keys=DIGITS, required=True),
        FormField(
            "why",
            "choice",
            "Why bad",
            ("typo", "wrong"),
            required_when=When("verdict", ("bad",), "a bad one says why"),
            only_when=When("verdict", ("bad",), "only a bad one says why"),
        ),
        FormField("picked", "multi-choice", "Picked", options_from=view_list("choices", "label")),
        FormField("stars", "rating", "Stars", rating_options(1, 5)),
        yes_no_field("sure", "Sure?", required=False),
        comment_field(),
    ),
)
VIEW = {"choices": [{"label": "A"}, {"label": "B"}]}


def test_every_task_type_declares_its_form_and_no_policy() -> None:
    for name, kind in TASK_TYPES.items():
        assert kind.form.fields, name
        assert len({f.name for f in kind.form.fields}) == len(kind.form.fields), name
        assert not hasattr(kind, "policy"), name  # the recipe's config and panel decide


def test_the_reader_gives_typed_values() -> None:
    values, problems = FORM.read(
        VIEW, {"verdict": ["bad"], "why": ["typo"], "picked": ["B", "A", "B"], "stars": ["4"], "sure": ["y"]}
    )
    assert problems == []
    assert values == {"verdict": "bad", "why": "typo", "picked": ["B", "A"], "stars": 4, "sure": True, "comment": None}
    json_values, _ = FORM.read(VIEW, {"verdict": "ok", "picked": {"A": True, "B": False}, "stars": 2, "sure": False})
    assert (json_values["picked"], json_values["stars"], json_values["sure"]) == (["A"], 2, False)


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({}, "verdict: required (one of ok, bad)"),
        ({"verdict": "meh"}, "verdict: 'meh' is not one of ok, bad"),
        ({"verdict": "bad"}, "why: a bad one says why"),
        ({"verdict": "ok", "why": "typo"}, "why: only a bad one says why"),
        ({"verdict": "bad", "why": "nonsense"}, "why: 'nonsense' is not one of typo, wrong"),
        ({"verdict": "ok", "picked": ["C"]}, "picked: unknown ['C'] (known: A, B)"),
        ({"verdict": "ok", "picked": {"A": True}}, "picked.B: required (true or false)"),
        ({"verdict": "ok", "stars": "6"}, "stars: '6' is not one of 1, 2, 3, 4, 5"),
        ({"verdict": "ok", "sure": "perhaps"}, "sure: expected yes or no, got 'perhaps'"),
        ({"verdict": "ok", "comment": "x" * 2001}, "comment: at most 2000 characters"),
    ],
)
def test_the_reader_words_each_problem(fields: dict[str, object], problem: str) -> None:
    _, problems = FORM.read(VIEW, fields)
    assert problems == [problem]


def test_keys_and_option_texts_are_declared_with_the_field() -> None:
    verify = TASK_TYPES["verify"].form.field("accept")
    assert verify is not None and verify.yes_no and verify.keys_of(0) == ("1", "y") and verify.text_of("no") == "No"
    error = TASK_TYPES["adapt-check"].form.field("error")
    assert error is not None and [error.keys_of(i) for i in range(3)] == [("t",), ("p",), ("m",)]
    assert error.text_of("typo-mechanics") == "Typo or mechanics"
    answer = TASK_TYPES["answer"].form.field("choice")
    assert answer is not None and answer.options_for(VIEW) == ("A", "B") and answer.options_for(None) == tuple("ABCDE")


TEMPLATES = Path(__file__).parents[2] / "src" / "senseforge" / "annotate" / "templates"
MACRO_CALL = re.compile(
    r'fields\.choice\("([^"]+)", (\[[^\]]*\]), (\[[^\]]*\]), (\[\[.*?\]\]), values(?:, required=(\w+))?\)'
)
KEYS_CALL = re.compile(r'fields\.choice_keys\("([^"]+)", (\[[^\]]*\]), (\[\[.*?\]\])\)')


@pytest.mark.parametrize("page", ["verify", "ckv", "open-judge", "adapt-check"])
def test_a_page_built_from_the_macros_asks_what_its_form_declares(page: str) -> None:
    source = (TEMPLATES / f"{page}.html").read_text(encoding="utf-8")
    assert '{% import "_fields.html" as fields %}' in source
    assert 'type="radio"' not in source  # every choice on the page comes from the macro
    declared = TASK_TYPES[page].form
    calls = MACRO_CALL.findall(source)
    assert calls
    for name, options, texts, keys, required in calls:
        item = declared.field(name)
        assert item is not None and item.kind == "choice", name
        assert (required != "False") == item.required
        assert tuple(json.loads(options)) == item.options
        assert tuple(json.loads(texts)) == tuple(item.text_of(o) for o in item.options)
        assert tuple(tuple(k) for k in json.loads(keys)) == item.keys
    bound = KEYS_CALL.findall(source)
    assert [(name, json.loads(options)) for name, options, _ in bound] == [
        (name, json.loads(options)) for name, options, *_ in calls
    ]
    assert all(tuple(tuple(k) for k in json.loads(keys)) == declared.field(name).keys for name, _, keys in bound)  # type: ignore[union-attr]
