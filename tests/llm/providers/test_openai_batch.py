"""The ``openai`` provider's Batch API (``-o batch=true``) through the cache layer, against the loopback server's
files and batches endpoints: one submission for the same requests, whatever happens; answers stored once the batch
is done, at half the price."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from senseforge.llm.base import GenerateRequest
from senseforge.llm.cache import CachedLLM
from senseforge.llm.loopback import LoopbackOpenAI
from senseforge.llm.prices import Price, PriceTable
from senseforge.llm.registry import get_llm
from senseforge.store.db import Store

openai = pytest.importorskip("openai")

PRICES = PriceTable({"openai/loopback": Price(input=2.0, output=8.0)})


def _reply(body: dict[str, Any]) -> str:
    return f"answer to: {body['messages'][-1]['content']}"


def _llm(server: LoopbackOpenAI, store: Store, **options: Any) -> CachedLLM:
    inner = get_llm("openai/loopback", {"base_url": server.base_url, "timeout_s": 10.0, **options})
    return CachedLLM(inner, store, run="batch-test", prices=PRICES)


REQUESTS = [GenerateRequest.chat(f"question {i}", max_tokens=16) for i in range(3)]


def test_a_batch_is_submitted_once_collected_when_done_and_priced_at_half(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'cache.db'}")
    with LoopbackOpenAI(_reply, batch_latency_s=None) as server:
        llm = _llm(server, store, batch=True)
        waiting = llm.generate(REQUESTS)
        assert [r.failure.kind if r.failure else None for r in waiting] == ["awaiting_batch"] * 3
        assert "collect it later" in (waiting[0].failure.message if waiting[0].failure else "")
        assert llm.generate(REQUESTS)[0].failure is not None  # asked again while it runs: polled, not sent again
        assert server.batches_created == 1 and server.files_uploaded == 1
        assert store.ledger_rows(run="batch-test") == []  # nothing answered, nothing paid yet

        server.finish_batches()
        done = llm.generate(REQUESTS)
        assert [r.text for r in done] == [f"answer to: question {i}" for i in range(3)]
        assert all(r.ok and r.batched for r in done)
        assert server.batches_created == 1 and server.requests == 0  # no online call at all

        again = llm.generate(REQUESTS)  # from the cache now: still batched, no poll needed
        assert all(r.cached and r.batched for r in again)

    rows = [row for row in store.ledger_rows(run="batch-test") if not row.cache_hit]
    assert len(rows) == 3
    for row, result in zip(rows, done, strict=True):
        listed = PRICES.lookup("openai/loopback").cost(result.tokens_in, result.tokens_out)  # type: ignore[union-attr]
        assert listed and row.cost_usd == pytest.approx(listed / 2)

    # the online answers are the same
    with LoopbackOpenAI(_reply) as online_server:
        online = _llm(online_server, Store(f"sqlite:///{tmp_path / 'online.db'}")).generate(REQUESTS)
    assert [r.text for r in online] == [r.text for r in done]
    assert [(r.tokens_in, r.tokens_out) for r in online] == [(r.tokens_in, r.tokens_out) for r in done]


def test_a_process_killed_between_creating_a_batch_and_remembering_it_finds_it_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = Store(f"sqlite:///{tmp_path / 'cache.db'}")
    with LoopbackOpenAI(_reply, batch_latency_s=None) as server:
        real = Store.batch_add

        def killed(self: Store, *args: Any, **kwargs: Any) -> None:
            raise KeyboardInterrupt  # the process dies once the endpoint has the batch

        monkeypatch.setattr(Store, "batch_add", killed)
        with pytest.raises(KeyboardInterrupt):
            _llm(server, store, batch=True).generate(REQUESTS)
        assert server.batches_created == 1
        monkeypatch.setattr(Store, "batch_add", real)

        again = _llm(server, store, batch=True)  # the next run: the batch is found by its metadata
        assert all(r.failure and r.failure.kind == "awaiting_batch" for r in again.generate(REQUESTS))
        server.finish_batches()
        assert all(r.ok for r in again.generate(REQUESTS))
        assert server.batches_created == 1


def test_requests_of_a_batch_that_failed_go_in_a_new_one(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'cache.db'}")
    with LoopbackOpenAI(_reply, batch_latency_s=None) as server:
        llm = _llm(server, store, batch=True)
        llm.generate(REQUESTS)
        (batch_id,) = store.batches_open(llm.inner.batch_api.endpoint)  # type: ignore[attr-defined]
        client = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0)
        client.batches.cancel(batch_id)  # the API gives up on it (as on one that failed or expired)
        failed = llm.generate(REQUESTS)
        assert all(r.failure and r.failure.kind == "server_error" for r in failed)
        llm.generate(REQUESTS)  # the next round sends them again, in a new batch
        server.finish_batches()
        assert all(r.ok for r in llm.generate(REQUESTS))
        assert server.batches_created == 2


def test_a_batch_line_asks_for_top_logprobs_and_its_answer_keeps_them(tmp_path: Path) -> None:
    def letters(body: dict[str, Any]) -> dict[str, Any]:
        return {"text": "B", "top_logprobs": [[["B", -0.3], ["A", -1.4]]]}

    asked = [GenerateRequest.chat("which letter?", max_tokens=4, top_logprobs=2)]
    with LoopbackOpenAI(letters, batch_latency_s=None) as server:
        llm = _llm(server, Store(f"sqlite:///{tmp_path / 'cache.db'}"), batch=True)
        assert llm.generate(asked)[0].failure is not None  # submitted, awaiting its batch
        server.finish_batches()
        [done] = llm.generate(asked)
        [again] = llm.generate(asked)
    assert done.ok and done.batched and done.top_logprobs == ((("B", -0.3), ("A", -1.4)),)
    assert again.cached and again.top_logprobs == done.top_logprobs
