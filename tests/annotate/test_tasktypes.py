"""The task types' declared properties: what their judgements are for, read instead of their names."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from senseforge.annotate import interop
from senseforge.annotate.app import template_environment
from senseforge.annotate.tasktypes import TASK_TYPES
from senseforge.data.schema import JUDGEMENTS, Choice, Draft, DraftItem, QCEvent


def judgement_model(task_type: str) -> Any:
    """The judgement class a task type's judgements are (the body registered under its task)."""
    return JUDGEMENTS.body(task_type)


@pytest.mark.parametrize("name", list(TASK_TYPES))
def test_votes_and_writes_items_say_what_the_judgements_are(name: str) -> None:
    kind, model = TASK_TYPES[name], judgement_model(name)
    assert kind.votes == (model.vote_kind is not None)  # the agreement a vote counts in
    assert kind.writes_items == ("draft" in model.model_fields)  # a written item is a draft


def test_checking_and_revising_are_declared_by_qc_and_revise_over_drafts() -> None:
    checks = {name for name, kind in TASK_TYPES.items() if kind.checks_drafts}
    revises = {name for name, kind in TASK_TYPES.items() if kind.revises_drafts}
    assert checks == {"qc"} and revises == {"revise"}
    assert all(TASK_TYPES[name].input_model is DraftItem for name in checks | revises)
    assert {name for name, kind in TASK_TYPES.items() if kind.writes_items} == {"create", "revise"}


def shortcuts(kind: Any, task: str) -> str:
    env = template_environment("en")  # the templates as the app renders them in English
    item = {"labels": ["A", "B", "C"], "choices": [{"label": "A"}, {"label": "B"}]}
    return env.get_template("_shortcuts.html").render(kind=kind, task=task, item=item)


def test_the_shortcuts_follow_the_properties_not_the_name() -> None:
    writing = shortcuts(SimpleNamespace(writes_items=True, checks_drafts=False), "verify")
    assert "as the hard distractor" in writing and "yes, the answer follows" not in writing
    checking = shortcuts(SimpleNamespace(writes_items=False, checks_drafts=True), "create")
    assert "needs revision" in checking and "as the hard distractor" not in checking
    plain = shortcuts(SimpleNamespace(writes_items=False, checks_drafts=False), "qc")
    assert "needs revision" not in plain and "as the hard distractor" not in plain


def sent_back() -> DraftItem:
    draft = Draft(
        question="Where would you leave a wet umbrella?",
        choices=[Choice(label="A", text="by the door"), Choice(label="B", text="in bed")],
        answer="A",
        distractor="B",
    )
    history = [
        QCEvent(status="submitted", by="cy", round=0),
        QCEvent(status="needs_revision", by="ana", round=1, comment="say which door"),
    ]
    return DraftItem(
        id="h1@1", item_id="h1", lang="en", category="objects", concept="umbrella", creator="cy",
        draft=draft, history=history,
    )  # fmt: skip


def test_the_exports_prefill_the_draft_where_revises_drafts_says(monkeypatch: pytest.MonkeyPatch) -> None:
    tasks, _ = interop.label_studio_export("revise", [sent_back()])
    _, records = interop.argilla_export("revise", [sent_back()])
    assert tasks[0]["predictions"] and records[0]["suggestions"]
    monkeypatch.setattr(TASK_TYPES["revise"], "revises_drafts", False)
    tasks, _ = interop.label_studio_export("revise", [sent_back()])
    _, records = interop.argilla_export("revise", [sent_back()])
    assert "predictions" not in tasks[0] and records[0]["suggestions"] == {}
