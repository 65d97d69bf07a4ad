"""Provenance of the knowledge an mCSQA build read: the manifest records the store, a resume
refuses a re-imported one, and each item carries the hash of the template it was written with."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from senseforge.errors import ConfigError
from senseforge.kb.conceptnet import edges_path, import_dump
from senseforge.pipelines.mcsqa import MCSQA, McsqaConfig
from senseforge.pipelines.runner import build
from senseforge.store.db import Store, sha256_file

AUTHOR = "scripted/mcsqa-author"
REASONS = Path(__file__).resolve().parents[2] / "fixtures" / "conceptnet" / "reasons.csv"


def _config(kb: Path) -> McsqaConfig:
    return McsqaConfig(lang="en", n=5, kb=str(kb), model=AUTHOR, reviewers=(AUTHOR,), lm_review_as_hard=True)


def test_the_manifest_records_the_knowledge_store_and_items_their_template(tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    import_dump("demo", kb)
    config = _config(kb)
    run = tmp_path / "run"
    assert build(MCSQA, config, run, store=Store()).state == "done"
    manifest = json.loads((run / "manifest.json").read_text(encoding="utf-8"))
    known = manifest["knowledge"]
    edges = edges_path(kb)
    assert known["store"] == str(kb.resolve()) and known["edges"] == edges.name
    assert known["size"] == edges.stat().st_size and known["sha256"] == sha256_file(edges)
    assert known["source"].endswith("demo_kb.csv") and known["langs"] is None and known["imported_at"]
    assert manifest["config_hash"] == config.hash()  # the knowledge is checked on its own, the hash is unchanged
    generate = next(sha for name, sha in manifest["templates"].items() if name.startswith("generate/"))
    items = [
        json.loads(line)
        for split in ("train", "validation", "test")
        for line in (run / "items" / f"{split}.jsonl").open()
    ]
    assert items and {item["metadata"]["generate_template_hash"] for item in items} == {generate}
    # the same store: the resume goes on
    assert build(MCSQA, config, run, store=Store(), resume=True).state == "done"


def test_a_resume_refuses_a_re_imported_or_missing_store_and_names_it(tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    import_dump("demo", kb)
    config = _config(kb)
    run = tmp_path / "run"
    build(MCSQA, config, run, store=Store())
    import_dump(REASONS, kb)
    with pytest.raises(ConfigError) as refused:
        build(MCSQA, config, run, store=Store(), resume=True)
    message = str(refused.value)
    assert "the knowledge store was re-imported" in message and "since this run started" in message
    assert "demo_kb.csv" in message and str(REASONS) in message and "sha256:" in message
    shutil.rmtree(kb)
    with pytest.raises(ConfigError, match=r"the knowledge store .* is gone \(the run read .*demo_kb\.csv"):
        build(MCSQA, config, run, store=Store(), resume=True)


def test_a_manifest_without_a_knowledge_record_still_resumes(tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    import_dump("demo", kb)
    config = _config(kb)
    run = tmp_path / "run"
    build(MCSQA, config, run, store=Store())
    manifest = json.loads((run / "manifest.json").read_text(encoding="utf-8"))
    del manifest["knowledge"]  # a run started before the manifest recorded it
    (run / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    import_dump(REASONS, kb)
    assert build(MCSQA, config, run, store=Store(), resume=True).state == "done"
