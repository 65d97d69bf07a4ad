"""The Files and Batch API subset of the loopback OpenAI server, so a batch client can be tested offline.

:class:`BatchDesk` keeps uploaded files and batches in memory. A client uploads a JSONL
file of requests, creates a batch from it, polls the batch until it is ``completed``,
and reads the output (and error) file, as it would from OpenAI. The desk does not answer
the requests itself: it is given a function that answers one request body for an
endpoint (the loopback server's online path, less latency and faults), and calls it for
every line once the batch is due. It uses only the standard library.

Routes (see :meth:`BatchDesk.route`): ``POST /v1/files``, ``GET /v1/files/{id}``,
``GET /v1/files/{id}/content``, ``POST /v1/batches``, ``GET /v1/batches``,
``GET /v1/batches/{id}`` and ``POST /v1/batches/{id}/cancel``.

>>> desk = BatchDesk(lambda path, body, number: (200, {"echo": body["x"]}), latency_s=None)
>>> line = {"custom_id": "a", "method": "POST", "url": "/v1/completions", "body": {"x": 1}}
>>> upload = desk.upload("in.jsonl", json.dumps(line).encode(), "batch")
>>> request = {"input_file_id": upload["id"], "endpoint": "/v1/completions", "completion_window": "24h"}
>>> batch = desk.create_batch(request)
>>> desk.batch(batch["id"])["status"], desk.finish_batches(), desk.batch(batch["id"])["status"]
('in_progress', 1, 'completed')
>>> json.loads(desk.content(desk.batch(batch["id"])["output_file_id"]))["response"]["body"]
{'echo': 1}
"""

from __future__ import annotations

import email.parser
import email.policy
import json
import threading
import time
import urllib.parse
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from senseforge.errors import ConfigError

LineAnswerer = Callable[[str, dict[str, Any], int], tuple[int, dict[str, Any]]]
"""Answers one batch line: given the endpoint path (``/v1/chat/completions`` or ``/v1/completions``), the
request body and the line's 1-based serial number, returns the HTTP status and the JSON body an online request
would have got (a completion object with 200, an error object such as :func:`error_payload`'s otherwise).
It may raise; the line then fails with 500."""

BATCH_ENDPOINTS: tuple[str, ...] = ("/v1/chat/completions", "/v1/completions")
"""The endpoints a batch may target."""

COMPLETION_WINDOW = "24h"
"""The only completion window OpenAI accepts."""

DEFAULT_LIST_LIMIT = 20
"""Batches listed per page when the request names no ``limit`` (OpenAI's default)."""

_OCTET_STREAM = "application/octet-stream"
_JSON = "application/json"


def error_payload(status: int, message: str) -> dict[str, Any]:
    """The JSON error object the loopback server answers with: ``{"error": {"message", "type", "code"}}``.

    >>> error_payload(404, "no such file")
    {'error': {'message': 'no such file', 'type': 'loopback', 'code': '404'}}
    """
    return {"error": {"message": message, "type": "loopback", "code": str(status)}}


class DeskError(Exception):
    """A Files or Batch API request the desk refuses, with the HTTP status to answer."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class DeskAnswer:
    """One HTTP answer from the desk."""

    status: int
    payload: bytes
    content_type: str = _JSON


@dataclass
class _File:
    id: str
    filename: str
    purpose: str
    data: bytes
    created_at: int

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "file",
            "bytes": len(self.data),
            "created_at": self.created_at,
            "filename": self.filename,
            "purpose": self.purpose,
            "status": "processed",
        }


@dataclass
class _Batch:
    id: str
    serial: int
    endpoint: str
    input_file_id: str
    metadata: dict[str, str] | None
    created_at: int
    due: float | None
    """``time.monotonic()`` from when the batch may complete; None: only when :meth:`BatchDesk.finish_batches` runs."""
    lines: list[tuple[str, dict[str, Any]]]
    """``(custom_id, body)`` of every request, in the input file's order."""
    status: str = "in_progress"
    output_file_id: str | None = None
    error_file_id: str | None = None
    completed_at: int | None = None
    cancelled_at: int | None = None
    counts: dict[str, int] = field(default_factory=lambda: {"completed": 0, "failed": 0})

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "batch",
            "endpoint": self.endpoint,
            "input_file_id": self.input_file_id,
            "completion_window": COMPLETION_WINDOW,
            "status": self.status,
            "output_file_id": self.output_file_id,
            "error_file_id": self.error_file_id,
            "created_at": self.created_at,
            "completed_at": self.completed_at,
            "cancelled_at": self.cancelled_at,
            "request_counts": {"total": len(self.lines), **self.counts},
            "metadata": None if self.metadata is None else dict(self.metadata),
            "errors": None,
        }


