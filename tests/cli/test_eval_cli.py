"""``senseforge eval``: several models × several datasets, one result per pair and a leaderboard."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from senseforge.cli.eval import app
from senseforge.errors import ConfigError
from senseforge.evaluate.records import read_results

FIXTURES = Path(__file__).parent.parent / "fixtures"
CSQA = FIXTURES / "csqa" / "dev_sample.jsonl"
HUMAN_GEN = FIXTURES / "id-csqa" / "human_gen" / "ind" / "filtered_test.json"

runner = CliRunner()

RESPONDER = """
def first(request):
    if hasattr(request, "continuation"):
        return -1.0 * len(request.continuation)
    return "A"
"""


def test_every_model_on_every_dataset_and_a_leaderboard(tmp_path: Path) -> None:
    responder = tmp_path / "first.py"
    responder.write_text(RESPONDER, encoding="utf-8")
    models = ["scripted/echo", f"scripted/{responder}:first"]
    args = ["run", "-d", str(CSQA), "-d", str(HUMAN_GEN), "--out", str(tmp_path / "out"), "--bootstrap", "100"]
    for model in models:
        args += ["-m", model]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    folders = sorted(p.name for p in (tmp_path / "out").iterdir() if p.is_dir())
    assert len(folders) == 4
    pairs = {(r.model.name, r.data.name) for r in (read_results(tmp_path / "out" / f) for f in folders)}
    assert pairs == {(m, d) for m in models for d in ("commonsenseqa", "id-csqa-human-gen-id")}
    board = json.loads((tmp_path / "out" / "leaderboard.json").read_text(encoding="utf-8"))
    # loglik: acc and acc_norm for each of the 2 x 2 pairs
    assert len(board["entries"]) == 8 and len(board["results"]) == 4
    with (tmp_path / "out" / "leaderboard.csv").open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 8 and {row["metric"] for row in rows} == {"acc", "acc_norm"}
    # every entry is the number in its pair's results.json
    written = {(r.model.name, r.data.name): r for r in (read_results(Path(e["path"])) for e in board["results"])}
    for entry in board["entries"]:
        metrics = written[(entry["model"], entry["data"])].results[entry["task"]]
        assert entry["value"] == getattr(metrics, entry["metric"])
    assert "leaderboard" in result.output


def test_one_pair_writes_where_out_says_and_no_leaderboard(tmp_path: Path) -> None:
    result = runner.invoke(app, ["run", "-d", str(CSQA), "-m", "scripted/echo", "--out", str(tmp_path / "one")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "one" / "results.json").is_file() and not (tmp_path / "one" / "leaderboard.json").exists()


def test_putri_all_defaults_to_generation_and_refuses_the_cloze_prompt(tmp_path: Path) -> None:
    result = runner.invoke(
        app,
        ["run", "-d", str(HUMAN_GEN), "-m", "scripted/echo", "--variant", "putri-all", "--out", str(tmp_path / "p")],
    )
    assert result.exit_code == 0, result.output
    results = read_results(tmp_path / "p")
    assert results.config["formulation"] == "generate"
    assert [t.rsplit("/", 1)[1] for t in results.results] == ["putri1", "putri2", "putri3", "putri-mean"]
    refused = runner.invoke(app, ["run", "-d", str(HUMAN_GEN), "--variant", "putri2", "-f", "loglik"])
    assert isinstance(refused.exception, ConfigError) and "--formulation generate" in str(refused.exception)


def test_missing_data_is_named_before_any_model_loads(tmp_path: Path) -> None:
    result = runner.invoke(app, ["run", "-d", str(CSQA), "-d", str(tmp_path / "nope.jsonl"), "-m", "scripted/echo"])
    assert isinstance(result.exception, ConfigError) and "nope.jsonl" in str(result.exception)


def test_run_has_an_option_per_config_field_and_a_bad_value_names_its_flag() -> None:
    command = typer.main.get_command(app).commands["run"]  # type: ignore[attr-defined]
    names = {name for param in command.params for name in param.opts}
    generated = {"--formulation", "-f", "--variant", "--prompt-language", "--shots", "--seed", "--limit"}
    generated |= {"--max-tokens", "--bootstrap", "--binary-mode", "--oracle-knowledge", "--cot", "--crow-parity"}
    assert generated | {"--gold-key", "--judge", "--data", "-d", "--model", "-m", "--out", "--split"} <= names
    result = runner.invoke(app, ["run", "-d", str(CSQA), "-m", "scripted/echo", "--bootstrap", "5"])
    assert isinstance(result.exception, ConfigError) and str(result.exception).startswith("--bootstrap: ")


def test_help_documents_the_dimension_conventions() -> None:
    result = runner.invoke(app, ["run", "--help"], terminal_width=200)
    assert result.exit_code == 0
    text = " ".join(result.output.replace("│", " ").split())
    assert "--crow-parity" in text and "averaged over the tasks that have" in text and "putri-all" in text


# --------------------------------------------------------------------------- eval compare


LETTER_RESPONDER = """
def letters(request):
    text = request.continuation.strip()
    # B wins for letters, A for everything else (cloze): the two runs disagree on some items
    return 0.0 if text == "B" else -1.0 * len(request.continuation)
