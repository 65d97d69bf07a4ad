"""The cache answers repeated requests without a backend call; the ledger records every call."""

from __future__ import annotations

from pathlib import Path

import pytest

from senseforge.llm.base import Completion, Failure, GenerateRequest, LoglikelihoodRequest
from senseforge.llm.cache import CachedLLM, cache_key, open_llm
from senseforge.llm.mock import ScriptedLLM, echo
from senseforge.llm.prices import Price, PriceTable
from senseforge.store.db import Store


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(f"sqlite:///{tmp_path / 'store.db'}")


def _wrapped(store: Store, inner: ScriptedLLM, prices: PriceTable | None = None) -> CachedLLM:
    return CachedLLM(inner, store, prices=prices or PriceTable({"scripted/*": Price(1.0, 2.0)}))


def test_repeated_request_is_a_hit_and_makes_no_backend_call(store: Store) -> None:
    inner = ScriptedLLM(responder=echo, name="scripted/echo")
    llm = _wrapped(store, inner)
    first = llm.generate([GenerateRequest(prompt="hello world")])
    second = _wrapped(store, inner).generate([GenerateRequest(prompt="hello world")])
    assert len(inner.generate_calls) == 1
    assert first[0].text == second[0].text == "hello world"
    assert not first[0].cached and second[0].cached and second[0].attempts == 0
    rows = store.ledger_rows()
    assert [r.cache_hit for r in rows] == [False, True]
    assert rows[1].cost_usd == 0.0 and rows[1].attempts == 0


@pytest.mark.parametrize(
    "change",
    [{"temperature": 0.7}, {"top_p": 0.5}, {"seed": 1}, {"max_tokens": 7}, {"stop": ("x",)}, {"json_mode": True}],
)
def test_every_sampling_parameter_is_part_of_the_key(store: Store, change: dict[str, object]) -> None:
    inner = ScriptedLLM(responder=echo, name="scripted/echo")
    llm = _wrapped(store, inner)
    llm.generate([GenerateRequest(prompt="same prompt")])
    llm.generate([GenerateRequest(prompt="same prompt", **change)])  # type: ignore[arg-type]
    assert len(inner.generate_calls) == 2


def test_key_covers_provider_and_model_identity() -> None:
    request = GenerateRequest(prompt="p")
    base = cache_key("openai", {"model": "m", "base_url": "http://a"}, "generate", request)
    assert base != cache_key("openai", {"model": "m", "base_url": "http://b"}, "generate", request)
    assert base != cache_key("openai", {"model": "n", "base_url": "http://a"}, "generate", request)
    assert base != cache_key("hf", {"model": "m", "base_url": "http://a"}, "generate", request)
    assert base == cache_key("openai", {"base_url": "http://a", "model": "m"}, "generate", request)


def test_duplicates_within_a_batch_are_sent_once(store: Store) -> None:
    inner = ScriptedLLM(responder=echo, name="scripted/echo")
    results = _wrapped(store, inner).generate([GenerateRequest(prompt="a"), GenerateRequest(prompt="a")])
    assert len(inner.generate_calls) == 1
    assert [r.text for r in results] == ["a", "a"]
    assert [r.cache_hit for r in store.ledger_rows()] == [False, True]


def test_failures_are_ledgered_but_not_cached(store: Store) -> None:
    failed = Completion(failure=Failure(kind="rate_limit", message="429 after 6 attempts", status=429), attempts=6)
    inner = ScriptedLLM([failed], responder=echo, name="scripted/echo")
    llm = _wrapped(store, inner)
    assert llm.generate([GenerateRequest(prompt="x")])[0].failure is not None
    assert llm.generate([GenerateRequest(prompt="x")])[0].text == "x"
    assert len(inner.generate_calls) == 2
    first = store.ledger_rows()[0]
    assert first.failure_kind == "rate_limit" and first.attempts == 6 and not first.cache_hit
    assert llm.stats.failures == 1


def test_cost_from_price_table_and_unknown_price_is_none(store: Store) -> None:
    inner = ScriptedLLM([Completion(text="ok", tokens_in=1000, tokens_out=500)], name="scripted/priced")
    llm = _wrapped(store, inner, PriceTable({"scripted/priced": Price(input=2.0, output=10.0)}))
    llm.generate([GenerateRequest(prompt="q")])
    assert store.ledger_rows()[0].cost_usd == pytest.approx((1000 * 2.0 + 500 * 10.0) / 1e6)

    unpriced = ScriptedLLM([Completion(text="ok", tokens_in=10, tokens_out=5)], name="scripted/unpriced")
    llm2 = CachedLLM(unpriced, store, prices=PriceTable({}))
    llm2.generate([GenerateRequest(prompt="q2")])
    row = store.ledger_rows()[-1]
    assert row.cost_usd is None
    assert llm2.stats.cost_unknown_calls == 1


def test_unknown_token_counts_give_unknown_cost(store: Store) -> None:
    inner = ScriptedLLM([Completion(text="ok")], name="scripted/x")
    _wrapped(store, inner).generate([GenerateRequest(prompt="q")])
    assert store.ledger_rows()[0].cost_usd is None


def test_loglikelihood_is_cached_too(store: Store) -> None:
    inner = ScriptedLLM(name="scripted/s")
    llm = _wrapped(store, inner)
    request = LoglikelihoodRequest(context="Q: where? A:", continuation=" home")
    first = llm.loglikelihood([request])[0]
    second = llm.loglikelihood([request])[0]
    assert len(inner.loglikelihood_calls) == 1
    assert first.logprob == second.logprob and second.cached


def test_read_cache_false_calls_backend_again(store: Store) -> None:
    inner = ScriptedLLM(responder=echo, name="scripted/echo")
    _wrapped(store, inner).generate([GenerateRequest(prompt="a")])
    CachedLLM(inner, store, read_cache=False).generate([GenerateRequest(prompt="a")])
    assert len(inner.generate_calls) == 2


def test_run_label_and_open_llm_default_store(senseforge_home: Path) -> None:
    llm = open_llm("scripted/echo", run="r1")
    llm.generate([GenerateRequest(prompt="hi")])
    assert (senseforge_home / "senseforge.db").is_file()
    assert llm.store.ledger_rows(run="r1")[0].model == "scripted/echo"