class BatchDesk:
    """Files and batches of a loopback server, in memory; every method is safe to call from many threads.

    A batch is created ``in_progress`` and completes once it is due, ``latency_s`` seconds
    after its creation: lazily, the next time it is read (:meth:`batch`,
    :meth:`list_batches`, :meth:`cancel`), or when :meth:`finish_batches` runs. With
    ``latency_s=None`` only :meth:`finish_batches` completes batches. On completion every
    line is answered through ``answer``; a 200 answer becomes a line of the output file, any
    other status (or an exception from ``answer``, as a 500) a line of the error file, both
    in the input file's order.

    Args:
        answer: answers one request body for an endpoint (see :data:`LineAnswerer`).
        latency_s: seconds from a batch's creation until it is due, or None for "never by itself".
        lock: guards the desk's state; pass the server's own lock to count under it.

    Raises:
        ConfigError: ``latency_s`` is negative.
    """

    def __init__(
        self, answer: LineAnswerer, *, latency_s: float | None = 0.0, lock: threading.Lock | None = None
    ) -> None:
        if latency_s is not None and latency_s < 0:
            raise ConfigError(f"batch_latency_s must be >= 0 or None, got {latency_s}")
        self.answer = answer
        self.latency_s = latency_s
        self._lock = lock if lock is not None else threading.Lock()
        # held for a whole completion, answers included, so that a read after a batch is due
        # always finds it completed (never half-done by another thread); _lock is taken inside it
        self._settling = threading.Lock()
        self._files: dict[str, _File] = {}
        self._batches: dict[str, _Batch] = {}
        self._file_serial = 0
        self._batch_serial = 0
        self._line_serial = 0
        self._files_uploaded = 0

    # -- statistics --------------------------------------------------------------------------

    @property
    def files_uploaded(self) -> int:
        """Files uploaded by clients (output and error files not counted)."""
        with self._lock:
            return self._files_uploaded

    @property
    def batches_created(self) -> int:
        """Batches created (refused creations not counted)."""
        with self._lock:
            return self._batch_serial

    # -- files -------------------------------------------------------------------------------

    def upload(self, filename: str, data: bytes, purpose: str) -> dict[str, Any]:
        """Store an uploaded file; returns its file object. Only ``purpose="batch"`` is accepted."""
        if purpose != "batch":
            raise DeskError(400, f"purpose must be 'batch', got {purpose!r}")
        with self._lock:
            self._files_uploaded += 1
            return self._store(filename, data, purpose).as_json()

    def file(self, file_id: str) -> dict[str, Any]:
        """The file object of ``file_id``."""
        with self._lock:
            return self._file(file_id).as_json()

    def content(self, file_id: str) -> bytes:
        """The bytes of ``file_id``, as uploaded or written."""
        with self._lock:
            return self._file(file_id).data

    def _store(self, filename: str, data: bytes, purpose: str) -> _File:
        """Keep a new file (call with the lock held)."""
        self._file_serial += 1
        stored = _File(f"file-{self._file_serial}", filename, purpose, data, int(time.time()))
        self._files[stored.id] = stored
        return stored

    def _file(self, file_id: str) -> _File:
        try:
            return self._files[file_id]
        except KeyError:
            raise DeskError(404, f"no file with id {file_id!r}") from None

    # -- batches -----------------------------------------------------------------------------

    def create_batch(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """Create a batch from a ``POST /v1/batches`` body; returns its batch object.

        The body names ``input_file_id``, ``endpoint`` (one of :data:`BATCH_ENDPOINTS`),
        ``completion_window`` (``24h``) and optionally ``metadata`` (strings to strings).
        Every line of the input file is checked now, so a bad file is refused at once with
        the number of its first bad line.
        """
        endpoint = request.get("endpoint")
        if endpoint not in BATCH_ENDPOINTS:
            raise DeskError(400, f"endpoint must be one of {', '.join(BATCH_ENDPOINTS)}, got {endpoint!r}")
        window = request.get("completion_window")
        if window != COMPLETION_WINDOW:
            raise DeskError(400, f"completion_window must be {COMPLETION_WINDOW!r}, got {window!r}")
        metadata = request.get("metadata")
        if metadata is not None and not (
            isinstance(metadata, dict) and all(isinstance(v, str) for v in metadata.values())
        ):
            raise DeskError(400, "metadata must be an object of strings")
        input_file_id = request.get("input_file_id")
        with self._lock:
            if not isinstance(input_file_id, str) or input_file_id not in self._files:
                raise DeskError(400, f"input_file_id {input_file_id!r} names no uploaded file")
            data = self._files[input_file_id].data
        lines = _batch_lines(data, str(endpoint))
        due = None if self.latency_s is None else time.monotonic() + self.latency_s
        with self._lock:
            self._batch_serial += 1
            batch = _Batch(
                id=f"batch_{self._batch_serial}",
                serial=self._batch_serial,
                endpoint=str(endpoint),
                input_file_id=input_file_id,
                metadata=None if metadata is None else dict(metadata),
                created_at=int(time.time()),
                due=due,
                lines=lines,
            )
            self._batches[batch.id] = batch
            return batch.as_json()

    def batch(self, batch_id: str) -> dict[str, Any]:
        """The batch object of ``batch_id``, completing the batch first if it is due."""
        with self._settling:
            self._settle(force=False, ids=(batch_id,))
            with self._lock:
                return self._batch(batch_id).as_json()

    def list_batches(self, limit: int = DEFAULT_LIST_LIMIT, after: str | None = None) -> dict[str, Any]:
        """A page of batch objects, newest first: at most ``limit`` of them, older than ``after`` if given.

        Returns ``{"object": "list", "data", "first_id", "last_id", "has_more"}``, OpenAI's cursor page.
        """
        if not 1 <= limit <= 100:
            raise DeskError(400, f"limit must lie between 1 and 100, got {limit}")
        with self._settling:
            self._settle(force=False, ids=None)
            with self._lock:
                newest_first = sorted(self._batches.values(), key=lambda batch: batch.serial, reverse=True)
                if after is not None:
                    older_than = self._batch(after).serial
                    newest_first = [batch for batch in newest_first if batch.serial < older_than]
                page = [batch.as_json() for batch in newest_first[:limit]]
        return {
            "object": "list",
            "data": page,
            "first_id": page[0]["id"] if page else None,
            "last_id": page[-1]["id"] if page else None,
            "has_more": len(newest_first) > limit,
        }

    def cancel(self, batch_id: str) -> dict[str, Any]:
        """Cancel ``batch_id`` if it is still in progress (a due batch completes first); returns its batch object."""
        with self._settling:
            self._settle(force=False, ids=(batch_id,))
            with self._lock:
                batch = self._batch(batch_id)
                if batch.status == "in_progress":
                    batch.status = "cancelled"
                    batch.cancelled_at = int(time.time())
                return batch.as_json()

    def finish_batches(self) -> int:
        """Complete every batch still in progress now, due or not; returns how many were completed."""
        with self._settling:
            return self._settle(force=True, ids=None)

    def _batch(self, batch_id: str) -> _Batch:
        try:
            return self._batches[batch_id]
        except KeyError:
            raise DeskError(404, f"no batch with id {batch_id!r}") from None

    def _settle(self, *, force: bool, ids: Collection[str] | None) -> int:
        """Complete the batches in progress (among ``ids``, or all) that are due, or all of them with ``force``.

        Call it with ``_settling`` held; the answers are made outside ``_lock``, so that the
        responder never holds up the server's statistics.
        """
        now = time.monotonic()
        with self._lock:
            chosen = [self._batch(batch_id) for batch_id in ids] if ids is not None else list(self._batches.values())
            todo = [
                batch
                for batch in chosen
                if batch.status == "in_progress" and (force or (batch.due is not None and now >= batch.due))
            ]
            firsts = []
            for batch in todo:
                firsts.append(self._line_serial + 1)
                self._line_serial += len(batch.lines)
        for batch, first in zip(todo, firsts, strict=True):
            done: list[dict[str, Any]] = []
            failed: list[dict[str, Any]] = []
            for number, (custom_id, body) in enumerate(batch.lines, start=first):
                status, answer = self._answer(batch.endpoint, body, number)
                line = {
                    "id": f"batch_req_{number}",
                    "custom_id": custom_id,
                    "response": {"status_code": status, "request_id": f"req_{number}", "body": answer},
                    "error": None,
                }
                (done if status == 200 else failed).append(line)
            with self._lock:
                batch.output_file_id = self._store(f"{batch.id}_output.jsonl", _jsonl(done), "batch_output").id
                if failed:
                    batch.error_file_id = self._store(f"{batch.id}_error.jsonl", _jsonl(failed), "batch_output").id
                batch.counts = {"completed": len(done), "failed": len(failed)}
                batch.completed_at = int(time.time())
                batch.status = "completed"
        return len(todo)

    def _answer(self, endpoint: str, body: dict[str, Any], number: int) -> tuple[int, dict[str, Any]]:
        try:
            return self.answer(endpoint, body, number)
        except Exception as exc:
            return 500, error_payload(500, f"responder failed: {type(exc).__name__}: {exc}")

    # -- HTTP --------------------------------------------------------------------------------

    def route(self, method: str, target: str, content_type: str, raw: bytes) -> DeskAnswer | None:
        """Answer an HTTP request under ``/v1/files`` or ``/v1/batches``; None for any other path.

        ``target`` is the request line's path with its query string, ``content_type`` the
        request's ``Content-Type`` header and ``raw`` its body. A refusal is answered with
        its status and :func:`error_payload`'s JSON.
        """
        parts = urllib.parse.urlsplit(target)
        segments = parts.path.strip("/").split("/")
        if segments[:1] != ["v1"] or segments[1:2] not in (["files"], ["batches"]):
            return None
        try:
            return self._route(method, segments[1:], urllib.parse.parse_qs(parts.query), content_type, raw)
        except DeskError as exc:
            return DeskAnswer(exc.status, json.dumps(error_payload(exc.status, exc.message)).encode())

    def _route(
        self, method: str, segments: list[str], query: dict[str, list[str]], content_type: str, raw: bytes
    ) -> DeskAnswer:
        match method, segments:
            case "POST", ["files"]:
                return _json(self.upload(*_form_file(content_type, raw)))
            case "GET", ["files", file_id]:
                return _json(self.file(file_id))
            case "GET", ["files", file_id, "content"]:
                return DeskAnswer(200, self.content(file_id), _OCTET_STREAM)
            case "POST", ["batches"]:
                return _json(self.create_batch(_json_object(raw)))
            case "GET", ["batches"]:
                limit = _query_value(query, "limit")
                after = _query_value(query, "after")
                try:
                    count = DEFAULT_LIST_LIMIT if limit is None else int(limit)
                except ValueError:
                    raise DeskError(400, f"limit must be an integer, got {limit!r}") from None
                return _json(self.list_batches(count, after))
            case "GET", ["batches", batch_id]:
                return _json(self.batch(batch_id))
            case "POST", ["batches", batch_id, "cancel"]:
                return _json(self.cancel(batch_id))
        raise DeskError(404, f"no route for {method} /v1/{'/'.join(segments)}")


def _batch_lines(data: bytes, endpoint: str) -> list[tuple[str, dict[str, Any]]]:
    """``(custom_id, body)`` of every request line of a batch input file; blank lines are skipped.

    Raises:
        DeskError: (400) the file is not UTF-8, has no requests, or a line is not a request for ``endpoint``;
            the message names the 1-based line number.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DeskError(400, f"the input file is not UTF-8: {exc}") from None
    lines: list[tuple[str, dict[str, Any]]] = []
    seen: set[str] = set()
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DeskError(400, f"line {number} of the input file is not JSON: {exc}") from None
        problem = _line_problem(record, endpoint, seen)
        if problem is not None:
            raise DeskError(400, f"line {number} of the input file: {problem}")
        seen.add(record["custom_id"])
        lines.append((record["custom_id"], record["body"]))
    if not lines:
        raise DeskError(400, "the input file holds no requests")
    return lines


def _line_problem(record: Any, endpoint: str, seen: Collection[str]) -> str | None:
    """What is wrong with one parsed input line, or None."""
    if not isinstance(record, dict):
        return "must be a JSON object"
    custom_id = record.get("custom_id")
    if not isinstance(custom_id, str):
        return f"custom_id must be a string, got {custom_id!r}"
    if custom_id in seen:
        return f"custom_id {custom_id!r} is used twice"
    if record.get("method") != "POST":
        return f"method must be 'POST', got {record.get('method')!r}"
    if record.get("url") != endpoint:
        return f"url {record.get('url')!r} is not the batch's endpoint {endpoint!r}"
    if not isinstance(record.get("body"), dict):
        return "body must be a JSON object"
    return None


def _form_file(content_type: str, raw: bytes) -> tuple[str, bytes, str]:
    """``(filename, data, purpose)`` of a ``multipart/form-data`` upload with ``file`` and ``purpose`` fields."""
    if not content_type.lower().startswith("multipart/form-data"):
        raise DeskError(400, f"an upload must be multipart/form-data, got {content_type!r}")
    # the email parser reads MIME multipart bodies; a synthetic header gives it the boundary
    head = f"Content-Type: {content_type}\r\nMIME-Version: 1.0\r\n\r\n".encode("latin-1", "replace")
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + raw)
    if not message.is_multipart():
        raise DeskError(400, "the upload's multipart body could not be read")
    fields: dict[str, tuple[str | None, bytes]] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        if isinstance(name, str):
            payload = part.get_payload(decode=True)
            fields[name] = (part.get_filename(), payload if isinstance(payload, bytes) else b"")
    if "file" not in fields:
        raise DeskError(400, "the upload has no 'file' field")
    if "purpose" not in fields:
        raise DeskError(400, "the upload has no 'purpose' field")
    filename, data = fields["file"]
    return filename or "file", data, fields["purpose"][1].decode("utf-8", "replace").strip()


def _json_object(raw: bytes) -> dict[str, Any]:
    try:
        body = json.loads(raw or b"{}")
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DeskError(400, f"the body is not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise DeskError(400, "the body must be a JSON object")
    return body


def _query_value(query: Mapping[str, list[str]], name: str) -> str | None:
    values = query.get(name)
    return values[-1] if values else None


def _json(value: dict[str, Any]) -> DeskAnswer:
    return DeskAnswer(200, json.dumps(value).encode())


def _jsonl(records: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(record) + "\n" for record in records).encode()
