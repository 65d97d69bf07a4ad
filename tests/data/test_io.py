"""JSON Lines round trips, atomic writes and located errors."""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from senseforge.data.io import atomic_open, dump_record, iter_jsonl, read_jsonl, read_judgements, write_jsonl
from senseforge.data.schema import (
    AnswerJudgement,
    BinaryExample,
    Choice,
    MCItem,
    Provenance,
    QuestionSet,
    Triple,
    VerifyJudgement,
)
from senseforge.errors import DataValidationError


def _items() -> list[MCItem]:
    return [
        MCItem(
            id="ja-1",
            lang="ja",
            question="電子機器で使用される最も主要な電子回路基板の事をなんと言う？",
            question_concept="基板",
            choices=[Choice(label=x, text=t) for x, t in zip("ABC", ["掲示板", "マザーボード", "まな板"], strict=True)],
            answer="B",
            difficulty="hard",
            category="technology",
            provenance=Provenance(
                recipe="jcommonsenseqa", source_ids=["8939"], model_ids=["mock/echo"], review="human"
            ),
            metadata={"annotators": ["B", "B", "A"], "agreement": 0.67, "nested": {"ok": True, "n": None}},
        ),
        MCItem(
            id="zh-1",
            lang="zh-Hans-CN",
            question="春节时人们通常在门上贴什么？",
            choices=[Choice(label="A", text="春联"), Choice(label="B", text="雨伞")],
            answer=None,  # withheld
        ),
        MCItem(
            id="su-1",
            lang="su",
            question="Di mana biasana urang meuli sangu jeung deungeun-sangu?",
            question_concept="sangu",
            choices=[Choice(label="A", text="warung"), Choice(label="B", text="sawah"), Choice(label="C", text="")],
            answer="A",
            difficulty="easy",
            metadata={"quote": 'He said "hi"\\n', "line_sep": "a\u2028b\x85c\rd\ne", "emoji": "🍙"},
        ),
    ]


def _write_lines(path: Path, lines: list[str | bytes]) -> Path:
    data = b"".join((x if isinstance(x, bytes) else x.encode("utf-8")) + b"\n" for x in lines)
    path.write_bytes(data)
    return path


def _good_row() -> str:
    return dump_record(_items()[0])


# --- round trips --------------------------------------------------------------------


def test_write_read_round_trip_is_exact(tmp_path: Path) -> None:
    items = _items()
    path = tmp_path / "items.jsonl"
    assert write_jsonl(path, items) == 3
    back = read_jsonl(path, MCItem)
    assert back == items
    assert [b.model_dump() for b in back] == [i.model_dump() for i in items]
    assert back[1].answer is None
    assert back[0].metadata["nested"] == {"ok": True, "n": None}
    assert back[2].metadata["line_sep"] == "a\u2028b\x85c\rd\ne"

    # re-writing what was read gives the same bytes
    again = tmp_path / "again.jsonl"
    write_jsonl(again, back)
    assert again.read_bytes() == path.read_bytes()


def test_written_file_is_one_utf8_line_per_record(tmp_path: Path) -> None:
    path = tmp_path / "items.jsonl"
    write_jsonl(path, _items())
    raw = path.read_bytes()
    assert raw.endswith(b"\n")
    assert b"\r\n" not in raw
    lines = raw.split(b"\n")[:-1]
    assert len(lines) == 3
    # non-ASCII text is stored as UTF-8, not as \u escapes
    assert "マザーボード".encode() in lines[0]
    assert "春联".encode() in lines[1]
    assert [json.loads(line)["id"] for line in lines] == ["ja-1", "zh-1", "su-1"]
    assert json.loads(lines[1])["answer"] is None


