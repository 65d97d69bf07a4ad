"""The annotation app in a real chromium: keyboard-only judging and writing, the admin page, hostile item text."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

pytest.importorskip("uvicorn")
pytest.importorskip("starlette")

import uvicorn

from senseforge.annotate.app import create_app
from senseforge.annotate.store import AnnotationStore
from senseforge.data.crow_items import AnnotationItem, KnowledgeCheckItem, RewriteCheckItem, RewriteItem
from senseforge.data.schema import (
    Choice,
    ConceptSlot,
    Draft,
    DraftItem,
    MCItem,
    QCEvent,
)
from senseforge.pipelines.taskqueue import QueuedTask

pytestmark = pytest.mark.browser

HOSTILE = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=1</script>'


def item(n: int, question: str | None = None) -> MCItem:
    return MCItem(
        id=f"q{n}",
        lang="en",
        question=question or f"Where do you put clean plates number {n}?",
        choices=[{"label": label, "text": f"place {label.lower()}{n}"} for label in "ABCDE"],
        answer="A",
    )


@dataclass
class Served:
    base: str
    store: AnnotationStore

    def link(self, token: str) -> str:
        return f"{self.base}/login?token={token}"

    def judgements(self, task: str) -> dict[str, list[Any]]:
        return self.store.judgements(task)


@pytest.fixture
def served(db_url: str) -> Iterator[Served]:
    """The app under uvicorn on a free loopback port, in a background thread."""
    store = AnnotationStore(db_url)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(create_app(db_url), log_level="warning", access_log=False, lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            pytest.fail("uvicorn did not start")
        time.sleep(0.02)
    try:
        yield Served(f"http://127.0.0.1:{port}", store)
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
        store.close()


def test_judging_by_keyboard_and_the_admin_page(served: Served, page: Any) -> None:
    page.set_default_timeout(10_000)
    served.store.add_tasks("verify", [item(1), item(2)], k=1, group="g")
    served.store.add_tasks("answer", [item(3)], k=1, group="g")
    ana, boss = served.store.invite("ana"), served.store.invite("boss", "admin")

    page.goto(served.link(ana))
    assert page.url == f"{served.base}/"
    with page.expect_navigation():  # waits for the task page's load, so its key handler is bound
        page.click("#task-verify")
    assert page.locator("#shortcuts").is_hidden()
    page.keyboard.press("?")
    assert page.locator("#shortcuts").is_visible()
    page.keyboard.press("?")
    # a verification in two keystrokes
    page.keyboard.press("1")
    with page.expect_navigation():
        page.keyboard.press("Enter")
    # keys typed in the comment box are text, not shortcuts; Enter there is a new line
    page.click("summary")
    page.click("#comment")
    page.keyboard.type("n1?")
    page.keyboard.press("Enter")
    assert not page.is_checked('input[name="accept"][value="no"]')
    assert not page.is_checked('input[name="accept"][value="yes"]')
    assert page.locator("#shortcuts").is_hidden()
    page.locator("#question").click()  # leave the text box
    page.keyboard.press("2")
    with page.expect_navigation():
        page.keyboard.press("Enter")
    assert "Nothing left for you in verify" in page.content()

    page.goto(f"{served.base}/t/answer")
    page.keyboard.press("2")
    with page.expect_navigation():
        page.keyboard.press("Enter")
    assert "Nothing left for you in answer" in page.content()

    verify = served.judgements("verify")
    assert [(j.annotator, j.accept, j.comment) for j in verify["q1"]] == [("ana", True, None)]
    assert [(j.annotator, j.accept, j.comment) for j in verify["q2"]] == [("ana", False, "n1?")]
    answer = served.judgements("answer")["q3"]
    assert [(j.choice, j.certain) for j in answer] == [("B", True)]

    page.goto(served.link(boss))
    page.goto(f"{served.base}/admin")
    progress = page.locator("#progress").inner_text()
    assert "verify" in progress and "2 / 2" in progress and "1 / 1" in progress
    assert "ana" in page.locator("#annotators").inner_text()


FITS = """() => {
  const width = window.innerWidth;
  const cut = [...document.querySelectorAll("#progress a")].filter((link) => {
    const r = link.getBoundingClientRect();
    const box = link.closest(".scroll").getBoundingClientRect();
    return r.width === 0 || r.left < box.left - 0.5 || r.right > box.right + 0.5 || r.right > width + 0.5;
  });
  return {links: document.querySelectorAll("#progress a").length, cut: cut.map((a) => a.textContent),
          wide: document.documentElement.scrollWidth > width};
}"""
"""Which export links of the admin's progress table are cut off (by its scroll box or the window)."""


