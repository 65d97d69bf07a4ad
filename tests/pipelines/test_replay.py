"""Stage outcomes a build keeps and the next build replays (:mod:`senseforge.pipelines.replay`)."""

from __future__ import annotations

import functools
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from senseforge.data.schema import judgement
from senseforge.errors import SenseforgeError
from senseforge.pipelines.mcsqa import MCSQA, McsqaConfig
from senseforge.pipelines.mcsqa.stages import Refine, Shuffle
from senseforge.pipelines.outcomes import StageOutput, ok
from senseforge.pipelines.payloads import dumps
from senseforge.pipelines.replay import Opaque, Replay, Replayer, plain, stage_prefix
from senseforge.pipelines.runner import build
from senseforge.pipelines.runstore import CallEntry, Record, StageResult
from senseforge.pipelines.stage import CheckStage
from senseforge.store.db import Store

AUTHOR = "scripted/mcsqa-author"
OUTPUTS = (
    "dataset/train.jsonl",
    "dataset/validation.jsonl",
    "dataset/test.jsonl",
    "funnel.json",
    "cost.json",
    "rejects.jsonl",
)


def _config(kb: Path, **changes: Any) -> McsqaConfig:
    settings: dict[str, Any] = {"lang": "en", "n": 20, "kb": str(kb), "model": AUTHOR, "reviewers": (AUTHOR,)}
    return McsqaConfig(**{**settings, "lm_review_as_hard": True, **changes})


def _kept(store_path: Path) -> int:
    with sqlite3.connect(store_path) as db:
        return int(db.execute("SELECT count(*) FROM stage_replays").fetchone()[0])


