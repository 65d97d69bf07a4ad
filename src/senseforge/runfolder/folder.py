"""One call that opens a run folder: :meth:`RunFolder.open` reads and validates its manifest, funnel and cost.

A file that is missing is ``None`` (a run that has not finished has no funnel yet); a file that is there but
unreadable or of the wrong shape is a :class:`~senseforge.errors.ConfigError` naming the file and what is wrong.
A funnel written before the typed form (no ``format``) is read through :mod:`senseforge.runfolder.legacy`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from senseforge.errors import ConfigError
from senseforge.runfolder import files
from senseforge.runfolder.cost import Cost
from senseforge.runfolder.documents import located, read_document
from senseforge.runfolder.funnel import Funnel
from senseforge.runfolder.legacy import funnel_from_legacy
from senseforge.runfolder.manifest import Manifest

__all__ = ["RunFolder", "read_cost", "read_document", "read_funnel", "read_manifest"]


def read_manifest(folder: Path) -> Manifest | None:
    """The folder's manifest, ``None`` when it has none."""
    path = folder / files.MANIFEST
    document = read_document(path)
    if document is None:
        return None
    try:
        return Manifest.model_validate(document)
    except ValidationError as exc:
        raise located(path, exc) from exc


def read_funnel(folder: Path, manifest: Manifest | None = None) -> Funnel | None:
    """The folder's funnel in the typed form (an older file adapted), ``None`` when it has none."""
    path = folder / files.FUNNEL
    document = read_document(path)
    if document is None:
        return None
    try:
        if isinstance(document, dict) and "format" in document:
            return Funnel.model_validate(document)
        return funnel_from_legacy(document, manifest, folder)
    except ValidationError as exc:
        raise located(path, exc) from exc
    except ConfigError:
        raise  # a group's own file, named
    except ValueError as exc:
        raise ConfigError(f"{path}: {exc}") from exc


def read_cost(path: Path) -> Cost | None:
    """A cost file, ``None`` when there is none."""
    document = read_document(path)
    if document is None:
        return None
    try:
        return Cost.model_validate(document)
    except ValidationError as exc:
        raise located(path, exc) from exc


@dataclass(frozen=True)
class RunFolder:
    """A run folder, read: its manifest, funnel and cost (each ``None`` until written)."""

    path: Path
    manifest: Manifest | None
    funnel: Funnel | None
    cost: Cost | None

    @classmethod
    def open(cls, path: Path) -> RunFolder:
        """Read the run folder at ``path``.

        Raises:
            ConfigError: ``path`` is no run folder (neither a manifest nor a funnel), or one of its files is
                unreadable or of the wrong shape (the file and the place in it named).
        """
        if not any((path / name).is_file() for name in files.RUN_FILES):
            raise ConfigError(f"{path}: not a run folder (no {' or '.join(files.RUN_FILES)})")
        manifest = read_manifest(path)
        return cls(path, manifest, read_funnel(path, manifest), read_cost(path / files.COST))

    @property
    def recipe(self) -> str | None:
        """The recipe that built it (from the manifest, else the funnel)."""
        if self.manifest is not None and self.manifest.recipe:
            return self.manifest.recipe
        return self.funnel.recipe if self.funnel is not None else None

    @property
    def finished(self) -> bool:
        return self.funnel is not None

    def group_cost(self, group: str) -> Cost | None:
        """The cost of one group with a folder of its own (``id/cost.json``), ``None`` when there is none."""
        found = self.funnel.group(group) if self.funnel is not None else None
        if found is None or found.folder is None:
            return None
        return read_cost(self.path / found.folder / files.COST)