def test_flag_keys_undo_by_key_and_an_admin_table_that_fits(served: Served, page: Any) -> None:
    page.set_default_timeout(10_000)
    served.store.add_tasks("verify", [item(1), item(2)], k=1, group="g")
    for task in ("adapt-check", "label-errors", "answer"):  # long names: a wide table
        served.store.add_tasks(task, [item(9)], k=1, group="g")
    ana, boss = served.store.invite("ana"), served.store.invite("boss", "admin")
    page.goto(served.link(ana))
    page.goto(f"{served.base}/t/verify")
    assert page.locator("#position").inner_text() == "Task 1 of 2"
    page.keyboard.press("s")  # a flag by its key: the box of problems opens, ticked
    assert page.is_checked('input[name="flags"][value="several-right"]') and page.locator("#flags-box").is_visible()
    page.keyboard.press("1")
    with page.expect_navigation():
        page.keyboard.press("Enter")
    assert page.locator("#position").inner_text() == "Task 2 of 2"
    assert [(j.accept, j.flags) for j in served.judgements("verify")["q1"]] == [(True, ["several-right"])]
    with page.expect_navigation():
        page.keyboard.press("u")  # taken back: q1 again, to judge anew
    assert "number 1?" in page.locator("#question").inner_text() and served.judgements("verify") == {}
    assert page.locator("#position").inner_text() == "Task 1 of 2"

    page.goto(served.link(boss))
    for width, height in ((1280, 800), (390, 844)):
        page.set_viewport_size({"width": width, "height": height})
        page.goto(f"{served.base}/admin")
        fits = page.evaluate(FITS)
        assert fits == {"links": 4, "cut": [], "wide": False}, (width, fits)


def test_c_toggles_certainty_on_the_answer_page(served: Served, page: Any) -> None:
    page.set_default_timeout(10_000)
    served.store.add_tasks("answer", [item(1)], k=1, group="g")
    page.goto(served.link(served.store.invite("ana")))
    page.goto(f"{served.base}/t/answer")
    assert page.is_checked('input[name="certain"][value="yes"]')
    page.keyboard.press("c")
    page.keyboard.press("5")
    with page.expect_navigation():
        page.keyboard.press("Enter")
    assert [(j.choice, j.certain) for j in served.judgements("answer")["q1"]] == [("E", False)]


@pytest.mark.parametrize("task", ["verify", "answer"])
def test_hostile_item_text_renders_as_text(served: Served, page: Any, task: str) -> None:
    page.set_default_timeout(10_000)
    hostile = item(1, question=HOSTILE)
    hostile.choices[0].text = HOSTILE
    served.store.add_tasks(task, [hostile], k=1, group="g")
    page.goto(served.link(served.store.invite("ana")))
    page.goto(f"{served.base}/t/{task}")
    assert page.locator("#question").inner_text() == HOSTILE
    assert HOSTILE in page.locator("#judge" if task == "answer" else "ol.choices").inner_text()
    assert page.locator("#question img, #question script").count() == 0
    page.wait_for_timeout(200)  # give a stray onerror a chance to fire
    assert page.evaluate("typeof window.__pwned") == "undefined"


