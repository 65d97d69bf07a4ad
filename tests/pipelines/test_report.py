"""The engine's reports per group of records (per language, per task), and its one dataset writer."""

from __future__ import annotations

import json
from pathlib import Path

from senseforge.data.schema import Choice, MCItem
from senseforge.llm.prices import PriceTable
from senseforge.pipelines.report import (
    calls_by_stage,
    cost,
    cost_by,
    funnel_rows,
    funnel_rows_by,
    outcomes_by,
    write_jsonl,
    write_splits,
)
from senseforge.pipelines.runstore import CallEntry, Record, RunStore, StageResult, sqlite_url


class Word(Record):
    lang: str
    category: str


def _store(tmp_path: Path) -> RunStore:
    """Two languages: ``id`` keeps one of two words, ``su`` has one word, rejected twice over at ``check``."""
    store = RunStore(sqlite_url(tmp_path / "run.db"))
    call = {"check": (CallEntry(key="k1", model="scripted/x", tokens_in=10, tokens_out=5),)}
    store.put(
        "source",
        [
            StageResult("a", "ok", Word(lang="id", category="food")),
            StageResult("b", "ok", Word(lang="id", category="place")),
            StageResult("c", "ok", Word(lang="su", category="food")),
        ],
    )
    store.put(
        "check",
        [
            StageResult("a", "ok", Word(lang="id", category="food"), calls=call),
            StageResult("b", "rejected", Word(lang="id", category="place"), reason="too_long"),
            StageResult("c", "rejected", Word(lang="su", category="food"), calls=call),
        ],
    )
    return store


def test_grouped_rows_add_up_to_the_run_and_name_every_group_asked_for(tmp_path: Path) -> None:
    store = _store(tmp_path)
    by_lang = funnel_rows_by(store, ["source", "check"], lambda r: r.data.lang, Word, groups=["id", "su", "jv"])
    whole = funnel_rows(store, ["source", "check"])
    assert [row.out for row in by_lang["id"]] == [2, 1] and by_lang["id"][1].rejected == {"too_long": 1}
    assert by_lang["su"][1].rejected == {"rejected": 1}  # a rejection without a reason
    assert [(row.in_, row.out) for row in by_lang["jv"]] == [(0, 0), (0, 0)]
    for stage in range(2):
        assert whole[stage].in_ == sum(rows[stage].in_ for rows in by_lang.values())
    outcomes = outcomes_by(store, ["check"], lambda r: (r.data.lang, r.data.category), Word)
    assert list(outcomes) == [("id", "food"), ("id", "place"), ("su", "food")]
    assert outcomes[("id", "place")]["check"] == {"too_long": 1}


def test_grouped_cost_counts_each_groups_own_calls(tmp_path: Path) -> None:
    store = _store(tmp_path)
    prices = PriceTable.load()
    stages = ["source", "check"]
    per = cost_by(
        store, stages, lambda r: r.data.lang, kept={"id": 1, "su": 0}, langs=True, prices=prices, record_model=Word
    )
    assert per["id"].lang == "id" and per["id"].stages["check"].calls == 1 and per["su"].stages["check"].calls == 1
    whole = cost(store, stages, kept=1, human_judgements={}, human_rate=None, prices=prices)
    assert whole.stages["check"].calls == 1  # one call shared by both languages counts once in the run
    dumped = cost_by(store, stages, lambda r: r.data.lang, kept={"id": 2}, kept_unit="question", record_model=Word)[
        "id"
    ]
    assert "cost_per_kept_question_usd" in dumped.model_dump(by_alias=True) and "kept_unit" not in dumped.model_dump()


def test_one_writer_for_datasets_rows_and_items(tmp_path: Path) -> None:
    choices = [Choice(label="A", text="nasi"), Choice(label="B", text="roti")]
    item = MCItem(id="q1", lang="id", question="Makan apa?", choices=choices, answer="A")
    (tmp_path / "dataset").mkdir()
    (tmp_path / "dataset" / "train.jsonl").write_text("stale\n", encoding="utf-8")
    write_splits(tmp_path, {"test": [item]}, lambda it: {"id": it.id, "q": it.question})
    assert (tmp_path / "dataset" / "test.jsonl").read_text(encoding="utf-8") == '{"id": "q1", "q": "Makan apa?"}\n'
    assert MCItem.model_validate_json((tmp_path / "items" / "test.jsonl").read_text(encoding="utf-8")) == item
    assert not (tmp_path / "dataset" / "train.jsonl").exists()  # a split not written has no file
    write_jsonl(tmp_path / "rows.jsonl", [{"ü": 1}, item])
    first, second = (tmp_path / "rows.jsonl").read_text(encoding="utf-8").splitlines()
    assert first == '{"ü": 1}' and json.loads(second)["id"] == "q1"


def test_the_calls_of_a_run_are_counted_once_each_in_the_order_first_met(db_url: str) -> None:
    """Records carry their calls through every later stage, a call can be shared by records, and a stage can record
    calls under another stage's name: each call counts once, the first record met holding it says what it was."""
    store = RunStore(db_url)

    def entry(key: str, tokens: int) -> CallEntry:
        return CallEntry(key=key, model="scripted/x", tokens_in=tokens, tokens_out=1)

    ask = {"ask": (entry("k2", 2), entry("k1", 1))}
    store.put("ask", [StageResult("b", "ok", Word(lang="id", category="x"), calls=ask)])
    store.put(
        "ask",
        [StageResult("a", "ok", Word(lang="id", category="x"), calls={"ask": (entry("k3", 3), entry("k2", 9))})],
    )
    judged = {**ask, "judge": (entry("k4", 4),), "judge/second": (entry("k1", 5), entry("k5", 5))}
    store.put("judge", [StageResult("b", "ok", Word(lang="id", category="x"), calls=judged)])
    try:
        found = calls_by_stage(store, ["ask", "judge"])
        assert {stage: list(calls) for stage, calls in found.items()} == {
            "ask": ["k3", "k2", "k1"],  # record a before b
            "judge": ["k4"],
            "judge/second": ["k1", "k5"],  # the same key under another stage is that stage's call
        }
        assert found["ask"]["k2"].tokens_in == 9  # first met, on record a
    finally:
        store.close()
