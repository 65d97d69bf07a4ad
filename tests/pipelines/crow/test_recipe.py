"""``build crow`` with scripted workers: CRoW's shot samples and 50 CommonMT rows end to end; the 2-of-3 rules of
CKV and WSV; an item whose third vote is missing waits; labels flip; originals inherit their rewrites' knowledge;
the funnel and cost add up; the dataset and the release evaluate."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from senseforge.data.crow import CROW_TASKS
from senseforge.data.loaders import load_dataset
from senseforge.evaluate.harness import run_eval
from senseforge.evaluate.run import EvalConfig
from senseforge.evaluate.submission import score_submission
from senseforge.llm.base import Completion, Failure, GenerateRequest, LoglikelihoodRequest
from senseforge.llm.cache import open_llm
from senseforge.pipelines.crow.config import CrowConfig
from senseforge.pipelines.crow.recipe import CROW
from senseforge.pipelines.crow.templates import CKA_MARK, CKV_QUESTIONS, WSG_MARK, WSV_QUESTIONS
from senseforge.pipelines.outcomes import RunIncomplete
from senseforge.pipelines.runner import build
from senseforge.store.db import Store

FIXTURES = Path(__file__).parents[2] / "fixtures"
SHOTS = FIXTURES / "crow" / "shot_samples.json"
COMMONMT = FIXTURES / "commonmt" / "head100"
AUTHOR = "scripted/crow-author"
SLOW_AUTHOR = f"scripted/{Path(__file__).with_name('responder.py')}:slow_author"


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _build(tmp_path: Path, name: str = "run", **settings: Any) -> Path:
    run_dir = tmp_path / name
    config = CrowConfig.model_validate({"model": AUTHOR, **settings})
    summary = build(CROW, config, run_dir, store=Store())
    assert summary.state == "done"
    return run_dir


def by_task(funnel: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each task's group in the funnel, with its figures' numbers by name beside its own fields."""
    return {g["name"]: {**g, **{f["name"]: f["values"] for f in g["figures"]}} for g in funnel["groups"]}


