"""``analyze errors``: the paper's tables from their counts, labels voted per item, a real run store, the CLI."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from senseforge.analyze.errors import OPTION_LABELS, QUESTION_LABELS, error_tables, majority, read_csv
from senseforge.cli.main import app
from senseforge.data.schema import AdaptCheckJudgement, Choice, LabelErrorsJudgement, MCItem
from senseforge.errors import ConfigError, DataValidationError
from senseforge.pipelines.runstore import RunStore, sqlite_url
from senseforge.pipelines.taskqueue import add_tasks

COUNTS = Path(__file__).resolve().parents[1] / "fixtures" / "analyze" / "putri_error_counts.csv"
runner = CliRunner()

# Putri et al.'s printed percentages (Tables 4 and 6: ind/sun columns of LLM_Adapt and LLM_Gen, in
# the order of our label sets; Table 2: eng→ind verdicts; Table 8: ind→sun; Table 9: errors of wrong ones)
PAPER = {
    ("LLM_Adapt", "id", "question"): ["75.32", "8.23", "3.16", "6.96", "1.90", "0.63", "3.80"],
    ("LLM_Adapt", "su", "question"): ["15.19", "41.14", "10.13", "23.42", "1.90", "0.63", "7.59"],
    ("LLM_Gen", "id", "question"): ["68.67", "0.00", "0.00", "11.33", "3.00", "0.00", "17.00"],
    ("LLM_Gen", "su", "question"): ["51.00", "6.67", "0.00", "18.00", "8.00", "0.00", "16.33"],
    ("LLM_Adapt", "id", "options"): ["62.66", "3.80", "0.63", "0.63", "1.27", "31.01"],
    ("LLM_Adapt", "su", "options"): ["38.61", "47.47", "0.63", "0.63", "1.27", "11.39"],
    ("LLM_Gen", "id", "options"): ["93.00", "0.00", "0.67", "0.00", "5.67", "0.67"],
    ("LLM_Gen", "su", "options"): ["58.67", "31.67", "1.33", "0.00", "8.33", "0.00"],
    ("LLM_Adapt", "id", "adapt"): ["20.25", "75.32", "4.43"],
    ("LLM_Adapt", "su", "adapt"): ["77.22", "22.78"],
    ("LLM_Adapt", "id", "adapt-error"): ["57.14", "14.29", "28.57"],
    ("LLM_Adapt", "su", "adapt-error"): ["86.11", "2.78", "11.11"],
}


def test_the_papers_counts_give_its_percentages_to_two_decimals() -> None:
    result = error_tables(labels=[COUNTS])
    assert len(result.columns) == len(PAPER)
    for (dataset, lang, target), printed in PAPER.items():
        ours = result.percents(dataset, lang, target)
        assert list(ours.values()) == printed, (dataset, lang, target)
    assert list(result.percents("LLM_Adapt", "id", "question")) == list(QUESTION_LABELS)
    assert list(result.percents("LLM_Gen", "su", "options")) == list(OPTION_LABELS)
    table2 = result.column("LLM_Adapt", "id", "adapt")
    assert table2 is not None and f"{100 * (table2.correct_share or 0):.2f}" == "95.57"  # the text's 95.57% correct
    for column in result.columns:
        assert math.isclose(sum(column.share(label) or 0.0 for label in column.counts), 1.0)


def test_labels_are_voted_per_item_ties_to_the_first(tmp_path: Path) -> None:
    path = tmp_path / "labels.csv"
    path.write_text(
        "dataset,lang,item_id,question_error,options_error\n"
        "gen,su,q1,fluency,none\n"
        "gen,su,q1,none,none\n"
        "gen,su,q1,none,translation\n"  # q1: none (2 of 3) / none (2 of 3)
        "gen,su,q2,translation,invalid-options\n"
        "gen,su,q2,fluency,none\n"  # q2: a tie, the first row wins
        "gen,su,q3,context,\n",  # options not labelled
        encoding="utf-8",
    )
    kind, columns = read_csv(path)
    assert kind == "labels"
    question, options = columns
    assert question.counts["none"] == 1 and question.counts["translation"] == 1 and question.counts["context"] == 1
    assert question.total == 3 and options.total == 2
    assert options.counts["none"] == 1 and options.counts["invalid-options"] == 1
    assert majority(["b", "a", "a", "b"]) == "b"


def test_bad_csv_rows_are_located(tmp_path: Path) -> None:
    labels = tmp_path / "labels.csv"
    labels.write_text("dataset,lang,item_id,question_error,options_error\ngen,id,q1,typo,none\n", encoding="utf-8")
    with pytest.raises(DataValidationError, match=r"labels\.csv:2: question_error: 'typo' is not one of none"):
        read_csv(labels)
    counts = tmp_path / "counts.csv"
    counts.write_text("dataset,lang,target,label,count\ngen,id,options,none,3\ngen,id,options,none,x\n")
    with pytest.raises(DataValidationError, match=r"counts\.csv:3: count: 'x' is not a whole number"):
        read_csv(counts)
    other = tmp_path / "other.csv"
    other.write_text("a,b\n1,2\n", encoding="utf-8")
    with pytest.raises(DataValidationError, match=r"other\.csv:1: header"):
        read_csv(other)
    with pytest.raises(ConfigError, match="--run RUN_DIR"):
        error_tables()


def _item(item_id: str, lang: str) -> MCItem:
    return MCItem(
        id=item_id, lang=lang, question="?", choices=[Choice(label="A", text="a"), Choice(label="B", text="b")]
    )


def _store(tmp_path: Path) -> Path:
    run = tmp_path / "culture-adapt-su"
    (run / "su" / "dataset").mkdir(parents=True)
    (run / "su" / "dataset" / "test.jsonl").write_text(_item("d1", "su").model_dump_json() + "\n", encoding="utf-8")
    store = RunStore(sqlite_url(run / "run.db"))
    try:
        add_tasks(store.engine, "label-errors", [_item(i, "su") for i in ("q1", "q2", "q3")], k=3, group="test")
        add_tasks(
            store.engine, "adapt-check", [_item("a1", "su"), _item("a2", "su"), _item("a3", "su")], k=2, group="t"
        )

        def label(item: str, who: str, question: str, options: str, **extra: bool) -> LabelErrorsJudgement:
            return LabelErrorsJudgement(
                item_id=item, annotator=who, question_error=question, options_error=options, **extra
            )

        store.add_judgements(
            [
                label("q1", "ana", "fluency", "none"),
                label("q1", "budi", "translation", "translation"),
                label("q1", "citra", "translation", "none"),  # q1: translation / none
                label("q2", "budi", "context", "typo-mechanics"),
                label("q2", "ana", "none", "none"),  # q2: a tie, budi judged first
                label("d1", "ana", "none", "fluency"),  # not queued: its language comes from the dataset
                label("x9", "ana", "subjectivity", "none"),  # nowhere: und
                label("q3", "admin", "none", "none"),
                label("q3", "ana", "fluency", "fluency"),
                AdaptCheckJudgement(item_id="a1", annotator="ana", verdict="correct-major"),
                AdaptCheckJudgement(item_id="a2", annotator="ana", verdict="wrong", error="translation"),
                AdaptCheckJudgement(item_id="a2", annotator="budi", verdict="wrong", error="typo-mechanics"),
                AdaptCheckJudgement(item_id="a3", annotator="budi", verdict="correct-minor"),
                AdaptCheckJudgement(item_id="a3", annotator="ana", verdict="wrong", error="translation"),
            ],
            "human",
        )
        store.add_judgements(
            [
                label("q1", "lm:scripted/judge#0", "subjectivity", "context"),
                label("q3", "lead", "context", "context", adjudication=True),
            ],
            "lm",
        )
        store.add_judgements([label("q3", "lead", "context", "invalid-options", adjudication=True)], "human")
    finally:
        store.close()
    return run


def test_judgements_of_a_real_run_store(tmp_path: Path) -> None:
    run = _store(tmp_path)
    result = error_tables(runs=[run])
    question = result.column("culture-adapt-su", "su", "question")
    options = result.column("culture-adapt-su", "su", "options")
    assert question is not None and options is not None
    # q1 translation, q2 context (tie → budi, first), d1 none (language from the dataset), q3 the ruling
    assert {k: v for k, v in question.counts.items() if v} == {"translation": 1, "context": 2, "none": 1}
    assert {k: v for k, v in options.counts.items() if v} == {
        "none": 1,
        "typo-mechanics": 1,
        "fluency": 1,
        "invalid-options": 1,
    }
    unknown = result.column("culture-adapt-su", "und", "question")
    assert unknown is not None and unknown.counts["subjectivity"] == 1
    adapt = result.column("culture-adapt-su", "su", "adapt")
    errors = result.column("culture-adapt-su", "su", "adapt-error")
    assert adapt is not None and errors is not None
    # a3 is a tie between correct-minor (budi, first) and wrong
    assert adapt.counts == {"correct-major": 1, "correct-minor": 1, "wrong": 1}
    assert errors.counts == {"translation": 1, "phrase-structure": 0, "typo-mechanics": 0}
    (info,) = result.inputs
    assert info["label-errors"] == {"items": 5, "judgements": 10, "other_source_ignored": 1}
    with_lm = error_tables(runs=[run], source="any").column("culture-adapt-su", "su", "question")
    assert with_lm is not None and with_lm.counts["translation"] == 1 and with_lm.total == 4


def test_cli_on_a_run_and_on_the_counts(tmp_path: Path) -> None:
    run = _store(tmp_path)
    out = tmp_path / "out"
    args = ["analyze", "errors", "--run", str(run), "--labels", str(COUNTS), "--out", str(out)]
    result = runner.invoke(app, args, env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "41.14%" in result.output and "concept adaptation" in result.output
    doc = json.loads((out / "errors.json").read_text(encoding="utf-8"))
    assert doc["analysis"] == "errors" and len(doc["columns"]) == len(PAPER) + 6
    csv_lines = (out / "errors.csv").read_text(encoding="utf-8").splitlines()
    assert csv_lines[0] == "dataset,lang,target,label,count,total,share,percent"
    assert "LLM_Adapt,su,adapt-error,translation,31,36,0.861111,86.11%" in csv_lines
    assert (out / "errors.svg").is_file()
    missing = runner.invoke(app, ["analyze", "errors", "--run", str(tmp_path / "nope"), "--out", str(out)])
    assert isinstance(missing.exception, ConfigError) and "no such run directory" in str(missing.exception)
    empty = tmp_path / "empty-run"
    empty.mkdir()
    refused = runner.invoke(app, ["analyze", "errors", "--run", str(empty), "--out", str(out)])
    assert isinstance(refused.exception, ConfigError) and "no run store" in str(refused.exception)