def adapted(n: int, source_question: str) -> MCItem:
    """An item as culture-adapt queues it for ``adapt-check``: its source in the metadata."""
    source = {"lang": "en", "question": source_question, "concept": "snow", "answer": "A",
              "choices": [[label, f"spot {label.lower()}"] for label in "ABCDE"]}  # fmt: skip
    return item(n).model_copy(update={"question_concept": "hujan abu", "metadata": {"source": source}})


def test_adapt_check_by_keyboard_with_hostile_source_text_inert(served: Served, page: Any) -> None:
    page.set_default_timeout(10_000)
    served.store.add_tasks("adapt-check", [adapted(1, HOSTILE), adapted(2, "Where is snow kept?")], k=1, group="g")
    page.goto(served.link(served.store.invite("ana")))
    page.goto(f"{served.base}/t/adapt-check")
    assert page.locator("#source-question").inner_text() in (HOSTILE, "Where is snow kept?")
    page.wait_for_timeout(200)  # give a stray onerror a chance to fire
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.locator("#source-question img, #source-question script").count() == 0
    # a wrong adaptation and its error in three keystrokes, then a right one in two
    page.keyboard.press("3")
    page.keyboard.press("t")
    with page.expect_navigation():
        page.keyboard.press("Enter")
    page.keyboard.press("1")
    with page.expect_navigation():
        page.keyboard.press("Enter")
    assert "Nothing left for you in adapt-check" in page.content()
    judged = served.judgements("adapt-check")
    verdicts = sorted((j.verdict, j.error) for js in judged.values() for j in js)
    assert verdicts == [("correct-major", None), ("wrong", "translation")]


def test_label_errors_by_keyboard(served: Served, page: Any) -> None:
    page.set_default_timeout(10_000)
    served.store.add_tasks("label-errors", [item(1, question=HOSTILE)], k=1, group="g")
    page.goto(served.link(served.store.invite("ana")))
    page.goto(f"{served.base}/t/label-errors")
    assert page.locator("#question").inner_text() == HOSTILE
    page.keyboard.press("4")  # the question: fluency
    page.keyboard.press("e")  # the options: invalid options
    with page.expect_navigation():
        page.keyboard.press("Enter")
    assert "Nothing left for you in label-errors" in page.content()
    assert page.evaluate("typeof window.__pwned") == "undefined"
    (judgement,) = served.judgements("label-errors")["q1"]
    assert (judgement.question_error, judgement.options_error) == ("fluency", "invalid-options")
    assert judgement.accept is False


# -- writing, checking and revising questions -------------------------------------------------------


def concept_slot(n: int, concept: str = "umbrella", category: str = "weather") -> QueuedTask:
    """A create task for ana alone (the slot is hers to write)."""
    written = ConceptSlot(id=f"w{n}", lang="en", category=category, concept=concept, creator="ana")
    return QueuedTask(type="create", input=written, eligible=("ana",))


def draft_item(
    n: int, rnd: int, question: str, texts: list[str], history: list[QCEvent], category: str = "weather"
) -> DraftItem:
    choices = [Choice(label=label, text=text) for label, text in zip("ABCDE", texts, strict=True)]
    return DraftItem(
        id=f"w{n}@{rnd}",
        item_id=f"w{n}",
        lang="en",
        category=category,
        concept="umbrella",
        creator="ana",
        draft=Draft(question=question, choices=choices, answer="A", distractor="B"),
        history=history,
    )


