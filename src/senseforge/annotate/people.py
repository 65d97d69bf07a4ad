"""People of the annotation store: annotators, their roles and invite tokens, and who holds a token.

The ``annotators`` table keeps a name, a role (``admin`` or ``annotator``), the SHA-256
of the invite token (the token itself is shown once and never stored) and the language of
their pages (``lang``: a code of :func:`senseforge.annotate.i18n.languages`, or ``NULL`` for
the app's default). A store made before ``lang`` existed gets the column when it is opened.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from typing import Literal

import sqlalchemy as sa
from sqlalchemy.exc import SQLAlchemyError

from senseforge.annotate.db import StoreDb
from senseforge.annotate.i18n import check_language
from senseforge.errors import ConfigError, StoreError
from senseforge.pipelines.tables import annotators

Role = Literal["admin", "annotator"]


def token_hash(token: str) -> str:
    """What the store keeps of an invite token."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Annotator:
    name: str
    role: Role
    lang: str | None = None
    """The language of their pages (``None``: the app's default)."""


def _add_lang_column(db: StoreDb) -> None:
    """Give a store made before annotators had a language its ``lang`` column (NULL for everyone there).

    Two processes opening one old store at once both try; the loser's error is ignored once
    the column is there.

    Raises:
        StoreError: the column is missing and cannot be added.
    """

    def has_lang() -> bool:
        return "lang" in {c["name"] for c in sa.inspect(db.engine).get_columns(annotators.name)}

    if has_lang():
        return
    try:
        with db.engine.begin() as conn:
            conn.exec_driver_sql(f"ALTER TABLE {annotators.name} ADD COLUMN lang VARCHAR(16)")
    except SQLAlchemyError as exc:
        if not has_lang():
            raise StoreError(f"cannot add the annotators' language to the store {db.runs.url}: {exc}") from exc


class People:
    """Annotators and their invite tokens, on the store's database."""

    def __init__(self, db: StoreDb) -> None:
        self.db = db
        _add_lang_column(db)

    def invite(self, name: str, role: Role = "annotator", lang: str | None = None) -> str:
        """Create (or re-key) an annotator; returns their new invite token (shown once).

        ``lang`` sets the language of their pages; ``None`` keeps what a re-invited person had.

        Raises:
            ConfigError: a bad name or role, or a language the app does not speak (the error lists those it does).
        """
        if not name.strip() or len(name) > 128:
            raise ConfigError("an annotator needs a name of 1 to 128 characters")
        if role not in ("admin", "annotator"):
            raise ConfigError(f"unknown role {role!r}: admin or annotator")
        token = secrets.token_urlsafe(24)
        values: dict[str, object] = {"role": role, "token_sha256": token_hash(token)}
        if lang is not None:
            values["lang"] = check_language(lang)
        with self.db.engine.begin() as conn:
            updated = conn.execute(annotators.update().where(annotators.c.name == name).values(**values))
            if updated.rowcount == 0:
                conn.execute(annotators.insert().values(name=name, created_at=self.db.clock(), **values))
        return token

    def who(self, token: str | None) -> Annotator | None:
        """The annotator holding ``token``, or ``None``."""
        if not token:
            return None
        with self.db.engine.connect() as conn:
            row = conn.execute(
                sa.select(annotators.c.name, annotators.c.role, annotators.c.lang).where(
                    annotators.c.token_sha256 == token_hash(token)
                )
            ).first()
        return Annotator(row[0], row[1], row[2]) if row else None

    def set_language(self, name: str, lang: str) -> None:
        """Remember the language of ``name``'s pages.

        Raises:
            ConfigError: the app does not speak ``lang``.
            LookupError: no annotator ``name``.
        """
        check_language(lang)
        with self.db.engine.begin() as conn:
            updated = conn.execute(annotators.update().where(annotators.c.name == name).values(lang=lang))
        if updated.rowcount == 0:
            raise LookupError(f"no annotator {name!r}")

    def annotator_names(self) -> list[str]:
        """Every annotator's name, sorted."""
        with self.db.engine.connect() as conn:
            return [r[0] for r in conn.execute(sa.select(annotators.c.name).order_by(annotators.c.name))]


__all__ = ["Annotator", "People", "Role", "token_hash"]
