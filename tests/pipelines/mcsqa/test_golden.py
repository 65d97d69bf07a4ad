"""Regression guard: today's mCSQA builds write the very bytes recorded before the recipe engine.

The golden files under ``tests/fixtures/golden/mcsqa/`` were written by the recipe as it
was before it moved onto the engine (commit db6543c), with the stand-in author for
English and Japanese, with an LM panel and with people deciding through a decisions file.
The embedded-model builds of the demo are compared in ``tests/cli/test_build_cli.py``.

To record them again (only when an output is meant to change, and say why in the commit):
``SENSEFORGE_UPDATE_GOLDEN=1 pytest tests/pipelines/mcsqa/test_golden.py``.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from senseforge.data.splits import SPLIT_NAMES
from senseforge.pipelines.mcsqa import McsqaConfig, build
from senseforge.store.db import Store

GOLDEN = Path(__file__).resolve().parents[2] / "fixtures" / "golden" / "mcsqa"
AUTHOR = "scripted/mcsqa-author"
OUTPUTS: tuple[str, ...] = (
    "funnel.json",
    "cost.json",
    "rejects.jsonl",
    *(f"{folder}/{split}.jsonl" for folder in ("dataset", "items") for split in SPLIT_NAMES),
)


def compare_with_golden(run_dir: Path, golden: Path) -> None:
    """Every output byte-identical to its golden file (or, when updating, copied there)."""
    if os.environ.get("SENSEFORGE_UPDATE_GOLDEN"):
        for name in OUTPUTS:
            (golden / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(run_dir / name, golden / name)
    differing = [name for name in OUTPUTS if (run_dir / name).read_bytes() != (golden / name).read_bytes()]
    assert not differing, f"{run_dir}: differs from {golden} in {differing}"


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_dry_run_with_an_lm_panel(lang: str, demo_kb: Path, tmp_path: Path) -> None:
    config = McsqaConfig(lang=lang, n=40, kb=str(demo_kb), model=AUTHOR, reviewers=(AUTHOR,), lm_review_as_hard=True)
    summary = build(config, tmp_path / "run", store=Store())
    assert summary.state == "done"
    compare_with_golden(tmp_path / "run", GOLDEN / f"dry-{lang}")


def test_dry_run_decided_by_people(demo_kb: Path, tmp_path: Path) -> None:
    """No panel: the run waits, two people decide (one rejects every third item), the resume finishes."""
    config = McsqaConfig(lang="en", n=20, kb=str(demo_kb), model=AUTHOR)
    run_dir = tmp_path / "run"
    first = build(config, run_dir, store=Store())
    assert first.state == "awaiting_review"
    queue = [json.loads(line) for line in (run_dir / "review" / "queue.jsonl").read_text().splitlines()]
    decisions = tmp_path / "decisions.jsonl"
    with decisions.open("w", encoding="utf-8") as handle:
        for index, row in enumerate(sorted(queue, key=lambda r: r["id"])):
            for annotator in ("ana", "ben"):
                accept = not (annotator == "ben" and index % 3 == 0)
                line = {"item_id": row["id"], "annotator": annotator, "task": "verify", "accept": accept}
                handle.write(json.dumps(line) + "\n")
    done = build(config, run_dir, resume=True, store=Store(), decisions=[decisions], human_rate=0.05)
    assert done.state == "done"
    compare_with_golden(run_dir, GOLDEN / "dry-en-people")
