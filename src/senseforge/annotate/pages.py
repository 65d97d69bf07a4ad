"""The annotation app's pages for people: signing in and out, the language, the home page, and each task type's
form with its submission and undo (see :mod:`senseforge.annotate.app` for the routes)."""

from __future__ import annotations

from collections.abc import Mapping

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from senseforge.annotate.i18n import (
    N_,
    Said,
    languages,
)
from senseforge.annotate.store import Assignment
from senseforge.annotate.tasktypes import TASK_TYPES, InvalidSubmission, TaskType
from senseforge.annotate.web import (
    _RESERVED,
    COOKIE,
    COOKIE_MAX_AGE,
    RECHECK_S,
    WebBase,
    _Caller,
    _form,
    csrf_token,
)


class Pages(WebBase):
    """The routes people use in a browser."""

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
