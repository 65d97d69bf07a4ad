"""Golden outputs: what a run wrote, compared byte for byte with files recorded before a refactor.

A run's outputs are every file it wrote except its working state (``run.db``, the manifest,
logs): the dataset, the items, ``funnel.json``, ``cost.json``, ``rejects.jsonl``, review queues,
dataset cards. The people's work it handed out and took in (the annotation tasks and the
judgements in the run store, without their times) is compared too, as ``people.jsonl``.

To record them again (only when an output is meant to change, and say why in the commit):
``SENSEFORGE_UPDATE_GOLDEN=1 pytest tests/pipelines/test_golden.py tests/pipelines/mcsqa/test_golden.py``.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from collections.abc import Iterable, Sequence
from pathlib import Path

import pytest

from senseforge.pipelines import runner
from senseforge.pipelines.config import RecipeConfig
from senseforge.pipelines.stage import Stage

GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "golden"
PEOPLE = "people.jsonl"
"""The run store's annotation tasks and judgements, one JSON row each, sorted."""

_STATE = {"run.db", "run.db-journal", "run.db-wal", "run.db-shm", "manifest.json", "ledger.json"}
"""Working state, not outputs: the run store, the manifest, and the ledger (its run label and cache hits vary)."""
_STATE_DIRS = {"logs", "cache", "__pycache__", "eval"}
"""Folders that are not build outputs (``eval/``: evaluations run over the build, with their timings)."""


def outputs(run_dir: Path) -> list[str]:
    """The files a run wrote, relative to it and sorted, without its working state."""
    found = []
    for path in run_dir.rglob("*"):
        relative = path.relative_to(run_dir)
        if not path.is_file() or relative.name in _STATE or _STATE_DIRS & set(relative.parts[:-1]):
            continue
        found.append(relative.as_posix())
    return sorted(found)


def people_rows(run_dir: Path) -> list[str]:
    """The run store's tasks (type, item, k, creator, group) and judgements (item, who, task, source, body)."""
    db = run_dir / "run.db"
    if not db.exists():
        return []
    with sqlite3.connect(db) as conn:
        tasks = conn.execute("select type, item_id, item, k, creator, grp from tasks").fetchall()
        judged = conn.execute("select item_id, annotator, task, source, body from judgements").fetchall()
    rows: list[dict[str, object]] = [
        {"task": kind, "item_id": item_id, "item": json.loads(item), "k": k, "creator": creator, "group": grp}
        for kind, item_id, item, k, creator, grp in tasks
    ]
    rows += [
        {"judgement": task, "item_id": item_id, "annotator": who, "source": source, "body": json.loads(body)}
        for item_id, who, task, source, body in judged
    ]
    return sorted(json.dumps(row, ensure_ascii=False, sort_keys=True) for row in rows)


def compare_with_golden(run_dir: Path, golden: Path, names: Iterable[str] | None = None) -> None:
    """Every output of ``run_dir`` (or just ``names``) byte-identical to its golden file; none missing, none new.

    With ``SENSEFORGE_UPDATE_GOLDEN`` set, the golden folder is written anew from the run first.
    """
    wanted = sorted(names) if names is not None else outputs(run_dir)
    people = people_rows(run_dir) if names is None else []
    if os.environ.get("SENSEFORGE_UPDATE_GOLDEN"):
        if names is None and golden.exists():
            shutil.rmtree(golden)
        for name in wanted:
            (golden / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(run_dir / name, golden / name)
        if people:
            (golden / PEOPLE).write_text("".join(row + "\n" for row in people), encoding="utf-8")
    if names is None:
        recorded = [name for name in outputs(golden) if name != PEOPLE]
        assert wanted == recorded, f"{run_dir} wrote {sorted(set(wanted) ^ set(recorded))} unlike {golden}"
        expected = (golden / PEOPLE).read_text(encoding="utf-8").splitlines() if (golden / PEOPLE).exists() else []
        assert people == expected, f"{run_dir}: the people's tasks and judgements differ from {golden / PEOPLE}"
    differing = [name for name in wanted if (run_dir / name).read_bytes() != (golden / name).read_bytes()]
    assert not differing, f"{run_dir}: differs from {golden} in {differing}"


@pytest.fixture(params=["as-chosen", "streamed"])
def schedule(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each golden run twice: scheduled as the runner chooses (one batch at a time for the scripted models here),
    and streamed, several batches of several stages at once (:mod:`senseforge.pipelines.flow`): the bytes are the
    same."""
    if request.param == "streamed":
        chosen = runner.stream_width

        def streamed(segment: Sequence[Stage], config: RecipeConfig, streaming: bool | None = None) -> int:
            return chosen(segment, config, True)

        monkeypatch.setattr(runner, "stream_width", streamed)
    return str(request.param)
