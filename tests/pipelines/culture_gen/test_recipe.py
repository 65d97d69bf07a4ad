"""``build culture-gen`` with a scripted writer: exactly the valid items kept, every other one rejected with its
reason, a funnel that adds up per language and category, and outputs in Putri et al.'s released shape."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from senseforge.data.loaders import load_dataset
from senseforge.errors import DataValidationError
from senseforge.pipelines.culture_gen.recipe import CULTURE_GEN, CultureGenConfig
from senseforge.pipelines.runner import build
from senseforge.runfolder.funnel import Group
from senseforge.store.db import Store

RESPONDER = f"scripted/{Path(__file__).with_name('responder.py')}:respond"
TABLE = """category,concept,lang
culinary,ok-1,id
culinary,four-1,id
culinary,letter-1,id
culinary,twin-1,id
culinary,lost-1,id
place,none-1,id
place,extra-1,id
place,ok-2,id
place,ok-1,id
culinary,ok-1,id
history,prose-1,id
history,ok-3,id
"""


def _run(tmp_path: Path, **overrides: object) -> Path:
    table = tmp_path / "concepts.csv"
    table.write_text(TABLE, encoding="utf-8")
    settings = {"concepts": str(table), "langs": ("id",), "model": RESPONDER, **overrides}
    run_dir = tmp_path / "run"
    summary = build(CULTURE_GEN, CultureGenConfig.model_validate(settings), run_dir, store=Store())
    assert summary.state == "done"
    return run_dir


def test_keeps_exactly_the_valid_items_and_names_every_rejection(tmp_path: Path) -> None:
    run_dir = _run(tmp_path)
    rows = [json.loads(line) for line in (run_dir / "id" / "dataset" / "test.jsonl").read_text().splitlines()]
    # ok-1 asked again under place: the same question with other options, kept unless --dedup question
    assert sorted(row["question_concept"] for row in rows) == ["extra-1", "ok-1", "ok-1", "ok-2"]
    for row in rows:
        assert set(row) == {"id", "category", "question_concept", "question", "choices", "answer_creator", "lang"}
        assert row["id"].startswith("gen_id_") and row["lang"] == "id"
        assert row["choices"]["label"] == list("ABCDE") and row["answer_creator"] == "B"

    rejects = [json.loads(line) for line in (run_dir / "rejects.jsonl").read_text().splitlines()]
    reasons = sorted((r["stage"], r["reason"]) for r in rejects)
    assert reasons == sorted(
        [
            ("generate", "no_item"),
            ("generate", "extra_item"),
            ("generate", "malformed_output"),  # the prose reply: each of its batch's two concepts once
            ("generate", "malformed_output"),
            ("check", "choice_count"),
            ("check", "answer_not_in_choices"),
            ("check", "duplicate_choices"),
            ("check", "concept_missing"),
            ("dedup", "duplicate_item"),  # ok-1 asked again under culinary: the very same item
        ]
    )
    prose = [r for r in rejects if r["reason"] == "malformed_output"]
    # the raw reply is kept once per call: the batch's second concept points at the row that holds it
    first, second = prose
    assert "Tentu!" in first["response"] and "response_of" not in first
    assert second["response"] is None and second["response_of"] == first["id"]
    checked = {r["reason"]: r for r in rejects if r["stage"] == "check"}
    assert checked["concept_missing"]["question"] and checked["concept_missing"]["checked"]["choices"]
    assert checked["concept_missing"]["evidence"]["concept"]

    funnel = json.loads((run_dir / "funnel.json").read_text())
    for row in funnel["stages"]:
        assert row["in"] == row["out"] + sum(row["rejected"].values()), row
    generate = funnel["stages"][1]
    assert generate["from"] == 4 and generate["in"] == 13  # 12 concept slots + the extra item
    per_lang = Group.model_validate_json((run_dir / "id" / "funnel.json").read_text())
    assert funnel["groups"] == [per_lang.model_dump(mode="json", by_alias=True)] and per_lang.folder == "id"
    assert per_lang.kept == funnel["kept"] == 4 and per_lang.splits == {"test": 4}
    language = per_lang.figure("language")
    assert language is not None and language.kind == "counts"
    assert language.values == {"slots": 12, "kept": 4, "other_language": 0}
    categories = per_lang.figure("categories")
    assert categories is not None and categories.kind == "table"
    assert categories.columns == ["generate", "after moderate"]
    assert dict(zip(categories.rows, categories.values, strict=True)) == {
        "culinary": [6, 1],  # four of six rejected by the check, one repeated
        "history": [0, 0],
        "place": [3, 3],
    }
    assert json.loads((run_dir / "id" / "cost.json").read_text())["kept"] == 4


def test_lenient_matching_and_question_dedup_are_options(tmp_path: Path) -> None:
    run_dir = _run(tmp_path, concept_match="lenient", dedup="question")
    funnel = json.loads((run_dir / "funnel.json").read_text())
    dedup = next(row for row in funnel["stages"] if row["stage"] == "dedup")
    assert dedup["rejected"] == {"duplicate_item": 1, "duplicate_question": 1}


def test_the_output_evaluates_and_loads_as_putri_rows(tmp_path: Path) -> None:
    run_dir = _run(tmp_path, split="50/25/25")
    loaded = load_dataset(run_dir / "id" / "dataset" / "train.jsonl")
    assert loaded.items and all(item.lang == "id" for item in loaded.items)
    assert (run_dir / "id" / "items" / "test.jsonl").is_file()

    from senseforge.evaluate.harness import run_eval
    from senseforge.evaluate.run import EvalConfig
    from senseforge.llm.mock import ScriptedLLM

    payload = run_eval(run_dir / "id", ScriptedLLM(), EvalConfig(), tmp_path / "eval", split="all")
    assert (tmp_path / "eval" / "results.json").is_file() and payload.results


def test_a_recurring_batch_gets_its_own_seed(tmp_path: Path) -> None:
    from senseforge.data.concepts import Concept
    from senseforge.pipelines.culture_gen.concepts import batches
    from senseforge.pipelines.culture_gen.templates import build_request

    rows = [Concept("place", "pasar"), Concept("place", "sawah")] * 2
    cut = batches(rows, ["id"], size=2)
    assert [b.occurrence for b in cut] == [0, 1]
    seeds = [build_request(b, "chat", seed=7).seed for b in cut]
    assert seeds == [7, 8]


def test_a_bad_concept_row_is_located(tmp_path: Path) -> None:
    table = tmp_path / "bad.csv"
    table.write_text("category,concept\nplace,pasar\nplace,\n", encoding="utf-8")
    with pytest.raises(DataValidationError, match=r"bad.csv:3: concept: missing"):
        _run_table(table, tmp_path)


def _run_table(table: Path, tmp_path: Path) -> None:
    config = CultureGenConfig(concepts=str(table), langs=("id",), model=RESPONDER)
    build(CULTURE_GEN, config, tmp_path / "bad-run", store=Store())


def test_review_by_lm_judges_is_there_when_asked_for(tmp_path: Path) -> None:
    run_dir = _run(tmp_path, reviewers=(RESPONDER,), lm_review_final=True)
    funnel = json.loads((run_dir / "funnel.json").read_text())
    review = funnel["stages"][-1]
    assert review["stage"] == "review" and review["rejected"] == {"lm_review_rejected": 1}
    rows = [json.loads(line) for line in (run_dir / "id" / "items" / "test.jsonl").read_text().splitlines()]
    assert sorted(row["question_concept"] for row in rows) == ["extra-1", "ok-1", "ok-1"]
    assert all(row["metadata"]["review"] == "lm" and len(row["metadata"]["template_sha256"]) == 64 for row in rows)


def test_items_a_registered_benchmark_holds_are_rejected_at_the_gate(tmp_path: Path) -> None:
    from senseforge.pipelines.contamination import GATE
    from senseforge.registry.store import Registry

    (tmp_path / "first").mkdir()
    (tmp_path / "again").mkdir()
    first = _run(tmp_path / "first")
    registry = Registry.open(tmp_path / "reg")
    registry.add(first / "id" / "items" / "test.jsonl", "earlier-build", embed=False)  # our own items, as a benchmark
    again = _run(tmp_path / "again", registry=str(tmp_path / "reg"))
    funnel = json.loads((again / "funnel.json").read_text())
    gate = next(row for row in funnel["stages"] if row["stage"] == GATE)
    assert gate["rejected"] == {"contaminated": 4} and gate["out"] == 0
    assert not (again / "id" / "dataset" / "test.jsonl").read_text().strip()
