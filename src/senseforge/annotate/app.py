"""The annotation web app: a thin layer of routes over :class:`~senseforge.annotate.store.AnnotationStore`.

People open their invite link (``/login?token=…``), which leaves the token in an
HttpOnly, SameSite=Strict cookie; scripts send ``Authorization: Bearer <token>`` instead.
Pages are rendered on the server from ``templates/`` with autoescaping on, because every
item text is untrusted LM output, and served under a Content-Security-Policy that runs
only the pages' own inline scripts (each carries the response's nonce). A page speaks its
reader's language: the one stored with them (``annotate invite --lang``, or switched on the
page), else the first of their browser's ``Accept-Language`` the app speaks, else English;
``<html lang>`` says which, while item texts carry their own ``lang``.

Routes:

* ``GET /login?token=…`` — set the session cookie, redirect to ``/``; ``POST /logout``;
* ``POST /lang`` — the language of the caller's pages (remembered with them; see
  :mod:`senseforge.annotate.i18n`), then back to the page they were on;
* ``GET /`` — the caller's task types, with what is left of each;
* ``GET /t/{type}`` and ``POST /t/{type}`` — the next assignment as a keyboard-first form,
  and its submission (303 back to the next one; 422 with the problems shown); the page is
  ``templates/<type>.html``, or for a registered task type without one ``task.html``, built
  from the type's declared form;
* ``GET /admin`` and ``GET /export/{type}.jsonl`` — progress, agreement, the QC queue and
  the judgements (``/export/all.jsonl``: of every type; admins only);
* ``POST /api/{type}/next`` and ``POST /api/{type}/{assignment_id}`` — the same as JSON (``next`` says where
  the task stands in the caller's queue: ``position``, ``{"n": …, "of": …}``);
* ``POST /t/{type}/undo/{assignment_id}`` and ``POST /api/{type}/{assignment_id}/undo`` — take back one's last judgement
  of the type while no stage has decided on it (409 once one has, or for another's); the task is one's own
  again and comes next. Task pages offer it (a button, the key ``u``) after a submission.

With a :class:`~senseforge.annotate.follow.Follower` (``annotate serve --follow``) the run moves on by itself: an
annotator whose queue is empty while it does is told that more work is coming (the page looks again by itself;
``/api/{type}/next`` answers ``{"assignment_id": null, "more_coming": true}`` with ``Retry-After``), and the admin
page shows the log of advances beside the run's state.

Form posts authenticated by the cookie carry a ``csrf`` field (HMAC-SHA256 of the literal
``csrf`` keyed with the token; JSON calls that rely on the cookie send it as an
``X-CSRF-Token`` header); a missing or wrong one is answered 403; bearer calls need none.

Every handler is a blocking function that runs in Starlette's threadpool, one hop per
request, with the body read beforehand (at most :data:`MAX_BODY`). The store's
transactions make concurrent submissions exactly-once; on SQLite this process also queues
its writes on one lock, so waiting threads wake when the writer is done instead of polling
SQLite's busy handler (``benchmarks/annotate_load.py``: p99 of a submit under 50 flat-out
clients fell from about 1.3 s to 0.4 s).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from senseforge.annotate.admin_routes import Admin
from senseforge.annotate.api_routes import Api
from senseforge.annotate.follow import Follower
from senseforge.annotate.i18n import (
    N_,
)
from senseforge.annotate.pages import Pages
from senseforge.annotate.store import DEFAULT_LEASE_S, AnnotationStore
from senseforge.annotate.web import (
    COOKIE,
    MAX_BODY,
    _answering,
    agreement_summary,
    csrf_token,
    template_environment,
)


class _App(Pages, Admin, Api):
    """The routes, bound to one store and one template environment per language (:class:`WebBase` and its route
    groups)."""


Handler = Callable[[Request, bytes], Response]


async def _read_body(request: Request) -> bytes:
    """The request body, refused (413) past :data:`MAX_BODY` without reading further."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_BODY:
        raise HTTPException(413, N_("request body too large"))
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY:
            raise HTTPException(413, N_("request body too large"))
        chunks.append(chunk)
    return b"".join(chunks)


def _in_threadpool(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    """An endpoint that reads the body, then runs the blocking handler in the threadpool in one hop."""

    def answer(request: Request, body: bytes) -> Response:
        _answering.request = request
        try:
            return handler(request, body)
        finally:
            _answering.request = None

    async def endpoint(request: Request) -> Response:
        body = await _read_body(request) if request.method == "POST" else b""
        return await run_in_threadpool(answer, request, body)

    return endpoint


def create_app(
    store_url: str,
    *,
    lease_s: float = DEFAULT_LEASE_S,
    secure_cookies: bool = False,
    clock: Callable[[], float] | None = None,
    follower: Follower | None = None,
    run_state: Callable[[], Mapping[str, Any]] | None = None,
) -> Starlette:
    """The annotation app over the run store at ``store_url``.

    Args:
        store_url: the run store's SQLAlchemy URL (``sqlite:///…/run.db`` or PostgreSQL).
        lease_s: how long an assignment stays reserved for its annotator.
        secure_cookies: mark the session cookie ``Secure`` (serve over HTTPS).
        clock: the time source of the store (tests move it forward); ``time.time`` by default.
        follower: resumes the run as judgements let it move on (``--follow``); started and stopped with the app.
        run_state: where the run stands (``run_status`` as JSON values), for the admin page; without it the page
            shows the run store's state alone.
    """
    store = AnnotationStore(store_url, lease_s=lease_s, clock=clock or time.time)
    web = _App(store, secure_cookies=secure_cookies, follower=follower, run_state=run_state)

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        if follower is not None:
            follower.start()
        try:
            yield
        finally:
            if follower is not None:
                await run_in_threadpool(follower.stop)
            store.close()

    routes = [
        Route("/login", _in_threadpool(web.login), methods=["GET"]),
        Route("/logout", _in_threadpool(web.logout), methods=["POST"]),
        Route("/lang", _in_threadpool(web.set_language), methods=["POST"]),
        Route("/", _in_threadpool(web.home), methods=["GET"]),
        Route("/t/{task_type}", _in_threadpool(web.next_page), methods=["GET"]),
        Route("/t/{task_type}", _in_threadpool(web.submit_page), methods=["POST"]),
        Route("/t/{task_type}/undo/{assignment_id:int}", _in_threadpool(web.undo_page), methods=["POST"]),
        Route("/admin", _in_threadpool(web.admin_page), methods=["GET"]),
        Route("/admin/adjudicate/{task_type}", _in_threadpool(web.adjudication_page), methods=["GET"]),
        Route("/admin/adjudicate/{task_type}", _in_threadpool(web.adjudicate_form), methods=["POST"]),
        Route("/api/adjudicate/{task_type}/{item_id}", _in_threadpool(web.api_adjudicate), methods=["POST"]),
        Route("/favicon.ico", lambda _request: Response(status_code=204), methods=["GET"]),
        Route("/export/{task_type}.jsonl", _in_threadpool(web.export), methods=["GET"]),
        Route("/api/{task_type}/next", _in_threadpool(web.api_next), methods=["POST"]),
        Route("/api/{task_type}/{assignment_id:int}", _in_threadpool(web.api_submit), methods=["POST"]),
        Route("/api/{task_type}/{assignment_id:int}/undo", _in_threadpool(web.api_undo), methods=["POST"]),
    ]
    app = Starlette(routes=routes, lifespan=lifespan, exception_handlers={HTTPException: web.handle_error})
    app.state.store = store
    return app


__all__ = ["COOKIE", "MAX_BODY", "agreement_summary", "create_app", "csrf_token", "template_environment"]
