"""The cache answers repeated requests without a backend call; the ledger records every call."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from senseforge.llm.base import Completion, Failure, GenerateRequest, LoglikelihoodRequest, Progress
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


def test_keys_are_pinned_so_a_paid_cache_stays_valid() -> None:
    """Keys recorded at commit 90302c8: a change to the key (a new request field, a new version) must be deliberate,
    since it turns every cached reply a user paid for into a miss."""
    chat = GenerateRequest.chat("Is a kettle used to boil water?", max_tokens=8, temperature=0.0, seed=3)
    api = {"model": "gpt-4o-mini", "base_url": "https://api.openai.com/v1"}
    assert cache_key("openai", api, "generate", chat) == (
        "33f9e76e151bb10bd56924eb6ead72719647cc48cfcf8488a988a3e8daa3b713"
    )
    scored = LoglikelihoodRequest(context="Q: Where is a kettle kept?\nA:", continuation=" kitchen")
    assert cache_key("llamacpp", {"model": "gemma-3-270m"}, "loglikelihood", scored) == (
        "dba0041e763a359f02ac725c411065571f8a5549546a43379f7fab9651a05898"
    )


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


# -- writing as results arrive ---------------------------------------------------------------


class BatchRecorder(ScriptedLLM):
    """A scripted backend that notes each batch it gets and how much the store held by then."""

    def __init__(self, store: Store, *, fail_on_batch: int | None = None) -> None:
        super().__init__(responder=echo, name="scripted/echo")
        self.store = store
        self.fail_on_batch = fail_on_batch
        self.batches: list[list[str]] = []
        self.ledger_sizes: list[int] = []

    def generate(self, requests: Sequence[GenerateRequest], progress: Progress | None = None) -> list[Completion]:
        self.ledger_sizes.append(len(self.store.ledger_rows()))
        if len(self.batches) == self.fail_on_batch:
            raise RuntimeError("killed")
        self.batches.append([r.as_messages()[-1].content for r in requests])
        return super().generate(requests, progress)


def test_a_non_streaming_backend_gets_misses_in_sub_batches(store: Store) -> None:
    _wrapped(store, ScriptedLLM(responder=echo, name="scripted/echo")).generate([GenerateRequest(prompt="p3")])
    inner = BatchRecorder(store)
    llm = CachedLLM(inner, store, prices=PriceTable({}), flush_every=4)
    prompts = [f"p{i}" for i in range(10)] + ["p1", "p8"]
    ticks: list[int] = []
    done = llm.generate([GenerateRequest(prompt=p) for p in prompts], progress=ticks.append)
    assert [c.text for c in done] == prompts
    assert inner.batches == [["p0", "p1", "p2", "p4"], ["p5", "p6", "p7", "p8"], ["p9"]]
    # 1 row from the first wrapper, then the hit on p3; each sub-batch is stored before the next call
    assert inner.ledger_sizes == [2, 7, 12]
    rows = store.ledger_rows()[1:]
    assert len(rows) == len(prompts)
    assert sum(r.cache_hit for r in rows) == 3  # p3 from the cache, the repeated p1 and p8
    assert ticks == [1] * 10  # the cached p3 at once, then one per backend call (repeats get none)


def test_a_crash_keeps_the_sub_batches_already_done(store: Store) -> None:
    inner = BatchRecorder(store, fail_on_batch=2)
    llm = CachedLLM(inner, store, prices=PriceTable({}), flush_every=2)
    requests = [GenerateRequest(prompt=f"q{i}") for i in range(6)]
    with pytest.raises(RuntimeError, match="killed"):
        llm.generate(requests)
    assert len(store.ledger_rows()) == 4
    resumed = BatchRecorder(store)
    done = CachedLLM(resumed, store, prices=PriceTable({}), flush_every=2).generate(requests)
    assert [c.text for c in done] == [f"q{i}" for i in range(6)]
    assert resumed.batches == [["q4", "q5"]]


def test_flush_every_must_be_positive(store: Store) -> None:
    with pytest.raises(ValueError, match="flush_every"):
        CachedLLM(ScriptedLLM(), store, flush_every=0)


class StreamingScripted(ScriptedLLM):
    """A streaming backend that reports results in reverse order from a worker thread."""

    streams_results = True

    def __init__(self, store: Store, *, skip_callback_for: int | None = None) -> None:
        super().__init__(responder=echo, name="scripted/echo")
        self.store = store
        self.skip_callback_for = skip_callback_for
        self.rows_seen: list[int] = []

    def generate(
        self,
        requests: Sequence[GenerateRequest],
        progress: Progress | None = None,
        *,
        on_result: Callable[[int, Completion], None] | None = None,
    ) -> list[Completion]:
        done = [self._answer(request) for request in requests]
        assert on_result is not None

        def report() -> None:
            for index in reversed(range(len(done))):
                if index != self.skip_callback_for:
                    on_result(index, done[index])
                    self.rows_seen.append(len(self.store.ledger_rows()))
                if progress:
                    progress(1)

        worker = threading.Thread(target=report)
        worker.start()
        worker.join()
        return done


def test_a_streaming_backend_is_written_per_result(store: Store) -> None:
    inner = StreamingScripted(store)
    llm = CachedLLM(inner, store, prices=PriceTable({}), flush_every=1)
    prompts = ["s0", "s1", "s0", "s2"]
    done = llm.generate([GenerateRequest(prompt=p) for p in prompts])
    assert [c.text for c in done] == prompts
    assert len(inner.generate_calls) == 3  # one batch, s0 once
    assert inner.rows_seen == [1, 2, 4]  # s2; s1; s0 with its repeat, written together
    rows = store.ledger_rows()
    assert [(r.cache_key == rows[2].cache_key, r.cache_hit) for r in rows[2:]] == [(True, False), (True, True)]
    assert llm.stats.misses == 3 and llm.stats.hits == 1


def test_results_the_backend_did_not_report_are_still_stored(store: Store) -> None:
    inner = StreamingScripted(store, skip_callback_for=0)
    llm = CachedLLM(inner, store, prices=PriceTable({}))
    done = llm.generate([GenerateRequest(prompt="u0"), GenerateRequest(prompt="u1")])
    assert [c.text for c in done] == ["u0", "u1"]
    assert len(store.ledger_rows()) == 2
    assert len(store.cache_get([r.cache_key for r in store.ledger_rows()])) == 2


# -- retry errors and the summary ------------------------------------------------------------


def test_retry_errors_reach_the_ledger_but_not_the_cache(store: Store) -> None:
    retried = Completion(text="ok", tokens_in=3, tokens_out=1, attempts=3, retry_errors=("429 a", "timeout: b"))
    inner = ScriptedLLM([retried], name="scripted/x")
    llm = _wrapped(store, inner)
    assert llm.generate([GenerateRequest(prompt="r")])[0].retry_errors == ("429 a", "timeout: b")
    [hit] = llm.generate([GenerateRequest(prompt="r")])
    assert hit.cached and hit.retry_errors == () and hit.attempts == 0
    assert [r.retry_errors for r in store.ledger_rows()] == [("429 a", "timeout: b"), ()]
    assert "retry_errors" not in store.cache_get([store.ledger_rows()[0].cache_key]).popitem()[1]


def test_ledger_summary_of_a_scripted_sequence(store: Store) -> None:
    script = [
        Completion(text="a", tokens_in=10, tokens_out=2, latency_s=0.5, service_s=0.25, queue_s=0.125),
        Completion(text="b", tokens_in=20, tokens_out=4, latency_s=1.5, attempts=3, retry_errors=("429 x", "500 y")),
        Completion(
            attempts=2,
            latency_s=1.0,
            tokens_in=0,  # nothing billed: the cost is known (zero)
            tokens_out=0,
            failure=Failure(kind="timeout", message="late"),
            retry_errors=("timeout: late", "timeout: late"),
        ),
        Completion(
            tokens_in=0, tokens_out=0, failure=Failure(kind="bad_request", message="no"), retry_errors=("400 no",)
        ),
    ]
    llm = CachedLLM(
        ScriptedLLM(script, name="scripted/s"), store, prices=PriceTable({"scripted/s": Price(1.0, 2.0)}), run="r1"
    )
    llm.generate([GenerateRequest(prompt=p) for p in ("a", "b", "c", "d", "a")])
    llm.generate([GenerateRequest(prompt="b")])  # a hit
    CachedLLM(ScriptedLLM(responder=echo, name="scripted/t"), store, prices=PriceTable({}), run="r2").generate(
        [GenerateRequest(prompt="other")]
    )
    summary = store.ledger_summary("r1")
    assert summary == {
        "calls": 6,
        "cache_hits": 2,
        "backend_attempts": 1 + 3 + 2 + 1,
        "retried_calls": 2,
        "failed_calls": 2,
        "failures_by_kind": {"bad_request": 1, "timeout": 1},
        "retry_errors_by_kind": {"400": 1, "429": 1, "500": 1, "timeout": 2},
        "tokens_in": 30,
        "tokens_out": 6,
        "cost_usd": pytest.approx((30 * 1.0 + 6 * 2.0) / 1e6),
        "priced": "at call time",
        "models": ["scripted/s"],
        "unpriced_models": [],
        "latency_s": pytest.approx(3.0),
        "service_s": pytest.approx(2.75),  # the first call's server time, the others' latency (none measured)
        "queue_s": pytest.approx(0.125),
    }
    first = store.ledger_rows(run="r1")[0]
    assert (first.service_s, first.queue_s) == (0.25, 0.125)
    assert "service_s" not in store.cache_get([first.cache_key])[first.cache_key]  # one call's, never cached
    assert store.ledger_summary("r2")["cost_usd"] is None  # unpriced
    everything = store.ledger_summary()
    assert everything["calls"] == 7 and everything["cost_usd"] is None


def _two_batches_at_once(
    store: Store, responder: Callable[[GenerateRequest], str | Completion]
) -> tuple[ScriptedLLM, list[Completion], list[Completion]]:
    """Stage A sends [p1, p2] and is held on p1; while it is, stage B (another wrapper, another thread) sends
    [p2, p3]; then A is let go."""
    entered, go = threading.Event(), threading.Event()

    def held(request: GenerateRequest) -> str | Completion:
        if request.prompt == "p1":
            entered.set()
            assert go.wait(30)
        return responder(request)

    inner = ScriptedLLM(responder=held, name="scripted/echo")
    a, b = _wrapped(store, inner), _wrapped(store, inner)
    out: dict[str, list[Completion]] = {}
    first = threading.Thread(
        target=lambda: out.setdefault("a", a.generate([GenerateRequest(prompt=p) for p in ("p1", "p2")]))
    )
    first.start()
    assert entered.wait(30)
    second = threading.Thread(
        target=lambda: out.setdefault("b", b.generate([GenerateRequest(prompt=p) for p in ("p2", "p3")]))
    )
    second.start()
    for _ in range(3000):  # until B has sent what is its own (p3), then let A go
        if any(call.prompt == "p3" for call in inner.generate_calls):
            break
        second.join(0.01)
    go.set()
    first.join(30)
    second.join(30)
    return inner, out["a"], out["b"]


def test_a_request_another_batch_has_in_flight_is_sent_once_and_ledgered_as_a_hit(store: Store) -> None:
    inner, a, b = _two_batches_at_once(store, echo)
    assert sorted(call.prompt for call in inner.generate_calls) == ["p1", "p2", "p3"]  # p2 once, for both
    assert [c.text for c in a] == ["p1", "p2"] and [c.text for c in b] == ["p2", "p3"]
    assert not a[1].cached and b[0].cached and not b[1].cached
    rows = [(row.cache_hit, row.cost_usd > 0) for row in store.ledger_rows()]
    assert sorted(rows) == [(False, True), (False, True), (False, True), (True, False)]  # 3 paid calls, 1 hit


def test_a_failed_answer_in_flight_is_asked_again_by_the_batch_that_waited_for_it(store: Store) -> None:
    asked: list[str] = []

    def fails_once(request: GenerateRequest) -> str | Completion:
        asked.append(request.prompt or "")
        if request.prompt == "p2" and asked.count("p2") == 1:
            return Completion(failure=Failure(kind="server_error", message="503"))
        return echo(request)

    _, a, b = _two_batches_at_once(store, fails_once)
    assert not a[1].ok and b[0].ok and b[0].text == "p2" and not b[0].cached
    assert asked.count("p2") == 2


def test_top_logprobs_are_part_of_the_key_only_when_asked_and_round_trip_through_the_cache(store: Store) -> None:
    top = ((("B", -0.2), ("A", -1.8)),)
    inner = ScriptedLLM(
        responder=lambda request: Completion(text="B", finish_reason="stop", top_logprobs=top), name="scripted/p"
    )
    default = GenerateRequest(prompt="Which?")
    asked = default.model_copy(update={"top_logprobs": 2})
    assert cache_key("p", {}, "generate", default) != cache_key("p", {}, "generate", asked)
    assert cache_key("p", {}, "generate", default) == cache_key(
        "p", {}, "generate", GenerateRequest(prompt="Which?", top_logprobs=0)
    )
    llm = _wrapped(store, inner)
    fresh = llm.generate([asked, default])
    again = _wrapped(store, inner).generate([asked, default])
    assert len(inner.generate_calls) == 2
    assert [r.top_logprobs for r in fresh] == [r.top_logprobs for r in again] == [top, None]
    assert all(r.cached for r in again)
    keys = [cache_key("scripted", llm.identity(), "generate", request) for request in (asked, default)]
    stored = store.cache_get(keys)
    assert '"top_logprobs":[[["B",-0.2],["A",-1.8]]]' in stored[keys[0]]
    assert "top_logprobs" not in stored[keys[1]]  # not asked: stored as before the field existed
