"""OpenAI's Batch API for the ``openai`` provider (``-o batch=true``): the same requests at half the price, answered
within a day instead of a second.

A :class:`BatchClient` does the three things a batch needs, each one HTTP call or two:

* :meth:`~BatchClient.submit` writes the requests as a JSONL file (one line per request, its ``custom_id`` the
  request's cache key), uploads it (``POST /v1/files``, purpose ``batch``) and creates the batch
  (``POST /v1/batches``) with a ``senseforge_submission`` digest in its metadata;
* :meth:`~BatchClient.find` looks for a batch already created with that digest (``GET /v1/batches``), so that a
  process killed between creating a batch and remembering it never submits the same requests twice;
* :meth:`~BatchClient.poll` reads a batch (``GET /v1/batches/{id}``) and, once it is completed, its output and
  error files: one :class:`~senseforge.llm.base.Completion` per request, ``batched``, priced at the batch rate.

The cache layer (:class:`senseforge.llm.cache.CachedLLM`) decides what to submit and remembers each batch in
the cache store, which it owns; the provider only speaks to the endpoint.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Literal

from senseforge.llm.base import Completion, Failure, FailureKind, GenerateRequest

if TYPE_CHECKING:  # the client is made by the provider
    import openai

__all__ = ["SUBMISSION_KEY", "BatchClient", "BatchState"]

SUBMISSION_KEY: Final = "senseforge_submission"
"""The metadata key of a batch that names its requests (a digest of their cache keys)."""

FORM_KEY: Final = "senseforge_format"
"""The metadata key of a batch with reply shapes that names the form they were sent in (see
:mod:`senseforge.llm.providers.openai_formats`); absent from a batch without shapes."""

FINISHED: Final = frozenset({"completed"})
DEAD: Final = frozenset({"failed", "expired", "cancelled", "cancelling"})
"""States of a batch whose requests will never be answered there: they go in a new batch."""

_LIST_LIMIT: Final = 100


@dataclass(frozen=True)
class BatchState:
    """A batch as the endpoint reports it."""

    batch_id: str
    status: str
    """``validating``, ``in_progress``, ``finalizing``, ``completed``, ``failed``, ``expired``, ``cancelled`` …"""
    results: Mapping[str, Completion] = field(default_factory=dict)
    """Once completed: a completion per ``custom_id`` (a failure for each line of the error file)."""
    form: str | None = None
    """The form its reply shapes were sent in (:data:`FORM_KEY`), ``None`` for a batch without shapes."""

    @property
    def finished(self) -> bool:
        return self.status in FINISHED

    @property
    def dead(self) -> bool:
        return self.status in DEAD


@dataclass
class BatchClient:
    """Batches of one endpoint and served model.

    Args:
        client: opens a synchronous client of the endpoint (the provider's key, URL, timeout and TLS context).
        model: the served model name.
        base_url: the endpoint's URL (with the model, what :attr:`endpoint` names).
        url: the path every request of a batch is sent to (``/v1/chat/completions`` or ``/v1/completions``).
        body: a request's JSON body, exactly as the provider would send it online.
        parse: a successful answer's body as a completion (as the provider reads an online answer).
        form: the form the endpoint takes for reply shapes now (learned online, see
            :mod:`~senseforge.llm.providers.openai_formats`); ``None`` where shapes are sent no response format.
        learn: called before a batch with a JSON-schema shape is built, with one such request: probes the endpoint
            once, online, for the form it takes, so that no line of the batch is refused for its format.
        constrained: whether a request's reply was held to its shape, given the form its batch was sent in.
    """

    client: Callable[[], openai.OpenAI]
    model: str
    base_url: str
    url: Literal["/v1/chat/completions", "/v1/completions"]
    body: Callable[[GenerateRequest], dict[str, Any]]
    parse: Callable[[Any], Completion]
    form: Callable[[], str | None] = lambda: None
    learn: Callable[[GenerateRequest], None] | None = None
    constrained: Callable[[GenerateRequest, str | None], bool] = lambda request, form: False

    @property
    def endpoint(self) -> str:
        """What the cache store files this client's batches under: the base URL and the served model."""
        return f"{self.base_url} {self.model}"

    def find(self, submission: str) -> str | None:
        """The newest live batch created with ``submission`` in its metadata, if the endpoint still lists one."""
        with self.client() as client:
            page = client.batches.list(limit=_LIST_LIMIT)
            for batch in page.data:
                metadata = batch.metadata or {}
                if metadata.get(SUBMISSION_KEY) == submission and batch.status not in DEAD:
                    return batch.id
        return None

    def submit(self, requests: Sequence[GenerateRequest], keys: Sequence[str], submission: str) -> str:
        """Upload ``requests`` (each under its cache key) as one batch; its id.

        Where some request has a reply shape, the endpoint's form is learned first (:attr:`learn`), every line
        carries it, and the batch's metadata names it (:data:`FORM_KEY`)."""
        metadata = {SUBMISSION_KEY: submission}
        shaped = [request for request in requests if request.reply_shape is not None]
        if shaped:
            schema = next((r for r in shaped if r.reply_shape and r.reply_shape.json_schema is not None), None)
            if schema is not None and self.learn is not None:
                self.learn(schema)
            metadata[FORM_KEY] = self.form() or "none"
        lines = [
            json.dumps({"custom_id": key, "method": "POST", "url": self.url, "body": self.body(request)})
            for key, request in zip(keys, requests, strict=True)
        ]
        data = ("\n".join(lines) + "\n").encode()
        with self.client() as client:
            uploaded = client.files.create(file=("senseforge-batch.jsonl", data, "application/jsonl"), purpose="batch")
            batch = client.batches.create(
                input_file_id=uploaded.id,
                endpoint=self.url,
                completion_window="24h",
                metadata=metadata,
            )
        return batch.id

    def poll(self, batch_id: str) -> BatchState:
        """The batch's state, and its answers once it is completed."""
        with self.client() as client:
            batch = client.batches.retrieve(batch_id)
            form = (batch.metadata or {}).get(FORM_KEY)
            if batch.status not in FINISHED:
                return BatchState(batch_id, batch.status, form=form)
            latency = float(batch.completed_at - batch.created_at) if batch.completed_at and batch.created_at else 0.0
            results: dict[str, Completion] = {}
            for file_id in (batch.output_file_id, batch.error_file_id):
                if file_id:
                    for line in client.files.content(file_id).text.splitlines():
                        if line.strip():
                            custom_id, result = self._read_line(line, batch_id)
                            results[custom_id] = result.model_copy(update={"latency_s": latency, "batched": True})
        return BatchState(batch_id, batch.status, results, form)

    def marked(self, state: BatchState, held: Mapping[str, str]) -> dict[str, Completion]:
        """A completed batch's answers, each to a request with a reply shape (``held``: the requests' JSON by key)
        marked with whether it was held to it (:attr:`Completion.constrained`)."""
        out = dict(state.results)
        for key, answer in state.results.items():
            if key in held and answer.ok and '"reply_shape"' in held[key]:
                request = GenerateRequest.model_validate_json(held[key])
                out[key] = answer.model_copy(update={"constrained": self.constrained(request, state.form)})
        return out

    def _read_line(self, line: str, batch_id: str) -> tuple[str, Completion]:
        """One line of an output or error file: its ``custom_id`` and what it answered."""
        row = json.loads(line)
        custom_id = str(row.get("custom_id"))
        response = row.get("response") or {}
        status = int(response.get("status_code") or 0)
        body = response.get("body")
        if status == 200 and row.get("error") is None:
            try:
                return custom_id, self.parse(body)
            except Exception as exc:  # an answer the online path would not decode either
                return custom_id, _failed("truncated", f"batch {batch_id}: undecodable answer: {exc}")
        error = row.get("error") or (body or {}).get("error") or {}
        message = f"batch {batch_id}: {status or 'no status'} {error.get('message', 'failed')}"
        return custom_id, _failed(_kind_of(status), message)


def _kind_of(status: int) -> FailureKind:
    if status == 429:
        return "rate_limit"
    if status in (401, 403):
        return "auth"
    if status == 404:
        return "not_found"
    if 400 <= status < 500:
        return "bad_request"
    return "server_error"


def _failed(kind: FailureKind, message: str) -> Completion:
    return Completion(failure=Failure(kind=kind, message=message))
