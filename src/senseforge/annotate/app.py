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
import dataclasses
import functools
import hashlib
import hmac
import json
import secrets
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qsl

import jinja2
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from senseforge.annotate.follow import Follower, describe
from senseforge.annotate.i18n import (
    N_,
    SOURCE_LANGUAGE,
    Said,
    html_lang,
    language_name,
    languages,
    translate,
    translations,
)
from senseforge.annotate.store import DEFAULT_LEASE_S, AnnotationStore, Annotator, Assignment, Closed, NotYours
from senseforge.annotate.tasktypes import TASK_TYPES, InvalidSubmission, TaskType
from senseforge.data.schema import Judgement
from senseforge.evaluate import policies
from senseforge.pipelines.quality import quality_settings

COOKIE = "senseforge_session"
COOKIE_MAX_AGE = 30 * 24 * 3600
MAX_BODY = 64 * 1024
"""The largest request body accepted (a judgement is well under a kilobyte)."""
_RESERVED = frozenset({"csrf", "assignment_id"})
SHOWN_WORDS = (N_("awaiting qc"), N_("needs revision"), N_("revised"), N_("complete"), N_("submitted"))
"""Values the pages show from the store, translated when shown: the QC queue's states, a question's history's."""
_answering = threading.local()
"""The request the handler running in this thread answers (its path is where the language switch returns)."""
RECHECK_S = 15
"""Seconds after which a page (or a client) with nothing to do while more work is coming looks again."""
RUN_STATES = {
    "running": N_("running"),
    "awaiting_review": N_("waiting on people"),
    "awaiting_batch": N_("awaiting batch"),
    "done": N_("done"),
    "stopped": N_("stopped"),
}
"""The admin page's words for a run's states (``run_status``), translated when shown."""


def _utc(ts: float) -> str:
    """A time as the admin page shows it: ``2026-12-04 03:12:05``, UTC."""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S")


