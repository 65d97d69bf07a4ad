"""load_dataset: format detection, names, kinds, splits and errors, on every fixture format."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from senseforge.data.io import write_jsonl
from senseforge.data.loaders import FORMATS, LoadedDataset, detect_format, load_dataset
from senseforge.data.schema import BinaryExample, Choice, MCItem
from senseforge.errors import ConfigError, DataValidationError

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"

CASES = [
    # path, fmt, name, kind, count, split, langs
    ("csqa/dev_sample.jsonl", "csqa", "commonsenseqa", "mc", 10, "validation", {"en"}),
    ("jcommonsenseqa/valid_sample.jsonl", "jcommonsenseqa", "jcommonsenseqa", "mc", 10, "validation", {"ja"}),
    ("id-csqa/human_gen/ind/filtered_test.json", "putri", "id-csqa-human-gen-id", "mc", 6, "test", {"id"}),
    ("id-csqa/human_gen/sun/filtered_test.json", "putri", "id-csqa-human-gen-su", "mc", 5, "test", {"su"}),
    ("id-csqa/llm_adapt/ind/filtered_test.json", "putri", "id-csqa-llm-adapt-id", "mc", 4, "test", {"id"}),
    ("id-csqa/llm_gen/sun/filtered_test.json", "putri", "id-csqa-llm-gen-su", "mc", 4, "test", {"su"}),
    ("xcopa/et/val.et.jsonl", "xcopa", "xcopa-et", "mc", 8, "validation", {"et"}),
    ("xcopa/th/val.th.jsonl", "xcopa", "xcopa-th", "mc", 3, "validation", {"th"}),
    ("copal-id/test_copal.csv", "copal", "copal-id", "mc", 8, "test", {"id"}),
    ("copal-id/test_copal_colloquial.csv", "copal", "copal-id-colloquial", "mc", 8, "test", {"id"}),
    ("commonmt/lexical ambiguity.csv", "commonmt", "commonmt-lexical-ambiguity", "binary", 12, None, {None}),
    ("crow/released_handwritten.jsonl", "crow", "crow", "binary", 8, None, {"en", None}),
    ("crow/shot_samples.json", "crow-shots", "crow-shots", "binary", 12, None, {"en", None}),
]


@pytest.mark.parametrize(("rel", "fmt", "name", "kind", "count", "split", "langs"), CASES)
def test_every_fixture_is_detected_and_loaded(
    rel: str, fmt: str, name: str, kind: str, count: int, split: str | None, langs: set[str | None]
) -> None:
    path = FIXTURES / rel
    assert detect_format(path) == fmt
    data = load_dataset(path)
    assert isinstance(data, LoadedDataset)
    assert (data.fmt, data.name, data.kind, len(data), data.split) == (fmt, name, kind, count, split)
    records = data.items if kind == "mc" else data.examples
    assert len(records) == count
    assert (data.examples if kind == "mc" else data.items) == []
    assert {r.lang for r in records} == langs
    assert data.path == path
    assert FORMATS[fmt].kinds == (("mc", "binary") if fmt == "senseforge" else (kind,))


def test_explicit_format_and_lang() -> None:
    data = load_dataset(FIXTURES / "csqa" / "dev_sample.jsonl", "csqa", lang="en-us", split="dev")
    assert data.name == "csqa-en-US"
    assert data.split == "validation"
    assert {i.lang for i in data.items} == {"en-US"}
    assert {i.metadata["split"] for i in data.items} == {"validation"}


def test_split_metadata_on_converted_items() -> None:
    data = load_dataset(FIXTURES / "xcopa" / "et" / "val.et.jsonl")
    assert data.items[0].id == "xcopa-et-validation-0"
    assert data.items[0].metadata["split"] == "validation"


def test_a_folder_and_a_split_pick_the_file(tmp_path: Path) -> None:
    folder = tmp_path / "xcopa" / "et"
    folder.mkdir(parents=True)
    shutil.copy(FIXTURES / "xcopa" / "et" / "val.et.jsonl", folder / "val.et.jsonl")
    shutil.copy(FIXTURES / "xcopa" / "et" / "val.et.jsonl", folder / "test.et.jsonl")
    data = load_dataset(folder, split="val")
    assert data.split == "validation"
    assert data.path == folder / "val.et.jsonl"
    assert load_dataset(folder, split="test").items[0].id == "xcopa-et-test-0"
    with pytest.raises(ConfigError, match="expected one data file in the folder, found"):
        load_dataset(folder)
    with pytest.raises(ConfigError, match="for split 'train'"):
        load_dataset(folder, split="train")


def test_a_split_that_contradicts_the_file_name() -> None:
    with pytest.raises(ConfigError, match="the file name says split 'validation', but split='test'"):
        load_dataset(FIXTURES / "xcopa" / "et" / "val.et.jsonl", split="test")


def test_senseforge_files_of_both_kinds(tmp_path: Path) -> None:
    items = [
        MCItem(
            id="q1",
            lang="ja",
            question="猫は？",
            choices=[Choice(label="A", text="動物"), Choice(label="B", text="石")],
        ),
    ]
    examples = [BinaryExample(id="e1", context_id="c1", context="c", target="t", label=True, task="dialogue")]
    mc_path, bin_path = tmp_path / "items.jsonl", tmp_path / "pairs.jsonl"
    write_jsonl(mc_path, items)
    write_jsonl(bin_path, examples)
    assert detect_format(mc_path) == detect_format(bin_path) == "senseforge"
    mc = load_dataset(mc_path)
    assert (mc.kind, mc.name, mc.items) == ("mc", "items", items)
    pairs = load_dataset(bin_path)
    assert (pairs.kind, pairs.examples) == ("binary", examples)
    assert load_dataset(mc_path, lang="ja").items == items
    with pytest.raises(DataValidationError, match=r"items.jsonl:1: lang: is 'ja', but lang='en' was asked for"):
        load_dataset(mc_path, lang="en")


def test_unknown_format_lists_the_formats() -> None:
    with pytest.raises(ConfigError, match="unknown dataset format 'parquet'") as info:
        load_dataset(FIXTURES / "csqa" / "dev_sample.jsonl", "parquet")
    for key in FORMATS:
        assert key in str(info.value)
    assert "senseforge.data" not in str(info.value)  # a message names what to type, not where the code is


def test_undetectable_files(tmp_path: Path) -> None:
    odd = tmp_path / "odd.jsonl"
    odd.write_text(json.dumps({"foo": 1}) + "\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="cannot tell the dataset format from its first row") as info:
        load_dataset(odd)
    assert "--format" in str(info.value) and "fmt=" not in str(info.value) and "senseforge" in str(info.value)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("", encoding="utf-8")
    with pytest.raises(ConfigError, match="the file is empty"):
        load_dataset(empty)
    table = tmp_path / "table.csv"
    table.write_text("a,b\n1,2\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="cannot tell the dataset format"):
        load_dataset(table)
    text = tmp_path / "notes.txt"
    text.write_text("hello", encoding="utf-8")
    with pytest.raises(ConfigError, match="cannot tell the dataset format"):
        load_dataset(text)


def test_missing_file_and_bad_lang(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such file"):
        load_dataset(tmp_path / "absent.jsonl")
    with pytest.raises(ConfigError, match="not a BCP-47 language tag"):
        load_dataset(FIXTURES / "csqa" / "dev_sample.jsonl", lang="english")


def test_xcopa_without_a_language_in_the_path(tmp_path: Path) -> None:
    path = tmp_path / "copa.jsonl"
    shutil.copy(FIXTURES / "xcopa" / "et" / "val.et.jsonl", path)
    with pytest.raises(ConfigError, match="pass lang="):
        load_dataset(path)
    assert load_dataset(path, lang="et").name == "xcopa-et"


def test_wrong_format_forced_gives_a_located_error() -> None:
    with pytest.raises(DataValidationError, match=r"val.et.jsonl:1: task: missing"):
        load_dataset(FIXTURES / "xcopa" / "et" / "val.et.jsonl", "crow")


def test_crow_single_task_name(tmp_path: Path) -> None:
    lines = (FIXTURES / "crow" / "released_handwritten.jsonl").read_text(encoding="utf-8").splitlines()
    path = tmp_path / "dialogue.jsonl"
    path.write_text("\n".join(lines[:2]) + "\n", encoding="utf-8")
    assert load_dataset(path).name == "crow-dialogue"


def test_bad_senseforge_row_is_located(tmp_path: Path) -> None:
    good = BinaryExample(id="e1", context_id="c1", context="c", target="t", label=True, task="dialogue")
    bad = {**good.model_dump(), "id": "e2", "label": "perhaps"}
    path = tmp_path / "pairs.jsonl"
    path.write_text(good.model_dump_json() + "\n\n" + json.dumps(bad) + "\n", encoding="utf-8")
    with pytest.raises(DataValidationError, match=r"pairs.jsonl:3: label: "):
        load_dataset(path)


def test_a_file_that_is_not_utf8_is_located_to_its_line(tmp_path: Path) -> None:
    from senseforge.data import _rows
    from senseforge.errors import DataValidationError

    table = tmp_path / "concepts.csv"
    good = "category,concept\nculinary,rendang\nplace,Citarum\nculinary,cafe\u0301\n".encode()
    table.write_bytes(good + b"place,Bogor\xe9\n")  # Latin-1, as a spreadsheet may save it
    with pytest.raises(DataValidationError, match=r"concepts\.csv:5: not UTF-8 \(byte 0xe9 at column 12"):
        list(_rows.iter_csv_rows(table, ["category", "concept"]))
    document = tmp_path / "items.json"
    document.write_bytes(b'[\n{"a": 1},\n{"b": "\xff"}\n]\n')
    with pytest.raises(DataValidationError, match=r"items\.json:3: not UTF-8"):
        _rows.read_json_document(document)
    document.write_text('[\n  {"id": "q1",\n   "question": "open}\n]\n', encoding="utf-8")
    with pytest.raises(
        DataValidationError, match=r"items\.json:3: invalid JSON at column 22: a line break \(U\+000A\)"
    ):
        _rows.read_json_document(document)  # the line and column of the document, not the parser's words


LANG_FROM = [
    # path, where each record's language came from when no lang= is given
    ("csqa/dev_sample.jsonl", {"format"}),
    ("jcommonsenseqa/valid_sample.jsonl", {"format"}),
    ("id-csqa/human_gen/ind/filtered_test.json", {"path"}),
    ("xcopa/et/val.et.jsonl", {"path"}),
    ("copal-id/test_copal.csv", {"format"}),
    ("commonmt/lexical ambiguity.csv", {"none"}),
    ("crow/released_handwritten.jsonl", {"format", "none"}),
]


@pytest.mark.parametrize(("rel", "origins"), LANG_FROM)
def test_every_record_says_where_its_language_came_from(rel: str, origins: set[str]) -> None:
    data = load_dataset(FIXTURES / rel)
    assert len(data.lang_from) == len(data) and set(data.lang_from) == origins
    flagged = load_dataset(FIXTURES / rel, lang="id") if rel.startswith(("csqa", "copal")) else None
    if flagged is not None:
        assert set(flagged.lang_from) == {"flag"} and {i.lang for i in flagged.items} == {"id"}


def _csqa_rows(count: int) -> list[dict[str, object]]:
    lines = (FIXTURES / "csqa" / "dev_sample.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines[:count]]


def test_a_csqa_rows_lang_field_is_read(tmp_path: Path) -> None:
    """A CommonsenseQA-format row's ``lang`` is its language; a row without one takes lang=, else en."""
    rows = _csqa_rows(3)
    rows[0]["lang"], rows[1]["lang"] = "ID", "su"
    path = tmp_path / "adapted.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    data = load_dataset(path)
    assert [i.lang for i in data.items] == ["id", "su", "en"] and data.lang_from == ["row", "row", "format"]
    assert data.name == "commonsenseqa"  # several languages: the format's name
    path.write_text("".join(json.dumps(dict(r, lang="su")) + "\n" for r in rows), encoding="utf-8")
    one = load_dataset(path)
    assert one.name == "csqa-su" and {i.lang for i in one.items} == {"su"}
    assert load_dataset(path, lang="su").lang_from == ["row"] * 3


def test_a_row_lang_that_contradicts_lang_or_is_no_tag_is_located(tmp_path: Path) -> None:
    rows = _csqa_rows(2)
    path = tmp_path / "mixed.jsonl"
    rows[1]["lang"] = "id"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    data = load_dataset(path, lang="id")
    assert [i.lang for i in data.items] == ["id", "id"] and data.lang_from == ["flag", "row"]
    with pytest.raises(DataValidationError, match=r"mixed\.jsonl:2: lang: is 'id', but lang='su' was asked for"):
        load_dataset(path, lang="su")
    rows[1]["lang"] = "not a tag!"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    with pytest.raises(DataValidationError, match=r"mixed\.jsonl:2: lang: .*not a BCP-47"):
        load_dataset(path)


def test_a_jcommonsenseqa_rows_lang_field_is_read(tmp_path: Path) -> None:
    lines = (FIXTURES / "jcommonsenseqa" / "valid_sample.jsonl").read_text(encoding="utf-8").splitlines()
    rows = [json.loads(line) for line in lines[:2]]
    rows[0]["lang"] = "zh"
    path = tmp_path / "j.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    data = load_dataset(path)
    assert [i.lang for i in data.items] == ["zh", "ja"] and data.lang_from == ["row", "format"]
