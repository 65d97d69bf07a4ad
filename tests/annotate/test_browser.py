"""The annotation app in a real chromium: keyboard-only judging, the admin page, hostile item text."""

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
from senseforge.data.schema import MCItem

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
