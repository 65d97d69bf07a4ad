"""The annotation app's plumbing: who is asking, pages in the reader's language, the store's refusals as HTTP
answers, and what every route shares (:class:`WebBase`). The routes are in :mod:`senseforge.annotate.pages`,
:mod:`senseforge.annotate.admin_routes` and :mod:`senseforge.annotate.api_routes`; :mod:`senseforge.annotate.app`
puts them together.
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
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qsl

import jinja2
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response

from senseforge.annotate.follow import Follower
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
from senseforge.annotate.store import AnnotationStore, Annotator, Assignment, Closed, NotYours
from senseforge.annotate.tasktypes import TASK_TYPES, TaskType
from senseforge.data.schema import Judgement
from senseforge.evaluate import policies

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


class WebBase:
    """What every route shares, bound to one store and one template environment per language: who is asking,
    pages in their language, the store's refusals as HTTP answers, and the error page.

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

    def more_coming(self) -> bool:
        """Whether the run will hand out more work by itself: it is followed, and not done or stopped."""
        follower = self.follower
        if follower is None or not follower.following:
            return False
        return follower.state() != "done"

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
