"""Every page of the annotation app checked by axe-core against WCAG 2.0 and 2.1, levels A and AA.

One server, one browser page: an annotator opens a task of every registered type (and one refused with its
problems listed), an admin the admin page, the adjudication of a split, a done page and an error page, and
a stranger the sign-in error; each page is checked at a desktop width (1280 px) and a phone's (390 px).
axe-core comes from ``axe-playwright-python`` (it ships ``axe.min.js``; nothing is fetched). No rule is
turned off.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("uvicorn")
pytest.importorskip("starlette")

from senseforge.annotate.store import AnnotationStore
from senseforge.annotate.tasktypes import TASK_TYPES

from .keyboard import SESSIONS, WHO, mc_item, serve

pytestmark = pytest.mark.browser

WCAG = ("wcag2a", "wcag2aa", "wcag21a", "wcag21aa")
VIEWS = (("light", 1280, 800), ("light", 390, 844), ("dark", 390, 844))
"""Each page at a desktop width and a phone's, and on the phone in its dark scheme too (the pages follow the
system's colour scheme)."""
AXE_OPTIONS = {"runOnly": {"type": "tag", "values": list(WCAG)}, "resultTypes": ["violations"]}


@pytest.fixture
def app(tmp_path: Path) -> Iterator[tuple[str, AnnotationStore]]:
    url = f"sqlite:///{tmp_path / 'run.db'}"
    store = AnnotationStore(url)
    try:
        with serve(url) as base:
            yield base, store
    finally:
        store.close()


def _violations(script: str, page: Any) -> list[str]:
    """axe's WCAG A/AA violations on the page as it is now, one line each (rule, impact, where)."""
    if not page.evaluate("typeof window.axe === 'object'"):  # once per page load
        page.evaluate(script)
    found = page.evaluate("(options) => axe.run(document, options)", AXE_OPTIONS)["violations"]
    return [
        f"{v['id']} ({v['impact']}): {', '.join(str(t) for node in v['nodes'] for t in node['target'])} — {v['help']}"
        for v in found
    ]


def _in_every_view(script: str, page: Any, label: str) -> list[str]:
    """The page's violations in each of :data:`VIEWS`, each line naming the page and the view."""
    found = []
    for scheme, width, height in VIEWS:
        page.emulate_media(color_scheme=scheme)
        page.set_viewport_size({"width": width, "height": height})
        found += [f"{label} @ {width}px {scheme}: {line}" for line in _violations(script, page)]
    return found


def test_every_page_passes_axe_wcag_a_and_aa_at_desktop_and_phone_width(
    app: tuple[str, AnnotationStore], page: Any
) -> None:
    try:
        from axe_playwright_python.base import AXE_SCRIPT as axe  # the axe.min.js the package ships
    except ImportError:  # as tests/conftest.py treats a missing browser: fail under CI, else skip
        if os.environ.get("CI", "").strip().lower() in ("1", "true", "yes"):
            pytest.fail("axe-playwright-python is not installed (CI=true: browser tests must run)", pytrace=False)
        pytest.skip("axe-playwright-python is not installed (pip install -e '.[dev]')")
    base, store = app
    page.set_default_timeout(10_000)
    for name in TASK_TYPES:
        SESSIONS[name].queue(store, 1)
    store.add_tasks("verify", [mc_item(7)], k=2, group="split")  # two people will split on it
    kim, boss = store.invite(WHO), store.invite("boss", "admin")
    splitters = [store.invite("ana"), store.invite("ben")]

    def signed_in(token: str | None) -> None:
        page.context.clear_cookies()
        if token:
            page.goto(f"{base}/login?token={token}")

    pages: list[tuple[str | None, str, str]] = [(kim, "home", "/")]
    pages += [(kim, f"task {name}", f"/t/{name}") for name in TASK_TYPES]
    pages += [(boss, "admin", "/admin"), (boss, "adjudicate", "/admin/adjudicate/verify")]
    pages += [(boss, "done", "/t/verify"), (boss, "not found", "/t/no-such-type"), (None, "sign in", "/login?token=x")]

    problems: list[str] = []
    checked = 0
    who: str | None = ""
    for token, label, path in pages:
        if token != who:
            signed_in(token)
            who = token
        if label == "admin":  # kim holds a lease on each task now; ana and ben split on the one left
            for person, accept in zip(splitters, (True, False), strict=True):
                bearer = {"Authorization": f"Bearer {person}"}
                lease = page.request.post(f"{base}/api/verify/next", headers=bearer).json()
                page.request.post(
                    f"{base}/api/verify/{lease['assignment_id']}", headers=bearer, data={"accept": accept}
                )
        page.goto(f"{base}{path}")
        if label == "adjudicate":
            assert "number 7" in page.content()  # the split is on the page, with its forms
        problems += _in_every_view(axe, page, label)
        checked += 1
        if label == "task cka":  # the same page refused: its problems listed
            page.keyboard.press("Enter")
            page.wait_for_selector("#problems")
            problems += _in_every_view(axe, page, "cka refused")
            checked += 1
    assert checked == len(pages) + 1
    assert not problems, "\n".join(problems)
