"""``analyze language``: handmade Indonesian, Sundanese and English items through CLD3, short texts, Malay, the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from senseforge.analyze.language import parse_fields, wrong_language
from senseforge.cli.main import app
from senseforge.data.schema import Choice, MCItem
from senseforge.errors import ConfigError

pytest.importorskip("gcld3", reason="language identification needs cld3-py (the langid extra)")

# Each text below was checked first: CLD3 names the language in the comment.
ID_QUESTION = "Apa yang biasanya dimakan orang Indonesia saat sarapan pagi?"  # id
ID_AS_MALAY = "Makanan apa yang paling sering disajikan ketika perayaan Lebaran tiba?"  # ms
ID_SENTENCE = "Mereka pergi ke pasar untuk membeli sayuran segar setiap hari"  # id
SU_QUESTION = "Naon anu biasana dianggo ku urang Sunda pikeun ngadamel sangu liwet?"  # su
SU_OTHER = "Urang Sunda biasana ngagunakeun naon pikeun nyieun kueh?"  # su
EN_QUESTION = "What do people usually eat for breakfast in the morning?"  # en
EN_SENTENCE = "People go to the market to buy fresh vegetables every day"  # en


def _item(item_id: str, lang: str, question: str, *choices: str) -> MCItem:
    texts = choices or ("Nasi goreng", "Sangu", "Rice")  # short: CLD3 calls them jv, hi, sr
    return MCItem(
        id=item_id,
        lang=lang,
        question=question,
        choices=[Choice(label="ABCDE"[i], text=t) for i, t in enumerate(texts)],
    )


ITEMS = [
    _item("id-1", "id", ID_QUESTION, "Nasi goreng", EN_SENTENCE, ID_SENTENCE),
    _item("id-2", "id", ID_AS_MALAY),
    _item("su-1", "su", SU_QUESTION),
    _item("su-2", "su", ID_SENTENCE),  # Indonesian in a Sundanese item
    _item("su-3", "su", SU_OTHER),
    _item("en-1", "en", EN_QUESTION),
]


def test_texts_in_another_language_are_found_and_listed() -> None:
    result = wrong_language(ITEMS)
    flagged = {(f.id, f.field, f.label, f.declared, f.detected) for f in result.flagged}
    assert flagged == {("id-1", "choices", "B", "id", "en"), ("su-2", "question", None, "su", "id")}
    questions = result.tally("su", "question")
    assert questions is not None and (questions.judged, questions.other) == (3, 1)
    assert questions.share == pytest.approx(1 / 3)
    indonesian = result.tally("id", "question")
    assert indonesian is not None and indonesian.other == 0 and indonesian.detected == {"id": 1, "ms": 1}
    choices = result.tally("id", "choices")
    assert choices is not None
    assert (choices.texts, choices.too_short, choices.judged, choices.other) == (6, 4, 2, 1)
    assert (choices.items_judged, choices.items_other) == (1, 1)
    english = result.tally("en", "question")
    assert english is not None and english.other == 0 and english.judged == 1


def test_short_texts_are_not_judged_unless_asked_and_malay_counts_only_when_strict() -> None:
    every = wrong_language(ITEMS, fields=("choices",), min_chars=0)
    short = {(f.id, f.text) for f in every.flagged}
    assert ("su-1", "Sangu") in short and ("en-1", "Rice") in short  # why short texts are left out by default
    strict = wrong_language(ITEMS, fields=("question",), strict=True)
    assert {(f.id, f.detected) for f in strict.flagged} == {("id-2", "ms"), ("su-2", "id")}
    with pytest.raises(ConfigError, match="--fields"):
        parse_fields("question,answer")
    with pytest.raises(ConfigError, match="--min-chars"):
        wrong_language(ITEMS, min_chars=-1)
    with pytest.raises(ConfigError, match="no multiple-choice items"):
        wrong_language([])


def test_cli_writes_json_csv_and_figure(tmp_path: Path) -> None:
    data = tmp_path / "items.jsonl"
    data.write_text("".join(item.model_dump_json() + "\n" for item in ITEMS), encoding="utf-8")
    out = tmp_path / "out"
    args = ["analyze", "language", str(data), "--fields", "question", "--out", str(out)]
    result = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "su-2" in result.output and "flagged texts" in result.output
    doc = json.loads((out / "language.json").read_text(encoding="utf-8"))
    assert doc["min_chars"] == 35 and doc["same_language"] == {"id": ["ms"]}
    assert [(f["id"], f["field"], f["declared"], f["detected"]) for f in doc["flagged"]] == [
        ("su-2", "question", "su", "id")
    ]
    lines = (out / "language.csv").read_text(encoding="utf-8").splitlines()
    assert lines[0].startswith("lang,field,texts,too_short,undetermined,judged,other,share")
    assert len(lines) == 1 + 3  # id, su and en questions
    assert (out / "language.svg").is_file()
    refused = CliRunner().invoke(app, ["analyze", "language", str(data), "--fields", "nope", "--out", str(out)])
    assert isinstance(refused.exception, ConfigError) and "--fields 'nope'" in str(refused.exception)
