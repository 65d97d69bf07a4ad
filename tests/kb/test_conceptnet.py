"""The ConceptNet reader: fields from URIs, malformed lines, strict mode, atomic imports."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from senseforge.errors import ConfigError, DataValidationError
from senseforge.kb import conceptnet
from senseforge.kb.conceptnet import import_dump, open_edges, read_report, stats

INFO = '{"dataset": "/d/conceptnet/4/en", "weight": 2.5}'
GOOD = [
    f"/a/[/r/AtLocation/,/c/en/revolving_door/n/wn/artifact/,/c/en/bank/]\t/r/AtLocation\t"
    f"/c/en/revolving_door/n/wn/artifact\t/c/en/bank\t{INFO}",
    f"/a/[/r/UsedFor/,/c/ja/包丁/,/c/ja/料理/]\t/r/UsedFor\t/c/ja/包丁\t/c/ja/料理\t{INFO}",
    f"/a/[/r/Synonym/,/c/en/bank/n/,/c/fr/banque/]\t/r/Synonym\t/c/en/bank/n\t/c/fr/banque\t{INFO}",
    f"/a/[/r/ExternalURL/,/c/en/bank/,http://x/]\t/r/ExternalURL\t/c/en/bank\thttp://dbpedia.org/resource/Bank\t{INFO}",
]


def write_dump(path: Path, lines: list[bytes]) -> Path:
    data = b"\n".join(lines) + b"\n"
    if path.suffix == ".gz":
        path.write_bytes(gzip.compress(data))
    else:
        path.write_bytes(data)
    return path


def test_fields_are_split_from_uris(tmp_path: Path) -> None:
    dump = write_dump(tmp_path / "d.csv.gz", [line.encode() for line in GOOD])
    report = import_dump(dump, tmp_path / "kb")
    assert report.rows_kept == 2 and report.malformed == 0  # cross-language and non-concept edges are not kept
    with open_edges(tmp_path / "kb") as con:
        rows = con.execute(
            "SELECT relation, start_lang, start_text, start_pos, start_sense, end_text, weight, dataset "
            "FROM edges ORDER BY uri"
        ).fetchall()
    assert rows[0] == ("AtLocation", "en", "revolving door", "n", "wn/artifact", "bank", 2.5, "/d/conceptnet/4/en")
    assert rows[1][:3] == ("UsedFor", "ja", "包丁")


def test_language_and_relation_filters(tmp_path: Path) -> None:
    dump = write_dump(tmp_path / "d.csv", [line.encode() for line in GOOD])
    only_ja = import_dump(dump, tmp_path / "a", langs=["ja", "id"])
    assert only_ja.rows_kept == 1 and only_ja.by_language == {"ja": 1}
    assert only_ja.missing_languages() == ["id"]
    assert import_dump(dump, tmp_path / "b", relations=["AtLocation"]).rows_kept == 1
    info = stats(tmp_path / "b")
    assert info["languages"] == [("en", 1)] and info["relations"] == [("AtLocation", 1)]


def test_malformed_lines_are_counted_located_and_skipped(tmp_path: Path) -> None:
    lines = [
        GOOD[0].encode(),
        b"only\ttwo columns",
        b"/a/x\t/r/IsA\t/c/en/a_b\t/c/en/c_d\t{not json",
        b"/a/y\t/r/IsA\t/c/en/caf\xe9\t/c/en/b\t" + INFO.encode(),
        GOOD[1].encode(),
        b"/a/z\t/r/IsA\t/c/en/a\t/c/en/b\t{}\textra",
    ]
    for name in ("d.csv", "d.csv.gz"):
        dump = write_dump(tmp_path / name, lines)
        report = import_dump(dump, tmp_path / f"kb-{name}")
        assert report.rows_kept == 2
        assert report.malformed == 4
        assert [bad.line for bad in report.examples] == [2, 3, 4, 6]
        assert "not valid JSON" in report.examples[1].reason
        assert read_report(tmp_path / f"kb-{name}").malformed == 4


def test_strict_makes_the_first_bad_line_fatal_and_keeps_the_old_store(tmp_path: Path) -> None:
    store = tmp_path / "kb"
    import_dump(write_dump(tmp_path / "good.csv", [GOOD[0].encode()]), store)
    bad = write_dump(tmp_path / "bad.csv", [GOOD[1].encode(), b"/a/x\t/r/IsA\t/c/en/a\t/c/en/b\t{oops"])
    with pytest.raises(DataValidationError, match=r"bad\.csv:2: info column is not valid JSON"):
        import_dump(bad, store, strict=True)
    assert read_report(store).rows_kept == 1 and read_report(store).source.endswith("good.csv")
    assert not list(store.glob(".*.tmp")) and len(list(store.glob("edges-*.parquet"))) == 1


def test_interrupted_import_leaves_the_previous_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = tmp_path / "kb"
    import_dump(write_dump(tmp_path / "first.csv", [GOOD[0].encode()]), store)

    def interrupted(*_: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(conceptnet.os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        import_dump(write_dump(tmp_path / "second.csv", [GOOD[1].encode()]), store)
    monkeypatch.undo()
    assert read_report(store).source.endswith("first.csv")
    with open_edges(store) as con:
        assert con.execute("SELECT start_text FROM edges").fetchall() == [("revolving door",)]
    assert not list(store.glob(".*.tmp"))


def test_kill_9_mid_import_leaves_a_readable_store(tmp_path: Path) -> None:
    store = tmp_path / "kb"
    import_dump(write_dump(tmp_path / "first.csv", [GOOD[0].encode()]), store)
    rows = [
        f"/a/[{i}]\t/r/AtLocation\t/c/en/thing_{i % 5000}\t/c/en/place_{i % 700}\t{INFO}".encode()
        for i in range(400_000)
    ]
    big = write_dump(tmp_path / "big.csv.gz", rows)
    env = {**os.environ}
    child = subprocess.Popen(
        [sys.executable, "-m", "senseforge", "kb", "import", str(big), "--store", str(store)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(1.0)
    was_running = child.poll() is None
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)
    report = read_report(store)
    with open_edges(store) as con:
        count = con.execute("SELECT count(*) FROM edges").fetchone()
    assert count is not None
    # either the old store, intact, or the new one, complete — never a mix; a kill that lands
    # after the pointer was replaced but before the process exited leaves the new one
    if report.source.endswith("first.csv"):
        assert was_running and count[0] == 1
    else:
        assert report.source.endswith("big.csv.gz") and count[0] == 400_000
    assert not list(store.glob("*.tmp")) or was_running  # a killed process may leave a temp file
    import_dump(write_dump(tmp_path / "third.csv", [GOOD[1].encode()]), store)  # and the next import works
    assert read_report(store).source.endswith("third.csv")


def test_missing_dump_and_missing_store_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="dump not found"):
        import_dump(tmp_path / "nope.csv.gz", tmp_path / "kb")
    with pytest.raises(ConfigError, match="kb import"):
        stats(tmp_path / "empty")


def test_bundled_dumps_import(tmp_path: Path) -> None:
    sample = import_dump("sample", tmp_path / "s")
    assert sample.rows_kept > 200 and sample.malformed == 0
    demo = import_dump("demo", tmp_path / "d")
    assert demo.malformed == 0
    with open_edges(tmp_path / "d") as con:
        datasets = {row[0] for row in con.execute("SELECT DISTINCT dataset FROM edges").fetchall()}
    assert datasets == {"/d/senseforge-demo"}  # labelled as ours, not ConceptNet
    assert json.loads((tmp_path / "d" / "kb.json").read_text())["report"]["rows_kept"] == demo.rows_kept


def test_progress_is_reported_and_ends_at_100(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    seen: list[float] = []
    import_dump("sample", tmp_path / "kb", progress=seen.append)
    assert seen and seen[-1] == 100.0 and all(0 <= s <= 100 for s in seen)
    assert capfd.readouterr().out == ""  # DuckDB draws no bar of its own


REASONS = Path(__file__).parents[1] / "fixtures" / "conceptnet" / "reasons.csv"


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file of a folder, by name, with its bytes."""
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir()) if path.is_file()}


