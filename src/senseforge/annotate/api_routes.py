"""The annotation app's JSON API: the next assignment, a submission, an undo (see :mod:`senseforge.annotate.app`
for the routes)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from senseforge.annotate.tasktypes import InvalidSubmission
from senseforge.annotate.web import (
    RECHECK_S,
    WebBase,
    _json_fields,
)


class Api(WebBase):
    """The JSON routes scripts use (bearer token) as the pages do."""

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
