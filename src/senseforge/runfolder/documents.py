"""Reading one JSON file of a run folder, and saying where it is wrong."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from senseforge.errors import ConfigError


def read_document(path: Path) -> Any:
    """The JSON document at ``path``, ``None`` when there is no such file.

    Raises:
        ConfigError: the file is there but is not JSON (its path and the parser's line and column).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"{path}: not JSON: {exc}") from exc


def located(path: Path, exc: ValidationError) -> ConfigError:
    """A shape error as one line: the file, the place in it (``by_task.safety.examples``) and what is wrong."""
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or "(top)"
    return ConfigError(f"{path}: {where}: {first['msg']}")
