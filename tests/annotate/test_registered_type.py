"""A task type defined here alone, registered with its judgement body, goes the whole way.

``keep`` (keep a part of a word, how sure, why not, a comment) has no template, no interop form and no
judgement body anywhere in the package: the app serves it from its declared form, a submission is parsed
by it, it travels to Label Studio and Argilla and back into the same judgements, and the people stage of a
recipe that queues it reads its judgements on ``build --resume``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal

import pytest

pytest.importorskip("starlette")
pytest.importorskip("httpx")
from pydantic import BaseModel
from starlette.testclient import TestClient

from senseforge.annotate import interop
from senseforge.annotate.app import create_app, csrf_token
from senseforge.annotate.fields import InvalidSubmission, TaskType
from senseforge.annotate.forms import (
    Form,
    FormField,
    Shown,
    When,
    choices_text,
    comment_field,
    rating_options,
    yes_no_field,
)
from senseforge.annotate.store import AnnotationStore
from senseforge.annotate.tasktypes import TASK_TYPES
from senseforge.data.schema import ACCEPT_VOTE, JUDGEMENTS, REJECT_VOTE, MCItem, VoteKind
from senseforge.data.schema import Judgement as Body
from senseforge.pipelines import stage as st
from senseforge.pipelines.calls import AWAITING
from senseforge.pipelines.outcomes import Outcome, ok, rejected
from senseforge.pipelines.runner import build
from senseforge.pipelines.runstore import RunStore, StageResult, sqlite_url
from senseforge.pipelines.taskqueue import QueuedTask
from senseforge.store.db import Store

from ..pipelines.engine.tiny import Piece, Tiny, TinyConfig, config, item
from .test_browser import Served, served  # noqa: F401 (the fixture)

REASONS = ("too-short", "not-a-part")


class KeepJudgement(Body):
    """Keep a part or drop it, how sure (1–3), why not (flags), and a comment."""

    vote_kind: ClassVar[VoteKind | None] = "accept"
    task: Literal["keep"] = "keep"
    keep: bool
    sure: int
    reasons: tuple[str, ...] = ()
    comment: str | None = None

    def vote(self) -> str | None:
        return ACCEPT_VOTE if self.keep else REJECT_VOTE


class Keep(TaskType):
    """Is the first option a part of the word worth keeping?"""

    name: str = "keep"
    page_note: str | None = "A part is a piece of the word, not the word."
    input_model: type[BaseModel] = MCItem
    form: Form = Form(
        "Is option A a part of the word worth keeping?",
        (Shown("question", "Question"), Shown("choices", "Options", choices_text())),
        (
            yes_no_field("keep", "Keep it?", texts=("Keep", "Drop")),
            FormField("sure", "rating", "How sure?", rating_options(1, 3), keys=(("a",), ("s",), ("d",)),
                      required=True),
            FormField("reasons", "flags", "Why drop it", REASONS, keys=(("q",), ("w",)),
                      only_when=When("keep", (False,), "only for a part you drop")),
            comment_field(),
        ),
    )  # fmt: skip

    def view(self, task: MCItem) -> dict[str, Any]:
        return {"id": task.id, "lang": task.lang, "question": task.question,
                "choices": [c.model_dump() for c in task.choices]}  # fmt: skip

    def parse(self, task: MCItem, fields: Mapping[str, Any]) -> Body:
        values, problems = self.form.read(self.view(task), fields)
        if problems:
            raise InvalidSubmission(problems)
        return KeepJudgement(item_id=task.id, annotator="?", keep=values["keep"], sure=values["sure"],
                             reasons=tuple(values["reasons"]), comment=values["comment"])  # fmt: skip


class KeepPick(st.PeopleStage[Piece]):
    """A person keeps a part or drops it, by a ``keep`` task."""

    people_tasks = ("keep",)

    def shown(self, record: StageResult[Piece]) -> QueuedTask:
        return QueuedTask("keep", item(record))

    def decide(self, record: StageResult[Piece], judged: Sequence[Body]) -> Outcome:
        votes = [j.vote() for j in judged]
        return AWAITING if not votes else ok(record) if votes[0] == ACCEPT_VOTE else rejected(record, "dropped")


class KeepTiny(Tiny):
    """The tiny recipe with its people stage asking ``keep``."""

    def stages(self, config: TinyConfig) -> list[st.Stage]:
        return [KeepPick("pick") if s.name == "pick" else s for s in super().stages(config)]


@pytest.fixture
def registered() -> Iterator[Keep]:
    """``keep`` and its body registered for the test, and taken out after it."""
    assert "keep" not in TASK_TYPES and "keep" not in JUDGEMENTS.bodies()
    kind = Keep()
    JUDGEMENTS.register(KeepJudgement)
    TASK_TYPES.register(kind)
    try:
        yield kind
    finally:
        TASK_TYPES.unregister("keep")
        JUDGEMENTS.unregister("keep")


PARTS = [f"w{w}/{p}" for w in (0, 1) for p in range(3)]


def item_of(part: str) -> MCItem:
    """An item of the tiny recipe's shape for a part that no build made."""
    return item(StageResult(part, "ok", Piece(word="bee", text=f"bee-{part[-1]}")))