def test_writing_a_question_by_keyboard(served: Served, page: Any) -> None:
    page.set_default_timeout(10_000)
    served.store.queue([concept_slot(1)])
    page.goto(served.link(served.store.invite("ana")))
    page.goto(f"{served.base}/t/create")
    assert page.locator("#concept").inner_text() == "umbrella" and page.locator("#category").inner_text() == "weather"
    assert page.evaluate("document.activeElement.id") == "question"  # the page opens in the question box
    page.keyboard.type("What do you take along when it rains?")  # the concept is missing: a 422 below
    options = ["a brolly", "a raincoat", "sunglasses", "a scarf", "a kite"]
    for n, text in enumerate(options):
        page.keyboard.press("Tab")
        page.keyboard.type(text)
        if n == 2:  # Enter in a one-line field moves on instead of submitting
            page.keyboard.press("Enter")
            assert page.evaluate("document.activeElement.id") == "option-D"
            page.keyboard.press("Shift+Tab")
    assert page.locator('#judge .mirror[data-label="B"]').first.inner_text() == "a raincoat"
    page.keyboard.press("Tab")  # into the answer choices: the keys work here
    page.keyboard.press("1")
    page.keyboard.press("Shift+Digit2")
    assert page.is_checked('input[name="answer"][value="A"]')
    assert page.is_checked('input[name="distractor"][value="B"]')
    page.keyboard.press("Shift+Digit3")
    page.keyboard.press("2")
    assert page.is_checked('input[name="distractor"][value="C"]') and page.is_checked('input[name="answer"][value="B"]')
    page.keyboard.press("1")
    with page.expect_navigation():
        page.keyboard.press("Enter")
    problems = page.locator("#problems").inner_text()
    assert "the concept 'umbrella' does not appear" in problems
    assert page.input_value("#question") == "What do you take along when it rains?"
    assert [page.input_value(f"#option-{label}") for label in "ABCDE"] == options
    assert page.is_checked('input[name="answer"][value="A"]')
    assert page.is_checked('input[name="distractor"][value="C"]')
    # Esc leaves the question box so that the keys work; Ctrl+Enter submits from inside a text field
    page.keyboard.press("Escape")
    page.keyboard.press("?")
    assert page.locator("#shortcuts").is_visible()
    page.keyboard.press("?")
    page.click("#question")
    page.keyboard.press("Control+a")
    page.keyboard.type("Which umbrella do you take along when it rains?")
    with page.expect_navigation():
        page.keyboard.press("Control+Enter")
    assert "Nothing left for you in create" in page.content()
    (judgement,) = served.judgements("create")["w1"]
    assert (
        judgement.annotator == "ana" and judgement.draft.question == "Which umbrella do you take along when it rains?"
    )
    assert [c.text for c in judgement.draft.choices] == options
    assert (judgement.draft.answer, judgement.draft.distractor) == ("A", "C")


