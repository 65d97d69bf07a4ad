"""Annotator quality reaches the recipe: gold items and the accuracy bar, and adjudication of split items."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from senseforge.annotate.store import AnnotationStore
from senseforge.data.schema import Choice, MCItem, judgement
from senseforge.pipelines.mcsqa import MCSQA, McsqaConfig
from senseforge.pipelines.quality import set_quality
from senseforge.pipelines.runner import build
from senseforge.pipelines.runstore import sqlite_url
from senseforge.store.db import Store

from .conftest import read_jsonl


def _gold(n: int) -> MCItem:
    choices = [Choice(label=x, text=f"pilihan {x} {n}") for x in "ABCDE"]
    return MCItem(id=f"g{n:02d}", lang="en", question=f"Which one is right, number {n}?", choices=choices, answer="A")


def _hard(run: Path) -> set[str]:
    items = [row for split in ("train", "validation", "test") for row in read_jsonl(run / "items" / f"{split}.jsonl")]
    return {str(row["id"]) for row in items if row["difficulty"] == "hard"}


def test_gold_at_its_rate_and_an_annotator_below_the_bar_does_not_count(demo_kb: Path, tmp_path: Path) -> None:
    config = McsqaConfig(lang="en", n=12, kb=str(demo_kb), model="scripted/mcsqa-author")
    run = tmp_path / "run"
    paused = build(MCSQA, config, run, store=Store())
    assert paused.state == "awaiting_review"
    app = AnnotationStore(sqlite_url(run / "run.db"))
    real = {item.id for item, _, _ in app.items("verify")}
    assert app.add_gold("verify", [(_gold(n), {"accept": "yes"}) for n in range(6)]) == 6
    set_quality(app.runs, task_type="verify", rate=0.25, min_accuracy=0.75, min_gold=2)
    for person in ("ana", "ben", "cy"):
        app.invite(person)
    served: dict[str, list[str]] = {"ana": [], "ben": [], "cy": []}

    def work(person: str, accept: bool) -> None:
        while (lease := app.next_assignment(person, "verify")) is not None:
            served[person].append(lease.input.id)
            vote = judgement(item_id=lease.input.id, annotator=person, task="verify", accept=accept)
            assert app.submit(lease.id, person, vote)

    work("ana", True)
    work("ben", False)  # rejects everything, gold included: below the bar after two gold items
    work("cy", True)  # takes the slots ben held
    for ids in served.values():
        golds = [i for i in ids if i not in real]
        assert len(golds) == len(set(golds))  # never the same gold item twice to one person
        assert len(golds) <= 0.25 * len(ids) + 1e-9
    assert [i in real for i in served["ana"][:4]] == [True, True, True, False]  # one in four is gold
    assert sum(i not in real for i in served["ben"]) == 2 and len(served["ben"]) == 8  # then nothing more
    report = app.gold_report()
    assert report["ben"]["verify"] == {"gold": 2, "correct": 0, "accuracy": 0.0, "excluded": True}
    assert report["ana"]["verify"]["excluded"] is False
    assert set(app.judgements("verify")) == real  # gold items feed no decision
    app.close()

    done = build(MCSQA, config, run, store=Store(), resume=True)
    assert done.state == "done"
    assert _hard(run) == real  # ben's rejections were left out: ana and cy accepted everything


def test_an_adjudication_settles_a_split_item_and_the_recipe_resumes_from_it(demo_kb: Path, tmp_path: Path) -> None:
    config = McsqaConfig(lang="en", n=12, kb=str(demo_kb), model="scripted/mcsqa-author", adjudicate=True)
    run = tmp_path / "run"
    assert build(MCSQA, config, run, store=Store()).state == "awaiting_review"
    app = AnnotationStore(sqlite_url(run / "run.db"))
    queued = sorted(item.id for item, _, _ in app.items("verify"))
    split_on, rejected = queued[0], queued[1]
    for person in ("ana", "ben"):
        app.invite(person)
        while (lease := app.next_assignment(person, "verify")) is not None:
            item = lease.input.id
            accept = not (item == rejected or (item == split_on and person == "ben"))
            assert app.submit(lease.id, person, judgement(item_id=item, annotator=person, task="verify", accept=accept))
    assert [row["item_id"] for row in app.splits("verify")] == [split_on]
    app.close()

    waiting = build(MCSQA, config, run, store=Store(), resume=True)
    assert waiting.state == "awaiting_review" and waiting.awaiting == 1  # the split item waits for a ruling

    app = AnnotationStore(sqlite_url(run / "run.db"))
    ruled = app.adjudicate("boss", "verify", split_on, {"accept": "yes"}, comment="B is plainly wrong")
    assert ruled.adjudication and ruled.annotator == "adjudicator:boss" and ruled.comment == "B is plainly wrong"
    assert app.splits("verify") == []
    assert Counter(j.annotator for j in app.judgements("verify")[split_on]) == {
        "ana": 1,
        "ben": 1,
        "adjudicator:boss": 1,
    }
    app.close()

    done = build(MCSQA, config, run, store=Store(), resume=True)
    assert done.state == "done"
    hard = _hard(run)
    assert split_on in hard and rejected not in hard and hard == set(queued) - {rejected}
