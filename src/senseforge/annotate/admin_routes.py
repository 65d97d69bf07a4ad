"""The annotation app's admin routes: progress, agreement and the run's state, adjudication, the exports
(see :mod:`senseforge.annotate.app` for the routes)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response

from senseforge.annotate.follow import describe
from senseforge.annotate.i18n import (
    N_,
    Said,
)
from senseforge.annotate.tasktypes import TASK_TYPES, InvalidSubmission, TaskType
from senseforge.annotate.web import (
    _RESERVED,
    RUN_STATES,
    WebBase,
    _Caller,
    _fields_of,
    _form,
    _json_fields,
    agreement_summary,
    csrf_token,
)
from senseforge.data.schema import Judgement
from senseforge.pipelines.quality import quality_settings


class Admin(WebBase):
    """The routes for admins (every handler checks the caller is one)."""

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