def validators(funnel: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The validators' agreement by ``<task> · <stage>``."""
    figure = next(f for f in funnel["figures"] if f["name"] == "validators")
    return {rated["label"]: rated for rated in figure["groups"]}


def _adds_up(funnel: dict[str, Any]) -> None:
    for row in funnel["stages"]:
        assert row["in"] == row["out"] + sum(row["rejected"].values()), row
    assert funnel["group_by"] == "task" and funnel["kept"] == sum(g["kept"] for g in funnel["groups"])
    for task, part in by_task(funnel).items():
        previous = None
        for row in part["stages"]:
            assert row["in"] == row["out"] + sum(row["rejected"].values()), (task, row)
            if previous is not None and row["stage"] != "cka":
                assert row["in"] == previous, (task, row)  # each stage takes what the one before kept
            previous = row["out"]
        contexts = part["contexts"]
        left_out = sum(n for key, n in contexts.items() if key.startswith("left out: "))
        assert contexts["in"] == contexts["kept"] + left_out


@pytest.fixture(scope="module")
def shots_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("home")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SENSEFORGE_HOME", str(home))
        return _build(tmp_path_factory.mktemp("shots"), source=(str(SHOTS),))


def test_the_shot_samples_build_every_task_with_its_own_stages(shots_run: Path) -> None:
    funnel = json.loads((shots_run / "funnel.json").read_text())
    _adds_up(funnel)
    assert {group["name"] for group in funnel["groups"]} == set(CROW_TASKS)
    stages = {task: [row["stage"] for row in part["stages"]] for task, part in by_task(funnel).items()}
    every = ["contexts", "cka", "ckv", "wsg", "edits", "dedup", "wsv"]
    assert stages["dialogue"] == stages["stance"] == [s for s in every if s != "ckv"]  # they bring their knowledge
    assert stages["safety"] == stages["intent"] == stages["summarization"] == every
    assert stages["mt-zh-en"] == ["contexts", "cka", "ckv"]
    # dialogue and stance bring their knowledge: no CKA call, the source's triples
    dialogue = _rows(shots_run / "dataset" / "dialogue.jsonl")
    assert {t["relation"] for row in dialogue for t in row["knowledge"]} == {"HappensIn"}
    assert all(row["context_id"] == "daily-dialogue-0001/prefix-3" for row in dialogue)
    kept = sum(len(_rows(path)) for path in (shots_run / "dataset").glob("*.jsonl"))
    assert funnel["kept"] == kept > 0


def test_rewrites_take_the_opposite_label_and_originals_inherit_their_triples(shots_run: Path) -> None:
    for path in sorted((shots_run / "dataset").glob("*.jsonl")):
        rows = _rows(path)
        originals = {row["source_id"]: row for row in rows if row["origin"] == "source"}
        for row in rows:
            assert set(row) >= {"context_id", "example_id", "task", "label", "knowledge"}
            assert row["label"] in (0, 1)
            for triple in row["knowledge"]:
                assert list(triple) == ["head", "relation", "tail", "dimension", "verbalized"]
            if row["origin"] != "rewrite":
                continue
            original = originals[row["source_id"]]
            assert row["label"] == 1 - original["label"], (path.name, row)
            assert row["edits"] <= 5 and row["original"] == original[_target_field(path.stem)]
            assert all(triple in original["knowledge"] for triple in row["knowledge"])
        for source_id, original in originals.items():
            rewrites = [r for r in rows if r["origin"] == "rewrite" and r["source_id"] == source_id]
            if rewrites:
                union = [t for r in rewrites for t in r["knowledge"]]
                assert all(t in union for t in original["knowledge"])
    # safety: the shots hold a safe original and an unsafe one; each rewrite is the other
    safety = _rows(shots_run / "dataset" / "safety.jsonl")
    flipped = {(r["original"], r["label"]) for r in safety if r["origin"] == "rewrite"}
    assert ("do not eat it.", 0) in flipped and ("eat it up.", 1) in flipped


def _target_field(task: str) -> str:
    return {"dialogue": "response", "summarization": "summary", "intent": "intent", "safety": "action"}.get(
        task, "argument"
    )


def test_the_dataset_and_the_release_evaluate(shots_run: Path, tmp_path: Path) -> None:
    llm = open_llm("scripted/echo", store=Store(), run="eval")
    try:
        payload = run_eval(shots_run, llm, EvalConfig(n_bootstrap=100), tmp_path / "eval")
    finally:
        llm.close()
    results = payload.model_dump(mode="json", by_alias=True)["results"]
    safety = results["safety"]
    assert {"macro_f1,none", "situational_acc,none"} <= set(safety)
    assert safety["per_dimension_macro_f1"]  # the rows' triples carry dimensions
    crow = results["crow"]
    assert crow["crow_score_macro_f1,none"] == pytest.approx(
        sum(results[t]["macro_f1,none"] for t in results if t != "crow") / (len(results) - 1)
    )
    # the release: a public file without labels, and a submission eval scores against the private file
    public = _rows(shots_run / "release" / "public.jsonl")
    assert public and all("label" not in row and "knowledge" not in row and "origin" not in row for row in public)
    scored = score_submission(
        shots_run / "release" / "private.jsonl",
        shots_run / "release" / "baseline_submission.jsonl",
        EvalConfig(n_bootstrap=100),
        tmp_path / "scored",
    )
    assert "crow" in scored.results


def test_fifty_commonmt_rows_keep_the_contexts_whose_knowledge_holds(tmp_path: Path) -> None:
    run_dir = _build(tmp_path, source=(str(COMMONMT),), n=50)
    funnel = json.loads((run_dir / "funnel.json").read_text())
    _adds_up(funnel)
    part = by_task(funnel)["mt-zh-en"]
    # two rows of the real suite give the same translation as correct and as wrong: rejected, not guessed at
    assert part["source"] == {"contexts": 100, "passed_filters": 98, "sampled": 50}
    assert part["contexts"]["in"] == 50
    rows = _rows(run_dir / "dataset" / "mt-zh-en.jsonl")
    assert len(rows) == 2 * part["contexts"]["kept"] and 0 < part["contexts"]["kept"] <= 50
    by_context: dict[str, list[int]] = {}
    for row in rows:
        by_context.setdefault(row["context_id"], []).append(row["label"])
        assert row["source_lang"] == "zh" and row["target_lang"] == "en" and row["knowledge"]
    assert all(sorted(labels) == [0, 1] for labels in by_context.values())  # the wrong translation carried through
    left = {key for key in part["contexts"] if key not in ("in", "kept")}
    assert left <= {"left out: no_kept_knowledge"}
    cost = json.loads((run_dir / "cost.json").read_text())
    assert set(cost["stages"]) == {"cka", "ckv"}
    assert cost["kept"] == len(rows) and cost["human"]["judgements"] == 0


# -- the panels' rules, with workers whose votes the test decides ---------------------------------

VOTES = {"keep": (True, True, False), "drop": (True, False, False), "all": (True, True, True)}
"""Per marker word, the votes of validators 0, 1 and 2."""


def _validator(prompt: str, questions: tuple[str, ...]) -> int:
    return next(i for i, q in enumerate(questions) if q.split("{")[0] in prompt)


class Panel:
    """CKA writes two triples per context (heads ``keep…`` and ``drop…``); WSG rewrites one word; validators vote
    by the marker word of the item; ``missing`` names (head, validator) pairs whose call times out."""

    def __init__(self) -> None:
        self.missing: set[tuple[str, int]] = set()

    def __call__(self, request: GenerateRequest | LoglikelihoodRequest) -> str | float | Completion:
        assert isinstance(request, GenerateRequest)
        first, last = request.as_messages()[0].content, request.as_messages()[-1].content
        if first.startswith(CKA_MARK):
            return json.dumps(
                [
                    {"head": "keepsake", "relation": "UsedFor", "tail": "memory"},
                    {"head": "dropout", "relation": "Causes", "tail": "failure"},
                    {"head": "waiting room", "relation": "AtLocation", "tail": "hospital"},
                ]
            )
        if first.startswith(WSG_MARK):
            target = re.search(r"^[A-Z][^:()\n]*\(\w+\): (.*)$", last, flags=re.MULTILINE)
            assert target is not None
            word = "allkeep" if "keepsake" in last else "drop" if "dropout" in last else "waiting"
            return json.dumps({"rewrite": f"{target[1]} {word}"})
        if "Rewrite:" in last:
            index = _validator(last, WSV_QUESTIONS)
            rewrite = re.search(r"^Rewrite: (.*)$", last, flags=re.MULTILINE)
            assert rewrite is not None
            marker = "all" if rewrite[1].endswith("allkeep") else "drop" if rewrite[1].endswith("drop") else "keep"
        else:
            index = _validator(last, CKV_QUESTIONS)
            head = re.search(r"\((.*?) \| ", last)
            assert head is not None
            marker = {"keepsake": "all", "dropout": "keep", "waiting room": "keep"}[head[1]]
            if (head[1], index) in self.missing:
                return Completion(failure=Failure(kind="timeout", message="no answer yet"))
        return "yes" if VOTES[marker][index] else "no"


SAFETY = json.dumps(
    {"task": "safety", "id": "s1", "scenario": "A pot of soup boils over", "action": "turn down the heat", "label": 1}
)


def _panel_run(tmp_path: Path, panel: Panel, name: str = "run", *, resume: bool = False, rounds: int = 3) -> Path:
    source = tmp_path / "safety.jsonl"
    source.write_text(SAFETY, encoding="utf-8")
    config = CrowConfig(model="scripted/panel", source=(str(source),), call_rounds=rounds)
    build(CROW, config, tmp_path / name, resume=resume, store=Store(), responders={"panel": panel})
    return tmp_path / name


def test_ckv_and_wsv_keep_two_of_three_votes_and_drop_one(tmp_path: Path) -> None:
    run_dir = _panel_run(tmp_path, Panel())
    funnel = json.loads((run_dir / "funnel.json").read_text())
    stages = {row["stage"]: row for row in by_task(funnel)["safety"]["stages"]}
    # CKV: keepsake 3 of 3, dropout 2 of 3, waiting room 2 of 3: all kept
    assert stages["ckv"] == {"stage": "ckv", "in": 3, "out": 3, "rejected": {}}
    # WSV: the keepsake rewrite 3 of 3, the waiting one 2 of 3 kept; the dropout one 1 of 3 dropped
    assert stages["wsv"] == {"stage": "wsv", "in": 3, "out": 2, "rejected": {"lm_review_rejected": 1}}
    rows = _rows(run_dir / "dataset" / "safety.jsonl")
    assert sorted(row["action"] for row in rows) == [
        "turn down the heat",
        "turn down the heat allkeep",
        "turn down the heat waiting",
    ]
    agreement = validators(funnel)
    assert agreement["safety · ckv"]["raters"] == 3 and agreement["safety · ckv"]["items"] == 3
    assert agreement["safety · wsv"]["extra"]["accept_rate"] == pytest.approx(6 / 9)


def test_a_triple_with_one_vote_of_three_is_dropped(tmp_path: Path) -> None:
    panel = Panel()
    VOTES_BEFORE = dict(VOTES)
    try:
        VOTES["keep"] = VOTES["drop"]  # dropout and waiting room now get one vote of three
        run_dir = _panel_run(tmp_path, panel)
    finally:
        VOTES.update(VOTES_BEFORE)
    stages = {
        row["stage"]: row for row in by_task(json.loads((run_dir / "funnel.json").read_text()))["safety"]["stages"]
    }
    assert stages["ckv"] == {"stage": "ckv", "in": 3, "out": 1, "rejected": {"lm_review_rejected": 2}}


def test_an_item_with_two_of_three_votes_waits_and_is_decided_once_the_third_comes(tmp_path: Path) -> None:
    panel = Panel()
    panel.missing = {("dropout", 2)}
    with pytest.raises(RunIncomplete, match="ckv"):
        _panel_run(tmp_path, panel, rounds=2)
    run_dir = tmp_path / "run"
    assert not (run_dir / "funnel.json").exists()
    import sqlite3

    with sqlite3.connect(run_dir / "run.db") as conn:
        decided = {row[0] for row in conn.execute("select record_id from stage_results where stage = 'ckv'")}
        votes = conn.execute("select item_id, annotator from judgements where task = 'ckv'").fetchall()
    assert "safety/s1/0/1" not in decided and {"safety/s1/0/0", "safety/s1/0/2"} <= decided
    assert sorted(a for item, a in votes if item == "safety/s1/0/1") == ["lm:scripted/panel#0", "lm:scripted/panel#1"]
    panel.missing = set()  # the third validator answers: the resumed run decides the item
    _panel_run(tmp_path, panel, resume=True, rounds=2)
    stages = {
        row["stage"]: row for row in by_task(json.loads((run_dir / "funnel.json").read_text()))["safety"]["stages"]
    }
    assert stages["ckv"]["out"] == 3


def test_a_resumed_run_writes_the_same_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kill_build: Callable[..., None]
) -> None:
    flags = ["--source", str(SHOTS), "-m", SLOW_AUTHOR, "--batch-size", "2"]
    clean = _build(tmp_path, "clean", source=(str(SHOTS),), model=SLOW_AUTHOR, batch_size=2)
    killed = tmp_path / "killed"
    home = tmp_path / "home-killed"
    kill_build("crow", flags, killed, home, "wsg", 6)
    monkeypatch.setenv("SENSEFORGE_HOME", str(home))
    config = CrowConfig(model=SLOW_AUTHOR, source=(str(SHOTS),), batch_size=2)
    assert build(CROW, config, killed, resume=True, store=Store()).state == "done"
    names = ["funnel.json", "cost.json", "cost_by_task.json", "rejects.jsonl"]
    names += [f"release/{name}" for name in ("public.jsonl", "private.jsonl", "baseline_submission.jsonl")]
    names += [f"dataset/{path.name}" for path in (clean / "dataset").glob("*.jsonl")]
    for name in names:
        assert (killed / name).read_bytes() == (clean / name).read_bytes(), name


