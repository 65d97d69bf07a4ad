"""``senseforge kb`` end to end in real processes."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path


def run_cli(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SENSEFORGE_HOME": str(home), "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "senseforge", "kb", *args], capture_output=True, text=True, env=env, timeout=120
    )


def test_import_stats_and_question_sets(senseforge_home: Path, tmp_path: Path) -> None:
    imported = run_cli("import", "demo", home=senseforge_home)
    assert imported.returncode == 0, imported.stderr
    assert "· malformed 0 ·" in imported.stderr
    stats = run_cli("stats", home=senseforge_home)
    assert stats.returncode == 0 and "en" in stats.stdout and "AtLocation" in stats.stdout
    out = tmp_path / "qs.jsonl"
    extracted = run_cli(
        "question-sets", "--lang", "ja", "--n", "40", "--seed", "3", "--out", str(out), home=senseforge_home
    )
    assert extracted.returncode == 0, extracted.stderr
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 40 and all(r["lang"] == "ja" and len(r["targets"]) == 3 for r in rows)
    assert "triples synonym" in extracted.stderr and "wrote 40 question sets" in extracted.stderr


def test_malformed_lines_reported_with_line_numbers_and_strict_fails(senseforge_home: Path, tmp_path: Path) -> None:
    dump = tmp_path / "d.csv.gz"
    good = '/a/1\t/r/AtLocation\t/c/en/knife\t/c/en/kitchen\t{"weight": 1.0}'
    dump.write_bytes(gzip.compress(f"{good}\nbroken line\n{good}\n".encode()))
    lenient = run_cli("import", str(dump), "--langs", "en", home=senseforge_home)
    assert lenient.returncode == 0 and f"{dump}:2: rejected" in lenient.stderr
    strict = run_cli("import", str(dump), "--strict", home=senseforge_home)
    assert strict.returncode != 0 and "Traceback" not in strict.stderr
    assert strict.stderr.strip().startswith(f"error: {dump}:2:")


def test_question_sets_without_a_store_is_one_clear_line(senseforge_home: Path, tmp_path: Path) -> None:
    result = run_cli("question-sets", "--lang", "en", "--out", str(tmp_path / "x.jsonl"), home=senseforge_home)
    assert result.returncode != 0 and result.stderr.count("\n") == 1 and "kb import" in result.stderr


REASONS = Path(__file__).parents[1] / "fixtures" / "conceptnet" / "reasons.csv"


def snapshot(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir()) if path.is_file()}


def test_import_summary_counts_every_line_by_reason(senseforge_home: Path) -> None:
    result = run_cli("import", str(REASONS), "-l", "en", "-r", "AtLocation", home=senseforge_home)
    assert result.returncode == 0, result.stderr
    first = result.stderr.splitlines()[0]
    assert first.startswith(
        "read 7 lines · kept 1 edges · left out: non-concept nodes 1, cross-lingual 1, other languages 1, "
        "other relations 1 · malformed 2 · "
    )
    assert f"{REASONS}:6: info column is not valid JSON" in result.stderr
    stats = run_cli("stats", home=senseforge_home)
    assert "read 7 lines · kept 1 edges" in stats.stdout


def test_import_that_keeps_nothing_is_refused_in_one_line_unless_allowed(senseforge_home: Path, tmp_path: Path) -> None:
    assert run_cli("import", "demo", home=senseforge_home).returncode == 0
    store = senseforge_home / "kb"
    before = snapshot(store)
    comma = tmp_path / "comma.csv"
    comma.write_text("/a/1,/r/IsA,/c/en/a,/c/en/b,{}\n/a/2,/r/IsA,/c/en/c,/c/en/d,{}\n", encoding="utf-8")
    refused = run_cli("import", str(comma), home=senseforge_home)
    assert refused.returncode != 0 and refused.stderr.count("\n") == 1 and "Traceback" not in refused.stderr
    assert refused.stderr.startswith(f"error: {comma}: no edge kept (read 2 lines · kept 0 edges")
    assert "tab-separated" in refused.stderr and "--allow-empty" in refused.stderr
    assert snapshot(store) == before
    forced = run_cli("import", str(comma), "--allow-empty", home=senseforge_home)
    assert forced.returncode == 0, forced.stderr
    assert forced.stderr.startswith("read 2 lines · kept 0 edges · left out: none · malformed 2")


def test_question_sets_says_when_fewer_exist_than_asked(senseforge_home: Path, tmp_path: Path) -> None:
    assert run_cli("import", "demo", home=senseforge_home).returncode == 0
    out = tmp_path / "qs.jsonl"
    result = run_cli("question-sets", "--lang", "en", "--n", "5000", "--out", str(out), home=senseforge_home)
    assert result.returncode == 0, result.stderr
    written = len(out.read_text(encoding="utf-8").splitlines())
    assert 0 < written < 5000
    assert f"asked for 5,000 question sets; the store holds only {written:,} for en\n" in result.stderr
    enough = run_cli("question-sets", "--lang", "en", "--n", "3", "--out", str(out), home=senseforge_home)
    assert "asked for" not in enough.stderr


HELD_IMPORT = """
import os, pathlib, sys, time
from senseforge.kb import conceptnet

