"""``senseforge registry`` and ``senseforge analyze contamination`` in real processes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .test_llm_cli import assert_one_line_error, run_cli

FIXTURES = Path(__file__).parents[1] / "fixtures"
CSQA = FIXTURES / "csqa" / "dev_sample.jsonl"


def test_register_list_check_and_remove(tmp_path: Path, senseforge_home: Path) -> None:
    added = run_cli(
        "registry", "add", str(CSQA), "--name", "csqa-dev", "--licence", "MIT", "--no-embeddings", home=senseforge_home
    )
    assert added.returncode == 0, added.stderr
    assert "registered csqa-dev: 10 items (en; csqa)" in added.stderr
    listed = run_cli("registry", "list", "--json", home=senseforge_home)
    payload = json.loads(listed.stdout)
    assert [(e["name"], e["items"], e["licence"]) for e in payload["entries"]] == [("csqa-dev", 10, "MIT")]
    assert payload["folder"] == str(senseforge_home / "registry") and len(payload["hash"]) == 64

    rows = [json.loads(line) for line in CSQA.read_text(encoding="utf-8").splitlines()]
    copied = dict(rows[0], id="ours-1", question=rows[0]["question"].upper())  # a re-cased copy
    changed = dict(rows[2], id="ours-2", question=rows[2]["question"].replace("magazines", "newspapers"))
    fresh = dict(rows[3], id="ours-3", question="Where do you keep the milk cold at home?")
    data = tmp_path / "ours"
    data.mkdir()
    (data / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in (copied, changed, fresh)))
    (data / "test.jsonl").write_text(json.dumps(dict(fresh, id="ours-4")) + "\n")  # the train item again: a leak
    out = tmp_path / "analysis"
    checked = run_cli("analyze", "contamination", str(data), "--out", str(out), home=senseforge_home)
    assert checked.returncode == 0, checked.stderr
    assert "copies (a gate rejects): 2 (50.00%)" in checked.stdout
    assert "repeated within the dataset: 1, of which across splits: 1" in checked.stdout
    report = json.loads((out / "contamination.json").read_text())
    assert report["by_entry"]["csqa-dev"] == {"exact": 0, "normal": 1, "near": 1, "cross_lingual": 0}
    by_id = {item["id"]: item for item in report["matched_items"]}
    assert by_id["ours-1"]["matches"][0]["source_id"] == rows[0]["id"]
    assert by_id["ours-2"]["matches"][0]["kind"] == "near"
    assert by_id["ours-3"]["repeats"] == "ours-4" and by_id["ours-3"]["leak"] is True  # files in path order
    assert not report["cross_lingual_checked"]  # the entry has no embeddings
    assert (out / "contamination.csv").is_file()

    removed = run_cli("registry", "remove", "csqa-dev", home=senseforge_home)
    assert removed.returncode == 0 and "removed csqa-dev (10 items)" in removed.stderr
    empty = run_cli("analyze", "contamination", str(data), "--out", str(out), home=senseforge_home)
    assert_one_line_error(empty, "no benchmark registered")
    missing = run_cli("registry", "remove", "csqa-dev", home=senseforge_home)
    assert_one_line_error(missing, "no registry entry 'csqa-dev'")
    bad = run_cli("registry", "add", str(tmp_path / "nope.jsonl"), "--name", "x", home=senseforge_home)
    assert_one_line_error(bad, "no such file or folder")


ADAPTED = FIXTURES / "contamination"
SOURCES_OF = {  # adapted item -> the CommonsenseQA dev item it was adapted from (the id's last part)
    f"adapt_{lang}_{source}": source
    for lang, source in (
        ("ind", "1afa02df02c908a558b4036e80242fac"),
        ("ind", "2435de612dd69f2012b9e40d6af4ce38"),
        ("ind", "8d3dc21a53523850ec80771daaa5ff20"),
        ("sun", "a4892551cb4beb279653ae52d0de4c89"),
        ("sun", "118a9093a30695622363455e4d911866"),
        ("sun", "ba640b9634ad6b4ad98b17b4f152e562"),
    )
}


def _flags(report: dict[str, object]) -> dict[str, str]:
    matched = report["matched_items"]
    assert isinstance(matched, list)
    return {i["id"]: i["matches"][0]["source_id"] for i in matched if i["matches"]}


@pytest.mark.slow
def test_cultural_adaptations_in_a_csqa_file_are_found_in_their_language(tmp_path: Path, senseforge_home: Path) -> None:
    """Issue 44: a CommonsenseQA-format file of Indonesian and Sundanese adaptations against their English source,
    with each row's ``lang``, with ``--lang``, and identified; and a file in the registry's language."""
    added = run_cli("registry", "add", str(ADAPTED / "csqa_sources.jsonl"), "--name", "csqa-dev", home=senseforge_home)
    assert added.returncode == 0, added.stderr
    assert "item languages (and where they came from): en 12 identified" in added.stderr

    out = tmp_path / "rows"
    checked = run_cli(
        "analyze", "contamination", str(ADAPTED / "adapted.jsonl"), "--out", str(out), home=senseforge_home
    )
    assert checked.returncode == 0, checked.stderr
    assert "item languages (and where they came from): id 5 row; su 5 row" in checked.stdout
    assert "(10 item(s) compared with registered items in another language)" in checked.stdout
    report = json.loads((out / "contamination.json").read_text())
    assert report["cross_lingual_checked"] is True and report["cross_lingual_compared"] == 10
    assert report["cross_lingual_reason"] is None
    assert {(i["lang"], i["lang_from"]) for i in report["item_languages"]} == {("id", "row"), ("su", "row")}
    flags = _flags(report)
    assert all(SOURCES_OF.get(item) == source for item, source in flags.items())  # no wrong source, no unrelated
    assert len(flags) >= 3  # at least half of the six adaptations named with their source

    flagged = tmp_path / "flag"
    given = run_cli(
        "analyze", "contamination", str(ADAPTED / "adapted_id.jsonl"), "--lang", "id", "--out", str(flagged),
        home=senseforge_home,
    )  # fmt: skip
    assert given.returncode == 0, given.stderr
    by_flag = json.loads((flagged / "contamination.json").read_text())
    assert {(i["lang"], i["lang_from"]) for i in by_flag["item_languages"]} == {("id", "flag")}
    assert by_flag["cross_lingual_compared"] == 5
    assert _flags(by_flag) == {k: v for k, v in flags.items() if k.startswith("adapt_ind_")}

    identified = tmp_path / "identified"
    found = run_cli(
        "analyze", "contamination", str(ADAPTED / "adapted_id.jsonl"), "--out", str(identified), home=senseforge_home
    )
    assert found.returncode == 0, found.stderr
    by_id = json.loads((identified / "contamination.json").read_text())
    said = [(i["lang"], i["lang_from"]) for i in by_id["item_languages"]]
    assert {how for _, how in said} == {"identified"}  # CLD3 reads one of the five as Malay (with one in five, a
    assert [lang for lang, _ in said].count("id") == 4 and {lang for lang, _ in said} == {"id", "ms"}  # fair share)
    assert by_id["cross_lingual_compared"] == 5 and _flags(by_id) == _flags(by_flag)  # Malay is not English either

    english = tmp_path / "english"
    same = run_cli(
        "analyze", "contamination", str(ADAPTED / "csqa_sources.jsonl"), "--out", str(english), home=senseforge_home
    )
    assert same.returncode == 0, same.stderr
    assert "(not checked: every item is in the registry's languages (en); no cross-lingual pair)" in same.stdout
    by_en = json.loads((english / "contamination.json").read_text())
    assert by_en["cross_lingual_checked"] is False and by_en["cross_lingual_compared"] == 0
    assert by_en["cross_lingual_reason"] == "every item is in the registry's languages (en); no cross-lingual pair"
    assert by_en["copies"] == 12  # each its own exact copy