def test_the_cost_adds_up_to_its_stages(shots_run: Path) -> None:
    cost = json.loads((shots_run / "cost.json").read_text())
    by_task = json.loads((shots_run / "cost_by_task.json").read_text())
    assert set(cost["stages"]) == {"cka", "ckv", "wsg", "wsv"}
    assert cost["total_usd"] == pytest.approx(sum(s["cost_usd"] for s in cost["stages"].values()))
    calls = {
        stage: sum(part["stages"].get(stage, {}).get("calls", 0) for part in by_task.values())
        for stage in cost["stages"]
    }
    assert calls == {stage: s["calls"] for stage, s in cost["stages"].items()}
    assert cost["kept"] == sum(part["kept"] for part in by_task.values())
    assert "cost_per_kept_example_usd" in cost


def test_stance_and_an_unsafe_original_flip_to_the_other_label(tmp_path: Path) -> None:
    rows = [
        {
            "task": "safety",
            "id": "u1",
            "scenario": "A pan of oil catches fire",
            "action": "pour water on it",
            "label": 0,
        },
        {
            "task": "stance",
            "id": "b1",
            "belief": "Schools should teach swimming.",
            "argument": "Swimming keeps children safe near water.",
            "label": "support",
            "knowledge": [{"head": "swimming", "relation": "Causes", "tail": "safety near water"}],
        },
    ]
    source = tmp_path / "rows.jsonl"
    source.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    config = CrowConfig(model="scripted/panel", source=(str(source),))
    build(CROW, config, tmp_path / "run", store=Store(), responders={"panel": Panel()})
    stance = _rows(tmp_path / "run" / "dataset" / "stance.jsonl")
    assert [(r["origin"], r["label"]) for r in stance] == [("source", 1), ("rewrite", 0)]  # supports → counters
    assert stance[1]["argument"] == "Swimming keeps children safe near water. waiting"
    assert stance[0]["knowledge"] == stance[1]["knowledge"] and stance[0]["knowledge"][0]["dimension"] == "causal"
    safety = _rows(tmp_path / "run" / "dataset" / "safety.jsonl")
    assert {(r["origin"], r["label"]) for r in safety} == {("source", 0), ("rewrite", 1)}  # unsafe → safe