def _stored(run: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(run / "run.db") as db:
        return db.execute(
            "SELECT stage, record_id, status, reason, payload, prompt, response FROM stage_results "
            "ORDER BY stage, record_id"
        ).fetchall()


def test_a_rebuild_replays_the_kept_stages_and_writes_the_bytes_of_a_run(
    demo_kb: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "store.db"
    store = Store(f"sqlite:///{path}")
    first = build(MCSQA, _config(demo_kb), tmp_path / "first", store=store)
    assert first.state == "done" and _kept(path) > 0
    kept = _kept(path)

    # a rebuild parses no reply of the refine stage again: it stores what the first build made of each record
    def refuse(*_: Any) -> None:
        raise SenseforgeError("refine parsed a reply again")

    monkeypatch.setattr(Refine, "parse", refuse)
    second = build(MCSQA, _config(demo_kb), tmp_path / "second", store=store)
    assert second.state == "done" and _kept(path) == kept  # nothing new to keep
    with pytest.raises(SenseforgeError, match="parsed a reply again"):  # without replay the stage runs
        build(MCSQA, _config(demo_kb), tmp_path / "refused", store=store, replay=False)
    monkeypatch.undo()
    third = build(MCSQA, _config(demo_kb), tmp_path / "third", store=store, replay=False)

    for name in OUTPUTS:
        assert (tmp_path / "second" / name).read_bytes() == (tmp_path / "third" / name).read_bytes(), name
        assert (tmp_path / "second" / name).read_bytes() == (tmp_path / "first" / name).read_bytes(), name
    assert _stored(tmp_path / "second") == _stored(tmp_path / "third")
    # every call ledgered as a hit, as a build answered from the cache ledgers it
    assert second.ledger["calls"] == third.ledger["calls"] == first.ledger["calls"]
    assert second.ledger["cache_hits"] == third.ledger["cache_hits"] == second.ledger["calls"]
    assert second.ledger["tokens_in"] == third.ledger["tokens_in"]


def test_a_rebuild_takes_more_records_a_batch_while_its_batches_replay_whole(
    demo_kb: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    looked_up: list[tuple[int, int]] = []  # refine's batches: records looked up, outcomes replayed
    replay = Replayer.replay

    def watched(self: Replayer, stage: Any, records: Any, keys: Any) -> Replay:
        done = replay(self, stage, records, keys)
        if stage.name == "refine":
            looked_up.append((len(records), len(done.outcomes)))
        return done

    monkeypatch.setattr(Replayer, "replay", watched)
    store = Store(f"sqlite:///{tmp_path / 'store.db'}")
    build(MCSQA, _config(demo_kb, n=30), tmp_path / "first", store=store)
    assert max(size for size, _ in looked_up) == 8 and not any(done for _, done in looked_up)  # nothing kept yet
    records = sum(size for size, _ in looked_up)
    looked_up.clear()
    build(MCSQA, _config(demo_kb, n=30), tmp_path / "second", store=store)
    sizes = [size for size, _ in looked_up]
    assert all(size == done for size, done in looked_up)
    assert sizes == [8, 16, 32, records - 56] and records > 56  # a batch's worth, then twice as many while all replay


def test_changed_settings_keep_new_outcomes_and_replay_none_of_the_old(demo_kb: Path, tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    store = Store(f"sqlite:///{path}")
    build(MCSQA, _config(demo_kb), tmp_path / "first", store=store)
    kept = _kept(path)
    build(MCSQA, _config(demo_kb, call_rounds=5), tmp_path / "second", store=store)
    # the stages holding the whole config ran again and kept their outcomes anew; verification and review hold
    # only their own settings, which did not change: they replayed
    assert kept < _kept(path) < 2 * kept
    for name in OUTPUTS:  # the rounds a record gets when its calls fail change nothing here
        assert (tmp_path / "second" / name).read_bytes() == (tmp_path / "first" / name).read_bytes(), name


def test_a_record_whose_cache_row_is_gone_runs_again(demo_kb: Path, tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    store = Store(f"sqlite:///{path}")
    first = build(MCSQA, _config(demo_kb), tmp_path / "first", store=store)
    with sqlite3.connect(path) as db:
        db.execute("DELETE FROM llm_cache WHERE key = (SELECT min(key) FROM llm_cache WHERE kind = 'generate')")
    second = build(MCSQA, _config(demo_kb), tmp_path / "second", store=store)
    for name in OUTPUTS:
        assert (tmp_path / "second" / name).read_bytes() == (tmp_path / "first" / name).read_bytes(), name
    assert second.ledger["calls"] == first.ledger["calls"]
    assert second.ledger["backend_attempts"] >= 1  # the request whose answer was gone was sent again


# -- what is kept ------------------------------------------------------------------------------


class Item(Record):
    text: str = ""


@dataclass
class Upper(CheckStage[Item]):
    """Never rejects: the stage only names the batches below."""

    def reason(self, data: Item) -> str | None:
        return None


STAGE = Shuffle("shuffle", McsqaConfig(lang="en", n=4, model=AUTHOR))
"""A stage of the package's own (a stage defined here is never kept: see the last test)."""


def _replayer(tmp_path: Path) -> tuple[Replayer, Store]:
    store = Store(f"sqlite:///{tmp_path / 'store.db'}")

    def no_models(spec: str) -> Any:
        raise AssertionError(spec)

    return Replayer(store, Item, no_models), store


def _batch() -> tuple[list[StageResult[Item]], list[StageResult[Item]]]:
    records = [StageResult(f"r{i}", "ok", Item(text=f"t{i}")).keep_stored(f'{{"text":"t{i}"}}') for i in range(2)]
    entry = CallEntry(key="k" * 64, model="scripted/x", tokens_in=3, tokens_out=1)
    made = [ok(r, Item(text=r.data.text.upper())) for r in records]
    made = [StageResult(r.record_id, "ok", r.data, calls={"upper": (entry,)}) for r in made]
    return records, made


@pytest.mark.parametrize(
    ("asked", "failed", "judged", "kept"),
    [
        (2, 0, [], 2),  # clean: each record's outcome kept
        (None, 0, [], 0),  # not counted (another executor)
        (2, 1, [], 0),  # a call failed: a rebuild would send it again
        (3, 0, [], 0),  # a call no record recorded
        (2, 0, ["r0"], 2),  # a judgement on a record of the batch goes with it
        (2, 0, ["elsewhere"], 0),  # a judgement on another item
    ],
)
def test_only_clean_batches_are_kept(
    tmp_path: Path, asked: int | None, failed: int, judged: list[str], kept: int
) -> None:
    replayer, store = _replayer(tmp_path)
    records, made = _batch()
    judgements = [(judgement(item_id=i, annotator="lm:x#0", task="verify", accept=True), "lm") for i in judged]
    output = StageOutput(made, judgements, asked=asked, failed=failed)
    keys = [f"{i}" * 64 for i in range(2)]
    replayer.remember(STAGE, keys, records, output, {id(r): f'{{"text":"{r.data.text}"}}' for r in made}, Replay())
    assert len(store.replays_get(keys)) == kept


def test_a_replayed_outcome_reads_its_payload_when_used(tmp_path: Path) -> None:
    replayer, store = _replayer(tmp_path)
    records, made = _batch()
    keys = ["a" * 64, "b" * 64]
    output = StageOutput(made, [], asked=2, failed=0)
    replayer.remember(STAGE, keys, records, output, {id(r): dumps(r.payload) for r in made}, Replay())
    hits = _Hits()
    replayer._named["scripted/x"] = hits  # type: ignore[assignment]
    assert replayer.replay(STAGE, records, keys).outcomes == {}  # the cache row its call was answered from is missing
    with sqlite3.connect(store.url.removeprefix("sqlite:///")) as db:
        db.execute(
            "INSERT INTO llm_cache VALUES (?, 'scripted', 'scripted/x', 'generate', '{}', '{\"text\":\"T\"}', 0)",
            ("k" * 64,),
        )
    replayed = replayer.replay(STAGE, records, keys)
    assert sorted(replayed.outcomes) == [0, 1]
    assert hits.found == [("k" * 64, "generate", '{"text":"T"}')] * 2  # ledgered as hits, one per call
    first = replayed.outcomes[0]
    assert isinstance(first, StageResult) and first.stored == dumps(made[0].payload)
    assert "_read" not in vars(first)  # not read yet
    assert first.data == Item(text="T0") and first.calls == made[0].calls


class _Hits:
    """Stands for the cached model: records the hits a replay ledgers."""

    name = "scripted/x"

    def __init__(self) -> None:
        self.found: list[tuple[str, str, str]] = []

    def ledger_hits(self, found: list[tuple[str, str, str]]) -> None:
        self.found += found


# -- what decides a stage ----------------------------------------------------------------------


def _module_level(x: int) -> int:
    return x


class _Settings:
    def __init__(self, terms: tuple[str, ...]) -> None:
        self.terms = terms

    def __replay__(self) -> dict[str, Any]:
        return {"terms": self.terms}


def test_plain_data_decides_a_stage_and_live_objects_fail_closed() -> None:
    assert plain({"b": 1.5, "a": (Path("x"), _module_level)}) == {
        "map": {
            "a": {"seq": "tuple", "items": [{"path": "x"}, {"function": f"{__name__}:_module_level"}]},
            "b": {"float": "1.5"},
        }
    }
    assert plain(_Settings(("a",))) != plain(_Settings(("b",)))
    assert plain(functools.partial(_module_level, 1))["partial"] == {"function": f"{__name__}:_module_level"}
    for live in (lambda x: x, object(), {1: "a"}, sqlite3.connect(":memory:")):
        with pytest.raises(Opaque):
            plain(live)


def test_a_stage_defined_outside_the_package_is_never_replayed() -> None:
    assert stage_prefix(Upper("upper"), {}) is None  # its code is not in the package's digest
