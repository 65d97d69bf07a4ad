"""Checks against the registry: copies caught with their source id, unrelated items left alone, translations
flagged, and a dataset's own repeats found."""

from __future__ import annotations

from pathlib import Path

import pytest

from senseforge.registry.check import Checker, copies_within
from senseforge.registry.store import Registry, Unit, read_units

FIXTURES = Path(__file__).parents[1] / "fixtures"
CSQA = FIXTURES / "csqa" / "dev_sample.jsonl"


@pytest.fixture
def csqa_registry(tmp_path: Path) -> Registry:
    registry = Registry.open(tmp_path / "reg")
    registry.add(CSQA, "csqa-dev", licence="MIT", embed=False)
    return registry


def test_verbatim_recased_and_one_word_changed_copies_are_caught_with_their_source(csqa_registry: Registry) -> None:
    sources, _ = read_units(CSQA)
    checker = Checker(csqa_registry, cross=None)
    copies = [
        Unit("verbatim", "en", sources[0].text, sources[0].answer),
        Unit("recased", "en", sources[1].text.upper() + "  "),
        Unit("one-word", "en", sources[2].text.replace("magazines", "newspapers"), sources[2].answer),
        Unit("unrelated", "en", "Where do you keep the milk cold at home?"),
        Unit("same-frame", "en", "What do people aim to eat at work?", "lunch"),  # another question on one frame
    ]
    found = checker.check(copies)
    assert [(m.kind, m.source_id, m.entry, m.licence) for m in found[0]] == [
        ("exact", sources[0].id, "csqa-dev", "MIT")
    ]
    assert found[0][0].same_answer is True and found[0][0].reason == "contaminated"
    assert [(m.kind, m.source_id) for m in found[1]] == [("normal", sources[1].id)]
    assert [(m.kind, m.source_id) for m in found[2]] == [("near", sources[2].id)]
    assert found[2][0].reason == "near_duplicate" and 0.5 <= found[2][0].score < 1.0
    assert found[3] == [] and found[4] == []
    answerless = checker.check([Unit("same-frame", "en", "What do people aim to eat at work?")])
    assert [m.kind for m in answerless[0]] == ["near"]  # without an answer to tell them apart, the frame decides
    assert not checker.cross_checked  # no embeddings asked for: no cross-lingual check


def test_an_empty_registry_matches_nothing(tmp_path: Path) -> None:
    assert Checker(Registry.open(tmp_path), cross=None).check([Unit("a", "en", "anything")]) == [[]]


def test_a_dataset_repeating_itself_names_the_first_item_it_repeats() -> None:
    units = [
        Unit("a", "en", "Where would you find magazines along side many other printed works?"),
        Unit("b", "en", "What do people aim to do at work?"),
        Unit("c", "en", "what do people AIM to do at work"),
        Unit("d", "en", "Where would you find newspapers along side many other printed works?"),
        Unit("e", "en", "Where would you find magazines along side many other printed works?"),
    ]
    assert [(c.index, c.earlier, c.kind) for c in copies_within(units)] == [
        (2, 1, "normal"),
        (3, 0, "near"),
        (4, 0, "exact"),
    ]


@pytest.mark.slow
def test_a_translation_is_flagged_not_rejected_and_names_its_parallel_item(tmp_path: Path) -> None:
    registry = Registry.open(tmp_path)
    registry.add(FIXTURES / "xcopa" / "et", "xcopa-et", licence="CC BY 4.0")  # validation items 0–7
    thai, _ = read_units(FIXTURES / "xcopa" / "th")  # the same validation items 0–2, in Thai
    assert all(not m for m in Checker(registry).check(thai))  # the defaults: nothing named wrong
    # Three Thai items and eight Estonian ones are too few to find each language's centre (CENTRE_MIN), so the
    # cosines run low; at lower cut-offs the two the check is sure of name their parallel item.
    checker = Checker(registry, cross=0.15, margin=0.05)
    assert checker.cross_checked
    found = checker.check(thai)
    flagged = [
        (u.id.rsplit("-", 1)[1], m[0].source_id.rsplit("-", 1)[1]) for u, m in zip(thai, found, strict=True) if m
    ]
    assert flagged == [("0", "0"), ("2", "2")]
    assert all(m.kind == "cross_lingual" and not m.rejects for matches in found for m in matches)
    same_language = checker.check([Unit("x", "et", read_units(FIXTURES / "xcopa" / "et")[0][0].text + " Jah.")])
    assert all(m.kind != "cross_lingual" for m in same_language[0])  # within one language only copies count


def test_the_cross_lingual_check_says_what_it_compares_and_why_not(csqa_registry: Registry, tmp_path: Path) -> None:
    units = [
        Unit("en", "en", "Where do you keep the milk cold at home?"),
        Unit("id", "id", "Di mana Anda menyimpan susu agar tetap dingin di rumah?"),
        Unit("zh-Hant", "zh-Hant", "你在家裡把牛奶放在哪裡保持冷？"),
        Unit("no-lang", None, "Where?"),
        Unit("empty", "id", "  "),
    ]
    bare = Checker(csqa_registry)  # registered without embeddings
    assert not bare.cross_checked and bare.cross_comparable(units) == []
    assert bare.cross_skipped == "no embeddings in the registry for csqa-dev (registered with --no-embeddings)"
    assert Checker(csqa_registry, cross=None).cross_skipped == "not asked for"
    assert Checker(Registry.open(tmp_path / "none")).cross_skipped == "nothing registered"


@pytest.mark.slow
def test_only_items_of_another_language_are_compared_and_a_tag_is_its_primary_language(tmp_path: Path) -> None:
    registry = Registry.open(tmp_path)
    registry.add(FIXTURES / "xcopa" / "et", "xcopa-et", licence="CC BY 4.0")
    checker = Checker(registry)
    thai, _ = read_units(FIXTURES / "xcopa" / "th")
    units = [*thai, Unit("et-EE", "et-EE", thai[0].text), Unit("none", None, thai[0].text)]
    assert checker.cross_skipped is None
    assert checker.cross_comparable(units) == [0, 1, 2]  # et-EE is Estonian, as registered; no language: not compared
    found = checker.check(units)
    assert all(m.kind != "cross_lingual" for m in found[3] + found[4])


@pytest.mark.slow
def test_without_the_units_centres_a_verdict_does_not_depend_on_what_is_checked_with_it(tmp_path: Path) -> None:
    """A build's gate checks batch by batch (``centres_from_units=False``): a unit's matches are the same checked
    alone or among more than CENTRE_MIN others of its language, where the checked units' own centre would count."""
    registry = Registry.open(tmp_path)
    registry.add(FIXTURES / "xcopa" / "et", "xcopa-et", licence="CC BY 4.0")
    thai, _ = read_units(FIXTURES / "xcopa" / "th")
    units = [Unit(f"{u.id}#{n}", u.lang, u.text, u.answer) for n in range(7) for u in thai]  # 21 Thai units
    checker = Checker(registry, cross=0.15, margin=0.05)
    together = checker.check(units, centres_from_units=False)
    alone = [checker.check([u], centres_from_units=False)[0] for u in units]
    assert together == alone
    assert any(m.kind == "cross_lingual" for matches in together for m in matches)  # the check found something
