"""The cache layer's writer: what each request leaves in the store, and when.

Every request, hit or miss, becomes one ledger row (tokens, latency, the server's time and the wait before
sending where measured, attempts, the errors of failed attempts, whether it was batched, and its cost with the
price of the moment); a fresh answer that succeeded also becomes a cache row. Both go in one transaction
(:meth:`senseforge.store.db.Store.record`), so a killed run never keeps one without the other.
:class:`LedgerWriter` builds and writes them for a :class:`~senseforge.llm.cache.CachedLLM`, counting them in
its :class:`CacheStats`; :func:`write_as_reported` writes a streaming backend's results as each arrives, a burst of
them in one transaction (a group commit on a writer thread).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from pydantic import BaseModel

from senseforge.llm.base import Completion, Loglikelihood, Progress
from senseforge.llm.prices import Price
from senseforge.store.db import CacheRow, Store
from senseforge.store.ledger import LEDGER_COLUMNS, LedgerRow

Kind = Literal["generate", "loglikelihood"]
"""The kind of call a row is for."""
_Res = TypeVar("_Res", Completion, Loglikelihood)

_NOT_CACHED = {"cached", "retry_errors", "concurrency", "service_s", "queue_s"}
"""Result fields that describe one call rather than the response, left out of the cache."""

_PER_HIT = ("cache_key", "tokens_in", "tokens_out", "batched", "constrained", "failure_kind", "failure_message")
"""The ledger columns a hit's row takes from its answer (:meth:`LedgerWriter.write_cached`)."""

Answered = tuple[str, list[int], _Res]
"""A backend's answer to one distinct request: its cache key, its indices in the batch (the first one sent, the
others repeats, ledgered as hits) and the result."""


@dataclass
class CacheStats:
    """Counts since the wrapper was created."""

    hits: int = 0
    misses: int = 0
    failures: int = 0
    cost_usd: float = 0.0
    cost_unknown_calls: int = 0
    replies: int = 0
    """Generations that came back (cache hits included): what :meth:`senseforge.llm.cache.CachedLLM.diagnosis` reads."""
    replies_cut: int = 0
    """Of those, how many ended at the token limit."""
    replies_marked: dict[str, int] = field(default_factory=dict)
    """Of those, how many held each chat-template family's markup."""
    max_tokens: int = 0
    """The largest generation budget asked for."""


class LedgerWriter:
    """Builds and stores the rows of a wrapper's requests, counting each in :attr:`stats`.

    Call its methods with the wrapper's lock held: the stats are the wrapper's.

    Args:
        store: where the cache and ledger live.
        provider: the provider's name, as rows record it (``openai``).
        model: the backend's ``provider/model`` name.
        run: a label stored on each ledger row (a run name).
        stats: the wrapper's counts.
    """

    def __init__(self, store: Store, *, provider: str, model: str, run: str | None, stats: CacheStats) -> None:
        self.store = store
        self.provider = provider
        self.model = model
        self.run = run
        self.stats = stats

    def write(
        self,
        kind: Kind,
        requests: Sequence[BaseModel],
        price: Price | None,
        *,
        hits: Sequence[tuple[str, Completion | Loglikelihood]] = (),
        fresh: Sequence[tuple[str, list[int], Completion | Loglikelihood]] = (),
    ) -> None:
        """Store fresh results and ledger every request they answer, in one transaction.

        Args:
            kind: the kind of call.
            requests: the whole batch (for the request text of cache rows).
            price: the model's price now (``None``: unknown).
            hits: (key, result) of requests answered from the cache.
            fresh: (key, indices in the batch, result) of backend calls; the first index is
                the request sent, the others repeat it and are ledgered as hits.
        """
        now = time.time()
        ledger = [self.row(kind, key, result, True, price, now) for key, result in hits]
        cache = []
        for key, indices, result in fresh:
            ledger.append(self.row(kind, key, result, False, price, now))
            ledger.extend(self.row(kind, key, result, True, price, now) for _ in indices[1:])
            if result.ok:
                cache.append(self._cache_row(kind, key, requests[indices[0]].model_dump_json(), result))
        self.store.record(cache=cache, ledger=ledger)

    def write_cached(self, kind: Kind, found: Sequence[tuple[str, Mapping[str, Any]]]) -> None:
        """Ledger answers read from the cache as hits, a row each, in one transaction: the rows :meth:`write` writes
        for them, built from each answer's cached values (key, values) without making a result or a
        :class:`LedgerRow` of each (a rebuild that replays its stages ledgers a hit per request of every stage)."""
        now = time.time()
        hit: dict[str, Any] = {
            "ts": now,
            "run": self.run,
            "provider": self.provider,
            "model": self.model,
            "kind": kind,
            "cache_hit": True,
            "latency_s": 0.0,
            "attempts": 0,
            "cost_usd": 0.0,
            "retry_errors": None,
            "concurrency": None,
            "service_s": None,
            "queue_s": None,
        }
        template = [hit.get(name) for name in LEDGER_COLUMNS]
        at = {name: LEDGER_COLUMNS.index(name) for name in _PER_HIT}
        completion = kind == "generate"
        rows: list[tuple[Any, ...]] = []
        for key, values in found:
            row = list(template)
            row[at["cache_key"]] = key
            row[at["tokens_in"]] = values.get("tokens_in")
            row[at["tokens_out"]] = values.get("tokens_out")
            row[at["batched"]] = completion and bool(values.get("batched", False))
            row[at["constrained"]] = values.get("constrained") if completion else None
            failure = values.get("failure")
            if failure:
                row[at["failure_kind"]] = failure["kind"]
                row[at["failure_message"]] = failure["message"]
            rows.append(tuple(row))
        self.store.ledger_add_values(rows)
        self.stats.hits += len(rows)

    def collect(
        self, batch_id: str, held: Mapping[str, str], answers: Mapping[str, Completion], price: Price | None
    ) -> None:
        """Store every answer of a completed batch (``held``: its requests' JSON by key) and close it, in one
        transaction."""
        now = time.time()
        ledger = [self.row("generate", key, result, False, price, now) for key, result in answers.items()]
        cache = [self._cache_row("generate", key, held[key], result) for key, result in answers.items() if result.ok]
        self.store.batch_close(batch_id, "collected", cache=cache, ledger=ledger)

    def _cache_row(self, kind: Kind, key: str, request: str, result: Completion | Loglikelihood) -> CacheRow:
        return CacheRow(
            key=key,
            provider=self.provider,
            model=self.model,
            kind=kind,
            request=request,
            response=cached_json(result),
        )

    def row(
        self,
        kind: Kind,
        key: str,
        result: Completion | Loglikelihood,
        hit: bool,
        price: Price | None,
        now: float,
    ) -> LedgerRow:
        """The ledger row for one request, counted in :attr:`stats`."""
        if hit:
            cost: float | None = 0.0
            self.stats.hits += 1
        else:
            self.stats.misses += 1
            batched = isinstance(result, Completion) and result.batched
            cost = price.cost(result.tokens_in, result.tokens_out, batched=batched) if price is not None else None
            if result.failure is not None:
                self.stats.failures += 1
        if cost is None:
            self.stats.cost_unknown_calls += 1
        else:
            self.stats.cost_usd += cost
        # every value comes from a validated result, request and price: built without validating again (a cached
        # rebuild writes one row per request of every stage)
        return LedgerRow.model_construct(
            ts=now,
            run=self.run,
            provider=self.provider,
            model=self.model,
            kind=kind,
            cache_key=key,
            cache_hit=hit,
            tokens_in=result.tokens_in,
            tokens_out=result.tokens_out,
            latency_s=0.0 if hit else result.latency_s,
            service_s=None if hit else result.service_s,
            queue_s=None if hit else result.queue_s,
            batched=isinstance(result, Completion) and result.batched,
            attempts=0 if hit else result.attempts,
            cost_usd=cost,
            failure_kind=result.failure.kind if result.failure else None,
            failure_message=result.failure.message if result.failure else None,
            retry_errors=() if hit else result.retry_errors,
            concurrency=None if hit else result.concurrency,
            constrained=result.constrained if isinstance(result, Completion) else None,
        )


