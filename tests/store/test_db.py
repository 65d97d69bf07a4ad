"""The store: cache rows written once, ledger appends and totals, old files upgraded, memoized file digests."""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path

import pytest
import sqlalchemy as sa

from senseforge.errors import StoreError
from senseforge.store.db import CacheRow, Store, default_store_url
from senseforge.store.ledger import LedgerRow, retry_error_kind


def _row(key: str, response: str = "{}") -> CacheRow:
    return CacheRow(key=key, provider="p", model="p/m", kind="generate", request="{}", response=response)


def test_default_url_follows_senseforge_home(senseforge_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert default_store_url() == f"sqlite:///{senseforge_home / 'senseforge.db'}"
    monkeypatch.setenv("SENSEFORGE_STORE_URL", "sqlite:///elsewhere.db")
    assert default_store_url() == "sqlite:///elsewhere.db"


def test_first_response_wins_and_duplicates_do_not_fail(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    store.cache_put([_row("k1", '{"a": 1}'), _row("k1", '{"a": 2}')])
    store.cache_put([_row("k1", '{"a": 3}'), _row("k2")])
    assert store.cache_get(["k1", "k2", "k3"]) == {"k1": '{"a": 1}', "k2": "{}"}


def test_concurrent_writers_store_each_key_once(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    Store(url)
    errors: list[BaseException] = []

    def write(offset: int) -> None:
        try:
            store = Store(url)
            store.cache_put([_row(f"k{i}") for i in range(offset, offset + 50)])
            store.ledger_add(
                [LedgerRow(ts=0.0, provider="p", model="p/m", kind="generate", cache_key="k", cache_hit=False)]
            )
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(offset,)) for offset in (0, 25, 10, 40)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    store = Store(url)
    assert len(store.cache_get([f"k{i}" for i in range(200)])) == 90
    assert len(store.ledger_rows()) == 4


def test_file_digest_is_memoized_and_refreshed_on_change(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    weights = tmp_path / "w.bin"
    weights.write_bytes(b"abc")
    assert store.file_digest(weights) == hashlib.sha256(b"abc").hexdigest()
    weights.write_bytes(b"abcd")
    os.utime(weights, ns=(1, 1))
    assert store.file_digest(weights) == hashlib.sha256(b"abcd").hexdigest()


def test_unopenable_store_is_a_store_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(StoreError, match="cannot open the store"):
        Store(f"sqlite:///{blocker / 'sub' / 'x.db'}")


def _ledger(**fields: object) -> LedgerRow:
    base: dict[str, object] = {
        "ts": 0.0,
        "provider": "p",
        "model": "p/m",
        "kind": "generate",
        "cache_key": "k",
        "cache_hit": False,
    }
    return LedgerRow.model_validate({**base, **fields})


def test_an_old_ledger_table_gets_the_new_column(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    engine = sa.create_engine(f"sqlite:///{path}")
    with engine.begin() as conn:  # the ledger as the first release created it
        conn.execute(
            sa.text(
                "CREATE TABLE llm_ledger (id INTEGER PRIMARY KEY AUTOINCREMENT, ts FLOAT NOT NULL, run TEXT, "
                "provider VARCHAR(64) NOT NULL, model TEXT NOT NULL, kind VARCHAR(16) NOT NULL, "
                "cache_key VARCHAR(64) NOT NULL, cache_hit BOOLEAN NOT NULL, tokens_in INTEGER, tokens_out INTEGER, "
                "latency_s FLOAT NOT NULL, attempts INTEGER NOT NULL, cost_usd FLOAT, failure_kind VARCHAR(32), "
                "failure_message TEXT)"
            )
        )
        conn.execute(
            sa.text(
                "INSERT INTO llm_ledger (ts, provider, model, kind, cache_key, cache_hit, latency_s, attempts) "
                "VALUES (1.0, 'p', 'p/m', 'generate', 'old', 1, 0.0, 0)"
            )
        )
    engine.dispose()

    store = Store(f"sqlite:///{path}")
    assert "retry_errors" in {c["name"] for c in sa.inspect(store.engine).get_columns("llm_ledger")}
    assert "ix_llm_ledger_run" in {i["name"] for i in sa.inspect(store.engine).get_indexes("llm_ledger")}
    with store.engine.connect() as conn:  # a run's totals read its rows by the index, not every run's
        plan = conn.exec_driver_sql("EXPLAIN QUERY PLAN SELECT count(*) FROM llm_ledger WHERE run = 'r'").all()
    assert "ix_llm_ledger_run" in " ".join(str(row[-1]) for row in plan)
    store.ledger_add([_ledger(cache_key="new", attempts=2, retry_errors=("500 server_error: x",))])
    old, new = store.ledger_rows()
    assert old.cache_key == "old" and old.retry_errors == ()
    assert new.retry_errors == ("500 server_error: x",)
    Store(f"sqlite:///{path}")  # opening again finds the column and leaves it be
    assert old.service_s is None and old.queue_s is None and old.batched is False


def test_a_ledger_before_service_times_opens_reads_and_sums(tmp_path: Path) -> None:
    """A store written before calls' server time and queue wait were kept apart: the columns are added, its rows
    read with none, and its totals count their latency as the server's time."""
    path = tmp_path / "before.db"
    engine = sa.create_engine(f"sqlite:///{path}")
    with engine.begin() as conn:  # the ledger as the release with retry_errors and concurrency created it
        conn.execute(
            sa.text(
                "CREATE TABLE llm_ledger (id INTEGER PRIMARY KEY AUTOINCREMENT, ts FLOAT NOT NULL, run TEXT, "
                "provider VARCHAR(64) NOT NULL, model TEXT NOT NULL, kind VARCHAR(16) NOT NULL, "
                "cache_key VARCHAR(64) NOT NULL, cache_hit BOOLEAN NOT NULL, tokens_in INTEGER, tokens_out INTEGER, "
                "latency_s FLOAT NOT NULL, attempts INTEGER NOT NULL, cost_usd FLOAT, failure_kind VARCHAR(32), "
                "failure_message TEXT, retry_errors TEXT, concurrency INTEGER)"
            )
        )
        conn.execute(
            sa.text(
                "INSERT INTO llm_ledger (ts, run, provider, model, kind, cache_key, cache_hit, tokens_in, tokens_out, "
                "latency_s, attempts, cost_usd, concurrency) "
                "VALUES (1.0, 'r', 'openai', 'openai/m', 'generate', 'old', 0, 1000, 100, 7.5, 1, NULL, 1)"
            )
        )
    engine.dispose()

    store = Store(f"sqlite:///{path}")
    columns = {c["name"] for c in sa.inspect(store.engine).get_columns("llm_ledger")}
    assert {"service_s", "queue_s", "batched"} <= columns
    store.ledger_add(
        [
            _ledger(
                run="r",
                model="openai/m",
                tokens_in=10,
                tokens_out=1,
                latency_s=9.0,
                service_s=2.0,
                queue_s=6.5,
                cost_usd=0.5,
            )
        ]
    )
    old, new = store.ledger_rows(run="r")
    assert (old.service_s, old.queue_s, old.batched) == (None, None, False)
    assert (new.service_s, new.queue_s) == (2.0, 6.5)
    summary = store.ledger_summary("r")
    assert summary["latency_s"] == 16.5 and summary["service_s"] == 9.5 and summary["queue_s"] == 6.5
    Store(f"sqlite:///{path}")  # opening again leaves it be


def test_the_summary_prices_recorded_tokens_with_the_table_given(tmp_path: Path) -> None:
    """A price added after the calls prices them (``now``); without one the costs recorded at call time are
    summed (``at call time``), unknown where any was; a batched call costs what the pricer says of batches."""
    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    store.ledger_add(
        [
            _ledger(run="r", model="openai/m", tokens_in=1_000_000, tokens_out=0, cost_usd=None),
            _ledger(run="r", model="openai/m", tokens_in=0, tokens_out=1_000_000, cost_usd=None, batched=True),
            _ledger(run="r", model="openai/m", cache_hit=True, cost_usd=0.0),
            _ledger(run="r", model="free/m", tokens_in=None, tokens_out=None, cost_usd=0.0),
        ]
    )
    recorded = store.ledger_summary("r")
    assert recorded["cost_usd"] is None and recorded["priced"] == "at call time"
    assert recorded["unpriced_models"] == ["openai/m"] and recorded["models"] == ["free/m", "openai/m"]

    def price(model: str, tokens_in: int | None, tokens_out: int | None, *, batched: bool = False) -> float | None:
        if model == "free/m":
            return 0.0
        assert tokens_in is not None and tokens_out is not None
        return (tokens_in * 2.0 + tokens_out * 8.0) / 1e6 * (0.5 if batched else 1.0)

    now = store.ledger_summary("r", price=price)
    assert now["cost_usd"] == pytest.approx(2.0 + 4.0) and now["priced"] == "now" and now["unpriced_models"] == []

    def unknown(model: str, tokens_in: int | None, tokens_out: int | None, *, batched: bool = False) -> float | None:
        return None if tokens_in is None else 1.0  # free/m reported no tokens: unknown to a pricer that needs them

    assert store.ledger_summary("r", price=unknown)["unpriced_models"] == ["free/m"]


def test_record_writes_cache_and_ledger_together(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    store.record(cache=[_row("k1")], ledger=[_ledger(cache_key="k1")])
    assert store.cache_get(["k1"]) == {"k1": "{}"}
    with store.engine.begin() as conn:  # make the ledger insert fail after the cache insert
        conn.execute(sa.text("CREATE TRIGGER refuse BEFORE INSERT ON llm_ledger BEGIN SELECT RAISE(ABORT, 'no'); END"))
    with pytest.raises(sa.exc.SQLAlchemyError):
        store.record(cache=[_row("k2")], ledger=[_ledger(cache_key="k2")])
    assert store.cache_get(["k2"]) == {}  # rolled back with the ledger row
    assert len(store.ledger_rows()) == 1


def test_retry_error_kind_is_the_first_word() -> None:
    assert retry_error_kind("429 rate_limit: slow down") == "429"
    assert retry_error_kind("timeout: Request timed out.") == "timeout"
    assert retry_error_kind("truncated: response body could not be decoded") == "truncated"


def test_ledger_summary_counts_one_run(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    assert store.ledger_summary()["calls"] == 0 and store.ledger_summary()["cost_usd"] == 0.0
    store.ledger_add(
        [
            _ledger(run="a", tokens_in=5, tokens_out=1, latency_s=0.25, cost_usd=0.5),
            _ledger(run="a", attempts=3, latency_s=2.0, cost_usd=0.0, retry_errors=("429 x", "429 y", "500 z")),
            _ledger(run="a", cache_hit=True, attempts=0, tokens_in=5, tokens_out=1, cost_usd=0.0),
            _ledger(
                run="a",
                attempts=2,
                failure_kind="truncated",
                cost_usd=0.0,
                retry_errors=("truncated: a", "truncated: b"),
            ),
            _ledger(run="b", tokens_in=100, cost_usd=None),
        ]
    )
    summary = store.ledger_summary("a")
    assert summary == {
        "calls": 4,
        "cache_hits": 1,
        "backend_attempts": 6,
        "retried_calls": 2,
        "failed_calls": 1,
        "failures_by_kind": {"truncated": 1},
        "retry_errors_by_kind": {"429": 2, "500": 1, "truncated": 2},
        "tokens_in": 5,
        "tokens_out": 1,
        "cost_usd": 0.5,
        "priced": "at call time",
        "models": ["p/m"],
        "unpriced_models": [],
        "latency_s": 2.25,
        "service_s": 2.25,
        "queue_s": 0.0,
    }
    assert store.ledger_summary("b")["cost_usd"] is None
    assert store.ledger_summary()["tokens_in"] == 105


def test_batches_remember_their_run_stage_size_and_last_status_also_in_an_old_table(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    engine = sa.create_engine(f"sqlite:///{path}")
    with engine.begin() as conn:  # the batches table as it first shipped, with a batch submitted then
        conn.execute(
            sa.text(
                "CREATE TABLE llm_batches (batch_id TEXT PRIMARY KEY, endpoint TEXT NOT NULL, "
                "submission VARCHAR(64) NOT NULL, requests TEXT NOT NULL, status VARCHAR(16) NOT NULL, "
                "created_at FLOAT NOT NULL)"
            )
        )
        conn.execute(
            sa.text(
                "INSERT INTO llm_batches VALUES ('old', 'http://x/v1 m', 's0', '{\"k1\": \"{}\", \"k2\": \"{}\"}', "
                "'submitted', 1.0)"
            )
        )
    engine.dispose()

    store = Store(f"sqlite:///{path}")
    store.batch_add("b1", "http://x/v1 m", "s1", {"k3": "{}", "k4": "{}", "k5": "{}"}, run="r", stage="distractors")
    store.batch_add("b2", "http://x/v1 m", "s2", {"k6": "{}"}, run="other", stage="verify")
    store.batch_polled("b1", "in_progress")
    (mine,) = store.batches(run="r")
    assert (mine.batch_id, mine.run, mine.stage, mine.requests) == ("b1", "r", "distractors", 3)
    assert mine.status == "submitted" and mine.api_status == "in_progress" and mine.polled_at is not None
    assert mine.submitted_at > 1.0
    old, also = store.batches(run="r", ids=["old"])  # oldest first; an old row's requests counted from its JSON
    assert (old.batch_id, old.run, old.stage, old.requests, old.api_status) == ("old", None, None, 2, None)
    assert also == mine
    assert store.batches() == []
    store.batch_close("b1", "collected")
    assert store.batches(run="r") == []  # collected: no longer open
    (closed,) = store.batches(run="r", open_only=False)
    assert closed.status == "collected"


def test_a_store_opened_while_another_process_creates_its_tables_opens(tmp_path: Path) -> None:
    """Two processes opening a new store at once both find a table missing, and the later ``CREATE`` fails ("table
    llm_cache already exists": evaluation replicas on Ray did so). Here another connection creates the table just
    after this store checked for it: the store checks again and opens, and the table is there once."""
    from senseforge.store.schema import llm_cache, metadata

    url = f"sqlite:///{tmp_path / 'store.db'}"
    other = sa.create_engine(url)
    raced: list[bool] = []

    def another_process_first(target: sa.Table, connection: sa.Connection, **kw: object) -> None:
        if not raced:  # the first attempt only: the other process got there between the check and the create
            raced.append(True)
            llm_cache.to_metadata(sa.MetaData()).create(other)

    sa.event.listen(llm_cache, "before_create", another_process_first)
    try:
        store = Store(url)
    finally:
        sa.event.remove(llm_cache, "before_create", another_process_first)
        other.dispose()
    assert raced == [True]
    with store.engine.connect() as conn:
        names = [row[0] for row in conn.execute(sa.text("SELECT name FROM sqlite_master WHERE type = 'table'"))]
    assert names.count("llm_cache") == 1 and set(metadata.tables) <= set(names)
    store.close()


def test_kept_stage_outcomes_keep_their_first_value_and_cache_rows_name_their_kind(db_url: str) -> None:
    store = Store(db_url)
    try:
        store.replays_put({"a" * 64: "first\n{}", "b" * 64: "other"})
        store.replays_put({"a" * 64: "second"})  # kept already: the first stays
        assert store.replays_get(["a" * 64, "c" * 64, "a" * 64]) == {"a" * 64: "first\n{}"}
        row = CacheRow(key="k" * 64, provider="p", model="p/m", kind="loglikelihood", request="{}", response="{}")
        store.cache_put([row])
        assert store.cache_rows(["k" * 64, "z" * 64]) == {"k" * 64: ("loglikelihood", "{}")}
    finally:
        store.close()
