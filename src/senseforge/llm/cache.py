"""A content-addressed response cache and a cost ledger around any backend.

:class:`CachedLLM` speaks the same protocol as the backend it wraps. Before a batch
reaches the backend it looks every request up by a key that covers the provider, the
model identity (weights hash, or served name plus base URL), the kind of call and the
full request with its sampling parameters and seed; only the misses are sent on. Every
request, hit or miss, becomes one ledger row with tokens, latency, attempts and cost.
Failed calls are recorded in the ledger but never cached.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, TypeVar

from pydantic import BaseModel

from senseforge.llm.base import (
    LLM,
    Completion,
    GenerateRequest,
    Loglikelihood,
    LoglikelihoodRequest,
    Progress,
)
from senseforge.llm.prices import PriceTable
from senseforge.store.db import CacheRow, LedgerRow, Store

logger = logging.getLogger(__name__)

Kind = Literal["generate", "loglikelihood"]
Req = TypeVar("Req", GenerateRequest, LoglikelihoodRequest)
Res = TypeVar("Res", Completion, Loglikelihood)
CACHE_VERSION = 1


def cache_key(provider: str, identity: dict[str, str], kind: Kind, request: BaseModel) -> str:
    """SHA-256 over everything that determines a response."""
    payload = {
        "v": CACHE_VERSION,
        "provider": provider,
        "identity": identity,
        "kind": kind,
        "request": request.model_dump(mode="json"),
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


@dataclass
class CacheStats:
    """Counts since the wrapper was created."""

    hits: int = 0
    misses: int = 0
    failures: int = 0
    cost_usd: float = 0.0
    cost_unknown_calls: int = 0


class CachedLLM:
    """Wraps a backend with the cache and the ledger.

    Args:
        inner: the backend.
        store: where the cache and ledger live.
        prices: the price table (default: shipped table plus the user's file).
        run: a label stored on each ledger row (a run name).
        read_cache: set to ``False`` to always call the backend (results are still stored).
    """

    def __init__(
        self,
        inner: LLM,
        store: Store,
        *,
        prices: PriceTable | None = None,
        run: str | None = None,
        read_cache: bool = True,
    ) -> None:
        self.inner = inner
        self.store = store
        self.prices = prices or PriceTable.load()
        self.run = run
        self.read_cache = read_cache
        self.stats = CacheStats()
        self._provider = inner.name.split("/", 1)[0]
        self._identity: dict[str, str] | None = None
        self._warned_unpriced = False

    @property
    def name(self) -> str:
        return self.inner.name

    def identity(self) -> dict[str, str]:
        if self._identity is None:
            self._identity = self.inner.identity()
        return self._identity

    def close(self) -> None:
        self.inner.close()

    def generate(self, requests: Sequence[GenerateRequest], progress: Progress | None = None) -> list[Completion]:
        return self._through(requests, "generate", Completion, self.inner.generate, progress)

    def loglikelihood(
        self, requests: Sequence[LoglikelihoodRequest], progress: Progress | None = None
    ) -> list[Loglikelihood]:
        return self._through(requests, "loglikelihood", Loglikelihood, self.inner.loglikelihood, progress)

    def _through(
        self,
        requests: Sequence[Req],
        kind: Kind,
        result_type: type[Res],
        call: object,
        progress: Progress | None,
    ) -> list[Res]:
        identity = self.identity()
        keys = [cache_key(self._provider, identity, kind, request) for request in requests]
        cached = self.store.cache_get(keys) if self.read_cache else {}
        results: list[Res | None] = [None] * len(requests)
        for index, key in enumerate(keys):
            if key in cached:
                hit = result_type.model_validate_json(cached[key])
                results[index] = hit.model_copy(update={"cached": True, "attempts": 0, "latency_s": 0.0})
        if progress and cached:
            progress(sum(1 for r in results if r is not None))
        # one backend call per distinct missing request, even when a batch repeats one
        todo: dict[str, int] = {}
        for index, key in enumerate(keys):
            if results[index] is None and key not in todo:
                todo[key] = index
        if todo:
            batch = [requests[index] for index in todo.values()]
            fresh: list[Res] = call(batch, progress)  # type: ignore[operator]
            by_key = dict(zip(todo, fresh, strict=True))
            for index, key in enumerate(keys):
                if results[index] is None:
                    results[index] = by_key[key]
            self.store.cache_put(
                CacheRow(
                    key=key,
                    provider=self._provider,
                    model=self.inner.name,
                    kind=kind,
                    request=requests[todo[key]].model_dump_json(),
                    response=result.model_dump_json(exclude={"cached"}),
                )
                for key, result in by_key.items()
                if result.ok
            )
        done = [r for r in results if r is not None]
        self._record(kind, keys, done, fresh_keys=set(todo))
        return done

    def _record(
        self, kind: Kind, keys: list[str], results: Sequence[Completion | Loglikelihood], fresh_keys: set[str]
    ) -> None:
        price = self.prices.lookup(self.inner.name)
        now = time.time()
        rows = []
        seen_fresh: set[str] = set()
        for key, result in zip(keys, results, strict=True):
            hit = key not in fresh_keys or key in seen_fresh
            seen_fresh.add(key)
            if hit:
                cost: float | None = 0.0
                self.stats.hits += 1
            else:
                self.stats.misses += 1
                cost = price.cost(result.tokens_in, result.tokens_out) if price is not None else None
                if result.failure is not None:
                    self.stats.failures += 1
            if cost is None:
                self.stats.cost_unknown_calls += 1
            else:
                self.stats.cost_usd += cost
            rows.append(
                LedgerRow(
                    ts=now,
                    run=self.run,
                    provider=self._provider,
                    model=self.inner.name,
                    kind=kind,
                    cache_key=key,
                    cache_hit=hit,
                    tokens_in=result.tokens_in,
                    tokens_out=result.tokens_out,
                    latency_s=0.0 if hit else result.latency_s,
                    attempts=0 if hit else result.attempts,
                    cost_usd=cost,
                    failure_kind=result.failure.kind if result.failure else None,
                    failure_message=result.failure.message if result.failure else None,
                )
            )
        if price is None and self.stats.cost_unknown_calls and not self._warned_unpriced:
            self._warned_unpriced = True
            logger.warning(
                "no price for %s: its cost is recorded as unknown; add it to %s",
                self.inner.name,
                "the price table ($SENSEFORGE_HOME/prices.toml)",
            )
        self.store.ledger_add(rows)


def open_llm(
    spec: str,
    options: dict[str, object] | None = None,
    *,
    store: Store | None = None,
    read_cache: bool = True,
    run: str | None = None,
) -> CachedLLM:
    """The backend for ``spec`` wrapped in the cache and ledger of ``store`` (default store if None)."""
    from senseforge.llm.registry import get_llm

    store = store or Store()
    return CachedLLM(get_llm(spec, dict(options or {}), store=store), store, run=run, read_cache=read_cache)
