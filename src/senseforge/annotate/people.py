"""People of the annotation store: annotators, their roles and invite tokens, and who holds a token.

The ``annotators`` table keeps a name, a role (``admin`` or ``annotator``) and the SHA-256
of the invite token; the token itself is shown once and never stored.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from typing import Literal

import sqlalchemy as sa

from senseforge.annotate.db import StoreDb
from senseforge.errors import ConfigError
from senseforge.pipelines.tables import annotators

Role = Literal["admin", "annotator"]


def token_hash(token: str) -> str:
    """What the store keeps of an invite token."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Annotator:
    name: str
    role: Role


class People:
    """Annotators and their invite tokens, on the store's database."""

    def __init__(self, db: StoreDb) -> None:
        self.db = db

    def invite(self, name: str, role: Role = "annotator") -> str:
        """Create (or re-key) an annotator; returns their new invite token (shown once)."""
        if not name.strip() or len(name) > 128:
            raise ConfigError("an annotator needs a name of 1 to 128 characters")
        if role not in ("admin", "annotator"):
            raise ConfigError(f"unknown role {role!r}: admin or annotator")
        token = secrets.token_urlsafe(24)
        values = {"role": role, "token_sha256": token_hash(token)}
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
                sa.select(annotators.c.name, annotators.c.role).where(annotators.c.token_sha256 == token_hash(token))
            ).first()
        return Annotator(row[0], row[1]) if row else None

    def annotator_names(self) -> list[str]:
        """Every annotator's name, sorted."""
        with self.db.engine.connect() as conn:
            return [r[0] for r in conn.execute(sa.select(annotators.c.name).order_by(annotators.c.name))]


__all__ = ["Annotator", "People", "Role", "token_hash"]
