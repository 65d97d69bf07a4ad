"""Stems: Sastrawi for Indonesian, Porter for English, none elsewhere."""

from __future__ import annotations

from senseforge.data.stems import stem, stemmer_name


def test_stemmer_names() -> None:
    assert stemmer_name("id") == "sastrawi"
    assert stemmer_name("en-US") == "porter"
    assert stemmer_name("su") is None
    assert stemmer_name("ms") is None
    assert stemmer_name("ja") is None


def test_stems_of_affixed_words() -> None:
    assert stem("memasak", "id") == stem("masak", "id") == "masak"
    assert stem("running", "en") == stem("runs", "en") == "run"
    assert stem("nyapu", "su") is None
