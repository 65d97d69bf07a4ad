"""People of the annotation store: a store made before annotators had a language still opens, and gets one."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from senseforge.annotate.people import token_hash
from senseforge.annotate.store import AnnotationStore
from senseforge.errors import ConfigError
from senseforge.pipelines.runstore import sqlite_url


def test_a_store_without_the_lang_column_gets_it_and_keeps_its_people(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path / "run.db")
    engine = sa.create_engine(url)
    with engine.begin() as conn:  # the annotators table as stores made before languages have it
        conn.exec_driver_sql(
            "CREATE TABLE annotators (name VARCHAR(128) PRIMARY KEY, role VARCHAR(16) NOT NULL, "
            "token_sha256 VARCHAR(64) NOT NULL UNIQUE, created_at FLOAT NOT NULL)"
        )
        conn.exec_driver_sql("INSERT INTO annotators VALUES ('ana', 'annotator', ?, 1.0)", (token_hash("old-token"),))
    engine.dispose()
    for _ in range(2):  # opening it again finds the column there
        store = AnnotationStore(url)
        try:
            who = store.who("old-token")
            assert who is not None and (who.name, who.role, who.lang) == ("ana", "annotator", None)
        finally:
            store.close()
    store = AnnotationStore(url)
    try:
        store.set_language("ana", "id")
        who = store.who("old-token")
        assert who is not None and who.lang == "id"
        with pytest.raises(ConfigError, match="available are en, id"):
            store.set_language("ana", "xx")
        with pytest.raises(LookupError, match="no annotator 'bo'"):
            store.set_language("bo", "id")
        token = store.invite("bo", lang="id")
        bo = store.who(token)
        assert bo is not None and bo.lang == "id"
    finally:
        store.close()
