"""BCP-47 tag normalisation."""

from __future__ import annotations

import pytest

from senseforge.data.lang import normalize_tag, primary_language


@pytest.mark.parametrize(
    ("tag", "expected"),
    [
        ("en", "en"),
        ("EN", "en"),
        ("ja", "ja"),
        ("zh-Hant-TW", "zh-Hant-TW"),
        ("ZH-hant-tw", "zh-Hant-TW"),
        ("zh-hant-tw", "zh-Hant-TW"),
        ("pt-BR", "pt-BR"),
        ("pt-br", "pt-BR"),
        ("su", "su"),
        ("id", "id"),
        ("es-419", "es-419"),
        ("sr-Latn-RS", "sr-Latn-RS"),
        ("SR-LATN-rs", "sr-Latn-RS"),
        ("zh-yue-HK", "zh-yue-HK"),  # extlang
        ("de-CH-1996", "de-CH-1996"),  # variant
        ("en-US-u-ca-gregory", "en-US-u-ca-gregory"),  # extension
        ("  ja  ", "ja"),  # surrounding whitespace is dropped
    ],
)
def test_normalize_tag_canonical_casing(tag: str, expected: str) -> None:
    assert normalize_tag(tag) == expected


@pytest.mark.parametrize("tag", ["zh-Hant-TW", "pt-BR", "es-419", "sr-Latn-RS", "en"])
def test_normalize_tag_is_idempotent(tag: str) -> None:
    once = normalize_tag(tag)
    assert normalize_tag(once) == once


@pytest.mark.parametrize(
    "garbage",
    ["english", "French", "abcd", "", "   ", "e", "en_US", "zh_Hant", "en-", "-en", "en--US", "12", "en US", "x-foo"],
)
def test_normalize_tag_rejects_garbage(garbage: str) -> None:
    with pytest.raises(ValueError, match="not a BCP-47 language tag"):
        normalize_tag(garbage)


@pytest.mark.parametrize("not_a_string", [None, 42, b"en"])
def test_normalize_tag_rejects_non_strings(not_a_string: object) -> None:
    with pytest.raises(ValueError):
        normalize_tag(not_a_string)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("tag", "primary"),
    [("pt-BR", "pt"), ("ZH-hant-TW", "zh"), ("su", "su"), ("es-419", "es")],
)
def test_primary_language(tag: str, primary: str) -> None:
    assert primary_language(tag) == primary


def test_primary_language_rejects_garbage() -> None:
    with pytest.raises(ValueError):
        primary_language("en_US")