@pytest.mark.parametrize(
    "records",
    [
        [
            QuestionSet(
                id="qs",
                lang="ja",
                anchor="犬",
                relation="IsA",
                direction="backward",
                targets=["柴犬", "秋田犬", "プードル"],
                source_uris=["/a/[/r/IsA/,/c/ja/柴犬/,/c/ja/犬/]"],
                source_lang="ja",
            )
        ],
        [
            BinaryExample(
                id="b1",
                context_id="c1",
                context="我把冰淇淋放在车里一下午。",
                target="It melted.",
                label=True,
                task="mt-zh-en",
                lang="zh",
                knowledge=[Triple(head="冰淇淋", relation="HasProperty", tail="融化", lang="zh", dimension="physical")],
                metadata={"pair": ["zh", "en"]},
            )
        ],
        [
            AnswerJudgement(
                item_id="q1",
                annotator="ann-1",
                choice="B",
                certain=False,
                flags=["ambiguous-question"],
                reason="Pilihan B jeung C sarua.",
                created_at=datetime(2024, 5, 1, 12, 30, tzinfo=UTC),
            ),
            VerifyJudgement(
                item_id="q2",
                annotator="openai/gpt-4o",
                accept=True,
                created_at=datetime(2024, 5, 1, 21, 0, tzinfo=timezone(timedelta(hours=9))),
            ),
            VerifyJudgement(item_id="q3", annotator="ann-2", created_at=datetime(2024, 1, 2, 3, 4, 5, 678)),
        ],
    ],
    ids=["question-set", "binary-example", "judgement"],
)
def test_other_records_round_trip(tmp_path: Path, records: list[BaseModel]) -> None:
    path = tmp_path / "records.jsonl"
    write_jsonl(path, records)
    judged = isinstance(records[0], AnswerJudgement | VerifyJudgement)
    back = read_judgements(path) if judged else read_jsonl(path, type(records[0]))
    assert back == records
    write_jsonl(tmp_path / "again.jsonl", back)
    assert (tmp_path / "again.jsonl").read_bytes() == path.read_bytes()


def test_iter_jsonl_streams_lazily(tmp_path: Path) -> None:
    path = _write_lines(tmp_path / "file.jsonl", [_good_row(), "not json"])
    stream = iter_jsonl(path, MCItem)
    assert next(stream).id == "ja-1"  # the bad second line is not read yet
    with pytest.raises(DataValidationError, match=r"file\.jsonl:2: invalid JSON"):
        next(stream)