def csrf_token(token: str) -> str:
    """The CSRF value that goes with an invite token: HMAC-SHA256(key=token, msg="csrf"), hex."""
    return hmac.new(token.encode("utf-8"), b"csrf", hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class _Caller:
    """Who is asking, with the token they showed and how (cookie or bearer header)."""

    who: Annotator
    token: str
    bearer: bool


def _wants_json(request: Request) -> bool:
    path = request.url.path
    return path.startswith(("/api/", "/export/")) or "authorization" in request.headers


@contextlib.contextmanager
def _refusals_as_http() -> Iterator[None]:
    """The store's refusals of a write as HTTP answers: 403 for another's, 409 once closed, 404 for no such."""
    try:
        yield
    except NotYours as exc:
        raise HTTPException(403, str(exc)) from None
    except Closed as exc:
        raise HTTPException(409, str(exc)) from None
    except LookupError as exc:
        raise HTTPException(404, str(exc)) from None


def template_environment(lang: str) -> jinja2.Environment:
    """The templates in ``lang``: ``_()`` / ``{% trans %}`` from its catalogue, ``|tr`` for strings given as values."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("senseforge.annotate", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        extensions=["jinja2.ext.i18n"],
    )
    found = translations(lang)
    env.install_gettext_translations(found, newstyle=True)  # type: ignore[attr-defined]  # added by the extension
    env.filters["tr"] = functools.partial(translate, found)
    env.filters["utc"] = _utc
    env.globals.update(
        page_lang=html_lang(lang),
        lang_code=lang,
        languages=[(code, html_lang(code), language_name(code)) for code in languages()],
    )
    return env


def _accepted(header: str) -> str | None:
    """The first language of an ``Accept-Language`` header that the app speaks, or ``None``."""
    from babel import negotiate_locale

    wanted: list[tuple[float, int, str]] = []
    for part in header.split(","):
        tag, _, weight = part.strip().partition(";q=")
        try:
            quality = float(weight) if weight else 1.0
        except ValueError:
            continue
        if tag and tag != "*" and quality > 0:
            wanted.append((-quality, len(wanted), tag.replace("-", "_")))
    found = negotiate_locale([tag for _q, _i, tag in sorted(wanted)], list(languages()))
    return found if isinstance(found, str) else None


def _security_headers(nonce: str) -> dict[str, str]:
    policy = (
        f"default-src 'none'; script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}'; img-src 'self'; "
        "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    )
    return {
        "Content-Security-Policy": policy,
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "Cache-Control": "no-store",
    }


def agreement_summary(by_item: Mapping[str, list[Judgement]], task: str) -> dict[str, Any]:
    """Agreement among the judgements of one task type, as JSON-ready numbers (``None``: undefined).

    See :func:`senseforge.evaluate.policies.agreement`: items with fewer than two votes are
    left out; Fleiss' kappa needs the same number of votes on every remaining item.
    """
    return dataclasses.asdict(policies.agreement(by_item, task))


def _same(a: Judgement, b: Judgement) -> bool:
    """Whether two judgements say the same (who made them and when aside)."""

    def key(j: Judgement) -> dict[str, Any]:
        return j.model_dump(mode="json", exclude={"annotator", "created_at"})

    return key(a) == key(b)


class _App:
    """The routes, bound to one store and one template environment.

    Each handler is a plain function of (request, body) that the endpoint runs in
    Starlette's threadpool in one hop, body already read; on SQLite, the writes of this
    process queue on one lock instead of polling SQLite's busy handler.
    """

    def __init__(
        self,
        store: AnnotationStore,
        *,
        secure_cookies: bool,
        follower: Follower | None = None,
        run_state: Callable[[], Mapping[str, Any]] | None = None,
    ) -> None:
        self.store = store
        self.secure_cookies = secure_cookies
        self.follower = follower
        self.run_state = run_state
        self._environments: dict[str, jinja2.Environment] = {}
        self._building = threading.Lock()
        self.templates = self.environment(SOURCE_LANGUAGE)
        self.own_pages = frozenset(self.templates.list_templates(extensions=["html"]))
        """The templates there are: a task type without ``<name>.html`` is shown ``task.html``, built from its form."""
        sqlite = store.engine.dialect.name == "sqlite"
        self.writing: contextlib.AbstractContextManager[Any] = threading.Lock() if sqlite else contextlib.nullcontext()

    # -- plumbing ------------------------------------------------------------------------

    def environment(self, lang: str) -> jinja2.Environment:
        """The templates in ``lang`` (one environment per language, made when first asked for)."""
        with self._building:
            env = self._environments.get(lang)
            if env is None:
                env = self._environments[lang] = template_environment(lang)
        return env

    @staticmethod
    def language(who: Annotator | None) -> str:
        """The language of a page: its reader's, else their browser's first that the app speaks, else English."""
        if who is not None and who.lang in languages():
            return who.lang
        request = getattr(_answering, "request", None)
        header = request.headers.get("accept-language", "") if request is not None else ""
        return (_accepted(header) if header else None) or SOURCE_LANGUAGE

    def page(self, name: str, status_code: int = 200, **context: Any) -> HTMLResponse:
        nonce = secrets.token_urlsafe(16)
        who = context.get("who") or context.get("reader")
        request = getattr(_answering, "request", None)
        here = request.url.path if request is not None else "/"
        env = self.environment(self.language(who if isinstance(who, Annotator) else None))
        html = env.get_template(name).render(nonce=nonce, here=here, **context)
        return HTMLResponse(html, status_code=status_code, headers=_security_headers(nonce))

    def caller(self, request: Request) -> _Caller:
        header = request.headers.get("authorization", "")
        scheme, _, value = header.partition(" ")
        bearer = scheme.lower() == "bearer" and bool(value.strip())
        token = value.strip() if bearer else request.cookies.get(COOKIE, "")
        who = self.store.who(token) if token else None
        if who is None:
            raise HTTPException(401, N_("use your invite link to sign in"), headers={"WWW-Authenticate": "Bearer"})
        return _Caller(who, token, bearer)

    def admin(self, request: Request) -> _Caller:
        caller = self.caller(request)
        if caller.who.role != "admin":
            raise HTTPException(403, N_("this page is for admins"))
        return caller

    @staticmethod
    def check_csrf(caller: _Caller, supplied: str | None) -> None:
        if caller.bearer:
            return
        if not supplied or not hmac.compare_digest(supplied, csrf_token(caller.token)):
            raise HTTPException(403, N_("the form's security token is missing or wrong; reload the page"))

    @staticmethod
    def task(name: str) -> TaskType:
        try:
            return TASK_TYPES[name]
        except KeyError:
            raise HTTPException(404, Said(N_("no task type %(name)s"), name=repr(name))) from None

    def lease(self, caller: _Caller, task: TaskType) -> Assignment | None:
        with self.writing:
            return self.store.next_assignment(caller.who.name, task.name)

    def own_assignment(self, caller: _Caller, task_type: str, assignment_id: int) -> Assignment:
        assignment = self.store.assignment(assignment_id)
        if assignment is None:
            raise HTTPException(404, Said(N_("no assignment %(id)s"), id=assignment_id))
        if assignment.annotator != caller.who.name:
            raise HTTPException(403, Said(N_("assignment %(id)s is not yours"), id=assignment_id))
        if assignment.type != task_type:
            raise HTTPException(
                404, Said(N_("assignment %(id)s is not a %(type)s task"), id=assignment_id, type=task_type)
            )
        return assignment

    def store_judgement(self, assignment: Assignment, annotator: str, judgement: Judgement) -> bool:
        """Submit; ``True`` stored now, ``False`` the same judgement was stored before.

        Raises:
            HTTPException: 409 when a different judgement was stored before or the task is closed,
                403 / 404 as the store says.
        """
        made = datetime.fromtimestamp(float(self.store.clock()), tz=UTC)
        judgement = judgement.model_copy(update={"annotator": annotator, "created_at": made})
        with _refusals_as_http(), self.writing:
            if self.store.submit(assignment.id, annotator, judgement):
                return True
        stored = self.store.runs.judgements_for(judgement.task, [judgement.item_id]).get(judgement.item_id, [])
        earlier = [s.judgement for s in stored if s.source == "human" and s.judgement.annotator == annotator]
        if earlier and _same(earlier[0], judgement):
            return False
        raise HTTPException(409, N_("you already judged this item differently; your first judgement stands"))

    def undoable(self, caller: _Caller, task: TaskType) -> dict[str, Any] | None:
        """The caller's last judgement of the type, for the page's undo button (``None``: none)."""
        last = self.store.last_done(caller.who.name, task.name)
        if last is None:
            return None
        assignment = self.store.assignment(last)
        return None if assignment is None else {"assignment_id": last, "item_id": assignment.item_id}

    def take_back(self, caller: _Caller, task: TaskType, assignment_id: int) -> Assignment:
        """Undo the caller's judgement of an assignment of this type (the store's rules).

        Raises:
            HTTPException: 409 when there is nothing to undo or a stage has decided on it, 403 for another's,
                404 for no such assignment of the type.
        """
        self.own_assignment(caller, task.name, assignment_id)
        with _refusals_as_http(), self.writing:
            return self.store.undo(assignment_id, caller.who.name)

    async def handle_error(self, request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        headers = dict(exc.headers or {})
        if _wants_json(request):
            return JSONResponse({"error": exc.detail}, status_code=exc.status_code, headers=headers)
        # A Strict cookie is withheld on a navigation that started on another site (an invite
        # link clicked in webmail is redirected to "/" without it): reload once from here.
        retry = exc.status_code == 401 and request.headers.get("sec-fetch-site") == "cross-site"
        token = request.cookies.get(COOKIE, "")
        reader = self.store.who(token) if token else None  # the page in their language, when they are signed in
        _answering.request = request
        try:
            response = self.page(
                "error.html", exc.status_code, status=exc.status_code, message=exc.detail, retry=retry, reader=reader
            )
        finally:
            _answering.request = None
        response.headers.update(headers)
        return response

    # -- pages ---------------------------------------------------------------------------

    def login(self, request: Request, _body: bytes) -> Response:
        token = request.query_params.get("token", "")
        who = self.store.who(token) if token else None
        if who is None:
            raise HTTPException(401, N_("this invite link is not valid (any more); ask for a new one"))
        response = RedirectResponse("/", status_code=303)
        response.set_cookie(
            COOKIE,
            token,
            max_age=COOKIE_MAX_AGE,
            httponly=True,
            samesite="strict",
            secure=self.secure_cookies,
        )
        response.headers["Referrer-Policy"] = "no-referrer"
        return response

    def logout(self, request: Request, body: bytes) -> Response:
        caller = self.caller(request)
        self.check_csrf(caller, _form(body).get("csrf", [""])[0])
        response = RedirectResponse("/", status_code=303)
        response.delete_cookie(COOKIE, httponly=True, samesite="strict", secure=self.secure_cookies)
        return response

    def set_language(self, request: Request, body: bytes) -> Response:
        """Switch the caller's pages to the posted ``lang`` (remembered with them), then back to the posted ``back``."""
        caller = self.caller(request)
        values = _form(body)
        self.check_csrf(caller, values.get("csrf", [""])[0])
        lang = values.get("lang", [""])[0]
        if lang not in languages():
            known = ", ".join(languages())
            raise HTTPException(
                422, Said(N_("no interface language %(lang)s: available are %(known)s"), lang=repr(lang), known=known)
            )
        with self.writing:
            self.store.set_language(caller.who.name, lang)
        back = values.get("back", ["/"])[0]
        if not back.startswith("/") or back.startswith("//") or "\\" in back:
            back = "/"  # only a path of this app, never another site
        return RedirectResponse(back, status_code=303)

    def home(self, request: Request, _body: bytes) -> Response:
        caller = self.caller(request)
        progress = self.store.progress()
        mine = progress["annotators"].get(caller.who.name, {})
        open_to_me = self.store.available(caller.who.name)
        rows = []
        for name in TASK_TYPES:
            if name not in progress["tasks"]:
                continue
            done = mine.get(name, {}).get("done", 0)
            if not open_to_me.get(name) and not done:
                continue  # work for others only (a slot of another creator, a pool they are not in)
            rows.append({"type": name, "left": open_to_me.get(name, 0), "mine": done})
        return self.page("home.html", who=caller.who, rows=rows, csrf=csrf_token(caller.token))

    def form(
        self,
        caller: _Caller,
        task: TaskType,
        assignment: Assignment,
        *,
        status: int = 200,
        values: Mapping[str, list[str]] | None = None,
        problems: list[str] | None = None,
    ) -> HTMLResponse:
        own = f"{task.name}.html"
        form_page = own not in self.own_pages
        return self.page(
            "task.html" if form_page else own,
            status,
            who=caller.who,
            task=task.name,
            kind=task,
            form=task.form,
            form_page=form_page,
            item=task.view(assignment.input),
            assignment_id=assignment.id,
            csrf=csrf_token(caller.token),
            values=values or {},
            problems=problems or [],
            position=dict(zip(("n", "of"), self.store.position(caller.who.name, task.name), strict=True)),
            undo=self.undoable(caller, task),
        )

    def next_page(self, request: Request, _body: bytes) -> Response:
        caller = self.caller(request)
        task = self.task(request.path_params["task_type"])
        assignment = self.lease(caller, task)
        if assignment is None:
            undo = self.undoable(caller, task)
            return self.page(
                "done.html",
                who=caller.who,
                task=task.name,
                more_coming=self.more_coming(),
                poll_s=RECHECK_S,
                csrf=csrf_token(caller.token),
                undo=undo,
            )
        return self.form(caller, task, assignment)

    def undo_page(self, request: Request, body: bytes) -> Response:
        caller = self.caller(request)
        task = self.task(request.path_params["task_type"])
        self.check_csrf(caller, _form(body).get("csrf", [""])[0])
        self.take_back(caller, task, request.path_params["assignment_id"])
        return RedirectResponse(f"/t/{task.name}", status_code=303)

    def submit_page(self, request: Request, body: bytes) -> Response:
        caller = self.caller(request)
        task = self.task(request.path_params["task_type"])
        values = _form(body)
        self.check_csrf(caller, values.get("csrf", [""])[0])
        raw_id = values.get("assignment_id", [""])[0]
        if not raw_id.isdigit():
            raise HTTPException(422, N_("the form has no assignment; open the task page again"))
        assignment = self.own_assignment(caller, task.name, int(raw_id))
        fields = {key: value for key, value in values.items() if key not in _RESERVED}
        try:
            judgement = task.parse(assignment.input, fields)
        except InvalidSubmission as exc:
            return self.form(caller, task, assignment, status=422, values=fields, problems=exc.problems)
        self.store_judgement(assignment, caller.who.name, judgement)
        return RedirectResponse(f"/t/{task.name}", status_code=303)

    def admin_page(self, request: Request, _body: bytes) -> Response:
        caller = self.admin(request)
        progress = self.store.progress()
        stats = {
            name: agreement_summary(self.store.judgements(name), name)
            for name in progress["tasks"]
            if name in TASK_TYPES
        }
        queued = [TASK_TYPES[name] for name in progress["tasks"] if name in TASK_TYPES]
        qc = self.store.qc_queue() if any(kind.checks_drafts for kind in queued) else None
        voting = [kind.name for kind in queued if kind.votes]
        return self.page(
            "admin.html",
            who=caller.who,
            tasks=progress["tasks"],
            annotators=progress["annotators"],
            agreement=stats,
            qc=qc,
            qc_open=[row for row in qc["items"] if row["state"] != "complete"] if qc else [],
            gold=self.store.gold_report(),
            bar=quality_settings(self.store.runs),
            splits={name: len(self.store.splits(name)) for name in voting},
            short=self.store.short_of_people(),
            undone=self.store.undone()[-20:],
            run=self.run_view(progress["tasks"]),
            csrf=csrf_token(caller.token),
        )

    # -- the run's state ---------------------------------------------------------------------

    def more_coming(self) -> bool:
        """Whether the run will hand out more work by itself: it is followed, and not done or stopped."""
        follower = self.follower
        if follower is None or not follower.following:
            return False
        return follower.state() != "done"

    def run_view(self, queued: Mapping[str, Mapping[str, int]]) -> dict[str, Any]:
        """The run's state for the admin page: from ``run_status`` when the server was given it (``annotate serve``),
        else the run store's own word; the tasks waiting per type; the follower's log of advances."""
        status: Mapping[str, Any] = {}
        if self.run_state is not None:
            try:
                status = self.run_state()
            except Exception as exc:  # a run folder gone or unreadable: said on the page, the rest still works
                status = {"state": "unknown", "problem": str(exc)}
        state = str(status.get("state") or self.store.runs.meta("state") or "unknown")
        follow = describe(self.follower)
        waiting = {
            name: row["tasks"] - row["complete"] for name, row in queued.items() if row["tasks"] > row["complete"]
        }
        cause = follow.get("cause") or status.get("problem")
        if state == "stopped" and not cause:
            causes = status.get("causes") or []
            cause = causes[0].get("cause") if causes and isinstance(causes[0], Mapping) else None
            cause = cause or "its build stopped before it finished; an advance or `build --resume` continues it"
        return {
            "state": state,
            "label": RUN_STATES.get(state, state),
            "waiting": waiting if state == "awaiting_review" else {},
            "batches": len(status.get("batches") or []),
            "cause": cause,
            "follow": follow,
            "advances": self.follower.advances() if self.follower is not None else [],
        }

    def adjudication_page(
        self, request: Request, _body: bytes, *, status: int = 200, problems: list[str] | None = None
    ) -> Response:
        """The items people split on, each with every counted vote and a form to rule (admins only)."""
        caller = self.admin(request)
        task = self.task(request.path_params["task_type"])
        rows = [
            {"item_id": row["item_id"], "view": task.view(row["input"]), "votes": row["votes"]}
            for row in self.store.splits(task.name)
        ]
        return self.page(
            "adjudicate.html",
            status,
            who=caller.who,
            task=task.name,
            rows=rows,
            problems=problems or [],
            csrf=csrf_token(caller.token),
        )

    def _rule(self, caller: _Caller, task: TaskType, item_id: str, fields: Mapping[str, Any]) -> Judgement:
        """Store an admin's ruling: the fields of a judgement of the task type, or ``side``: one annotator's."""
        side = fields.get("side")
        comment = fields.get("comment")
        chosen: Mapping[str, Any] = fields
        if isinstance(side, str) and side:
            judged = self.store.judgements(task.name).get(item_id, [])
            mine = next((j for j in judged if j.annotator == side and not j.adjudication), None)
            if mine is None:
                raise InvalidSubmission(
                    [Said(N_("side: %(side)s did not judge item %(item)s"), side=repr(side[:40]), item=repr(item_id))]
                )
            chosen = _fields_of(mine)
        with self.writing:
            try:
                return self.store.adjudicate(
                    caller.who.name, task.name, item_id, chosen, comment=comment if isinstance(comment, str) else None
                )
            except LookupError as exc:
                raise HTTPException(404, str(exc)) from None

    def adjudicate_form(self, request: Request, body: bytes) -> Response:
        caller = self.admin(request)
        task = self.task(request.path_params["task_type"])
        values = _form(body)
        self.check_csrf(caller, values.get("csrf", [""])[0])
        fields = {key: v[0] if len(v) == 1 else v for key, v in values.items() if key not in _RESERVED}
        item_id = str(fields.pop("item_id", "") or "")
        try:
            self._rule(caller, task, item_id, fields)
        except InvalidSubmission as exc:
            return self.adjudication_page(request, b"", status=422, problems=exc.problems)
        return RedirectResponse(f"/admin/adjudicate/{task.name}", status_code=303)

    def api_adjudicate(self, request: Request, body: bytes) -> Response:
        caller = self.admin(request)
        task = self.task(request.path_params["task_type"])
        self.check_csrf(caller, request.headers.get("x-csrf-token"))
        fields = _json_fields(body)
        if isinstance(fields, JSONResponse):
            return fields
        try:
            ruled = self._rule(caller, task, request.path_params["item_id"], fields)
        except InvalidSubmission as exc:
            return JSONResponse({"problems": exc.problems}, status_code=422)
        return JSONResponse({"status": "stored", "judgement": ruled.model_dump(mode="json")}, status_code=201)

    def export(self, request: Request, _body: bytes) -> Response:
        """Every human judgement of a task type (``all``: of every type) with its full body.

        One ``{"judgement": …}`` line per judgement, per item in the order stored, and nothing
        else: every line has the one shape, so the file loads as a table. Agreement is on the
        admin page and in ``senseforge annotate status --json``.
        """
        self.admin(request)
        wanted = request.path_params["task_type"]
        every = wanted == "all"  # not a task type: the judgements of all of them in one file
        names = list(TASK_TYPES) if every else [self.task(wanted).name]
        lines = [
            json.dumps({"judgement": j.model_dump(mode="json")}, ensure_ascii=False, sort_keys=True)
            for name in names
            for group in self.store.judgements(name, gold=True).values()
            for j in group
        ]
        return Response(
            "\n".join(lines) + "\n" if lines else "",
            media_type="application/x-ndjson",
            headers={
                "Content-Disposition": f'attachment; filename="{"all" if every else names[0]}.jsonl"',
                "Cache-Control": "no-store",
            },
        )

    # -- JSON API ------------------------------------------------------------------------

    def api_next(self, request: Request, _body: bytes) -> Response:
        caller = self.caller(request)
        task = self.task(request.path_params["task_type"])
        self.check_csrf(caller, request.headers.get("x-csrf-token"))
        assignment = self.lease(caller, task)
        if assignment is None:
            if self.more_coming():
                body = {"assignment_id": None, "more_coming": True, "retry_after_s": RECHECK_S}
                return JSONResponse(body, headers={"Retry-After": str(RECHECK_S)})
            return Response(status_code=204)
        n, of = self.store.position(caller.who.name, task.name)
        return JSONResponse(
            {
                "assignment_id": assignment.id,
                "expires_at": assignment.expires_at,
                "item": task.view(assignment.input),
                "position": {"n": n, "of": of},
            }
        )

    def api_undo(self, request: Request, _body: bytes) -> Response:
        caller = self.caller(request)
        task = self.task(request.path_params["task_type"])
        self.check_csrf(caller, request.headers.get("x-csrf-token"))
        reopened = self.take_back(caller, task, request.path_params["assignment_id"])
        return JSONResponse(
            {
                "status": "undone",
                "assignment_id": reopened.id,
                "expires_at": reopened.expires_at,
                "item": task.view(reopened.input),
            }
        )

    def api_submit(self, request: Request, body: bytes) -> Response:
        caller = self.caller(request)
        task = self.task(request.path_params["task_type"])
        self.check_csrf(caller, request.headers.get("x-csrf-token"))
        assignment = self.own_assignment(caller, task.name, request.path_params["assignment_id"])
        fields = _json_fields(body)
        if isinstance(fields, JSONResponse):
            return fields
        try:
            judgement = task.parse(assignment.input, fields)
        except InvalidSubmission as exc:
            return JSONResponse({"problems": exc.problems}, status_code=422)
        if self.store_judgement(assignment, caller.who.name, judgement):
            return JSONResponse({"status": "stored", "assignment_id": assignment.id}, status_code=201)
        return JSONResponse({"status": "already stored", "assignment_id": assignment.id}, status_code=200)


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