def test_every_line_left_out_is_counted_by_its_reason(tmp_path: Path) -> None:
    report = import_dump(REASONS, tmp_path / "kb", langs=["en"], relations=["AtLocation"])
    assert report.lines_read == 7 and report.rows_kept == 1 and report.malformed == 2
    assert report.left_out == {"non_concept": 1, "cross_lingual": 1, "other_language": 1, "other_relation": 1}
    assert report.summary() == (
        "read 7 lines · kept 1 edges · left out: non-concept nodes 1, cross-lingual 1, other languages 1, "
        "other relations 1 · malformed 2"
    )
    assert [m.line for m in report.examples] == [6, 7]
    assert read_report(tmp_path / "kb").left_out == report.left_out  # kept in kb.json
    with open_edges(tmp_path / "kb") as con:
        assert con.execute("SELECT start_text, end_text FROM edges").fetchall() == [("knife", "kitchen")]
    # without filters only the malformed lines and the two edges that are never kept are left out
    everything = import_dump(REASONS, tmp_path / "all")
    assert everything.rows_kept == 3 and everything.left_out == {"non_concept": 1, "cross_lingual": 1}


def test_an_import_that_keeps_no_edge_leaves_the_old_store_byte_identical(tmp_path: Path) -> None:
    store = tmp_path / "kb"
    import_dump(REASONS, store)
    before = snapshot(store)
    comma = tmp_path / "comma.csv"
    comma.write_text("/a/1,/r/IsA,/c/en/a,/c/en/b,{}\n/a/2,/r/IsA,/c/en/c,/c/en/d,{}\n", encoding="utf-8")
    with pytest.raises(DataValidationError, match="tab-separated") as refused:
        import_dump(comma, store)
    assert "read 2 lines · kept 0 edges" in str(refused.value) and "--allow-empty" in str(refused.value)
    with pytest.raises(DataValidationError, match=r"left out: .*other languages 3 .*check --lang xx"):
        import_dump(REASONS, store, langs=["xx"])
    assert snapshot(store) == before  # nothing added, nothing removed, nothing rewritten


