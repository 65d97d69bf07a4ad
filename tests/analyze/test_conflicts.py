"""``analyze conflicts``: counts recomputed by hand on the released Human_Gen files, our own shape, anomalies, CLI."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from senseforge.analyze.conflicts import POOLED, read_conflicts
from senseforge.cli.main import app, main
from senseforge.errors import ConfigError, DataValidationError


def _shared_data() -> Path:
    here = Path(__file__).resolve().parents[3] / "shared" / "data"
    return here if here.is_dir() else Path("/work/shared/data")


HUMAN_GEN = _shared_data() / "id-csqa" / "human_gen"
FILES = {"id": HUMAN_GEN / "ind" / "filtered_test.json", "su": HUMAN_GEN / "sun" / "filtered_test.json"}
needs_release = pytest.mark.skipif(
    not all(path.is_file() for path in FILES.values()),
    reason=f"Putri et al.'s Human_Gen files are not in {HUMAN_GEN}",
)
runner = CliRunner()


def _by_hand(rows: list[dict[str, Any]]) -> dict[str, list[int]]:
    """[answers, differing, created, conflicted created, differing on created] per annotator, in plain Python."""
    pool = {w for row in rows for w in row["answers"]}
    out: dict[str, list[int]] = {w: [0, 0, 0, 0, 0] for w in pool}
    for row in rows:
        (creator,) = pool - set(row["answers"])
        wrong = [w for w, a in row["answers"].items() if a != row["answer_creator"]]
        for w in row["answers"]:
            out[w][0] += 1
        for w in wrong:
            out[w][1] += 1
        out[creator][2] += 1
        out[creator][3] += bool(wrong)
        out[creator][4] += len(wrong)
    return out


@needs_release
def test_counts_equal_a_recount_by_hand_on_the_released_files() -> None:
    result = read_conflicts(str(HUMAN_GEN))
    pooled: dict[str, Counter[int]] = {}
    for lang, path in FILES.items():
        expected = _by_hand(json.loads(path.read_text(encoding="utf-8")))
        got = {
            e.annotator: [e.answers, e.differing, e.created, e.conflicted_created, e.differing_on_created]
            for e in result.annotators
            if e.lang == lang
        }
        assert got == expected
        for who, counts in expected.items():
            pooled.setdefault(who, Counter()).update(dict(enumerate(counts)))
    pooled_got = {
        e.annotator: [e.answers, e.differing, e.created, e.conflicted_created, e.differing_on_created]
        for e in result.annotators
        if e.lang == POOLED
    }
    assert pooled_got == {who: [c[i] for i in range(5)] for who, c in pooled.items()}
    # the figures docs/concepts/analyses.md quotes
    w6 = result.of("id", "W6")
    assert w6 is not None and (w6.differing, w6.answers, w6.conflicted_created, w6.created) == (144, 1250, 6, 248)


@needs_release
def test_the_sundanese_anomalies_are_counted_not_fatal() -> None:
    rows = json.loads(FILES["su"].read_text(encoding="utf-8"))
    odd = Counter(v for row in rows for v in row["answers_uncertainty"].values() if v not in ("certain", "uncertain"))
    empty = sum(flag == "" for row in rows for flags in row["option_ambiguity"].values() for flag in flags)
    result = read_conflicts(str(FILES["su"]))
    (summary,) = result.langs
    assert summary.rows == summary.counted == len(rows)
    assert summary.anomalies.counts["uncertainty-value"] == sum(odd.values()) == 738
    assert dict(summary.anomalies.values["uncertainty-value"]) == dict(odd) == {"clear": 668, "ambiguous": 70}
    assert summary.anomalies.counts["option-flag-empty"] == empty == 2
    assert "option_ambiguity.W6[4]" in summary.anomalies.examples["option-flag-empty"][0]


def _ours(item_id: str, creator: str, answers: dict[str, str], gold: str = "A", **extra: Any) -> dict[str, Any]:
    """A row in the shape the human-gen recipe writes (``creator`` and ``lang`` included)."""
    row: dict[str, Any] = {
        "id": item_id,
        "question": "Apa?",
        "choices": {"label": ["A", "B", "C"], "text": ["a", "b", "c"]},
        "answer_creator": gold,
        "answer_majority": gold,
        "answers": answers,
        "answers_uncertainty": {w: "certain" for w in answers},
        "question_ambiguity": {w: "clear" for w in answers},
        "option_ambiguity": {w: ["clear", "clear", "clear"] for w in answers},
        "reason": {w: "" for w in answers},
        "creator": creator,
        "lang": "id",
    }
    row.update(extra)
    return row


def _run_dir(tmp_path: Path, rows: list[dict[str, Any]]) -> Path:
    run = tmp_path / "human-gen-id"
    (run / "id" / "dataset").mkdir(parents=True)
    (run / "manifest.json").write_text("{}", encoding="utf-8")
    text = "".join(json.dumps(row) + "\n" for row in rows)
    (run / "id" / "dataset" / "test.jsonl").write_text(text, encoding="utf-8")
    return run


def test_our_run_output_uses_the_creator_key_and_reports_anomalies(tmp_path: Path) -> None:
    rows = [
        _ours("i1", "ana", {"budi": "A", "citra": "B"}),
        _ours("i2", "budi", {"ana": "C", "citra": "C"}, gold="C"),
        _ours("i3", "citra", {"ana": "B", "budi": "B"}, answers_uncertainty={"ana": "clear", "budi": "certain"}),
        _ours("i4", "ana", {"ana": "A", "budi": "", "citra": "A"}),  # the creator answered; one blank answer
        {k: v for k, v in _ours("i5", "budi", {"ana": "A"}).items() if k != "reason"},
    ]
    run = _run_dir(tmp_path, rows)
    result = read_conflicts(str(run))
    ana, budi, citra = (result.of("id", who) for who in ("ana", "budi", "citra"))
    assert ana is not None and budi is not None and citra is not None
    assert (ana.answers, ana.differing, ana.created, ana.conflicted_created, ana.differing_on_created) == (
        3,
        1,
        2,
        1,
        1,
    )
    assert (budi.answers, budi.differing, budi.created, budi.conflicted_created) == (2, 1, 2, 0)
    assert (citra.answers, citra.differing, citra.created, citra.conflicted_created, citra.answers_on_created) == (
        3,
        1,
        1,
        1,
        2,
    )
    anomalies = result.langs[0].anomalies
    assert anomalies.counts == Counter(
        {"uncertainty-value": 1, "creator-answered": 1, "empty-answer": 1, "missing-key": 1}
    )
    assert result.langs[0].pools == {str(run / "id" / "dataset" / "test.jsonl"): ["ana", "budi", "citra"]}


def test_the_creator_is_inferred_from_the_pool_or_reported_unknown(tmp_path: Path) -> None:
    rows = [
        {"id": "orig_h_sun_1", "answer_creator": "A", "answers": {"W2": "A", "W3": "B"}},
        {"id": "orig_h_sun_2", "answer_creator": "B", "answers": {"W1": "B", "W3": "B"}},
        {"id": "orig_h_sun_3", "answer_creator": "B", "answers": {"W3": "A"}},  # two pool members missing
        {"id": "orig_h_sun_4", "answers": {"W1": "A", "W2": "A"}},  # no creator answer: skipped
    ]
    path = tmp_path / "released.json"
    path.write_text(json.dumps(rows), encoding="utf-8")
    result = read_conflicts(str(path))
    (summary,) = result.langs
    assert summary.lang == "su" and summary.rows == 4 and summary.counted == 3
    w1, w2, w3 = (result.of("su", who) for who in ("W1", "W2", "W3"))
    assert w1 is not None and w2 is not None and w3 is not None
    assert (w1.created, w1.conflicted_created, w2.created, w3.created) == (1, 1, 1, 0)
    assert (w3.answers, w3.differing) == (3, 2)
    assert summary.anomalies.counts["creator-unknown"] == 1
    assert summary.anomalies.counts["no-creator-answer"] == 1
    assert summary.anomalies.counts["missing-key"] == 3 * 4  # three counted rows, four annotation keys absent


def test_cli_writes_json_csv_and_figure(tmp_path: Path) -> None:
    data = _run_dir(tmp_path, [_ours("i1", "ana", {"budi": "A", "citra": "B"})])
    out = tmp_path / "out"
    result = runner.invoke(app, ["analyze", "conflicts", str(data), "--out", str(out)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "citra" in result.output and "no anomalies" in result.output
    doc = json.loads((out / "conflicts.json").read_text(encoding="utf-8"))
    assert doc["analysis"] == "conflicts"
    assert {r["annotator"]: r["differing"] for r in doc["annotators"]} == {"ana": 0, "budi": 0, "citra": 1}
    header = (out / "conflicts.csv").read_text(encoding="utf-8").splitlines()[0]
    assert header.startswith("lang,annotator,answers,differing")
    assert (out / "conflicts.svg").read_text(encoding="utf-8").lstrip().startswith("<?xml")


def test_bad_input_is_one_located_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plain = tmp_path / "plain.jsonl"
    plain.write_text(json.dumps({"id": "q", "question": "?", "answer_creator": "A"}) + "\n", encoding="utf-8")
    refused = runner.invoke(app, ["analyze", "conflicts", str(plain), "--out", str(tmp_path / "o")])
    assert isinstance(refused.exception, ConfigError) and "no row has annotators' answers" in str(refused.exception)
    broken = tmp_path / "broken.json"
    broken.write_text('[{"id": 1,}]', encoding="utf-8")
    with pytest.raises(DataValidationError, match=r"broken\.json:1: invalid JSON"):
        read_conflicts(str(broken))
    with pytest.raises(SystemExit) as exited:
        main(["analyze", "conflicts", str(tmp_path / "missing.json"), "--out", str(tmp_path / "o")])
    assert exited.value.code == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "missing.json: no such file or folder" in lines[0]
