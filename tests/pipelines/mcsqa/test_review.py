"""Human review: the run pauses awaiting decisions, resumes from a decisions file; Hard = unanimously accepted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from senseforge.errors import ConfigError, DataValidationError
from senseforge.pipelines.mcsqa import MCSQA, McsqaConfig
from senseforge.pipelines.runner import build
from senseforge.store.db import Store

from .conftest import read_jsonl

AUTHOR = "scripted/mcsqa-author"


def _decision(item_id: str, who: str, accept: bool) -> str:
    return json.dumps({"item_id": item_id, "annotator": who, "task": "verify", "accept": accept})


def test_paused_for_review_then_resumed_with_decisions(demo_kb: Path, tmp_path: Path) -> None:
    config = McsqaConfig(lang="en", n=15, kb=str(demo_kb), model=AUTHOR)
    run = tmp_path / "run"
    first = build(MCSQA, config, run, store=Store())
    assert first.state == "awaiting_review" and first.awaiting > 3
    queue = read_jsonl(run / "review" / "queue.jsonl")
    assert len(queue) == first.awaiting
    assert all(row["type"] == "verify" and row["needed"] == 2 and row["judged_by"] == [] for row in queue)
    assert all(row["k"] == 2 and row["input"]["answer"] for row in queue)
    assert not (run / "dataset").exists()

    ids = [str(row["id"]) for row in queue]
    accepted = set(ids[::2])
    # one reviewer everywhere; the second only for half the queue: still awaiting
    lines = [_decision(i, "ana", True) for i in ids] + [
        _decision(i, "ben", i in accepted) for i in ids[: len(ids) // 2]
    ]
    decisions = tmp_path / "decisions.jsonl"
    decisions.write_text("\n".join(lines) + "\n")
    second = build(MCSQA, config, run, store=Store(), resume=True, decisions=[decisions])
    assert second.state == "awaiting_review"
    assert second.awaiting == len(ids) - len(ids) // 2
    waiting = read_jsonl(run / "review" / "queue.jsonl")  # who judged so far, how many are still needed
    assert [row["id"] for row in waiting] == ids[len(ids) // 2 :]
    assert all(row["judged_by"] == ["ana"] and row["needed"] == 1 for row in waiting)

    lines += [_decision(i, "ben", i in accepted) for i in ids[len(ids) // 2 :]]
    decisions.write_text("\n".join(lines) + "\n")
    done = build(MCSQA, config, run, store=Store(), resume=True, decisions=[decisions], human_rate=0.05)
    assert done.state == "done"
    assert not (run / "review" / "queue.jsonl").exists()

    items = [item for name in ("train", "validation", "test") for item in read_jsonl(run / "items" / f"{name}.jsonl")]
    hard = {str(item["id"]) for item in items if item["difficulty"] == "hard"}
    assert hard == accepted  # moderation keeps all of the stand-in author's items
    assert {item["provenance"]["review"] for item in items if item["difficulty"] == "hard"} == {"human"}
    funnel = json.loads((run / "funnel.json").read_text())
    review = next(row for row in funnel["stages"] if row["stage"] == "review")
    assert review["rejected"] == {"review_rejected": len(ids) - len(accepted)}
    cost = json.loads((run / "cost.json").read_text())
    assert cost["human"] == {"judgements": 2 * len(ids), "rate_usd": 0.05, "cost_usd": pytest.approx(0.1 * len(ids))}
    assert cost["cost_per_kept_question_usd"] == pytest.approx(cost["total_usd"] / funnel["kept"])
    # the run remembers the rate: resuming the finished run without it writes the same report
    build(MCSQA, config, run, store=Store(), resume=True)
    assert json.loads((run / "cost.json").read_text()) == cost


def test_unknown_human_rate_makes_the_cost_unknown(demo_kb: Path, tmp_path: Path) -> None:
    config = McsqaConfig(lang="en", n=4, kb=str(demo_kb), model=AUTHOR, review_k=1)
    run = tmp_path / "run"
    first = build(MCSQA, config, run, store=Store())
    ids = [str(row["id"]) for row in read_jsonl(run / "review" / "queue.jsonl")]
    decisions = tmp_path / "d.jsonl"
    decisions.write_text("".join(_decision(i, "ana", True) + "\n" for i in ids))
    assert first.state == "awaiting_review"
    build(MCSQA, config, run, store=Store(), resume=True, decisions=[decisions])
    cost = json.loads((run / "cost.json").read_text())
    assert cost["human"]["cost_usd"] is None and cost["total_usd"] is None


def test_bad_decision_files_are_located(demo_kb: Path, tmp_path: Path) -> None:
    config = McsqaConfig(lang="en", n=4, kb=str(demo_kb), model=AUTHOR)
    build(MCSQA, config, tmp_path / "run", store=Store())
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"item_id": "x", "annotator": "ana", "task": "verify", "accept": true}\n{"item_id": \n')
    with pytest.raises(DataValidationError, match=r"broken.jsonl:2"):
        build(MCSQA, config, tmp_path / "run", store=Store(), resume=True, decisions=[broken])
    wrong_task = tmp_path / "answer.jsonl"
    wrong_task.write_text('{"item_id": "x", "annotator": "ana", "task": "answer", "choice": "A"}\n')
    with pytest.raises(
        ConfigError, match=r"answer.jsonl: decision 1 \(x\): no stage .* reads task 'answer' \(it reads: verify\)"
    ):
        build(MCSQA, config, tmp_path / "run", store=Store(), resume=True, decisions=[wrong_task])
    no_verdict = tmp_path / "flags.jsonl"
    no_verdict.write_text('{"item_id": "x", "annotator": "ana", "task": "verify", "flags": ["offensive"]}\n')
    with pytest.raises(ConfigError, match=r"flags.jsonl: decision 1 \(x\): a verify decision needs accept true/false"):
        build(MCSQA, config, tmp_path / "run", store=Store(), resume=True, decisions=[no_verdict])