def test_qc_sends_a_hostile_draft_back_and_its_writer_revises_it(served: Served, page: Any) -> None:
    page.set_default_timeout(10_000)
    question = f"{HOSTILE} umbrella?"
    texts = [HOSTILE, "a raincoat", "sunglasses", "a scarf", "a kite"]
    submitted = QCEvent(status="submitted", by="ana", round=0)
    checked = draft_item(1, 0, question, texts, [submitted], category=HOSTILE)
    served.store.queue([QueuedTask(type="qc", input=checked, creator="ana")])
    ana, bo = served.store.invite("ana"), served.store.invite("bo")

    page.goto(served.link(bo))
    page.goto(f"{served.base}/t/qc")
    assert page.locator("#question").inner_text() == question and page.locator("#category").inner_text() == HOSTILE
    assert HOSTILE in page.locator("ol.choices li.marked").inner_text()
    assert "a raincoat" in page.locator("ol.choices li.distractor").inner_text()
    assert not page.locator("#comment").is_visible()
    page.keyboard.press("2")  # needs revision: the comment box opens with the cursor in it
    assert page.is_checked('input[name="verdict"][value="needs_revision"]')
    assert page.evaluate("document.activeElement.id") == "comment"
    feedback = f"Option A is markup: {HOSTILE}"
    page.keyboard.type(feedback)
    with page.expect_navigation():
        page.keyboard.press("Control+Enter")
    assert "Nothing left for you in qc" in page.content()
    assert page.evaluate("typeof window.__pwned") == "undefined"
    (verdict,) = served.judgements("qc")["w1@0"]
    assert (verdict.annotator, verdict.verdict, verdict.comment) == ("bo", "needs_revision", feedback)

    sent_back = QCEvent(status="needs_revision", by="bo", round=1, comment=verdict.comment)
    revise = draft_item(1, 1, question, texts, [submitted, sent_back], category=HOSTILE)
    served.store.queue([QueuedTask(type="revise", input=revise, eligible=("ana",))])
    page.goto(served.link(ana))
    page.goto(f"{served.base}/t/revise")
    assert page.locator("#feedback").inner_text() == feedback
    assert page.locator("main img, main script").count() == 0
    assert page.input_value("#question") == question and page.input_value("#option-A") == HOSTILE
    assert page.is_checked('input[name="answer"][value="A"]') and page.is_checked('input[name="distractor"][value="B"]')
    page.keyboard.press("Control+a")  # the page opens in the question box
    page.keyboard.type("Which umbrella do you open in the rain?")
    page.keyboard.press("Tab")
    page.keyboard.press("Control+a")
    page.keyboard.type("a big umbrella")
    page.keyboard.press("Escape")
    page.keyboard.press("Shift+Digit4")
    with page.expect_navigation():
        page.keyboard.press("Enter")
    assert "Nothing left for you in revise" in page.content()
    page.wait_for_timeout(200)  # give a stray onerror a chance to fire
    assert page.evaluate("typeof window.__pwned") == "undefined"
    (edit,) = served.judgements("revise")["w1@1"]
    assert edit.annotator == "ana" and edit.draft.question == "Which umbrella do you open in the rain?"
    assert [c.text for c in edit.draft.choices] == ["a big umbrella", *texts[1:]]
    assert (edit.draft.answer, edit.draft.distractor) == ("A", "D")


@pytest.mark.parametrize("task", ["create", "qc", "revise"])
def test_hostile_text_stays_inert_on_the_writing_pages(served: Served, page: Any, task: str) -> None:
    page.set_default_timeout(10_000)
    if task == "create":
        served.store.queue([concept_slot(1, concept=HOSTILE, category=HOSTILE)])
    else:
        history = [
            QCEvent(status="submitted", by="ana", round=0, comment=HOSTILE),
            QCEvent(status="needs_revision", by="bo", round=1, comment=HOSTILE),
        ]
        written = draft_item(1, 1, f"{HOSTILE} umbrella?", [HOSTILE, "b", "c", "d", "e"], history, category=HOSTILE)
        served.store.queue([QueuedTask(type=task, input=written, eligible=("ana",))])
    page.goto(served.link(served.store.invite("ana")))
    page.goto(f"{served.base}/t/{task}")
    assert page.locator("#category").inner_text() == HOSTILE
    if task == "create":
        assert page.locator("#concept").inner_text() == HOSTILE
        page.fill("#question", HOSTILE)
        for label, text in zip("ABCDE", [HOSTILE, HOSTILE, "c", "d", "e"], strict=True):
            page.fill(f"#option-{label}", text)
        page.fill("#concept_form", HOSTILE)
        assert page.locator('#judge .mirror[data-label="A"]').first.inner_text() == HOSTILE
        page.keyboard.press("Escape")
        page.keyboard.press("1")
        page.keyboard.press("Shift+Digit3")
        with page.expect_navigation():
            page.keyboard.press("Enter")  # two options the same: a 422
        assert "two options say the same thing" in page.locator("#problems").inner_text()
        assert page.input_value("#question") == HOSTILE and page.input_value("#option-A") == HOSTILE
        assert page.input_value("#concept_form") == HOSTILE
        assert page.locator('#judge .mirror[data-label="A"]').first.inner_text() == HOSTILE
    elif task == "qc":
        assert page.locator("#question").inner_text() == f"{HOSTILE} umbrella?"
        assert page.locator("#history").inner_text().count(HOSTILE) == 2
        assert HOSTILE in page.locator("ol.choices").inner_text()
    else:
        assert page.locator("#feedback").inner_text() == HOSTILE
        assert page.input_value("#question") == f"{HOSTILE} umbrella?" and page.input_value("#option-A") == HOSTILE
        assert page.locator('#judge .mirror[data-label="A"]').first.inner_text() == HOSTILE
    assert page.locator("main img, main script").count() == 0
    page.wait_for_timeout(200)  # give a stray onerror a chance to fire
    assert page.evaluate("typeof window.__pwned") == "undefined"