"""


def _two_runs(tmp_path: Path) -> tuple[Path, Path]:
    responder = tmp_path / "letters.py"
    responder.write_text(LETTER_RESPONDER, encoding="utf-8")
    model = f"scripted/{responder}:letters"
    common = ["run", "-d", str(CSQA), "-m", model, "--bootstrap", "200"]
    first = runner.invoke(app, [*common, "-f", "loglik", "--out", str(tmp_path / "a")])
    assert first.exit_code == 0, first.output
    second = runner.invoke(app, [*common, "-f", "letter", "--limit", "6", "--out", str(tmp_path / "b")])
    assert second.exit_code == 0, second.output
    return tmp_path / "a", tmp_path / "b"


def _discordant(a: Path, b: Path) -> tuple[int, int]:
    def right(folder: Path) -> dict[str, bool]:
        lines = (folder / "samples.jsonl").read_text(encoding="utf-8").splitlines()
        return {row["id"]: bool(row["correct"]) for row in map(json.loads, lines)}

    ra, rb = right(a), right(b)
    shared = ra.keys() & rb.keys()
    return sum(ra[i] and not rb[i] for i in shared), sum(rb[i] and not ra[i] for i in shared)


def test_compare_labels_both_runs_and_tests_the_shared_items(tmp_path: Path) -> None:
    stats = pytest.importorskip("scipy.stats")
    a, b = _two_runs(tmp_path)
    result = runner.invoke(app, ["compare", str(a), str(b / "results.json"), "--json"])
    assert result.exit_code == 0, result.output
    comparison = json.loads(result.stdout)
    assert comparison["a"]["label"].endswith("· loglik · n=10")
    assert comparison["b"]["label"].endswith("· letter · n=6")
    assert (comparison["shared"], comparison["only_a"], comparison["only_b"]) == (6, 4, 0)
    assert any("4 only in A, 0 only in B" in w for w in comparison["warnings"])
    [acc] = [r for r in comparison["rows"] if r["metric"] == "acc" and r["task"] == "commonsenseqa"]
    a_only, b_only = _discordant(a, b)
    assert a_only + b_only > 0
    assert (acc["mcnemar"]["a_only"], acc["mcnemar"]["b_only"]) == (a_only, b_only)
    expected = stats.binomtest(b_only, a_only + b_only, 0.5).pvalue
    assert acc["mcnemar"]["p_value"] == pytest.approx(expected, rel=1e-12)
    assert acc["paired"]["units"] == 6 and acc["paired"]["ci_unit"] == "item"
    assert acc["paired"]["diff"] == pytest.approx((b_only - a_only) / 6)
    assert acc["a"]["wilson95"] is not None and acc["b"]["ci95"] is not None


def test_compare_table_names_formulation_n_and_the_warning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from senseforge.cli import _common

    monkeypatch.setattr(_common.out, "_width", 400)
    monkeypatch.setattr(_common.err, "_width", 400)
    a, b = _two_runs(tmp_path)
    result = runner.invoke(app, ["compare", str(a), str(b)])
    assert result.exit_code == 0, result.output
    text = result.output
    assert "· loglik · n=10" in text and "· letter · n=6" in text
    assert "warning: the item sets differ: 4 only in A, 0 only in B" in text
    assert "McNemar p" in text and "Wilson [" in text and "n = 6 items" in text


def test_results_table_shows_wilson_and_no_interval_from_one_context(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from senseforge.cli import _common
    from senseforge.cli.eval import print_results
    from senseforge.evaluate.records import BinarySample, DataInfo, EvalResults, ModelInfo
    from senseforge.evaluate.report import binary_metrics
    from senseforge.evaluate.run import EvalConfig

    monkeypatch.setattr(_common.out, "_width", 400)
    pairs = [
        BinarySample(
            id=f"t{i}",
            context_id="c0",
            task="stance",
            lang="en",
            dimensions=["other"],
            prompt="p",
            target="t",
            gold=i == 0,
            prediction=True,
            correct=i == 0,
        )
        for i in range(2)
    ]
    payload = EvalResults(
        results={"stance": binary_metrics(pairs, EvalConfig())},
        breakdowns={},
        config={},
        data=DataInfo(path="x", name="toy", format="crow", kind="binary"),
        model=ModelInfo(name="scripted/echo", identity={}),
        seeds={},
        prompt_hashes={},
        versions={},
        timing={},
    )
    print_results(payload)
    text = capsys.readouterr().out
    assert "n/a (n = 1 context)" in text and "[0.250, 0.250]" not in text
    assert "95% Wilson" in text and "[0.000, 0.793]" in text  # situational accuracy 0/1 over contexts
