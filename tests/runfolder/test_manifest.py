"""The manifest: common facts typed, a recipe's own facts kept as written and in their order."""

from __future__ import annotations

import json
from pathlib import Path

from senseforge.runfolder.folder import read_manifest

PAUSED = Path(__file__).parents[1] / "fixtures" / "golden" / "paused" / "mcsqa-en-awaiting"


def test_the_paused_run_s_manifest_reads_typed_and_writes_back_as_it_was() -> None:
    written = json.loads((PAUSED / "manifest.json").read_text(encoding="utf-8"))
    manifest = read_manifest(PAUSED)
    assert manifest is not None and manifest.recipe == "mcsqa" and manifest.config == written["config"]
    assert manifest.config_hash == written["config_hash"] and manifest.run_id == written.get("run_id")
    assert manifest.as_dict() == written and list(manifest.as_dict()) == list(written)
    own = [key for key in written if key not in type(manifest).model_fields]
    assert own and all(manifest.fact(key) == written[key] for key in own)
    assert manifest.fact("no-such-fact") is None


def test_a_folder_without_a_manifest_has_none(tmp_path: Path) -> None:
    assert read_manifest(tmp_path) is None