# -- CRoW's validations ------------------------------------------------------------------------------


def knowledge_check(n: int, context: str = "A pan of oil catches fire") -> QueuedTask:
    pair = {"task": "safety", "lang": "en", "context_name": "scenario", "target_name": "action", "label": "safe"}
    triple = {"head": "lid", "relation": "UsedFor", "tail": "smothering", "verbalized": "a lid is used for smothering"}
    shown = KnowledgeCheckItem.model_validate(
        {**pair, "id": f"safety/c{n}/0/0", "context": context, "target": "cover it", "triple": triple}
    )
    return QueuedTask(type="ckv", input=shown, k=1, group="g")


def rewrite_check(n: int, rewrite: str = "cover it with water") -> QueuedTask:
    pair = {"task": "safety", "lang": "en", "context_name": "scenario", "target_name": "action", "label": "safe"}
    shown = RewriteCheckItem.model_validate(
        {
            **pair,
            "id": f"safety/c{n}/0/0",
            "context": "A pan of oil catches fire",
            "target": "cover it with a lid",
            "rewrite": rewrite,
            "flipped": "unsafe",
            "violates": [{"head": "lid", "relation": "UsedFor", "tail": "smothering"}],
            "edits": 2,
        }
    )
    return QueuedTask(type="wsv", input=shown, k=1, group="g")


def test_crow_validations_by_keyboard_with_hostile_text_inert(served: Served, page: Any) -> None:
    page.set_default_timeout(10_000)
    served.store.queue([knowledge_check(1, context=HOSTILE), knowledge_check(2)])
    served.store.queue([rewrite_check(1, rewrite=HOSTILE), rewrite_check(2)])
    page.goto(served.link(served.store.invite("ana")))
    page.goto(f"{served.base}/t/ckv")
    assert page.locator("#triple").inner_text().startswith("a lid is used for smothering")
    page.keyboard.press("y")
    with page.expect_navigation():
        page.keyboard.press("Enter")
    page.keyboard.press("2")
    with page.expect_navigation():
        page.keyboard.press("Enter")
    assert "Nothing left for you in ckv" in page.content()
    assert sorted(j.accept for js in served.judgements("ckv").values() for j in js) == [False, True]
    page.goto(f"{served.base}/t/wsv")
    assert page.locator("#rewrite").inner_text() in (HOSTILE, "cover it with water")
    for key in "1234":  # all four conditions: accepted
        page.keyboard.press(key)
    with page.expect_navigation():
        page.keyboard.press("Enter")
    page.keyboard.press("1")
    page.keyboard.press("3")  # two of four: not accepted
    with page.expect_navigation():
        page.keyboard.press("Enter")
    assert "Nothing left for you in wsv" in page.content()
    page.wait_for_timeout(200)
    assert page.evaluate("typeof window.__pwned") == "undefined"
    checked = sorted(
        (j.accept, tuple(sorted(k for k, v in (j.conditions or {}).items() if v)))
        for js in served.judgements("wsv").values()
        for j in js
    )
    assert checked == [(False, ("flips", "minimal")), (True, ("flips", "minimal", "on_topic", "violates"))]


def annotation_task(n: int, context: str = "Oil in the pan catches fire") -> QueuedTask:
    pair = {"task": "safety", "lang": "en", "context_name": "scenario", "target_name": "action", "label": "safe"}
    shown = AnnotationItem.model_validate({**pair, "id": f"safety/a{n}/0", "context": context, "target": "use a lid"})
    return QueuedTask(type="cka", input=shown, k=1, group="g")


