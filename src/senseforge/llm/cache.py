"""A content-addressed response cache and a cost ledger around any backend.

:class:`CachedLLM` speaks the same protocol as the backend it wraps. Before a batch
reaches the backend it looks every request up by a key that covers the provider, the
model identity (weights hash, or served name plus base URL), the kind of call and the
full request with its sampling parameters and seed; only the misses are sent on. Every
request, hit or miss, becomes one ledger row with tokens, latency (and, where the backend
measures them apart, the server's time and the wait in the client before sending), attempts,
the errors of failed attempts, whether it was batched, and its cost with the price table of the
moment (a record: figures shown later are priced again, see :mod:`senseforge.llm.prices`). Failed
calls are recorded in the ledger but never cached. The rows are built and written by
:mod:`senseforge.llm.ledger`.

Results are written as they arrive, so that a run killed part-way (even by ``kill -9``)
never pays again for a call it already finished. A backend whose ``streams_results`` is
true reports each request as it finishes, and each is written at once; any other backend
gets the misses in sub-batches of ``flush_every``, each written as soon as it returns.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import json
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel
from pydantic_core import from_json

from senseforge.llm.base import (
    LLM,
    Completion,
    Failure,
    GenerateRequest,
    Loglikelihood,
    LoglikelihoodRequest,
    Progress,
)
from senseforge.llm.ledger import CacheStats, Kind, LedgerWriter, write_as_reported
from senseforge.llm.prices import PriceTable
from senseforge.llm.prompting import TEMPLATE_MARKERS, chat_template, diagnose, template_marker
from senseforge.store.db import Store

if TYPE_CHECKING:
    from senseforge.llm.providers.openai_batch import BatchClient

logger = logging.getLogger(__name__)

Req = TypeVar("Req", GenerateRequest, LoglikelihoodRequest)
Res = TypeVar("Res", Completion, Loglikelihood)
CACHE_VERSION = 1
FLUSH_EVERY = 64
"""Default sub-batch size for backends that do not stream results."""

_WARNED_UNPRICED: set[str] = set()
"""Models whose missing price this process has warned about."""

_AS_HIT: dict[str, Any] = {
    "cached": True,
    "attempts": 0,
    "latency_s": 0.0,
    "service_s": None,
    "queue_s": None,
    "retry_errors": (),
    "concurrency": None,
}
"""What a result answered without a backend call says of its call."""


_KEYS_KEPT = 1 << 12
"""Requests whose cache key :func:`cache_key` remembers: a stage's calls are keyed by the cache, then again by the
stage's call log (the same request objects, frozen), a batch apart; the requests are kept alive meanwhile, so a
few batches' worth is kept (all are forgotten when full)."""
_recent_keys: dict[int, tuple[BaseModel, str, dict[str, str], str, str]] = {}


def cache_key(provider: str, identity: dict[str, str], kind: Kind, request: BaseModel) -> str:
    """SHA-256 over everything that determines a response (a request's ``tag``, who asks, is left out)."""
    if not request.model_config.get("frozen"):
        return _cache_key(provider, identity, kind, request)
    found = _recent_keys.get(id(request))
    if found is not None and found[0] is request and found[1:4] == (provider, identity, kind):
        return found[4]  # the same (frozen) request object, kept alive here, so its id is its own
    key = _cache_key(provider, identity, kind, request)
    if len(_recent_keys) >= _KEYS_KEPT:
        _recent_keys.clear()
    _recent_keys[id(request)] = (request, provider, dict(identity), kind, key)
    return key


