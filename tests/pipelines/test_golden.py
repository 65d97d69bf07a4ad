"""Regression guard for the engine's refactors: every recipe's runs write the very bytes recorded before.

One run per recipe shape — culture-gen with an LM review, culture-adapt with people checking
its adaptations, CRoW with both LM validators and with people validating, human-gen driven
by people from writing to answering — each compared with ``tests/fixtures/golden/<name>/``
(outputs, and the people's tasks and judgements; see :mod:`golden`). mCSQA's runs are guarded
in ``tests/pipelines/mcsqa/test_golden.py``, the demo's embedded-model runs in
``tests/cli/test_build_cli.py``.

Recorded at commit 90302c8, before typed records. To record again (only when an output is
meant to change, and say why in the commit): ``SENSEFORGE_UPDATE_GOLDEN=1 pytest tests/pipelines/test_golden.py``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from senseforge.annotate.store import AnnotationStore
from senseforge.annotate.tasktypes import task_type
from senseforge.pipelines.crow.config import CrowConfig
from senseforge.pipelines.crow.recipe import CROW
from senseforge.pipelines.culture_adapt.config import CultureAdaptConfig
from senseforge.pipelines.culture_adapt.recipe import CULTURE_ADAPT
from senseforge.pipelines.culture_gen.recipe import CULTURE_GEN, CultureGenConfig
from senseforge.pipelines.human_gen.config import HumanGenConfig
from senseforge.pipelines.human_gen.recipe import HUMAN_GEN
from senseforge.pipelines.runner import BuildSummary, build
from senseforge.pipelines.runstore import sqlite_url
from senseforge.store.db import Store

from ..annotate.test_crow_people import author as crow_author
from .golden import GOLDEN, compare_with_golden, schedule  # noqa: F401 (a fixture)
from .human_gen.test_recipe import _write

REPO = Path(__file__).resolve().parents[2]
SOURCES = GOLDEN / "sources"
Answer = Callable[[str, str, Any], dict[str, Any] | None]


def responder_in(package: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """The recipe tests' scripted responder, named by a path relative to the repository (the working directory
    here), so the model name the outputs record is the same in every clone."""
    monkeypatch.chdir(REPO)
    return f"scripted/tests/pipelines/{package}/responder.py:respond"


def people_work(run_dir: Path, people: tuple[str, ...], tasks: tuple[str, ...], answer: Answer) -> int:
    """Every person takes every task of ``tasks`` they are offered, in turn, answering ``answer(who, task, input)``."""
    store = AnnotationStore(sqlite_url(run_dir / "run.db"))
    done = 0
    try:
        for who in people:
            for task in tasks:
                while (lease := store.next_assignment(who, task)) is not None:
                    body = answer(who, task, lease.input)
                    assert body is not None, (who, task, lease.input)
                    assert store.submit(lease.id, who, task_type(task).parse(lease.input, body))
                    done += 1
    finally:
        store.close()
    return done


@pytest.mark.usefixtures("schedule")
def test_culture_gen_with_an_lm_review(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    responder = responder_in("culture_gen", monkeypatch)
    config = CultureGenConfig(
        concepts=str(SOURCES / "culture-gen-concepts.csv"),
        langs=("id",),
        model=responder,
        reviewers=(responder,),
        lm_review_final=True,
    )
    assert build(CULTURE_GEN, config, tmp_path / "run", store=Store()).state == "done"
    compare_with_golden(tmp_path / "run", GOLDEN / "culture-gen-lm-review")


@pytest.mark.usefixtures("schedule")
def test_culture_adapt_with_people_checking_adaptations(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    responder = responder_in("culture_adapt", monkeypatch)
    source = SOURCES / "culture-adapt"
    config = CultureAdaptConfig(
        source=(
            f"train={source / 'train.jsonl'}",
            f"validation={source / 'validation.jsonl'}",
            str(source / "test.jsonl"),
        ),
        model=responder,
        similarity="chrf",
        adapt_check_k=2,
    )
    run_dir = tmp_path / "run"
    assert build(CULTURE_ADAPT, config, run_dir, store=Store()).state == "done"
    verdicts = {"ana": "correct-major", "ben": "correct-minor"}
    assert people_work(run_dir, ("ana", "ben"), ("adapt-check",), lambda who, _t, _i: {"verdict": verdicts[who]}) == 4
    compare_with_golden(run_dir, GOLDEN / "culture-adapt-people")


@pytest.mark.usefixtures("schedule")
def test_crow_with_both_lm_validators(tmp_path: Path) -> None:
    config = CrowConfig(model="scripted/crow-author", source=(str(GOLDEN.parent / "crow" / "shot_samples.json"),))
    assert build(CROW, config, tmp_path / "run", store=Store()).state == "done"
    compare_with_golden(tmp_path / "run", GOLDEN / "crow-lm")


@pytest.mark.usefixtures("schedule")
def test_crow_validated_by_people(tmp_path: Path) -> None:
    """Three people tick triples (3, 2 and 1 of 3 accept) and check rewrites; two of three decide."""
    source = tmp_path / "safety.jsonl"
    row = {"task": "safety", "id": "s1", "scenario": "A pot of soup boils over", "action": "turn down the heat"}
    source.write_text(json.dumps(row) + "\n", encoding="utf-8")
    config = CrowConfig(model="scripted/people-author", source=(str(source),), stage_by=("ckv=human", "wsv=human"))
    run_dir = tmp_path / "run"
    people = ("ana", "bo", "cy")
    ticks = {"keepsake": "yyy", "dropout": "yyn", "waiting room": "ynn"}
    all_four = {"minimal": True, "violates": True, "flips": True, "on_topic": True}

    def answer(who: str, task: str, given: Any) -> dict[str, Any]:
        index = people.index(who)
        item = given.model_dump(mode="json") if hasattr(given, "model_dump") else given
        if task == "ckv":
            return {"accept": ticks[item["triple"]["head"]][index] == "y"}
        keepsake = str(item["rewrite"]).endswith("keepsake")
        if index == 2 or (index == 1 and not keepsake):
            return {"conditions": {**all_four, "flips": False}}
        return {"conditions": all_four}

    def run(resume: bool) -> BuildSummary:
        responders = {"people-author": crow_author}
        rates = {"ckv": 0.2, "wsv": 0.3}
        return build(CROW, config, run_dir, resume=resume, store=Store(), responders=responders, human_rate=rates)

    assert run(False).state == "awaiting_review"
    assert people_work(run_dir, people, ("ckv",), answer) == 9
    assert run(True).state == "awaiting_review"
    assert people_work(run_dir, people, ("wsv",), answer) == 6
    assert run(True).state == "done"
    compare_with_golden(run_dir, GOLDEN / "crow-people")


@pytest.mark.usefixtures("schedule")
def test_human_gen_from_writing_to_answering(tmp_path: Path) -> None:
    """Six people write, check (one revision round), and answer; one item is flagged out by four answerers."""
    config = HumanGenConfig(
        concepts=str(SOURCES / "human-gen-concepts.csv"), assignment="pairs", pool=("a", "b", "c", "d", "e", "f")
    )
    run_dir = tmp_path / "run"
    revised: set[str] = set()

    def answer(who: str, task: str, given: Any) -> dict[str, Any] | None:
        if task == "create":
            return _write(given)
        if task == "qc":
            first = given.concept == "pasar" and given.creator == "a" and given.concept not in revised
            return {"verdict": "needs_revision", "comment": "kurang jelas"} if first else {"verdict": "complete"}
        if task == "revise":
            revised.add(given.concept)
            return {**_write(given), "question": f"Di mana orang biasa membeli {given.concept}?"}
        flagged = given.question_concept == "rendang" and who in ("b", "c", "d", "e")
        return {"choice": "B" if who == "b" else "A", "certain": "yes", "flags": ["ambiguous-option:C"] * flagged}

    summary = build(HUMAN_GEN, config, run_dir)
    people = tuple(config.pool)
    for _ in range(10):
        if summary.state == "done":
            break
        people_work(run_dir, people, ("create", "qc", "revise", "answer"), answer)
        summary = build(HUMAN_GEN, config, run_dir, resume=True, human_rate={"create": 0.4, "answer": 0.05})
    assert summary.state == "done"
    assert summary.funnel is not None and all((run_dir / d).is_dir() for d in summary.funnel.datasets)  # as the CLI
    compare_with_golden(run_dir, GOLDEN / "human-gen-people")