def rewrite_task(n: int, target: str = "cover the pan with a lid", context: str = "Oil catches fire") -> QueuedTask:
    pair = {"task": "safety", "lang": "en", "context_name": "scenario", "target_name": "action", "label": "safe"}
    triple = {"head": "lid", "relation": "UsedFor", "tail": "smothering", "verbalized": "a lid is used for smothering"}
    shown = RewriteItem.model_validate(
        {
            **pair,
            "id": f"safety/w{n}/0/0",
            "context": context,
            "target": target,
            "flipped": "unsafe",
            "triples": [triple],
        }
    )
    return QueuedTask(type="wsg", input=shown, k=1, group="g")


def _select(page: Any, selector: str, words: str) -> None:
    """Select ``words`` inside the element, as a mouse drag would."""
    page.evaluate(
        """([selector, words]) => {
          const node = document.querySelector(selector).firstChild;
          const start = node.textContent.indexOf(words);
          const range = document.createRange();
          range.setStart(node, start); range.setEnd(node, start + words.length);
          const selection = window.getSelection(); selection.removeAllRanges(); selection.addRange(range);
        }""",
        [selector, words],
    )


def test_writing_knowledge_and_a_rewrite_by_keyboard(served: Served, page: Any) -> None:
    page.set_default_timeout(10_000)
    served.store.queue([annotation_task(1, context=f"{HOSTILE} Oil in the pan catches fire"), annotation_task(2)])
    served.store.queue([rewrite_task(1), rewrite_task(2, context=HOSTILE)])
    page.goto(served.link(served.store.invite("ana")))
    page.goto(f"{served.base}/t/cka")
    first_context = page.locator("#context").inner_text()
    _select(page, "#context", "Oil")
    page.keyboard.press("h")
    _select(page, "#target", "lid")
    page.keyboard.press("t")
    assert page.locator("input.head").first.input_value() == "Oil"
    assert page.locator("input.tail").first.input_value() == "lid"
    page.keyboard.press("k")  # back to the first row (t moved on to the next)
    page.keyboard.press("r")
    page.keyboard.press("U")  # the relation list jumps to UsedFor
    with page.expect_navigation():
        page.keyboard.press("Control+Enter")
    page.keyboard.press("0")  # the second pair: no knowledge
    with page.expect_navigation():
        page.keyboard.press("Enter")
    assert "Nothing left for you in cka" in page.content()
    assert page.evaluate("typeof window.__pwned") == "undefined" and HOSTILE in first_context
    made = {i: js[0] for i, js in served.judgements("cka").items()}
    written = [t for j in made.values() for t in j.triples]
    assert [(t.head, t.relation, t.tail) for t in written] == [("Oil", "UsedFor", "lid")]
    assert sorted(j.no_knowledge for j in made.values()) == [False, True]

    page.goto(f"{served.base}/t/wsg")
    box = page.locator("#rewrite")
    assert box.input_value() == "cover the pan with a lid"  # a rewrite starts as the original
    box.fill("throw some cold water on it")
    assert "6 words changed (at most 5)" in page.locator("#count").inner_text()
    assert "over" in (page.locator("#count").get_attribute("class") or "")
    box.fill("cover the pan with a paper towel")
    assert page.locator("#count").inner_text().startswith("2 words changed")
    with page.expect_navigation():
        page.keyboard.press("Control+Enter")
    page.keyboard.press("0")
    with page.expect_navigation():
        page.keyboard.press("Enter")
    assert "Nothing left for you in wsg" in page.content()
    assert page.evaluate("typeof window.__pwned") == "undefined"
    rewrites = sorted((j.rewrite or "", j.no_alternative) for js in served.judgements("wsg").values() for j in js)
    assert rewrites == [("", True), ("cover the pan with a paper towel", False)]