def test_allow_empty_replaces_the_store_with_an_empty_one(tmp_path: Path) -> None:
    store = tmp_path / "kb"
    import_dump(REASONS, store)
    report = import_dump(REASONS, store, langs=["xx"], allow_empty=True)
    assert report.rows_kept == 0 and read_report(store).langs == ["xx"]
    with open_edges(store) as con:
        assert con.execute("SELECT count(*) FROM edges").fetchone() == (0,)
    assert len(list(store.glob("edges-*.parquet"))) == 1 and not list(store.glob(".*.tmp"))


def test_identity_names_the_edges_file_by_its_sha256(tmp_path: Path) -> None:
    from senseforge.store.db import sha256_file

    store = tmp_path / "kb"
    import_dump(REASONS, store, langs=["en"])
    found = conceptnet.identity(store, digest=lambda _: pytest.fail("the recorded hash is used"))
    edges = conceptnet.edges_path(store)
    assert found["sha256"] == sha256_file(edges) and found["size"] == edges.stat().st_size
    assert found["edges"] == edges.name and found["source"] == str(REASONS) and found["langs"] == ["en"]
    assert found["imported_at"].endswith("+00:00")
    # a store written before the hash was recorded: computed (by the digest given)
    pointer = store / "kb.json"
    payload = json.loads(pointer.read_text())
    del payload["sha256"], payload["size"]
    pointer.write_text(json.dumps(payload))
    assert (
        conceptnet.identity(store, digest=lambda path: f"digest of {path.name}")["sha256"] == f"digest of {edges.name}"
    )


def test_counts_by_reason_hold_over_a_dump_read_in_many_chunks(tmp_path: Path) -> None:
    lines = REASONS.read_bytes().splitlines()
    dump = write_dump(tmp_path / "many.csv.gz", lines * 20_000)  # 140,000 lines: many chunks, every thread
    report = import_dump(dump, tmp_path / "kb", langs=["en"], relations=["AtLocation"])
    assert report.lines_read == 140_000 and report.rows_kept == 20_000 and report.malformed == 40_000
    assert report.left_out == {reason: 20_000 for reason in conceptnet.LEFT_OUT}
    assert report.by_language == {"en": 20_000}
    with open_edges(tmp_path / "kb") as con:
        described = con.execute(f"DESCRIBE SELECT * FROM '{conceptnet.edges_path(tmp_path / 'kb')}'").fetchall()
        assert con.execute("SELECT count(*) FROM edges").fetchone() == (20_000,)
    assert [row[0] for row in described] == [
        "uri", "relation", "start_lang", "start_text", "start_pos", "start_sense",
        "end_lang", "end_text", "end_pos", "end_sense", "weight", "dataset", "ok",
    ]  # fmt: skip
    names = {p.name for p in (tmp_path / "kb").iterdir()}
    assert names == {".duckdb-tmp", "kb.json", conceptnet.edges_path(tmp_path / "kb").name}  # no scan left behind
