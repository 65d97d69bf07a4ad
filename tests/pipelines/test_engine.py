"""The engine under a recipe of a few lines: one record fans out into three, two calls per record come back to
it, a check passes the records it does not apply to, three LM judges keep two of three, a kill -9 at any
moment resumes to the same bytes, and the funnel counts every stage in its own unit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from senseforge.data.schema import AnswerJudgement, Judgement
from senseforge.errors import ConfigError
from senseforge.pipelines.runner import build
from senseforge.pipelines.runstore import RunStore, sqlite_url
from senseforge.store.db import Store

from .engine.tiny import Piece, Tiny, config

OUTPUTS = ("dataset/test.jsonl", "items/test.jsonl", "funnel.json", "cost.json", "rejects.jsonl")


def test_fan_out_and_two_of_three_judges(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    summary = build(Tiny(), config(words=("sun", "rain", "broken")), run_dir, store=Store())
    assert summary.state == "done"
    funnel = json.loads((run_dir / "funnel.json").read_text())
    assert funnel["stages"] == [
        {"stage": "words", "in": 3, "out": 3, "rejected": {}},
        {"stage": "expand", "in": 7, "out": 6, "rejected": {"malformed_output": 1}, "from": 3},
        {"stage": "flank", "in": 6, "out": 6, "rejected": {}},
        {"stage": "middle", "in": 6, "out": 4, "rejected": {"middle": 2}},
        {"stage": "judge", "in": 4, "out": 4, "rejected": {}},
    ]
    assert funnel["kept"] == 4
    kept = [json.loads(line) for line in (run_dir / "dataset" / "test.jsonl").read_text().splitlines()]
    assert kept == [
        {"id": i, "text": t}
        for i, t in zip(["w0/0", "w0/2", "w1/0", "w1/2"], ["sun-0", "sun-2", "rain-0", "rain-2"], strict=True)
    ]

    run = RunStore(sqlite_url(run_dir / "run.db"))
    votes = run.judgements_for("verify")
    flanked = run.results("flank", "ok", Piece)
    run.close()
    assert {r.data.around for r in flanked} == {"[0][1]"}  # the responder told the flank calls by their tag
    assert [len(r.calls["flank"]) for r in flanked] == [2] * 6  # each part's two calls, on the part
    assert sorted(votes) == sorted(f"w{w}/{p}" for w in (0, 1) for p in (0, 2))
    for item, stored in votes.items():
        assert [s.judgement.annotator.rsplit("#", 1)[1] for s in stored] == ["0", "1", "2"]
        assert all(s.source == "lm" and s.judgement.annotator.startswith("lm:scripted/") for s in stored)
        assert sum(s.judgement.accept is True for s in stored) == {"0": 3, "1": 1, "2": 2}[item[-1]]

    cost = json.loads((run_dir / "cost.json").read_text())
    assert cost["stages"]["expand"]["calls"] == 3  # one call per record, shared by its three children
    assert cost["stages"]["flank"]["calls"] == 12
    assert cost["stages"]["judge"]["calls"] == 12
    assert cost["total_usd"] == 0.0 and cost["cost_per_kept_part_usd"] == 0.0  # scripted models cost nothing


def test_a_people_stage_waits_for_each_record_and_goes_on_as_people_decide(tmp_path: Path) -> None:
    """Each part waits for a person's ``answer`` task; decisions (a file, or judgements stored by the app) decide
    it on resume, and the review after the people stage runs once none waits."""
    run_dir = tmp_path / "run"
    first = build(Tiny(), config(people=True), run_dir, store=Store())
    assert first.state == "awaiting_review" and first.waiting_for == {"answer": 6}
    queue = [json.loads(line) for line in (run_dir / "review" / "queue.jsonl").read_text().splitlines()]
    parts = [f"w{w}/{p}" for w in (0, 1) for p in range(3)]
    assert [(row["type"], row["id"], row["needed"], row["judged_by"]) for row in queue] == [
        ("answer", part, 1, []) for part in parts
    ]

    def pick(part: str) -> Judgement:
        return AnswerJudgement(item_id=part, annotator="ana", choice="B" if part.endswith("/1") else "A")

    decisions = tmp_path / "picks.jsonl"
    decisions.write_text("".join(pick(part).model_dump_json() + "\n" for part in parts[:3]), encoding="utf-8")
    second = build(Tiny(), config(people=True), run_dir, resume=True, store=Store(), decisions=[decisions])
    assert second.state == "awaiting_review" and second.waiting_for == {"answer": 3}  # w1's parts still wait
    run = RunStore(sqlite_url(run_dir / "run.db"))
    run.add_judgements([pick(part) for part in parts[3:]], "human")  # as the annotation app stores them
    run.close()
    done = build(Tiny(), config(people=True), run_dir, resume=True, store=Store())
    assert done.state == "done" and not (run_dir / "review" / "queue.jsonl").exists()
    funnel = json.loads((run_dir / "funnel.json").read_text())
    assert funnel["stages"][2:] == [
        {"stage": "pick", "in": 6, "out": 4, "rejected": {"dropped": 2}},
        {"stage": "flank", "in": 4, "out": 4, "rejected": {}},
        {"stage": "middle", "in": 4, "out": 4, "rejected": {}},  # the people dropped the middle parts already
        {"stage": "judge", "in": 4, "out": 4, "rejected": {}},
    ]
    kept = [json.loads(line)["id"] for line in (run_dir / "dataset" / "test.jsonl").read_text().splitlines()]
    assert kept == ["w0/0", "w0/2", "w1/0", "w1/2"]


def test_a_changed_setting_is_refused_on_resume_naming_it(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    build(Tiny(), config(), run_dir, store=Store())
    with pytest.raises(ConfigError, match=r"lm_review_policy: 'at-least:2/3' → 'majority'"):
        build(Tiny(), config(lm_review_policy="majority"), run_dir, resume=True, store=Store())


def test_an_edited_responder_is_a_new_model(tmp_path: Path) -> None:
    responder = tmp_path / "r.py"
    responder.write_text("def respond(request):\n    return 'a|b|c'\n")
    spec = f"scripted/{responder}:respond"
    first = build(Tiny(), config(model=spec, reviewers=()), tmp_path / "one", store=Store())
    assert first.state == "awaiting_review"  # no LM judges: people decide
    responder.write_text("def respond(request):\n    return 'no parts'\n")
    build(Tiny(), config(model=spec, reviewers=()), tmp_path / "two", store=Store())
    funnel_two = RunStore(sqlite_url(tmp_path / "two" / "run.db"))
    assert funnel_two.counts("expand") == {"malformed_output": 2}  # not the cached 'a|b|c'
    funnel_two.close()


_CHILD = """
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from engine.tiny import Tiny, config
from senseforge.pipelines.runner import build
build(Tiny(), config(words=tuple(sys.argv[3].split(","))), Path(sys.argv[2]))
"""


@pytest.mark.parametrize("kill_after", [2, 5, 9])
def test_kill_9_then_resume_is_byte_identical(
    kill_after: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kill_when: Callable[..., None]
) -> None:
    words = "sun,rain,snow"
    clean = tmp_path / "clean"
    build(Tiny(), config(words=tuple(words.split(","))), clean, store=Store())

    killed = tmp_path / "killed"
    env = {**os.environ, "TINY_SLOW": "0.05", "SENSEFORGE_HOME": str(tmp_path / "home-killed")}
    here = str(Path(__file__).parent)
    child = subprocess.Popen([sys.executable, "-c", _CHILD, here, str(killed), words], env=env)
    kill_when(child, killed, None, kill_after)  # under the run store's lock: it cannot finish first
    assert not (killed / "funnel.json").exists()

    monkeypatch.setenv("SENSEFORGE_HOME", env["SENSEFORGE_HOME"])  # the killed run's own cache and ledger
    summary = build(Tiny(), config(words=tuple(words.split(","))), killed, resume=True, store=Store())
    assert summary.state == "done"
    for name in OUTPUTS:
        assert (killed / name).read_bytes() == (clean / name).read_bytes(), name


def test_stage_work_can_be_pickled_for_another_executor() -> None:
    import pickle

    from senseforge.pipelines.culture_adapt.config import CultureAdaptConfig
    from senseforge.pipelines.culture_adapt.recipe import CULTURE_ADAPT
    from senseforge.pipelines.mcsqa import MCSQA, McsqaConfig

    mcsqa = McsqaConfig(lang="en", model="scripted/mcsqa-author", reviewers=("scripted/mcsqa-author",) * 3)
    adapt = CultureAdaptConfig(source=("items.jsonl",), model="scripted/culture-adapt-author")  # a Route among them
    for stage in [*Tiny().stages(config()), *MCSQA.stages(mcsqa), *CULTURE_ADAPT.stages(adapt)]:
        copy = pickle.loads(pickle.dumps(stage))
        assert copy.name == stage.name and copy.specs == stage.specs


def test_the_registry_lists_the_recipes_and_their_authors() -> None:
    from senseforge.pipelines.recipes import dry_run_authors, get_recipe, recipes

    assert "mcsqa" in recipes()
    assert "mcsqa-author" in dry_run_authors()
    with pytest.raises(ConfigError, match="unknown recipe 'nope'"):
        get_recipe("nope")


def test_a_judges_policy_needs_enough_judges() -> None:
    with pytest.raises(ValueError, match="needs 3 LM judges"):
        config(reviewers=("scripted/echo",) * 2)


def test_set_pairs_split_lists_and_parse_json() -> None:
    from senseforge.pipelines.config import parse_sets
    from senseforge.pipelines.mcsqa import McsqaConfig

    sets = parse_sets(["reviewers=a/b,c/d", "seed=3", "ratios=[0.5,0.25,0.25]", "kb=/tmp/kb"], McsqaConfig)
    assert sets == {"reviewers": ["a/b", "c/d"], "seed": 3, "ratios": [0.5, 0.25, 0.25], "kb": "/tmp/kb"}