SPEC = """[tasks.recipe-step]
description = "cooking: the next step of a recipe"
context_field = "steps"
target_field = "next"
context_name = "steps so far"
target_name = "next step"
turns = true
valid = "sensible"
invalid = "senseless"
question = "Is this a sensible next step?"
stages = ["cka", "ckv", "wsg", "wsv"]
"""


def test_a_user_task_from_a_toml_file_runs_end_to_end(tmp_path: Path) -> None:
    spec = tmp_path / "tasks.toml"
    spec.write_text(SPEC, encoding="utf-8")
    rows = [
        {
            "id": f"r{n}",
            "steps": ["Boil water in a pot.", f"Add {food} to the pot."],
            "next": f"Stir the {food} gently.",
        }
        for n, food in enumerate(("pasta", "rice", "noodles", "lentils"))
    ]
    source = tmp_path / "steps.jsonl"
    source.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    run_dir = _build(tmp_path, source=(str(source),), task=("recipe-step",), task_spec=str(spec))
    funnel = json.loads((run_dir / "funnel.json").read_text())
    _adds_up(funnel)
    assert [g["name"] for g in funnel["groups"]] == ["recipe-step"] and by_task(funnel)["recipe-step"]["contexts"][
        "in"
    ] == 4
    written = _rows(run_dir / "dataset" / "recipe-step.jsonl")
    assert written and all(isinstance(row["steps"], list) and "next" in row for row in written)
    assert {row["label"] for row in written} == {0, 1}
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["task_specs"]["recipe-step"]["valid"] == "sensible"
    loaded = load_dataset(run_dir / "dataset" / "recipe-step.jsonl")  # eval reads a task of one's own too
    assert loaded.kind == "binary" and {e.task for e in loaded.examples} == {"recipe-step"}
    assert {e.context_id for e in loaded.examples} <= {f"recipe-step/r{n}" for n in range(4)}


