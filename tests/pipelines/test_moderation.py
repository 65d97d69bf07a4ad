"""Moderation: the shipped word lists per language, extra terms, and the pluggable protocol."""

from __future__ import annotations

import pytest

from senseforge.pipelines.moderation import (
    Moderator,
    WordListModerator,
    bundled_languages,
    bundled_terms,
    chain,
    default_moderator,
    parse_terms,
)

SHIPPED = ("de", "en", "fr", "id", "ja", "nl", "pt", "ru", "su", "zh")


def test_every_language_ships_a_list() -> None:
    assert bundled_languages() == SHIPPED
    for lang in SHIPPED:
        terms = bundled_terms(lang)
        assert terms, lang
        assert all(not term.startswith("#") and term == term.strip() for term in terms), lang
        assert len(set(terms)) == len(terms), lang


@pytest.mark.parametrize(
    ("lang", "flagged", "clean"),
    [
        ("en", "Why would you shout fuck at a dog?", "Where would you keep a dog's food?"),
        ("en", "Who is a RAPIST?", "What do people eat with grapes?"),  # whole words only
        ("ja", "あのクソ野郎は何を食べる？", "犬は何を食べる？"),
        ("zh", "这个傻逼在哪里吃饭？", "人们在哪里吃饭？"),
        ("de", "Wer ist ein Arschloch?", "Wo bewahrt man Milch auf?"),
        ("de", "Wo liegt die Scheisse?", "Wo liegt die Schere?"),  # ß and ss fold together
        ("fr", "Où est cette putain de clé ?", "Où range-t-on le lait ?"),
        ("pt", "Onde fica o caralho do garfo?", "Onde se guarda o leite?"),
        ("nl", "Waar is die klootzak gebleven?", "Waar bewaar je melk?"),
        ("ru", "Где эта сука живёт?", "Где хранят молоко?"),
        ("id", "Di mana bajingan itu tinggal?", "Di mana orang menyimpan susu?"),
        ("su", "Naon nu dipigawé ku jalma goblog?", "Di mana jalma nyimpen susu?"),
        ("pt-BR", "Que porra é essa?", "Que fruta é essa?"),  # region subtags read the language's list
    ],
)
def test_lists_per_language(lang: str, flagged: str, clean: str) -> None:
    moderator = default_moderator()
    assert moderator.check(flagged, lang) is not None
    assert moderator.check(clean, lang) is None


def test_reason_names_the_term() -> None:
    assert WordListModerator().check("What the FUCK?", "en") == "listed term 'fuck'"


def test_phrases_match_across_whitespace() -> None:
    assert WordListModerator().check("Ele é um filho  da\nputa?", "pt") == "listed term 'filho da puta'"


def test_width_is_ignored() -> None:
    assert WordListModerator().check("ＳＨＩＴ happens?", "en") is not None


def test_words_match_whole_words_where_spaces_separate_them() -> None:
    moderator = WordListModerator({"en": ["ass"], "ja": ["犬"]}, bundled=False)
    assert moderator.check("Which class do you like?", "en") is None
    assert moderator.check("What a silly ass!", "en") is not None
    # no word boundaries in Japanese: a substring is enough
    assert moderator.check("子犬は何を食べる？", "ja") is not None


def test_extra_terms() -> None:
    moderator = WordListModerator({"en": ["spork"], "*": ["zzyzx"]})
    assert moderator.check("Is a spork a spoon?", "en") is not None
    assert moderator.check("Is a spork a spoon?", "de") is None
    assert moderator.check("Wo liegt zzyzx?", "de") is not None
    assert moderator.check("What the fuck?", "en") is not None  # the shipped list still applies
    assert "spork" in moderator.terms("en") and "fuck" in moderator.terms("en")


def test_bundled_off_checks_extra_terms_only() -> None:
    moderator = WordListModerator({"en": ["spork"]}, bundled=False)
    assert moderator.check("What the fuck?", "en") is None
    assert moderator.check("Where is the spork?", "en") is not None


def test_language_without_a_list_checks_extra_terms_only() -> None:
    assert bundled_terms("sw") == ()
    assert WordListModerator().check("Mbwa anakula nini?", "sw") is None
    assert WordListModerator({"sw": ["nini"]}).check("Mbwa anakula nini?", "sw") is not None


def test_parse_terms() -> None:
    assert parse_terms("# header\n\nfoo\n  bar baz  # note\n#x\n") == ("foo", "bar baz")


class _FakeApi:
    """Stands in for an API moderator: anything with ``check`` plugs in."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def check(self, text: str, lang: str) -> str | None:
        self.calls.append((text, lang))
        return "api: harassment" if "idiot" in text else None


def test_protocol_and_chain() -> None:
    api = _FakeApi()
    assert isinstance(api, Moderator)
    assert isinstance(WordListModerator(), Moderator)
    both = chain(WordListModerator(), api)
    assert both.check("What the fuck?", "en") == "listed term 'fuck'"
    assert api.calls == []  # the first reason wins; later moderators are not asked
    assert both.check("Which idiot barks?", "en") == "api: harassment"
    assert both.check("Which dog barks?", "en") is None
    assert len(api.calls) == 2
