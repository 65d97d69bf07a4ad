"""``senseforge kb`` end to end in real processes."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path


def run_cli(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SENSEFORGE_HOME": str(home), "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "senseforge", "kb", *args], capture_output=True, text=True, env=env, timeout=120
    )


def test_import_stats_and_question_sets(senseforge_home: Path, tmp_path: Path) -> None:
    imported = run_cli("import", "demo", home=senseforge_home)
    assert imported.returncode == 0, imported.stderr
    assert "skipped 0 malformed" in imported.stderr
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