def test_decisions_files_reach_both_reviews_by_their_task(tmp_path: Path) -> None:
    """``--decisions`` routes each judgement by its task: people's ckv decisions to the first review, their wsv
    decisions to the second (crow's), with one file holding both on the last resume."""
    from ...annotate.test_crow_people import HEADS, author

    source = tmp_path / "safety.jsonl"
    row = {"task": "safety", "id": "s1", "scenario": "A pot of soup boils over", "action": "turn down the heat"}
    source.write_text(json.dumps(row) + "\n", encoding="utf-8")
    config = CrowConfig(model="scripted/people-author", source=(str(source),), stage_by=("ckv=human", "wsv=human"))
    run_dir = tmp_path / "run"
    decisions = tmp_path / "decisions.jsonl"

    def run(**kwargs: Any) -> Any:
        return build(CROW, config, run_dir, store=Store(), responders={"people-author": author}, **kwargs)

    def decide(task: str, fields: dict[str, Any]) -> None:
        queue = [json.loads(line) for line in (run_dir / "review" / "queue.jsonl").read_text().splitlines()]
        assert {r["type"] for r in queue} == {task}
        with decisions.open("a", encoding="utf-8") as handle:
            for queued in queue:
                for who in ("ana", "bo", "cy"):
                    handle.write(json.dumps({"item_id": queued["id"], "annotator": who, "task": task, **fields}) + "\n")

    assert run().waiting_for == {"ckv": len(HEADS)}
    decide("ckv", {"accept": True})
    assert run(resume=True, decisions=[decisions]).waiting_for == {"wsv": len(HEADS)}
    conditions = {"minimal": True, "violates": True, "flips": True, "on_topic": True}
    decide("wsv", {"accept": True, "conditions": conditions})
    done = run(resume=True, decisions=[decisions])
    assert done.state == "done"
    funnel = json.loads((run_dir / "funnel.json").read_text())
    assert {r["stage"]: r["out"] for r in funnel["stages"]}["wsv"] == len(HEADS)
    cost = json.loads((run_dir / "cost.json").read_text())
    assert cost["human"]["judgements"] == 2 * 3 * len(HEADS)  # every decision of both reviews counted


