"""Forms as data: every task type declares its form once, and one reader validates submissions by it."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from senseforge.annotate.app import template_environment
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


NOT_TASK_PAGES = {"_fields.html", "base.html", "home.html", "admin.html", "adjudicate.html", "done.html", "error.html"}
"""The templates that are no task's page: the macros themselves, and the pages without a judgement form."""


def marked_controls(html: str) -> list[tuple[str, str, str]]:
    """(tag, name, data-field) of every control of the page's judgement form but its two hidden fields."""
    form = html.split('id="judge"', 1)[1].split("</form>", 1)[0]
    found = []
    for tag, attributes in re.findall(r"<(input|textarea|select)\b([^>]*)>", form):
        if 'type="hidden"' in attributes:
            continue
        name = re.search(r'\bname="([^"]*)"', attributes)
        mark = re.search(r'\bdata-field="([^"]*)"', attributes)
        found.append((tag, name.group(1) if name else "", mark.group(1) if mark else ""))
    return found


def test_no_task_template_writes_a_control_of_its_own() -> None:
    for path in sorted(TEMPLATES.glob("*.html")):
        if path.name in NOT_TASK_PAGES:
            continue
        source = path.read_text(encoding="utf-8")
        assert not re.search(r"<(input|textarea|select)\b", source), f"{path.name}: a control outside _fields.html"


@pytest.mark.parametrize("name", sorted(TASK_TYPES))
def test_every_control_on_a_task_page_is_a_field_of_its_form(name: str) -> None:
    """Each page, rendered as the app renders it, asks exactly its declared fields, every control from a macro."""
    from .test_interop import INPUTS

    kind = TASK_TYPES[name]
    templates = template_environment("en")  # the templates as the app renders them in English
    for given in INPUTS[name]:
        html = templates.get_template(f"{name}.html").render(
            nonce="n", who=None, task=name, kind=kind, form=kind.form, form_page=False, item=kind.view(given),
            assignment_id=1, csrf="c", values={}, problems=[],
        )  # fmt: skip
        marked = marked_controls(html)
        assert marked, name
        assert all(mark for *_, mark in marked), [m for m in marked if not m[2]]
        assert {mark for *_, mark in marked} == {f.name for f in kind.form.fields}
        for _, field_name, mark in marked:
            declared = kind.form.field(mark)
            assert declared is not None
            if declared.kind in ("texts", "triples"):  # a row posts the field's singular, a triple its parts
                assert field_name in {mark, mark.removesuffix("s"), "head", "relation", "tail", "other", "negated"}
            else:
                assert field_name == mark


def test_the_page_built_from_a_form_asks_each_kind_of_field_and_reads_back() -> None:
    """task.html over a form of every kind: each field marked once per control, posting the names its reader reads."""
    form = Form(
        "Every kind.",
        (),
        (
            *FORM.fields,
            FormField("lines", "texts", "Lines", rows=lambda view: 2, max_length=20),
            FormField("triples", "triples", "Triples", ("IsA", "PartOf"), rows=lambda view: 2),
        ),
    )
    kind = SimpleNamespace(form=form, writes_items=False, checks_drafts=False, page_note=None)
    templates = template_environment("en")  # the templates as the app renders them in English
    html = templates.get_template("task.html").render(
        nonce="n", who=None, task="every", kind=kind, form=form, form_page=True, item=VIEW, assignment_id=1,
        csrf="c", values={"stars": ["4"], "lines": ["one", "two"], "head": ["a"], "relation": ["IsA"]}, problems=[],
    )  # fmt: skip
    marked = marked_controls(html)
    assert [(mark, name) for _, name, mark in marked] == [
        ("verdict", "verdict"), ("verdict", "verdict"), ("why", "why"), ("why", "why"), ("picked", "picked"),
        ("picked", "picked"), *[("stars", "stars")] * 5, ("sure", "sure"), ("sure", "sure"), ("comment", "comment"),
        ("lines", "lines"), ("lines", "lines"), *[("triples", part) for part in ("head", "relation", "tail")] * 2,
    ]  # fmt: skip
    assert 'value="4" checked' in html and 'value="two"' in html and '<option value="IsA" selected>' in html
    keys = re.findall(r'"(\w)": \(\) => (pick|flip)\("(\w+)", "(\w+)"\)', html)
    assert keys[:2] == [("1", "pick", "verdict", "ok"), ("2", "pick", "verdict", "bad")]
    assert ("y", "pick", "sure", "yes") in keys
    values, problems = form.read(
        VIEW, {"verdict": ["ok"], "lines": ["one", "two"], "head": ["a", ""], "relation": ["IsA", ""],
               "tail": ["b", ""]},
    )  # fmt: skip
    assert problems == [] and values["triples"] == [{"head": "a", "relation": "IsA", "tail": "b"}]
