"""Every task type done by keyboard alone in a real chromium, and no control that holds the keyboard.

The sessions (what each type queues, the keys pressed) are in ``tests/annotate/keyboard.py``, which
``benchmarks/annotation_keystrokes.py`` times. Here: each registered task type must be completed by keys
alone, a verify-style judgement (a pick, then Enter) takes at most two keystrokes, and the cka relation
menu gives the keyboard back (Esc) and submits (Enter).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("uvicorn")
pytest.importorskip("starlette")

from senseforge.annotate.store import AnnotationStore
from senseforge.annotate.tasktypes import TASK_TYPES

from .keyboard import SESSIONS, Keyboard, judge_all, serve

pytestmark = pytest.mark.browser


@pytest.fixture
def app(tmp_path: Path) -> Iterator[tuple[str, AnnotationStore]]:
    """The app over a fresh SQLite run store, served on loopback: its base URL and the store."""
    url = f"sqlite:///{tmp_path / 'run.db'}"
    store = AnnotationStore(url)
    try:
        with serve(url) as base:
            yield base, store
    finally:
        store.close()


def test_every_task_type_is_done_by_keyboard_alone(app: tuple[str, AnnotationStore], page: Any) -> None:
    base, store = app
    missing = sorted(set(TASK_TYPES) - set(SESSIONS))
    assert not missing, f"no keyboard session for {missing}: add one to tests/annotate/keyboard.py"
    page.set_default_timeout(10_000)
    measured = judge_all(page, base, store, list(TASK_TYPES))
    assert sorted(measured) == sorted(TASK_TYPES)
    for name, done in measured.items():
        if SESSIONS[name].style == "verify":
            assert done.keys[0] + done.typed[0] <= 2, f"{name}: {done.keys[0] + done.typed[0]} keystrokes"
    # what the writing types took: the keys beside the text, so that a change to either shows here
    assert {name: (m.keys[0], m.typed[0]) for name, m in measured.items() if SESSIONS[name].style == "write"} == {
        "create": (9, 77),
        "revise": (2, 6),
        "cka": (7, 6),
        "wsg": (3, 5),
    }


def test_the_cka_relation_menu_gives_the_keyboard_back(app: tuple[str, AnnotationStore], page: Any) -> None:
    base, store = app
    page.set_default_timeout(10_000)
    SESSIONS["cka"].queue(store, 1)
    page.goto(f"{base}/login?token={store.invite('kim')}")
    page.goto(f"{base}/t/cka")
    kb = Keyboard(page)
    kb.press("r")
    assert page.evaluate("document.activeElement.getAttribute('aria-label')") == "relation 1"
    kb.press("U")  # letters in the menu pick a relation
    assert page.input_value('select[aria-label="relation 1"]') == "UsedFor"
    kb.press("Escape")  # and Esc gives the page its keys back
    assert kb.focused() == "body"
    kb.press("?")
    assert page.locator("#shortcuts").is_visible()
    kb.press("?")
    # h and t fill the current row and r opens that row's menu (not the next row's)
    kb.press("h")
    kb.type("oil")
    kb.press("Escape", "t")
    kb.type("fire")
    kb.press("Escape", "r")
    assert page.evaluate("document.activeElement.getAttribute('aria-label')") == "relation 1"
    # h on a full row starts the next one; k goes back
    kb.press("Escape", "h")
    assert page.evaluate("document.activeElement.getAttribute('aria-label')") == "head 2"
    assert page.locator("tr.current").get_attribute("data-row") == "1"
    kb.press("Escape", "k")
    assert page.locator("tr.current").get_attribute("data-row") == "0"
    kb.press("r")
    with page.expect_navigation():
        kb.press("Enter")  # Enter in the menu submits
    assert "Nothing left for you in cka" in page.content()
    (judgement,) = store.judgements("cka")["safety/a0/0"]
    assert [(t.head, t.relation, t.tail) for t in judgement.triples] == [("oil", "UsedFor", "fire")]