def test_contexts_a_registered_benchmark_holds_are_flagged_or_else_rejected(shots_run: Path, tmp_path: Path) -> None:
    from senseforge.pipelines.contamination import GATE
    from senseforge.registry.store import Registry

    Registry.open(tmp_path / "reg").add(shots_run / "dataset" / "safety.jsonl", "crow-safety", embed=False)
    plain = {path.name: _rows(path) for path in sorted((shots_run / "dataset").glob("*.jsonl"))}
    safety_ids = {row["context_id"] for row in plain["safety.jsonl"]}

    flagged = _build(tmp_path, "flagged", source=(str(SHOTS),), registry=str(tmp_path / "reg"))
    funnel = json.loads((flagged / "funnel.json").read_text())
    _adds_up(funnel)
    gate = next(row for row in funnel["stages"] if row["stage"] == GATE)
    assert gate["rejected"] == {} and gate["in"] == gate["out"]  # CRoW's sources are public sets: flagged
    assert [row["stage"] for row in by_task(funnel)["safety"]["stages"]][:3] == ["contexts", GATE, "cka"]
    for name, rows in plain.items():
        mine = _rows(flagged / "dataset" / name)
        marks = [row.pop("contamination", None) for row in mine]
        assert mine == rows  # the flags are all that changed
        if name == "safety.jsonl":
            assert all(m and m[0]["entry"] == "crow-safety" and m[0]["source_id"] == f"safety/{row['context_id']}"
                       for m, row in zip(marks, mine, strict=True))  # fmt: skip
        else:
            assert marks == [None] * len(mine)
    assert all("contamination" not in row for row in _rows(flagged / "release" / "public.jsonl"))
    assert json.loads((flagged / "manifest.json").read_text())["contamination"]["mode"] == "flag"

    rejected = _build(
        tmp_path, "rejected", source=(str(SHOTS),), registry=str(tmp_path / "reg"), contamination="reject"
    )
    funnel = json.loads((rejected / "funnel.json").read_text())
    _adds_up(funnel)
    safety = by_task(funnel)["safety"]["contexts"]
    assert safety == {"in": len(safety_ids), "kept": 0, "left out: contaminated": len(safety_ids)}
    assert not (rejected / "dataset" / "safety.jsonl").exists()
    for name, rows in plain.items():
        if name != "safety.jsonl":
            assert _rows(rejected / "dataset" / name) == rows
    cost = json.loads((rejected / "cost_by_task.json").read_text())
    assert sum(stage.get("calls", 0) for stage in cost["safety"]["stages"].values()) == 0  # none spent on a copy
