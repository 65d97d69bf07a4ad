"""The registry folder: entries added and removed, fingerprints only, settings and files checked on load."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from senseforge.errors import ConfigError, StoreError
from senseforge.registry.store import REGISTRY_FILE, Registry, Unit, identify_langs, read_units

FIXTURES = Path(__file__).parents[1] / "fixtures"
CSQA = FIXTURES / "csqa" / "dev_sample.jsonl"
XCOPA_ET = FIXTURES / "xcopa" / "et"


def texts_of(path: Path) -> list[str]:
    units, _ = read_units(path)
    return [u.text for u in units] + [u.answer for u in units if u.answer]


def test_the_folder_holds_no_text_of_what_was_registered(tmp_path: Path) -> None:
    registry = Registry.open(tmp_path / "reg")
    entry = registry.add(CSQA, "csqa-dev", licence="MIT", embed=False)
    registry.add(XCOPA_ET, "xcopa-et", licence="CC BY 4.0", embed=False)
    assert entry.items == 10 and entry.langs == ["en"] and entry.formats == ["csqa"]
    stored = b"".join(path.read_bytes() for path in (tmp_path / "reg").iterdir())
    secrets = [t for t in texts_of(CSQA) + texts_of(XCOPA_ET) if len(t) > 6]
    assert len(secrets) > 20
    for text in secrets:  # in any encoding numpy or JSON might write
        for encoded in (text.encode("utf-8"), text.encode("utf-16-le"), text.encode("utf-32-le")):
            assert encoded not in stored, text
        assert json.dumps(text)[1:-1].encode() not in stored


def test_entries_are_listed_reopened_and_removed(tmp_path: Path) -> None:
    registry = Registry.open(tmp_path)
    empty_hash = registry.content_hash()
    registry.add(CSQA, "csqa-dev", licence="MIT", embed=False)
    again = Registry.open(tmp_path)
    assert [e.name for e in again.entries] == ["csqa-dev"] and again.entries[0].licence == "MIT"
    assert again.content_hash() == registry.content_hash() != empty_hash
    prints = again.fingerprints(again.entry("csqa-dev"))
    assert len(prints) == 10 and prints.minhash.shape == (10, 128) and prints.embedding.shape == (10, 0)
    assert prints.ids[0] == "1afa02df02c908a558b4036e80242fac"
    with pytest.raises(ConfigError, match="registered already"):
        again.add(CSQA, "csqa-dev", embed=False)
    with pytest.raises(ConfigError, match="lower-case"):
        again.add(CSQA, "CSQA Dev", embed=False)
    again.remove("csqa-dev")
    assert Registry.open(tmp_path).entries == [] and not (tmp_path / "csqa-dev.npz").exists()
    with pytest.raises(ConfigError, match="no registry entry 'csqa-dev'"):
        again.remove("csqa-dev")


def test_signatures_made_under_other_settings_are_refused(tmp_path: Path) -> None:
    Registry.open(tmp_path).add(CSQA, "csqa-dev", embed=False)
    pointer = tmp_path / REGISTRY_FILE
    payload = json.loads(pointer.read_text())
    payload["minhash"]["num_perm"] = 64
    pointer.write_text(json.dumps(payload))
    with pytest.raises(StoreError, match="other MinHash settings"):
        Registry.open(tmp_path)


def test_a_changed_fingerprint_file_is_refused(tmp_path: Path) -> None:
    registry = Registry.open(tmp_path)
    entry = registry.add(CSQA, "csqa-dev", embed=False)
    (tmp_path / "csqa-dev.npz").write_bytes(b"not the file")
    with pytest.raises(StoreError, match="changed since it was registered"):
        registry.fingerprints(entry)


def test_a_folder_of_files_is_read_recursively_and_a_missing_path_is_named(tmp_path: Path) -> None:
    units, formats = read_units(FIXTURES / "xcopa")
    assert formats == ["xcopa"] and len(units) == 19 and {u.lang for u in units} == {"et", "qu", "th", "zh"}
    with pytest.raises(ConfigError, match="no such file or folder"):
        read_units(tmp_path / "nope")


ENGLISH = [
    "Where would you keep the milk so that it stays cold at home?",
    "What do people usually do when they are tired after a long day at work?",
    "Where would you find a lot of books that you can borrow for free?",
    "What might happen to someone who forgets to water the plants for a month?",
    "Why would a child cry after falling off a bicycle in the park?",
]


def test_languages_the_file_does_not_say_are_identified_or_assumed(monkeypatch: pytest.MonkeyPatch) -> None:
    from senseforge.data import langid

    units = [
        Unit("said", "id", "Di mana Anda menyimpan susu?", lang_from="row"),
        Unit("su", "en", "Naon anu biasana dianggo ku urang Sunda pikeun ngadamel sangu liwet?", lang_from="format"),
        *(Unit(f"en{i}", "en", text, lang_from="format") for i, text in enumerate(ENGLISH)),
        Unit("short", "en", "Ok?", lang_from="format"),  # CLD3 alone: Polish, at 0.66
        Unit("unclear", "en", "A revolving door?", "bank", lang_from="format"),  # CLD3 cannot tell
        Unit("bilingual", None, "   ", lang_from="none"),
    ]
    found, said = identify_langs(units)
    assert [(u.lang, u.lang_from) for u in found] == [
        ("id", "row"),
        ("su", "identified"),  # rare in the set, but CLD3 is sure
        *[("en", "identified")] * 5,
        ("en", "identified"),  # the one language of the set: a doubtful rare one is taken for it
        ("en", "assumed"),  # nothing could tell: the format's default stays, and says so
        (None, "none"),
    ]
    assert said.counts == {
        "en": {"assumed": 1, "identified": 6},
        "id": {"row": 1},
        "su": {"identified": 1},
        "unknown": {"none": 1},
    }
    assert said.note is None
    kept, not_asked = identify_langs(units, identify=False)
    assert [u.lang_from for u in kept] == ["row", *["assumed"] * 8, "none"]
    assert not_asked.note == "items whose file does not say their language are assumed to be in en"

    langid._identifier.cache_clear()
    monkeypatch.setitem(sys.modules, "gcld3", None)  # the langid extra not installed
    try:
        missing, note = identify_langs(units)
    finally:
        langid._identifier.cache_clear()
    assert [u.lang_from for u in missing] == ["row", *["assumed"] * 8, "none"]
    assert note.note is not None and note.note.startswith("language identification is not available (")
    assert "pip install 'senseforge[langid]'" in note.note and "8 item(s)" in note.note
    assert note.note.endswith("are assumed to be in en (their format's default): give --lang if they are not")


def test_registering_a_file_identifies_its_items_languages(tmp_path: Path) -> None:
    registry = Registry.open(tmp_path / "reg")
    entry = registry.add(CSQA, "csqa-dev", embed=False)
    assert entry.langs == ["en"]
    assert registry.last_languages is not None and registry.last_languages.counts["en"].get("identified", 0) >= 8
    flagged = registry.add(CSQA, "csqa-en", lang="en", embed=False)
    assert flagged.langs == ["en"] and registry.last_languages.counts == {"en": {"flag": 10}}