def cached_json(result: Completion | Loglikelihood) -> str:
    """A result as the cache keeps it: without what only one call had, and ``batched`` only when so."""
    batched = isinstance(result, Completion) and result.batched
    return result.model_dump_json(exclude=_NOT_CACHED if batched else _NOT_CACHED | {"batched"})


def write_as_reported(
    call: Callable[..., list[_Res]],
    batch: Sequence[BaseModel],
    answered: list[tuple[str, list[int]]],
    progress: Progress | None,
    write: Callable[[list[Answered[_Res]]], None],
) -> list[_Res]:
    """Send ``batch`` at once through a backend that streams results, and ``write`` each result as soon as the
    backend reports it (``answered``: each request's key and indices, in the order of ``batch``).

    Reported results go to one writer thread, which stores whatever has arrived in one
    transaction (a group commit): a burst of answers costs one write, not one each.
    ``on_result`` returns once its result is stored (the backend calls it off the event
    loop, so waiting holds up no request).
    """
    written: set[int] = set()
    queue: list[Answered[_Res]] = []
    wake = threading.Condition()
    closing = False
    failure: list[BaseException] = []
    counts = {"queued": 0, "stored": 0}

    def writer() -> None:
        while True:
            with wake:
                while not queue and not closing:
                    wake.wait()
                items, finished = list(queue), closing
                queue.clear()
            if items:
                try:
                    write(items)
                except BaseException as exc:  # re-raised in the caller's thread
                    with wake:
                        failure.append(exc)
                        wake.notify_all()
                    return
            with wake:
                counts["stored"] += len(items)
                wake.notify_all()
            if finished and not items:
                return

    def on_result(position: int, result: _Res) -> None:
        # returns once the result is stored, so the row exists when the backend moves on
        key, indices = answered[position]
        with wake:
            if position in written:
                return
            written.add(position)
            queue.append((key, indices, result))
            counts["queued"] += 1
            mine = counts["queued"]
            wake.notify_all()
            while counts["stored"] < mine and not failure:
                wake.wait()
            if failure:
                raise failure[0]

    thread = threading.Thread(target=writer, name="senseforge-cache-writer", daemon=True)
    thread.start()
    try:
        fresh = call(batch, progress, on_result=on_result)
    finally:
        with wake:
            closing = True
            wake.notify()
        thread.join()
    if failure:
        raise failure[0]
    with wake:
        late = [(key, indices, fresh[i]) for i, (key, indices) in enumerate(answered) if i not in written]
        written.update(range(len(fresh)))
    if late:  # results the backend returned without reporting them
        write(late)
    return fresh
