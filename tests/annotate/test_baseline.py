"""Human baselines: a seeded sample per split, five blind answers each, majority-vote accuracy."""

from __future__ import annotations

from pathlib import Path

import pytest

from senseforge.annotate.baseline import baseline_report, queue_baseline
from senseforge.annotate.store import AnnotationStore
from senseforge.data.schema import judgement
from senseforge.errors import ConfigError
from senseforge.evaluate.harness import write_outputs
from senseforge.evaluate.records import DataInfo, EvalResults, MCMetrics, ModelInfo
from senseforge.kb.conceptnet import import_dump
from senseforge.pipelines.mcsqa import MCSQA, McsqaConfig
from senseforge.pipelines.runner import build
from senseforge.pipelines.runstore import sqlite_url
from senseforge.store.db import Store

AUTHOR = "scripted/mcsqa-author"
PEOPLE = ("p1", "p2", "p3", "p4", "p5")


@pytest.fixture
def finished_run(tmp_path: Path) -> Path:
    import_dump("demo", tmp_path / "kb")
    config = McsqaConfig(
        lang="en", n=30, kb=str(tmp_path / "kb"), model=AUTHOR, reviewers=(AUTHOR,), lm_review_as_hard=True
    )
    build(MCSQA, config, tmp_path / "run", store=Store())
    results = EvalResults(
        results={"mcsqa-en": MCMetrics(n=9, n_withheld=0, failed_rate=0.0, acc=0.4, acc_ci95=[0.1, 0.7])},
        breakdowns={},
        config={},
        data=DataInfo(path=str(tmp_path / "run"), name="mcsqa-en", format="senseforge", kind="mc", split="test"),
        model=ModelInfo(name="hf/tiny", identity={}),
        seeds={"seed": 0},
        prompt_hashes={},
        versions={},
        timing={},
    )
    write_outputs(tmp_path / "run" / "eval" / "m", results, [])
    (tmp_path / "run" / "eval" / "broken").mkdir()
    (tmp_path / "run" / "eval" / "broken" / "results.json").write_text('{"results": {"x": {"acc,none": "no"}}}')
    return tmp_path / "run"


def test_baseline_queues_a_seeded_sample_and_scores_the_majority(finished_run: Path) -> None:
    store = AnnotationStore(sqlite_url(finished_run / "run.db"))
    queued = queue_baseline(store, finished_run, n=4, k=5, seed=1)
    assert queued == {"train": 4, "validation": 4, "test": 4}
    assert queue_baseline(store, finished_run, n=4, k=5, seed=1) == {"train": 0, "validation": 0, "test": 0}
    items = {item.id: item for item, _, _ in store.items("answer")}
    for person in PEOPLE:
        store.invite(person)
    # p1–p3 answer right, p4–p5 wrong: the majority is right everywhere, except on one test
    # item with a 2–2 tie between a wrong choice (p2, p4) and the answer (p3, p5): the
    # earliest of those four, p2, decides — wrongly
    tie_item = sorted(i for i, (_, _, g) in zip(items, store.items("answer"), strict=True) if g == "baseline:test")[0]
    for person in PEOPLE:
        while (assignment := store.next_assignment(person, "answer")) is not None:
            item = assignment.input
            labels = [c.label for c in item.choices]
            wrong = [label for label in labels if label != item.answer]
            if item.id == tie_item:
                choice = {"p1": wrong[0], "p2": wrong[1], "p3": item.answer, "p4": wrong[1], "p5": item.answer}[person]
            else:
                choice = item.answer if person in ("p1", "p2", "p3") else wrong[0]
            flags = ["ambiguous-question"] if person != "p5" and item.id == tie_item else []
            verdict = judgement(
                item_id=item.id, annotator=person, task="answer", choice=choice, certain=True, flags=flags
            )
            assert store.submit(assignment.id, person, verdict)

    report = baseline_report(store, finished_run, exclude_ambiguous=None)
    assert report["splits"]["train"] == {
        "queued": 4,
        "complete": 4,
        "excluded": 0,
        "scored": 4,
        "human_acc": 1.0,
        "human_acc_ci95": [1.0, 1.0],
    }
    test = report["splits"]["test"]
    assert test["scored"] == 4 and test["human_acc"] == 0.75  # the tie went to p2's wrong answer
    assert report["models"] == [
        {"model": "hf/tiny", "task": "mcsqa-en", "acc": 0.4, "ci95": [0.1, 0.7], "n": 9, "split": "test"}
    ]
    (unreadable,) = report["unreadable_results"]
    assert unreadable.startswith(str(finished_run / "eval" / "broken" / "results.json"))
    # four of five flagged the tie item as ambiguous: more than three, so it is excluded
    excluded = baseline_report(store, finished_run, exclude_ambiguous=3)["splits"]["test"]
    assert excluded["excluded"] == 1 and excluded["scored"] == 3 and excluded["human_acc"] == 1.0


def test_baseline_needs_a_finished_run(tmp_path: Path) -> None:
    store = AnnotationStore(sqlite_url(tmp_path / "run.db"))
    with pytest.raises(ConfigError, match="finish the build first"):
        queue_baseline(store, tmp_path, n=10)
