"""The app's catalogues: every shipped one complete, the template current, no template text left unwrapped."""

from __future__ import annotations

import pytest

pytest.importorskip("babel")

from babel.messages.catalog import Catalog
from babel.messages.pofile import read_po

from senseforge.annotate import catalog
from senseforge.annotate.i18n import languages


@pytest.fixture(scope="module")
def fresh() -> Catalog:
    return catalog.extract()


def test_every_shipped_catalogue_translates_every_string_and_none_is_fuzzy(fresh: Catalog) -> None:
    """A string added to a template or a form without its translation fails here (`make i18n`, then translate)."""
    assert "id" in languages()
    for lang in languages():
        assert catalog.problems(lang, fresh) == [], lang


def test_no_template_writes_text_where_a_translation_cannot_reach_it() -> None:
    """Text added to a template without ``{{ _("…") }}`` around it fails here, with the template and the words."""
    assert catalog.unwrapped() == {}


def test_the_shipped_template_is_the_fresh_extraction(fresh: Catalog) -> None:
    with catalog.POT.open("rb") as source:
        shipped = read_po(source)
    assert {m.id for m in shipped if m.id} == {m.id for m in fresh if m.id}


def test_the_extraction_has_the_templates_the_modules_and_the_forms_strings(fresh: Catalog) -> None:
    assert fresh.get("Keyboard shortcuts") is not None  # a template's _()
    assert fresh.get("no task type %(name)s") is not None  # app.py's N_()
    assert fresh.get("Accept the marked answer?") is not None  # verify's declared form
    assert fresh.get("Yes, it holds") is not None  # an option's text
    assert fresh.get("typo mechanics") is not None  # an option value as a page shows it
    assert fresh.get("HasProperty") is None and fresh.get("A") is None  # names and labels stay as they are


def test_unwrapped_text_finds_bare_words_in_text_and_attributes_only() -> None:
    source = (
        '{% extends "base.html" %}{% block main %}<h1>Check it</h1>\n'
        '<p>{{ _("Wrapped words") }} {{ item.text }}</p>\n'
        '<button title="Close the panel">×</button> <kbd>Enter</kbd> <code>senseforge annotate</code>\n'
        '<script nonce="{{ nonce }}">const said = "not shown as text";</script>\n'
        "{# a comment #}<p>{% trans %}In a trans block{% endtrans %}</p>{% endblock %}"
    )
    assert sorted(catalog.unwrapped_text(source)) == ["Check it", "Close the panel"]
    assert catalog.unwrapped_text('<p>{{ _("All %(n)s", n=3) }} · 4 / 5</p>') == []


def _entry(template: Catalog, found: Catalog, msgid: str, string: str, *, fuzzy: bool = False) -> None:
    template.add(msgid)
    found.add(msgid, string, flags=["fuzzy"] if fuzzy else [])


def test_problems_names_the_missing_the_untranslated_the_fuzzy_and_a_broken_placeholder(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    template, found = Catalog(), Catalog(locale="id")
    _entry(template, found, "Fine", "Baik")
    _entry(template, found, "Empty", "")
    _entry(template, found, "Unsure", "Ragu", fuzzy=True)
    _entry(template, found, "Hello, %(name)s", "Halo, %(nama)s")
    template.add("Gone")
    monkeypatch.setattr(catalog, "read", lambda lang: found)
    said = "\n".join(catalog.problems("id", template))
    assert "missing 'Gone'" in said
    assert "untranslated 'Empty'" in said
    assert "fuzzy 'Unsure'" in said
    assert "Hello, %(name)s" in said and "nama" in said  # Babel's placeholder check
    assert "Fine" not in said


def test_check_exits_zero_on_the_shipped_catalogues(capsys: pytest.CaptureFixture[str]) -> None:
    assert catalog.main(["check"]) == 0
    assert "0 problem(s)" in capsys.readouterr().err
    assert catalog.main(["nonsense"]) == 2