def answer_of(part: str) -> dict[str, Any]:
    """What a person answers for a part: keep the outer parts, drop the middle ones."""
    if part.endswith("/1"):
        return {"keep": "no", "sure": "3", "reasons": ["not-a-part"], "comment": f"{part} is a middle"}
    return {"keep": "yes", "sure": "2", "reasons": []}


def controls(html: str) -> list[tuple[str, str, str]]:
    """(tag, name, data-field) of every form control of the judgement form but the two hidden ones."""
    form = html.split('id="judge"', 1)[1].split("</form>", 1)[0]
    found = []
    for tag, attributes in re.findall(r"<(input|textarea|select)\b([^>]*)>", form):
        name = re.search(r'\bname="([^"]*)"', attributes)
        mark = re.search(r'\bdata-field="([^"]*)"', attributes)
        if 'type="hidden"' in attributes:
            continue
        found.append((tag, name.group(1) if name else "", mark.group(1) if mark else ""))
    return found


def test_the_registry_refuses_a_taken_or_unusable_name(registered: Keep) -> None:
    with pytest.raises(ValueError, match=r"'keep' is already registered \(Keep\)"):
        TASK_TYPES.register(Keep())
    assert TASK_TYPES.register(registered) is registered  # the same one again changes nothing
    for bad in ("Keep", "all", "task", "a/b", ""):
        other = Keep()
        other.name = bad
        with pytest.raises(ValueError, match="task type name"):
            TASK_TYPES.register(other)
    assert list(TASK_TYPES)[-1] == "keep" and TASK_TYPES["keep"] is registered


def test_a_task_type_defined_here_is_served_parsed_exported_imported_and_read_by_resume(
    registered: Keep, tmp_path: Path
) -> None:
    run_dir = tmp_path / "run"
    first = build(KeepTiny(), config(people=True), run_dir, store=Store())
    assert first.state == "awaiting_review" and first.waiting_for == {"keep": 6}

    # served: the page built from the declared form; parsed: the app's submissions
    url = sqlite_url(run_dir / "run.db")
    store = AnnotationStore(url)
    token = store.invite("ana")
    store.close()
    with TestClient(create_app(url)) as client:
        client.get(f"/login?token={token}", follow_redirects=False)
        csrf = csrf_token(token)
        for part in PARTS[:3]:
            page = client.get("/t/keep")
            assert page.status_code == 200, page.text
            assert "Is option A a part of the word worth keeping?" in page.text
            assert f"A. sun-{part[-1]}" in page.text  # the shown texts, rendered from the view
            assert '<p class="muted" id="note">A part is a piece of the word, not the word.</p>' in page.text
            assert "<li>Keep it?: <kbd>1</kbd> <kbd>y</kbd> Keep · <kbd>2</kbd> <kbd>n</kbd> Drop</li>" in page.text
            marked = controls(page.text)
            assert [(tag, mark) for tag, _, mark in marked] == [
                ("input", "keep"), ("input", "keep"), ("input", "sure"), ("input", "sure"), ("input", "sure"),
                ("input", "reasons"), ("input", "reasons"), ("textarea", "comment"),
            ]  # fmt: skip
            assert all(name == mark for _, name, mark in marked)  # each control posts the field it is marked
            assert {m for *_, m in marked} == {f.name for f in registered.form.fields}
            for key in ("1", "y", "2", "n", "a", "s", "d", "q", "w"):
                assert f'"{key}": () =>' in page.text  # the declared keys are bound
            assignment = re.search(r'name="assignment_id" value="(\d+)"', page.text)
            assert assignment is not None
            hidden = {"csrf": csrf, "assignment_id": assignment.group(1)}
            if part == PARTS[0]:  # a bad one first: 422, the problems shown, the values kept
                bad = client.post("/t/keep", data={**hidden, "keep": "yes", "sure": "3", "reasons": "too-short"})
                assert bad.status_code == 422
                assert "reasons: only for a part you drop" in bad.text
                assert 'value="3" required checked' in bad.text
            sent = client.post("/t/keep", data={**hidden, **answer_of(part)}, follow_redirects=False)
            assert sent.status_code == 303, sent.text
    run = RunStore(url)
    stored = run.judgements_for("keep")
    run.close()
    assert sorted(stored) == PARTS[:3]
    made = {i: s[0].judgement for i, s in stored.items()}
    assert all(isinstance(j, KeepJudgement) and j.annotator == "ana" for j in made.values())
    assert [(made[p].keep, made[p].sure, made[p].reasons) for p in PARTS[:3]] == [
        (True, 2, ()), (False, 3, ("not-a-part",)), (True, 2, ())
    ]  # fmt: skip

    # exported to both tools and imported back: the same judgements as the app's parse makes
    store = AnnotationStore(url)
    inputs = [given for given, _, _ in store.inputs("keep")]
    store.close()
    assert [i.id for i in inputs] == PARTS  # type: ignore[attr-defined]
    left = inputs[3:]
    tasks, config_xml = interop.label_studio_export("keep", left)
    assert interop.check_label_studio(tasks, config_xml) == []
    assert '<Choices name="keep"' in config_xml and '<Choices name="reasons"' in config_xml
    for task in tasks:
        given = answer_of(task["meta"]["senseforge"]["input_id"])
        result = [
            {"from_name": name, "to_name": "question", "type": "textarea" if name == "comment" else "choices",
             "value": {"text": [value]} if name == "comment" else {"choices": value if isinstance(value, list)
                                                                    else [value]}}
            for name, value in given.items()
        ]  # fmt: skip
        task["annotations"] = [{"completed_by": 7, "result": result, "was_cancelled": False}]
    from_ls = interop.label_studio_import("keep", json.loads(json.dumps(tasks)))
    assert from_ls.rejected == [] and len(from_ls.judgements) == 3

    settings, records = interop.argilla_export("keep", left)
    assert interop.check_argilla(settings, records) == []
    assert [q["name"] for q in settings["questions"]] == ["keep", "sure", "reasons", "comment"]
    for record in records:
        given = answer_of(record["id"])
        record["responses"] = {
            name: [{"user_id": "u7", "value": value, "status": "submitted"}] for name, value in given.items()
        }
    from_argilla = interop.argilla_import("keep", json.loads(json.dumps(records)))
    assert from_argilla.rejected == [] and len(from_argilla.judgements) == 3

    direct = {i.id: registered.parse(i, answer_of(i.id)) for i in left}  # type: ignore[attr-defined]

    def body(j: Body) -> dict[str, Any]:
        return j.model_dump(mode="json", exclude={"annotator", "created_at"})

    for imported, prefix in ((from_ls, "ls:"), (from_argilla, "argilla:")):
        assert all(isinstance(j, KeepJudgement) and j.annotator.startswith(prefix) for j in imported.judgements)
        assert {j.item_id: body(j) for j in imported.judgements} == {k: body(v) for k, v in direct.items()}

    # read by build --resume: the imported judgements as its decisions decide the parts left
    decisions = tmp_path / "keeps.jsonl"
    decisions.write_text("".join(j.model_dump_json() + "\n" for j in from_ls.judgements), encoding="utf-8")
    assert JUDGEMENTS.validate_json(decisions.read_text().splitlines()[0]) == from_ls.judgements[0]
    done = build(KeepTiny(), config(people=True), run_dir, resume=True, store=Store(), decisions=[decisions])
    assert done.state == "done", done
    funnel = json.loads((run_dir / "funnel.json").read_text())
    assert funnel["stages"][2] == {"stage": "pick", "in": 6, "out": 4, "rejected": {"dropped": 2}}
    kept = [json.loads(line)["id"] for line in (run_dir / "dataset" / "test.jsonl").read_text().splitlines()]
    assert kept == ["w0/0", "w0/2", "w1/0", "w1/2"]


