"""Smoke tests of the test infrastructure: a real chromium, and SQLite and PostgreSQL through db_url."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import pytest
import sqlalchemy as sa

if TYPE_CHECKING:
    from playwright.sync_api import Page


@pytest.mark.browser
def test_chromium_renders_a_page(page: Page) -> None:
    page.goto("data:text/html;charset=utf-8,<main><h1 id='title'>常識 senseforge</h1></main>")
    assert page.text_content("#title") == "常識 senseforge"
    assert page.evaluate("1 + 1") == 2


def test_asyncio_run_still_works_after_the_browser_started() -> None:
    async def answer() -> int:
        await asyncio.sleep(0)
        return 42

    assert asyncio.run(answer()) == 42


def test_db_url_round_trip(db_url: str) -> None:
    engine = sa.create_engine(db_url)
    try:
        rows = sa.table("rows", sa.column("id", sa.Integer), sa.column("text", sa.String))
        with engine.begin() as conn:
            conn.execute(sa.text("CREATE TABLE rows (id INTEGER PRIMARY KEY, text VARCHAR(40) NOT NULL)"))
            conn.execute(sa.insert(rows), [{"id": 1, "text": "一"}, {"id": 2, "text": "two"}])
        with engine.connect() as conn:
            assert conn.execute(sa.select(rows.c.text).order_by(rows.c.id)).scalars().all() == ["一", "two"]
            assert conn.dialect.name == ("sqlite" if db_url.startswith("sqlite") else "postgresql")
    finally:
        engine.dispose()
