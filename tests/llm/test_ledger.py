"""What the cache layer's writer leaves in the store for each request, and when (the flow through
:class:`~senseforge.llm.cache.CachedLLM` is in ``test_cache.py``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from senseforge.llm.base import Completion, Failure, GenerateRequest
from senseforge.llm.ledger import Answered, CacheStats, LedgerWriter, cached_json, write_as_reported
from senseforge.llm.prices import Price
from senseforge.store.db import Store


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(f"sqlite:///{tmp_path / 'store.db'}")


def _writer(store: Store) -> LedgerWriter:
    return LedgerWriter(store, provider="scripted", model="scripted/echo", run="r1", stats=CacheStats())


def test_a_repeated_request_is_one_miss_and_hits_and_only_an_answer_is_cached(store: Store) -> None:
    writer = _writer(store)
    requests = [GenerateRequest(prompt=text) for text in ("a", "a", "a", "b")]
    answer = Completion(text="A", tokens_in=1_000_000, tokens_out=0, latency_s=2.0, attempts=2)
    failed = Completion(failure=Failure(kind="timeout", message="slow"), retry_errors=("timeout: slow",))
    writer.write("generate", requests, Price(1.0, 2.0), fresh=[("ka", [0, 1, 2], answer), ("kb", [3], failed)])

    rows = store.ledger_rows(run="r1")
    assert [(row.cache_key, row.cache_hit) for row in rows] == [
        ("ka", False),
        ("ka", True),
        ("ka", True),
        ("kb", False),
    ]
    assert (rows[0].cost_usd, rows[0].attempts, rows[0].latency_s) == (1.0, 2, 2.0)
    assert (rows[1].cost_usd, rows[1].attempts, rows[1].latency_s) == (0.0, 0, 0.0)
    assert rows[3].failure_kind == "timeout" and rows[3].retry_errors == ("timeout: slow",)
    assert set(store.cache_get(["ka", "kb"])) == {"ka"}
    stats = writer.stats
    assert (stats.misses, stats.hits, stats.failures, stats.cost_usd) == (2, 2, 1, 1.0)
    assert stats.cost_unknown_calls == 1  # the failure reported no tokens


def test_the_cache_keeps_the_answer_not_what_one_call_had() -> None:
    call = Completion(text="x", attempts=3, retry_errors=("500 server_error: x",), service_s=0.5, queue_s=0.1)
    kept = json.loads(cached_json(call))
    assert kept["text"] == "x" and kept["attempts"] == 3
    assert not {"retry_errors", "service_s", "queue_s", "concurrency", "cached", "batched"} & set(kept)
    assert json.loads(cached_json(call.model_copy(update={"batched": True})))["batched"] is True


def test_results_are_written_as_reported_and_the_unreported_after() -> None:
    writes: list[list[Answered[Completion]]] = []

    def call(batch: list[GenerateRequest], progress: Any, *, on_result: Any) -> list[Completion]:
        first = Completion(text=batch[0].prompt or "")
        on_result(0, first)
        assert [[key for key, _, _ in items] for items in writes] == [["k0"]]  # stored before on_result returned
        return [first, Completion(text=batch[1].prompt or "")]

    batch = [GenerateRequest(prompt="p0"), GenerateRequest(prompt="p1")]
    fresh = write_as_reported(call, batch, [("k0", [0]), ("k1", [1, 2])], None, writes.append)
    assert [result.text for result in fresh] == ["p0", "p1"]
    assert [[(key, indices) for key, indices, _ in items] for items in writes] == [[("k0", [0])], [("k1", [1, 2])]]


def test_a_failed_write_ends_the_call_with_its_error() -> None:
    def call(batch: list[GenerateRequest], progress: Any, *, on_result: Any) -> list[Completion]:
        on_result(0, Completion(text="x"))
        return [Completion(text="x")]

    def refuse(items: list[Answered[Completion]]) -> None:
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        write_as_reported(call, [GenerateRequest(prompt="p")], [("k", [0])], None, refuse)


def test_hits_written_from_cached_values_are_the_rows_a_cached_call_writes(db_url: str) -> None:
    """:meth:`LedgerWriter.write_cached` (a replayed stage's hits) writes, per answer, the row :meth:`write` writes for
    a hit made of the same cached answer: a rebuild that replays leaves the ledger a cached rebuild leaves."""
    store = Store(db_url)
    answers = [
        Completion(text="A", tokens_in=12, tokens_out=3, finish_reason="stop", constrained=True),
        Completion(text="B", tokens_in=7, tokens_out=None, finish_reason="length", batched=True),
        Completion(text="<|im_start|> C"),
    ]
    cached = [(f"k{i}", json.loads(cached_json(answer))) for i, answer in enumerate(answers)]
    by_write, by_values = (
        _writer(store),
        LedgerWriter(store, provider="scripted", model="scripted/echo", run="r2", stats=CacheStats()),
    )
    hits = [(key, Completion.model_validate(values).model_copy(update={"cached": True})) for key, values in cached]
    by_write.write("generate", [], Price(1.0, 2.0), hits=hits)
    by_values.write_cached("generate", cached)
    by_values.write_cached("loglikelihood", [("k9", {"logprob": -1.5, "is_greedy": True, "tokens_in": 4})])

    def shown(run: str) -> list[dict[str, Any]]:
        return [row.model_dump(exclude={"ts", "run"}) for row in store.ledger_rows(run=run)]

    assert shown("r2")[:3] == shown("r1")
    assert shown("r2")[1]["batched"] is True and shown("r2")[0]["constrained"] is True
    assert shown("r2")[3]["kind"] == "loglikelihood" and shown("r2")[3]["tokens_in"] == 4
    assert not shown("r2")[3]["batched"] and shown("r2")[3]["constrained"] is None
    assert (by_values.stats.hits, by_values.stats.cost_usd) == (by_write.stats.hits + 1, by_write.stats.cost_usd)