def test_without_the_registration_the_type_is_unknown_everywhere() -> None:
    assert "keep" not in TASK_TYPES
    with pytest.raises(KeyError, match="no judgement body registered for task 'keep'"):
        JUDGEMENTS.body("keep")
    with pytest.raises(Exception, match="unknown task type 'keep'"):
        interop.label_studio_export("keep", [])


@pytest.mark.browser
def test_the_page_built_from_the_form_is_keyboard_first(registered: Keep, served: Served, page: Any) -> None:  # noqa: F811
    """In chromium: the declared keys pick a choice, pick a rating and tick flags; Enter submits; ``?`` lists them."""
    page.set_default_timeout(10_000)
    served.store.queue([QueuedTask("keep", item_of("b0/1")), QueuedTask("keep", item_of("b0/2"))])
    page.goto(served.link(served.store.invite("ana")))
    with page.expect_navigation():
        page.goto(f"{served.base}/t/keep")
    page.keyboard.press("?")
    assert page.locator("#shortcuts").is_visible() and "Why drop it" in page.locator("#shortcuts").inner_text()
    page.keyboard.press("?")
    for key in ("n", "d", "w", "q", "q"):  # drop, sure 3, tick not-a-part, tick and untick too-short
        page.keyboard.press(key)
    assert page.is_checked('input[name="keep"][value="no"]') and page.is_checked('input[name="sure"][value="3"]')
    assert page.is_checked('input[name="reasons"][value="not-a-part"]')
    assert not page.is_checked('input[name="reasons"][value="too-short"]')
    page.click("#comment")
    page.keyboard.type("y1")  # keys in the comment box are text
    assert page.is_checked('input[name="keep"][value="no"]')
    with page.expect_navigation():
        page.keyboard.press("Control+Enter")
    page.keyboard.press("1")
    page.keyboard.press("a")
    with page.expect_navigation():
        page.keyboard.press("Enter")
    assert "Nothing left for you in keep" in page.content()
    made = {i: j[0] for i, j in served.judgements("keep").items()}
    assert (made["b0/1"].keep, made["b0/1"].sure, made["b0/1"].reasons, made["b0/1"].comment) == (
        False, 3, ("not-a-part",), "y1"
    )  # fmt: skip
    assert (made["b0/2"].keep, made["b0/2"].sure, made["b0/2"].reasons) == (True, 1, ())
