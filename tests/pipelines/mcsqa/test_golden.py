"""Regression guard: today's mCSQA builds write the very bytes recorded before the recipe engine.

The golden files under ``tests/fixtures/golden/mcsqa/`` were written by the recipe as it
was before it moved onto the engine (commit db6543c), with the stand-in author for
English and Japanese, with an LM panel and with people deciding through a decisions file.
The embedded-model builds of the demo are compared in ``tests/cli/test_build_cli.py``.

Every output is compared, and the people's work (see :mod:`tests.pipelines.golden`). To record them again
(only when an output is meant to change, and say why in the commit):
``SENSEFORGE_UPDATE_GOLDEN=1 pytest tests/pipelines/mcsqa/test_golden.py``.
"""

from __future__ import annotations

import gzip
import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from senseforge.evaluate.records import MCSample
from senseforge.evaluate.run import score_mc
from senseforge.kb.conceptnet import import_dump
from senseforge.pipelines import verification
from senseforge.pipelines.mcsqa import MCSQA, McsqaConfig
from senseforge.pipelines.mcsqa import templates as mcsqa_templates
from senseforge.pipelines.runner import build
from senseforge.store.db import Store

from ..golden import GOLDEN as GOLDEN_ROOT
from ..golden import compare_with_golden, schedule  # noqa: F401 (a fixture)

GOLDEN = GOLDEN_ROOT / "mcsqa"
AUTHOR = "scripted/mcsqa-author"


def decide(run_dir: Path, decisions: Path) -> Path:
    """Two people's decisions on a paused run's review queue: ana accepts all, ben rejects every third item."""
    queue = [json.loads(line) for line in (run_dir / "review" / "queue.jsonl").read_text().splitlines()]
    with decisions.open("w", encoding="utf-8") as handle:
        for index, row in enumerate(sorted(queue, key=lambda r: r["id"])):
            for annotator in ("ana", "ben"):
                accept = not (annotator == "ben" and index % 3 == 0)
                line = {"item_id": row["id"], "annotator": annotator, "task": "verify", "accept": accept}
                handle.write(json.dumps(line) + "\n")
    return decisions


@pytest.mark.parametrize("lang", ["en", "ja"])
@pytest.mark.usefixtures("schedule")
def test_dry_run_with_an_lm_panel(lang: str, demo_kb: Path, tmp_path: Path) -> None:
    config = McsqaConfig(lang=lang, n=40, kb=str(demo_kb), model=AUTHOR, reviewers=(AUTHOR,), lm_review_as_hard=True)
    summary = build(MCSQA, config, tmp_path / "run", store=Store())
    assert summary.state == "done"
    compare_with_golden(tmp_path / "run", GOLDEN / f"dry-{lang}")


@pytest.mark.usefixtures("schedule")
def test_dry_run_decided_by_people(demo_kb: Path, tmp_path: Path) -> None:
    """No panel: the run waits, two people decide (one rejects every third item), the resume finishes."""
    config = McsqaConfig(lang="en", n=20, kb=str(demo_kb), model=AUTHOR)
    run_dir = tmp_path / "run"
    first = build(MCSQA, config, run_dir, store=Store())
    assert first.state == "awaiting_review"
    decisions = decide(run_dir, tmp_path / "decisions.jsonl")
    done = build(MCSQA, config, run_dir, resume=True, store=Store(), decisions=[decisions], human_rate=0.05)
    assert done.state == "done"
    compare_with_golden(run_dir, GOLDEN / "dry-en-people")


PAUSED = GOLDEN_ROOT / "paused" / "mcsqa-en-awaiting"
"""A run stored by commit 90302c8 (before typed records), paused awaiting review: ``McsqaConfig(lang="en", n=20,
kb="kb/demo", model=AUTHOR)`` built in a folder holding the demo knowledge store at ``kb/demo``; its ``run.db``
gzipped (VACUUMed first)."""


@pytest.mark.usefixtures("schedule")
def test_a_run_paused_before_typed_records_resumes_to_the_golden_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The decisions of ``test_dry_run_decided_by_people`` finish it, byte for byte as an uninterrupted run does."""
    monkeypatch.chdir(tmp_path)
    import_dump("demo", Path("kb/demo"))
    run_dir = Path("run")
    shutil.copytree(PAUSED, run_dir, ignore=shutil.ignore_patterns("run.db.gz"))
    with gzip.open(PAUSED / "run.db.gz") as packed, (run_dir / "run.db").open("wb") as db:
        shutil.copyfileobj(packed, db)
    decisions = decide(run_dir, tmp_path / "decisions.jsonl")
    config = McsqaConfig(lang="en", n=20, kb="kb/demo", model=AUTHOR)
    done = build(MCSQA, config, run_dir, resume=True, store=Store(), decisions=[decisions], human_rate=0.05)
    assert done.state == "done"
    compare_with_golden(tmp_path / run_dir, GOLDEN / "dry-en-people")


SHAPED = {"distractors", "verify"}
"""The stages of the paused run whose requests declare the shape of their reply (JSON; the answer's letter)."""


def _call_keys(db: Path) -> dict[str, set[str]]:
    """Per stage, the cache keys of every call the records of a run store say they made there."""
    with sqlite3.connect(db) as conn:
        payloads = [json.loads(row[0]) for row in conn.execute("select payload from stage_results")]
    out: dict[str, set[str]] = {}
    for payload in payloads:
        for stage, calls in payload.get("calls", {}).items():
            out.setdefault(stage, set()).update(call["key"] for call in calls)
    return out


def _without_letter_shape(*args: Any, **kwargs: Any) -> list[MCSample]:
    return score_mc(*args, **{**kwargs, "letter_shape": False})


@pytest.mark.usefixtures("schedule")
def test_todays_requests_have_the_cache_keys_stored_before(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A user's paid cache stays valid: the paused run's calls, made again today, have the very same cache keys,
    but at the stages whose requests now carry the shape of their reply, which is part of the key (a backend that
    constrains its decoding to it answers otherwise): as many calls there, each keyed anew. Without their shapes,
    today's requests key exactly as before."""
    monkeypatch.chdir(tmp_path)
    import_dump("demo", Path("kb/demo"))
    config = McsqaConfig(lang="en", n=20, kb="kb/demo", model=AUTHOR)
    assert build(MCSQA, config, Path("run"), store=Store()).state == "awaiting_review"
    with gzip.open(PAUSED / "run.db.gz") as packed, (tmp_path / "before.db").open("wb") as db:
        shutil.copyfileobj(packed, db)
    before, today = _call_keys(tmp_path / "before.db"), _call_keys(tmp_path / "run" / "run.db")
    assert sum(len(keys) for keys in before.values()) > 40
    assert set(before) >= SHAPED and set(today) == set(before)
    for stage, keys in before.items():
        if stage in SHAPED:
            assert len(today[stage]) == len(keys) and not today[stage] & keys, stage
        else:
            assert today[stage] == keys, stage

    monkeypatch.setattr(mcsqa_templates, "DISTRACTORS_SHAPE", None)
    monkeypatch.setattr(verification, "score_mc", _without_letter_shape)
    # the patches stand for older code: the outcomes the first build kept are not replayed (code of one digest)
    assert build(MCSQA, config, Path("unshaped"), store=Store(), replay=False).state == "awaiting_review"
    assert _call_keys(tmp_path / "unshaped" / "run.db") == before