original = conceptnet._run_with_progress

def held(con, sql, progress):
    def report(share):  # the scan runs: mark it, then hold, as a long import would
        pathlib.Path(os.environ["SF_TEST_MARK"]).touch()
        while True:
            time.sleep(0.05)
    return original(con, sql, report if progress is not None and ".scan-" in sql else progress)

conceptnet._run_with_progress = held
from senseforge.cli.main import main
sys.argv = ["senseforge", *sys.argv[1:]]
main()
"""


def test_ctrl_c_during_an_import_leaves_the_old_store(senseforge_home: Path, tmp_path: Path) -> None:
    """The import is held once its scan runs (a marked file says so), and Ctrl-C comes then, however fast the machine:
    the store is as it was, the scan's file gone, and the exit code 130."""
    assert run_cli("import", str(REASONS), home=senseforge_home).returncode == 0
    store = senseforge_home / "kb"
    before = snapshot(store)
    mark = tmp_path / "scanning"
    env = {**os.environ, "SENSEFORGE_HOME": str(senseforge_home), "COLUMNS": "200", "SF_TEST_MARK": str(mark)}
    child = subprocess.Popen(
        [sys.executable, "-c", HELD_IMPORT, "kb", "import", str(REASONS)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        # SIGINT as in a terminal, also when this test run inherited it ignored (a script's background job)
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 120  # a bound for a hang, not a pace: the test goes on at the mark
    while not mark.exists() and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert mark.exists(), f"the import never started its scan (exit {child.poll()})"
    child.send_signal(signal.SIGINT)
    _, stderr = child.communicate(timeout=60)
    assert child.returncode == 130, stderr
    assert "interrupted — the store was left as it was" in stderr and "Traceback" not in stderr
    assert snapshot(store) == before  # the scan's temporary file is gone too


def test_question_sets_for_several_languages_in_one_run_are_each_ones_own(
    senseforge_home: Path, tmp_path: Path
) -> None:
    assert run_cli("import", "demo", home=senseforge_home).returncode == 0
    alone = {}
    for lang in ("en", "ja"):
        out = tmp_path / f"alone-{lang}.jsonl"
        result = run_cli(
            "question-sets", "--lang", lang, "--n", "30", "--seed", "2", "--out", str(out), home=senseforge_home
        )
        assert result.returncode == 0, result.stderr
        alone[lang] = out.read_bytes()
    folder = tmp_path / "sets"
    together = run_cli(
        "question-sets", "--lang", "en,ja", "--n", "30", "--seed", "2", "--out", str(folder), home=senseforge_home
    )
    assert together.returncode == 0, together.stderr
    assert {path.name: path.read_bytes() for path in folder.iterdir()} == {
        "en.jsonl": alone["en"],
        "ja.jsonl": alone["ja"],
    }
    named = run_cli(
        "question-sets",
        "--lang",
        "ja,en",
        "--n",
        "30",
        "--seed",
        "2",
        "--out",
        str(tmp_path / "qs-{lang}.jsonl"),
        home=senseforge_home,
    )
    assert named.returncode == 0, named.stderr
    assert (tmp_path / "qs-ja.jsonl").read_bytes() == alone["ja"] and (tmp_path / "qs-en.jsonl").read_bytes() == alone[
        "en"
    ]
    assert "question sets for en" in named.stderr and "question sets for ja" in named.stderr
    mixed = run_cli(
        "question-sets", "--lang", "en,ja", "--source-lang", "ms", "--out", str(folder), home=senseforge_home
    )
    assert mixed.returncode != 0 and "TAG=CODE" in mixed.stderr
