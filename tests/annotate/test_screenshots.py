"""A screenshot of every task type's page in a real chromium, for the documentation's gallery.

Each registered task type gets one task queued (the same tasks the keyboard test judges), and its page is
photographed as an annotator first sees it. Here the pictures go to a temporary folder, so the test checks that
every type's page renders; ``make screenshots`` sets ``SENSEFORGE_SCREENSHOTS=docs/img/tasks`` to refresh the
committed gallery (``docs/concepts/annotation-gallery.md``), which the site's build only reads.
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

from .keyboard import SESSIONS, WHO, serve

pytestmark = pytest.mark.browser


@pytest.fixture
def app(tmp_path: Path) -> Iterator[tuple[str, AnnotationStore]]:
    url = f"sqlite:///{tmp_path / 'run.db'}"
    store = AnnotationStore(url)
    try:
        with serve(url) as base:
            yield base, store
    finally:
        store.close()


def test_every_task_type_has_a_screenshot(app: tuple[str, AnnotationStore], page: Any, tmp_path: Path) -> None:
    base, store = app
    folder = Path(os.environ.get("SENSEFORGE_SCREENSHOTS") or tmp_path / "shots")
    folder.mkdir(parents=True, exist_ok=True)
    names = sorted(TASK_TYPES)
    assert set(names) <= set(SESSIONS), f"task types with no session to queue: {set(names) - set(SESSIONS)}"
    for name in names:
        SESSIONS[name].queue(store, 1)
    page.set_viewport_size({"width": 1000, "height": 720})
    page.goto(f"{base}/login?token={store.invite(WHO)}")
    for name in names:
        page.goto(f"{base}/t/{name}")
        assert "Nothing left for you" not in page.content(), f"{name}: no task on the page"
        page.screenshot(path=str(folder / f"{name}.png"), full_page=True)
    assert sorted(p.stem for p in folder.glob("*.png")) >= names