def _json_fields(body: bytes) -> dict[str, Any] | JSONResponse:
    """A JSON request body as its object of fields, or the 422 that says why it is not one."""
    try:
        fields = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        return JSONResponse({"problems": [f"body: not valid JSON ({exc})"]}, status_code=422)
    if not isinstance(fields, dict):
        return JSONResponse({"problems": ["body: expected a JSON object of fields"]}, status_code=422)
    return fields


def _fields_of(judgement: Judgement) -> dict[str, Any]:
    """A stored judgement as the fields its task type's form would post (to rule as that annotator did)."""
    body = judgement.model_dump(mode="json", exclude={"item_id", "annotator", "task", "created_at", "adjudication"})
    draft = body.pop("draft", None)
    if isinstance(draft, dict):  # create / revise
        body.update({k: v for k, v in draft.items() if k != "choices"})
        body["options"] = [c["text"] for c in draft["choices"]]
    if "question_error" in body:  # label-errors posts question / options
        body["question"], body["options"] = body.pop("question_error"), body.pop("options_error")
    return {k: v for k, v in body.items() if v is not None}


def _form(body: bytes) -> dict[str, list[str]]:
    """An urlencoded form body as lists of values per field."""
    values: dict[str, list[str]] = {}
    for key, value in parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True):
        values.setdefault(key, []).append(value)
    return values


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