def test_write_jsonl_empty_and_count(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "dir" / "empty.jsonl"  # missing folders are created
    assert write_jsonl(path, []) == 0
    assert path.read_bytes() == b""
    assert read_jsonl(path, MCItem) == []


# --- atomic writes ------------------------------------------------------------------


def _failing(records: list[MCItem], after: int) -> Iterator[MCItem]:
    for n, record in enumerate(records):
        if n == after:
            raise RuntimeError("boom midway")
        yield record


def test_atomic_write_keeps_old_content_on_failure(tmp_path: Path) -> None:
    path = tmp_path / "items.jsonl"
    write_jsonl(path, _items()[:1])
    before = path.read_bytes()
    with pytest.raises(RuntimeError, match="boom midway"):
        write_jsonl(path, _failing(_items(), after=2))
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["items.jsonl"]  # no temp file left


def test_atomic_write_to_new_file_leaves_nothing_on_failure(tmp_path: Path) -> None:
    path = tmp_path / "new.jsonl"
    with pytest.raises(RuntimeError):
        write_jsonl(path, _failing(_items(), after=1))
    assert list(tmp_path.iterdir()) == []


def test_atomic_write_replaces_content(tmp_path: Path) -> None:
    path = tmp_path / "items.jsonl"
    write_jsonl(path, _items())
    write_jsonl(path, _items()[2:])
    assert [i.id for i in read_jsonl(path, MCItem)] == ["su-1"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["items.jsonl"]


def test_atomic_open_binary_and_bad_mode(tmp_path: Path) -> None:
    path = tmp_path / "blob.bin"
    with atomic_open(path, "wb") as handle:
        handle.write(b"\x00\xff")
    assert path.read_bytes() == b"\x00\xff"
    with pytest.raises(ValueError, match="'w' and 'wb' only"), atomic_open(path, "a"):
        pass
    assert path.read_bytes() == b"\x00\xff"


@pytest.mark.skipif(os.name == "nt", reason="POSIX permission bits")
@pytest.mark.parametrize("umask", [0o022, 0o002, 0o077])
def test_atomic_files_get_the_mode_a_plain_open_gives(tmp_path: Path, umask: int) -> None:
    """Not mkstemp's owner-only 0o600: a lab sharing the folder must read the outputs."""
    old = os.umask(umask)
    try:
        with open(tmp_path / "plain.txt", "w") as handle:
            handle.write("x")
        with atomic_open(tmp_path / "atomic.txt") as handle:
            handle.write("x")
        write_jsonl(tmp_path / "items.jsonl", _items())
    finally:
        os.umask(old)
    expected = 0o666 & ~umask
    assert stat.S_IMODE((tmp_path / "plain.txt").stat().st_mode) == expected
    assert stat.S_IMODE((tmp_path / "atomic.txt").stat().st_mode) == expected
    assert stat.S_IMODE((tmp_path / "items.jsonl").stat().st_mode) == expected


# --- located errors -----------------------------------------------------------------


def _row_with(**changes: Any) -> str:
    row = json.loads(_good_row())
    row.update(changes)
    return json.dumps(row, ensure_ascii=False)


@pytest.mark.parametrize(
    ("bad_row", "field", "problem"),
    [
        (
            _row_with(choices=[{"label": "", "text": "x"}, {"label": "B", "text": "y"}], answer=None),
            "choices.0.label",
            "at least 1 character",
        ),
        (_row_with(answer=3), "answer", "valid string"),
        (_row_with(lang="english"), "lang", "not a BCP-47 language tag"),
        (_row_with(answerKey="A"), "answerKey", "Extra inputs are not permitted"),
        (_row_with(provenance={"recipe": 1}), "provenance.recipe", "valid string"),
    ],
    ids=["empty-label", "answer-type", "lang", "extra-field", "nested"],
)
def test_bad_row_is_located(tmp_path: Path, bad_row: str, field: str, problem: str) -> None:
    path = _write_lines(tmp_path / "file.jsonl", [_good_row(), _good_row(), bad_row, _good_row()])
    with pytest.raises(DataValidationError) as exc:
        read_jsonl(path, MCItem)
    message = str(exc.value)
    assert message.startswith(f"{path}:3: {field}: ")
    assert "file.jsonl:3" in message
    assert problem in message


def test_model_validator_error_is_located(tmp_path: Path) -> None:
    path = _write_lines(tmp_path / "file.jsonl", [_good_row(), _good_row(), _row_with(answer="Z")])
    with pytest.raises(DataValidationError, match=r"file\.jsonl:3: .*answer 'Z' is not one of the choice labels"):
        read_jsonl(path, MCItem)


def test_error_counts_further_problems(tmp_path: Path) -> None:
    path = _write_lines(tmp_path / "file.jsonl", ['{"id": "", "lang": "xx_YY"}'])
    with pytest.raises(DataValidationError, match=r"file\.jsonl:1: id: .*\(\d+ more\)$"):
        read_jsonl(path, MCItem)


@pytest.mark.parametrize(
    ("bad_line", "pattern"),
    [
        ('{"id": "x", ', r"file\.jsonl:3: invalid JSON at column 13: a key in double quotes was expected here"),
        (b'{"id": "caf\xe9"}', r"file\.jsonl:3: not UTF-8"),
        (b"\xff\xfe{}", r"file\.jsonl:3: not UTF-8"),
        ("[1, 2, 3]", r"file\.jsonl:3: expected a JSON object, got list"),
        ('"just a string"', r"file\.jsonl:3: expected a JSON object, got str"),
        ("null", r"file\.jsonl:3: expected a JSON object, got NoneType"),
    ],
    ids=["truncated-json", "latin-1", "utf-16-bom", "array", "string", "null"],
)
def test_unreadable_lines_are_located(tmp_path: Path, bad_line: str | bytes, pattern: str) -> None:
    path = _write_lines(tmp_path / "file.jsonl", [_good_row(), _good_row(), bad_line])
    with pytest.raises(DataValidationError, match=pattern):
        read_jsonl(path, MCItem)


def test_blank_lines_are_skipped_but_counted(tmp_path: Path) -> None:
    path = _write_lines(tmp_path / "file.jsonl", ["", _good_row(), "   ", "\t", _good_row(), "", "{oops"])
    with pytest.raises(DataValidationError, match=r"file\.jsonl:7: invalid JSON"):
        read_jsonl(path, MCItem)
    path = _write_lines(tmp_path / "ok.jsonl", ["", _good_row(), "   ", _good_row(), ""])
    assert [i.id for i in read_jsonl(path, MCItem)] == ["ja-1", "ja-1"]


def test_crlf_lines_are_read(tmp_path: Path) -> None:
    path = tmp_path / "crlf.jsonl"
    path.write_bytes((_good_row() + "\r\n\r\n" + _good_row() + "\r\n").encode())
    assert read_jsonl(path, MCItem) == [_items()[0], _items()[0]]


def test_missing_file_is_reported(tmp_path: Path) -> None:
    with pytest.raises(DataValidationError, match=r"nope\.jsonl: cannot read"):
        read_jsonl(tmp_path / "nope.jsonl", MCItem)


# --- property: any valid item survives a round trip ------------------------------------

_TEXT = st.text(st.characters(codec="utf-8"), max_size=12)
_LANGS = st.sampled_from(["en", "ja", "zh-Hant-TW", "zh-Hans", "su", "id", "fr", "pt-BR", "es-419", "sr-Latn-RS"])
_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53), max_value=2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | _TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
    max_leaves=6,
)