def _cache_key(provider: str, identity: dict[str, str], kind: Kind, request: BaseModel) -> str:
    payload = {
        "v": CACHE_VERSION,
        "provider": provider,
        "identity": identity,
        "kind": kind,
        "request": request.model_dump(mode="json"),
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


class InFlight:
    """The cache keys some batch of this process is asking a backend for now, and their answers once they come.

    A batch claims the keys it misses (:meth:`claim`): those nobody has in flight become its own, to send; it waits
    for the others (:meth:`wait`). The owner settles its keys with their answers (:meth:`settle`), or with the error
    that ended its batch, which leaves the waiters to ask themselves. Keys are per store: a result is shared only
    where it is cached.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: dict[tuple[str, str], concurrent.futures.Future[Any]] = {}

    def claim(self, store: str, keys: Sequence[str]) -> tuple[list[str], dict[str, concurrent.futures.Future[Any]]]:
        """``keys`` split into those this caller now owns and those another caller has in flight (with the
        future of their answer)."""
        owned: list[str] = []
        borrowed: dict[str, concurrent.futures.Future[Any]] = {}
        with self._lock:
            for key in keys:
                pending = self._pending.get((store, key))
                if pending is not None:
                    borrowed[key] = pending
                else:
                    self._pending[(store, key)] = concurrent.futures.Future()
                    owned.append(key)
        return owned, borrowed

    def settle(
        self, store: str, keys: Sequence[str], answers: Mapping[str, Any], error: BaseException | None = None
    ) -> None:
        """The owner's answers (``None`` for a key it has none for) and the end of its claim on ``keys``."""
        with self._lock:
            futures = [self._pending.pop((store, key), None) for key in keys]
        for key, future in zip(keys, futures, strict=True):
            if future is not None and not future.done():
                future.set_result(None if error is not None else answers.get(key))

    @staticmethod
    def wait(borrowed: Mapping[str, concurrent.futures.Future[Any]]) -> dict[str, Any]:
        """Each borrowed key's answer (``None``: its owner had none), once its owner settles it."""
        return {key: future.result() for key, future in borrowed.items()}


_IN_FLIGHT = InFlight()
"""The process's requests in flight, shared by every :class:`CachedLLM`."""


class CachedLLM:
    """Wraps a backend with the cache and the ledger.

    Args:
        inner: the backend.
        store: where the cache and ledger live.
        prices: the price table (default: shipped table plus the user's file).
        run: a label stored on each ledger row (a run name).
        read_cache: set to ``False`` to always call the backend (results are still stored).
        flush_every: for a backend that does not stream results, the most cache misses
            sent to it in one call; each such sub-batch is stored before the next is
            sent, so a killed run loses at most one sub-batch of work.

    Raises:
        ValueError: ``flush_every`` is below 1.
    """

    def __init__(
        self,
        inner: LLM,
        store: Store,
        *,
        prices: PriceTable | None = None,
        run: str | None = None,
        read_cache: bool = True,
        flush_every: int = FLUSH_EVERY,
    ) -> None:
        if flush_every < 1:
            raise ValueError(f"flush_every must be at least 1, not {flush_every}")
        self.inner = inner
        self.store = store
        self.prices = prices or PriceTable.load()
        self.run = run
        self.read_cache = read_cache
        self.flush_every = flush_every
        self.stats = CacheStats()
        self._provider = inner.name.split("/", 1)[0]
        self._identity: dict[str, str] | None = None
        self._lock = threading.Lock()  # results may be written from a backend's worker thread
        self._ledger = LedgerWriter(store, provider=self._provider, model=inner.name, run=run, stats=self.stats)
        self._awaited: dict[str, None] = {}
        """The batches at an API whose answers this wrapper's calls found not ready yet, oldest first."""

    @property
    def name(self) -> str:
        return self.inner.name

    def identity(self) -> dict[str, str]:
        if self._identity is None:
            self._identity = self.inner.identity()
        return self._identity

    def chat_template(self) -> str | None:
        """The wrapped backend's chat template (see :func:`senseforge.llm.prompting.chat_template`)."""
        return chat_template(self.inner)

    def close(self) -> None:
        self.inner.close()

    def awaited_batches(self) -> list[str]:
        """The batches at an API (``-o batch=true``) that this wrapper's calls last found still running, by id:
        what the requests answered ``awaiting_batch`` wait for."""
        with self._lock:
            return list(self._awaited)

    def generate(self, requests: Sequence[GenerateRequest], progress: Progress | None = None) -> list[Completion]:
        results = self._through(requests, "generate", Completion, self.inner.generate, progress)
        with self._lock:
            for request, result in zip(requests, results, strict=True):
                if not result.ok:
                    continue
                self.stats.replies += 1
                self.stats.max_tokens = max(self.stats.max_tokens, request.max_tokens)
                self.stats.replies_cut += result.finish_reason == "length"
                family = template_marker(result.text)
                if family is not None:
                    self.stats.replies_marked[family] = self.stats.replies_marked.get(family, 0) + 1
        return results

    def diagnosis(self) -> str | None:
        """One line when this model's replies so far look wrong as a whole (see
        :func:`senseforge.llm.prompting.diagnose`), else ``None``."""
        stats = self.stats
        replies = [Completion(text="", finish_reason="length")] * stats.replies_cut
        replies += [Completion(text="", finish_reason="stop")] * (stats.replies - stats.replies_cut)
        marked = sum(stats.replies_marked.values())
        if marked:
            family = max(stats.replies_marked, key=lambda name: stats.replies_marked[name])
            sample = TEMPLATE_MARKERS[family][0]
            replies = [Completion(text=sample, finish_reason="stop")] * marked + replies[marked:]
        return diagnose(replies, model=self.name, max_tokens=stats.max_tokens or None, template=self.chat_template())

    def loglikelihood(
        self, requests: Sequence[LoglikelihoodRequest], progress: Progress | None = None
    ) -> list[Loglikelihood]:
        return self._through(requests, "loglikelihood", Loglikelihood, self.inner.loglikelihood, progress)

    def ledger_hits(self, found: Sequence[tuple[str, str, str]]) -> None:
        """Ledger cached answers as hits, one row each (repeats included), as :meth:`generate` and
        :meth:`loglikelihood` would for requests answered from the cache, without the requests: for a stage outcome
        replayed whole (:mod:`senseforge.pipelines.replay`). ``found``: (key, kind, cached JSON) each.
        """
        by_kind: dict[str, list[tuple[str, dict[str, Any]]]] = {}
        for key, kind, response in found:
            # a cache row holds a result this wrapper validated before it stored it: its values are read as they are
            by_kind.setdefault("loglikelihood" if kind == "loglikelihood" else "generate", []).append(
                (key, from_json(response))
            )
        with self._lock:
            for kind, hits in by_kind.items():
                self._ledger.write_cached(kind, hits)  # type: ignore[arg-type]
            for _, values in by_kind.get("generate", ()):
                if values.get("failure"):
                    continue
                self.stats.replies += 1
                self.stats.replies_cut += values.get("finish_reason") == "length"
                family = template_marker(values.get("text") or "")
                if family is not None:
                    self.stats.replies_marked[family] = self.stats.replies_marked.get(family, 0) + 1

    def _through(
        self,
        requests: Sequence[Req],
        kind: Kind,
        result_type: type[Res],
        call: Callable[..., list[Res]],
        progress: Progress | None,
    ) -> list[Res]:
        identity = self.identity()
        keys = [cache_key(self._provider, identity, kind, request) for request in requests]
        cached = self.store.cache_get(keys) if self.read_cache else {}
        results: list[Res | None] = [None] * len(requests)
        for index, key in enumerate(keys):
            if key in cached:
                hit = result_type.model_validate_json(cached[key])
                results[index] = hit.model_copy(update=_AS_HIT)
        hits = [(keys[i], r) for i, r in enumerate(results) if r is not None]
        if hits:
            self._write(kind, requests, hits=hits)
        if progress and cached:
            progress(len(hits))
        # one backend call per distinct missing request, even when a batch repeats one;
        # the repeats are answered with its result and ledgered as hits
        todo: dict[str, list[int]] = {}
        for index, key in enumerate(keys):
            if results[index] is None:
                todo.setdefault(key, []).append(index)
        # a request another batch of this process has in flight (another stage, another thread) is not sent
        # again: this batch waits for that answer and ledgers it as a hit
        owned, borrowed = _IN_FLIGHT.claim(self.store.url, list(todo))
        try:
            self._send(call, kind, requests, {key: todo[key] for key in owned}, results, progress)
        except BaseException as exc:
            _IN_FLIGHT.settle(self.store.url, owned, {}, exc)
            raise
        _IN_FLIGHT.settle(self.store.url, owned, {key: results[todo[key][0]] for key in owned})
        retry: dict[str, list[int]] = {}
        for key, answer in _IN_FLIGHT.wait(borrowed).items():
            if answer is None or not answer.ok:  # its sender failed: ask for it here
                retry[key] = todo[key]
                continue
            hit = answer.model_copy(update=_AS_HIT)
            self._write(kind, requests, hits=[(key, hit)] * len(todo[key]))
            for index in todo[key]:
                results[index] = hit
            if progress:
                progress(len(todo[key]))
        if retry:
            self._send(call, kind, requests, retry, results, progress)
        out = [r for r in results if r is not None]
        assert len(out) == len(requests)
        return out

    def _send(
        self,
        call: Callable[..., list[Res]],
        kind: Kind,
        requests: Sequence[Req],
        todo: dict[str, list[int]],
        results: list[Res | None],
        progress: Progress | None,
    ) -> None:
        """Send each distinct request of ``todo`` (key → its indices in ``requests``) once, storing the answers
        and filling ``results`` at every index."""
        batches = getattr(self.inner, "batch_api", None) if kind == "generate" else None
        if batches is not None and todo:
            self._send_batched(batches, requests, todo, results, progress)
            return
        missing = list(todo)
        streams = bool(getattr(self.inner, "streams_results", False))
        step = max(len(missing), 1) if streams else self.flush_every
        for start in range(0, len(missing), step):
            answered = [(key, todo[key]) for key in missing[start : start + step]]
            batch = [requests[indices[0]] for _, indices in answered]
            if streams:
                fresh = write_as_reported(
                    call, batch, answered, progress, lambda items: self._write(kind, requests, fresh=items)
                )
            else:
                fresh = call(batch, progress)
                done = [(key, indices, result) for (key, indices), result in zip(answered, fresh, strict=True)]
                self._write(kind, requests, fresh=done)
            for (_, indices), result in zip(answered, fresh, strict=True):
                for index in indices:
                    results[index] = result

    def _send_batched(
        self,
        batches: BatchClient,
        requests: Sequence[Req],
        todo: dict[str, list[int]],
        results: list[Res | None],
        progress: Progress | None,
    ) -> None:
        """Send ``todo`` through the endpoint's Batch API: requests in no open batch go in one new batch (never a
        second one for the same requests: a batch is remembered in the store and, should the process die before
        that, found by its metadata); each open batch holding some is polled once; a completed batch's answers are
        all stored (cache and ledger, at the batch price) and it is closed. A request whose batch is still running
        gets an ``awaiting_batch`` failure, which nothing records. A new batch is remembered with the run and the
        stage (the requests' ``tag``) that asked, and every poll with the status the API gave."""
        endpoint = batches.endpoint
        open_batches = self.store.batches_open(endpoint)
        holder = {key: batch_id for batch_id, held in open_batches.items() for key in held}
        unsent = [key for key in todo if key not in holder]
        if unsent:
            sent = {key: requests[todo[key][0]].model_dump_json() for key in unsent}
            submission = hashlib.sha256("\n".join(sorted(unsent)).encode()).hexdigest()
            asked = [requests[todo[key][0]] for key in unsent]
            batch_id = batches.find(submission) or batches.submit(asked, unsent, submission)  # type: ignore[arg-type]
            stage = ", ".join(sorted({request.tag for request in asked if request.tag})) or None
            self.store.batch_add(batch_id, endpoint, submission, sent, run=self.run, stage=stage)
            open_batches[batch_id] = {**open_batches.get(batch_id, {}), **sent}
            holder.update(dict.fromkeys(unsent, batch_id))
        for batch_id in dict.fromkeys(holder[key] for key in todo):
            state = batches.poll(batch_id)
            with self._lock:
                self._awaited.pop(batch_id, None)
                if not state.finished and not state.dead:
                    self._awaited[batch_id] = None
            mine = [key for key in todo if holder[key] == batch_id]
            if state.finished:
                held = open_batches[batch_id]
                answers = self._collect(batch_id, held, batches.marked(state, held))
            else:
                why = f"batch {batch_id} at {endpoint} is {state.status}"
                if state.dead:
                    self.store.batch_close(batch_id, "failed")
                    failure = Failure(kind="server_error", message=f"{why}: its requests go in a new batch")
                else:
                    self.store.batch_polled(batch_id, state.status)
                    failure = Failure(kind="awaiting_batch", message=f"{why}: collect it later (--resume)")
                answers = {key: Completion(failure=failure) for key in mine}
            for key in mine:
                for index in todo[key]:
                    results[index] = answers[key]  # type: ignore[call-overload]
                if progress and answers[key].failure is None:
                    progress(len(todo[key]))

    def _collect(
        self, batch_id: str, held: Mapping[str, str], answers: Mapping[str, Completion]
    ) -> dict[str, Completion]:
        """Store every answer of a completed batch and close it, in one transaction; its answer per request (a
        failure for one the batch did not answer)."""
        price = self.prices.lookup(self.inner.name)
        missing = Failure(kind="server_error", message=f"batch {batch_id} holds no answer for the request")
        out = {key: answers.get(key) or Completion(failure=missing) for key in held}
        with self._lock:
            self._ledger.collect(batch_id, held, out, price)
        return out

    def _write(
        self,
        kind: Kind,
        requests: Sequence[Req],
        *,
        hits: Sequence[tuple[str, Completion | Loglikelihood]] = (),
        fresh: Sequence[tuple[str, list[int], Completion | Loglikelihood]] = (),
    ) -> None:
        """Store fresh results and ledger every request they answer, in one transaction.

        Args:
            kind: the kind of call.
            requests: the whole batch (for the request text of cache rows).
            hits: (key, result) of requests answered from the cache.
            fresh: (key, indices in the batch, result) of backend calls; the first index is
                the request sent, the others repeat it and are ledgered as hits.
        """
        price = self.prices.lookup(self.inner.name)
        with self._lock:
            self._ledger.write(kind, requests, price, hits=hits, fresh=fresh)
            if price is None and self.stats.cost_unknown_calls and self.inner.name not in _WARNED_UNPRICED:
                _WARNED_UNPRICED.add(self.inner.name)  # once per model and process, however many wrappers it has
                logger.warning(
                    "no price for %s: its cost is recorded as unknown; add it to %s",
                    self.inner.name,
                    "the price table ($SENSEFORGE_HOME/prices.toml)",
                )


def open_llm(
    spec: str,
    options: dict[str, object] | None = None,
    *,
    store: Store | None = None,
    read_cache: bool = True,
    run: str | None = None,
    responders: Mapping[str, Any] | None = None,
) -> CachedLLM:
    """The backend for ``spec`` wrapped in the cache and ledger of ``store`` (default store if None).

    ``responders`` name scripted responders (``scripted/<name>``), e.g. recipes' dry-run authors.
    """
    from senseforge.llm.registry import get_llm

    store = store or Store()
    llm = get_llm(spec, dict(options or {}), store=store, responders=responders)
    return CachedLLM(llm, store, run=run, read_cache=read_cache)
