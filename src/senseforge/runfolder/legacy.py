"""Funnels written before the typed form: each recipe wrote its own shape; here they become a
:class:`~senseforge.runfolder.funnel.Funnel`, so a run built by an earlier version still opens and reports.

Every old shape has ``stages`` and ``kept``; what else it holds depends on the recipe that wrote it (named in
the manifest). The figures made from it are those the recipe declares today, so a report over an old run and a
new one of the same build shows the same figures.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from senseforge.runfolder.funnel import Funnel, StageRow
from senseforge.runfolder.manifest import Manifest


def funnel_from_legacy(document: Any, manifest: Manifest | None, folder: Path) -> Funnel:
    """An old ``funnel.json`` in the typed form (``folder``: the run folder, whose group folders hold more)."""
    if not isinstance(document, dict):
        raise ValueError("a funnel is a JSON object")
    recipe = (manifest.recipe if manifest is not None else None) or "unknown"
    return Funnel(
        recipe=recipe,
        stages=[StageRow.model_validate(row) for row in document.get("stages") or []],
        kept=int(document.get("kept") or 0),
    )