@st.composite
def mc_items(draw: st.DrawFn) -> MCItem:
    labels = draw(
        st.lists(st.text(st.characters(codec="utf-8"), min_size=1, max_size=3), min_size=2, max_size=5, unique=True)
    )
    return MCItem(
        id=draw(st.text(st.characters(codec="utf-8"), min_size=1, max_size=10)),
        lang=draw(_LANGS),
        question=draw(_TEXT),
        question_concept=draw(st.none() | _TEXT),
        choices=[Choice(label=label, text=draw(_TEXT)) for label in labels],
        answer=draw(st.none() | st.sampled_from(labels)),
        difficulty=draw(st.sampled_from([None, "easy", "hard"])),
        category=draw(st.none() | _TEXT),
        provenance=Provenance(
            recipe=draw(st.none() | _TEXT),
            source_ids=draw(st.lists(_TEXT, max_size=2)),
            review=draw(st.sampled_from([None, "none", "human", "lm"])),
        ),
        metadata=draw(st.dictionaries(_TEXT, _JSON, max_size=3)),
    )


@pytest.fixture(scope="module")
def property_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # one folder for all examples (a function-scoped tmp_path is not reset between them);
    # each example overwrites the same files, which exercises atomic replacement too
    return tmp_path_factory.mktemp("property")


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(items=st.lists(mc_items(), min_size=1, max_size=4))
def test_round_trip_property(property_dir: Path, items: list[MCItem]) -> None:
    path = property_dir / "items.jsonl"
    assert write_jsonl(path, items) == len(items)
    back = read_jsonl(path, MCItem)
    assert back == items
    again = property_dir / "again.jsonl"
    write_jsonl(again, back)
    assert again.read_bytes() == path.read_bytes()
    assert sorted(p.name for p in property_dir.iterdir()) == ["again.jsonl", "items.jsonl"]  # no temp files


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('{"q": "a\tb"}', r"column 9: a tab \(U\+0009\) inside a string: write it escaped, as \\t"),
        ('{"q": "a\x01b"}', r"column 9: a control character \(U\+0001\) inside a string: write it escaped, as \\u0001"),
        ('{"q": "ab}', "column 7: a string starts here and is never closed"),
        ('{"q": 1,}', r"column 9: a key in double quotes was expected here \(a comma ends no object\)"),
        ('{"q" 1}', "column 6: a colon after the key was expected here"),
        ('{"q": }', "column 7: a value was expected here"),
        ('{"q": 1} x', "column 10: more text after the JSON value ends"),
    ],
    ids=["tab", "control", "unclosed", "trailing-comma", "colon", "value", "extra"],
)
def test_a_json_syntax_error_is_said_in_words_with_its_column(tmp_path: Path, text: str, said: str) -> None:
    """The parser's own message ("Invalid control character at") never shows, nor a doubled "at"."""
    path = _write_lines(tmp_path / "file.jsonl", [_good_row(), text])
    with pytest.raises(DataValidationError) as raised:
        read_jsonl(path, MCItem)
    message = str(raised.value)
    assert message.startswith(f"{path}:2: invalid JSON at column ")
    assert re.search(said, message), message
    assert " at at " not in message and "Expecting" not in message and "Invalid" not in message
