"""The per-language literals table: complete for every language, and clear when it is not."""

from __future__ import annotations

import pytest

from senseforge.data import literals as lit
from senseforge.data.copa import XCOPA_LANGS
from senseforge.data.literals import (
    LITERAL_KEYS,
    LITERALS,
    SUPPORTED_LANGUAGES,
    MissingLiteralError,
    copa_connector,
    lookup,
    lookup_text,
    missing_keys,
)
from senseforge.errors import ConfigError

REQUIRED = {"en", "ja", "zh", "de", "fr", "pt", "nl", "ru", "id", "su", *XCOPA_LANGS}
TEXT_KEYS = [k for k in LITERAL_KEYS if k not in ("letters", "space_separated")]


def test_the_required_languages_are_supported() -> None:
    assert set(SUPPORTED_LANGUAGES) >= REQUIRED
    assert len(XCOPA_LANGS) == 11


@pytest.mark.parametrize("lang", SUPPORTED_LANGUAGES)
def test_every_language_is_complete(lang: str) -> None:
    assert missing_keys(lang) == []
    assert set(LITERALS[lang]) == set(LITERAL_KEYS)
    letters = lookup(lang, "letters")
    assert isinstance(letters, tuple) and len(letters) >= 5 and len(set(letters)) == len(letters)
    assert isinstance(lookup(lang, "space_separated"), bool)
    for key in TEXT_KEYS:
        value = lookup(lang, key)
        assert isinstance(value, str) and value.strip(), (lang, key)
        assert value == value.strip() or key in ("choice_delimiter", "colon"), (lang, key)
    assert lookup(lang, "yes") != lookup(lang, "no")
    assert lookup(lang, "cause") != lookup(lang, "effect")
    assert lookup(lang, "question") != lookup(lang, "answer")


def test_spacing_by_script() -> None:
    unspaced = {lang for lang in SUPPORTED_LANGUAGES if not lookup(lang, "space_separated")}
    assert unspaced == {"ja", "zh", "th"}


@pytest.mark.parametrize(
    ("lang", "key", "value"),
    [
        ("en", "question", "Question"),
        ("en", "cause", "because"),
        ("en", "effect", "therefore"),
        ("ja", "question", "質問"),
        ("ja", "answer", "答え"),
        ("zh", "question", "问题"),
        ("zh", "answer", "答案"),
        ("id", "question", "Pertanyaan"),
        ("id", "answer", "Jawaban"),
        ("id", "cause", "karena"),
        ("su", "no", "henteu"),
        ("zh", "colon", "："),
        ("ja", "question_mark", "？"),
        ("ja", "letters", ("A", "B", "C", "D", "E")),
    ],
)
def test_known_values(lang: str, key: str, value: object) -> None:
    assert lookup(lang, key) == value


def test_region_and_case_fall_back_to_the_language() -> None:
    assert lookup("pt-BR", "yes") == "sim"
    assert lookup("ZH-hans", "answer") == "答案"


def test_missing_word_names_key_and_language(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lit, "LITERALS", {**LITERALS, "th": {k: v for k, v in LITERALS["th"].items() if k != "yes"}})
    with pytest.raises(MissingLiteralError, match=r"^missing literal 'yes' for language 'th'") as info:
        lookup("th", "yes")
    assert isinstance(info.value, ConfigError) and isinstance(info.value, KeyError)
    assert lit.missing_keys("th") == ["yes"]


def test_unsupported_language() -> None:
    with pytest.raises(MissingLiteralError, match="missing literal 'yes' for language 'kk': no literals") as info:
        lookup("kk", "yes")
    assert "supported: de, en" in str(info.value)
    with pytest.raises(MissingLiteralError, match="missing literal 'yes' for language 'english'"):
        lookup("english", "yes")
    assert missing_keys("kk") == list(LITERAL_KEYS)


def test_unknown_key() -> None:
    with pytest.raises(KeyError, match="missing literal 'maybe' for language 'en'; known keys"):
        lookup("en", "maybe")


def test_copa_connectors_for_every_xcopa_language() -> None:
    assert copa_connector("et", "cause") == "sest"
    assert copa_connector("tr", "effect") == "bu yüzden"
    for lang in XCOPA_LANGS:
        assert copa_connector(lang, "cause") and copa_connector(lang, "effect")
    with pytest.raises(ValueError, match="'cause' or 'effect'"):
        copa_connector("en", "reason")


def test_lookup_text_refuses_flags() -> None:
    assert lookup_text("fr", "answer") == "Réponse"
    with pytest.raises(TypeError, match="'space_separated' is a bool"):
        lookup_text("fr", "space_separated")
