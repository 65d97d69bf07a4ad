"""CRoW's validations by people: a crow build with ``--stage-by ckv=human,wsv=human`` waits for the app, three
simulated annotators tick triples and check rewrites over the JSON API, and the resumed build keeps exactly what
two of three accepted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("starlette")
pytest.importorskip("httpx")

from starlette.testclient import TestClient

from senseforge.annotate.app import create_app
from senseforge.annotate.store import AnnotationStore
from senseforge.llm.base import GenerateRequest, LoglikelihoodRequest
from senseforge.pipelines.crow.config import CrowConfig
from senseforge.pipelines.crow.recipe import CROW
from senseforge.pipelines.crow.templates import CKA_MARK, WSG_MARK
from senseforge.pipelines.runner import build
from senseforge.pipelines.runstore import sqlite_url
from senseforge.store.db import Store

HEADS = ("keepsake", "dropout", "waiting room")
PEOPLE = ("ana", "bo", "cy")


def author(request: GenerateRequest | LoglikelihoodRequest) -> str:
    """CKA: three triples; WSG: the target with the triple's head word added."""
    assert isinstance(request, GenerateRequest)
    first, last = request.as_messages()[0].content, request.as_messages()[-1].content
    if first.startswith(CKA_MARK):
        return json.dumps([{"head": head, "relation": "UsedFor", "tail": "cooking"} for head in HEADS])
    assert first.startswith(WSG_MARK), first[:40]
    head = next(h for h in HEADS if f"({h} |" in last)
    return json.dumps({"rewrite": f"turn down the heat {head.split()[0]}"})


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _build(tmp_path: Path, *, resume: bool = False) -> object:
    source = tmp_path / "safety.jsonl"
    row = {"task": "safety", "id": "s1", "scenario": "A pot of soup boils over", "action": "turn down the heat"}
    source.write_text(json.dumps(row) + "\n", encoding="utf-8")
    config = CrowConfig(model="scripted/people-author", source=(str(source),), stage_by=("ckv=human", "wsv=human"))
    return build(
        CROW,
        config,
        tmp_path / "run",
        resume=resume,
        store=Store(),
        responders={"people-author": author},
        human_rate={"ckv": 0.2, "wsv": 0.3},
    )


def _work(client: TestClient, task: str, tokens: dict[str, str], answer: object) -> None:
    """Each person takes every task of ``task`` they are offered and answers ``answer(person, item)``."""
    for index, person in enumerate(PEOPLE):
        while True:
            got = client.post(f"/api/{task}/next", headers=bearer(tokens[person]))
            if got.status_code == 204:
                break
            body = got.json()
            fields = answer(index, body["item"])  # type: ignore[operator]
            sent = client.post(f"/api/{task}/{body['assignment_id']}", headers=bearer(tokens[person]), json=fields)
            assert sent.status_code == 201, sent.text


def test_people_validate_triples_and_rewrites_and_two_of_three_decide(tmp_path: Path) -> None:
    first = _build(tmp_path)
    assert first.state == "awaiting_review" and first.awaiting == 3  # type: ignore[attr-defined]
    run = tmp_path / "run"
    queued = [json.loads(line) for line in (run / "review" / "queue.jsonl").read_text().splitlines()]
    assert sorted(row["input"]["triple"]["head"] for row in queued) == sorted(HEADS)
    assert {(row["type"], row["k"], row["needed"]) for row in queued} == {("ckv", 3, 3)}
    url = sqlite_url(run / "run.db")
    store = AnnotationStore(url)
    tokens = {person: store.invite(person) for person in PEOPLE}
    ticks = {"keepsake": "yyy", "dropout": "yyn", "waiting room": "ynn"}  # 3, 2 and 1 of 3
    with TestClient(create_app(url)) as client:
        page = client.get("/t/ckv", headers=bearer(tokens["ana"]))
        assert page.status_code == 200 and 'name="accept" value="yes"' in page.text
        _work(client, "ckv", tokens, lambda i, item: {"accept": ticks[item["triple"]["head"]][i] == "y"})
    second = _build(tmp_path, resume=True)
    assert second.state == "awaiting_review" and second.awaiting == 2  # type: ignore[attr-defined]
    all_four = {"minimal": True, "violates": True, "flips": True, "on_topic": True}
    with TestClient(create_app(url)) as client:
        bad = client.post("/api/wsv/next", headers=bearer(tokens["ana"])).json()
        wrong = client.post(
            f"/api/wsv/{bad['assignment_id']}", headers=bearer(tokens["ana"]), json={"conditions": {"fun": True}}
        )
        assert wrong.status_code == 422 and any("fun" in p for p in wrong.json()["problems"])
        assert bad["item"]["flipped"] == "unsafe" and bad["item"]["rewrite"].startswith("turn down the heat ")

        def check(index: int, item: dict[str, object]) -> dict[str, object]:
            keepsake = str(item["rewrite"]).endswith("keepsake")
            if index == 2 or (index == 1 and not keepsake):
                return {"conditions": {**all_four, "flips": False}}
            return {"conditions": all_four}

        _work(client, "wsv", tokens, check)
    third = _build(tmp_path, resume=True)
    assert third.state == "done"  # type: ignore[attr-defined]
    rows = [json.loads(line) for line in (run / "dataset" / "safety.jsonl").read_text().splitlines()]
    assert [(row["action"], row["label"]) for row in rows] == [
        ("turn down the heat", 1),
        ("turn down the heat keepsake", 0),  # dropout's rewrite had one vote of three
    ]
    funnel = json.loads((run / "funnel.json").read_text())
    (safety,) = funnel["groups"]
    stages = {row["stage"]: row for row in safety["stages"]}
    assert stages["ckv"] == {"stage": "ckv", "in": 3, "out": 2, "rejected": {"review_rejected": 1}}
    assert stages["wsv"] == {"stage": "wsv", "in": 2, "out": 1, "rejected": {"review_rejected": 1}}
    cost = json.loads((run / "cost.json").read_text())
    assert cost["human"]["judgements"] == 15 and cost["human"]["cost_usd"] == pytest.approx(9 * 0.2 + 6 * 0.3)
    store.close()


def _all_human(tmp_path: Path, *, resume: bool = False) -> object:
    source = tmp_path / "safety.jsonl"
    row = {
        "task": "safety",
        "id": "s1",
        "scenario": "Oil in a frying pan catches fire",
        "action": "cover the pan with a lid",
    }
    source.write_text(json.dumps(row) + "\n", encoding="utf-8")
    stages = ("cka=human", "ckv=human", "wsg=human", "wsv=human")
    config = CrowConfig(source=(str(source),), stage_by=stages, k=2, ckv_min=2, wsv_min=2)
    return build(CROW, config, tmp_path / "run", resume=resume, store=Store(), human_rate={"cka": 0.75, "wsg": 0.65})


def test_every_stage_by_people_over_the_json_api(tmp_path: Path) -> None:
    first = _all_human(tmp_path)
    assert first.state == "awaiting_review" and first.waiting_for == {"cka": 1}  # type: ignore[attr-defined]
    assert first.ledger.get("calls", 0) == 0  # type: ignore[attr-defined]  # no model is asked anything
    url = sqlite_url(tmp_path / "run" / "run.db")
    store = AnnotationStore(url)
    tokens = {person: store.invite(person) for person in PEOPLE}
    with TestClient(create_app(url)) as client:
        got = client.post("/api/cka/next", headers=bearer(tokens["ana"])).json()
        assert got["item"]["target"] == "cover the pan with a lid" and got["item"]["dimensions"][0]["relations"]
        where = f"/api/cka/{got['assignment_id']}"
        bad = client.post(
            where,
            headers=bearer(tokens["ana"]),
            json={"triples": [{"head": "lid", "relation": "Smothers", "tail": "fire"}]},
        )
        assert bad.status_code == 422 and any("Smothers" in p for p in bad.json()["problems"])
        triples = [
            {"head": "lid", "relation": "UsedFor", "tail": "cutting off air"},
            {"head": "fire", "relation": "not has property", "tail": "safe to touch"},
        ]
        assert client.post(where, headers=bearer(tokens["ana"]), json={"triples": triples}).status_code == 201
    assert _all_human(tmp_path, resume=True).state == "awaiting_review"  # type: ignore[attr-defined]
    with TestClient(create_app(url)) as client:  # two people tick: both keep the lid, split on the fire
        _work_two(client, "ckv", tokens, lambda i, item: {"accept": i == 0 or item["triple"]["head"] == "lid"})
    assert _all_human(tmp_path, resume=True).waiting_for == {"wsg": 1}  # type: ignore[attr-defined]
    with TestClient(create_app(url)) as client:
        got = client.post("/api/wsg/next", headers=bearer(tokens["bo"])).json()
        assert [t["head"] for t in got["item"]["triples"]] == ["lid"] and got["item"]["flipped"] == "unsafe"
        assert got["item"]["flipped_valid"] is False  # the recipe says which way the label flips: the page words it
        where = f"/api/wsg/{got['assignment_id']}"
        six = client.post(where, headers=bearer(tokens["bo"]), json={"rewrite": "throw some cold water on it"})
        assert six.status_code == 422 and "rewrite: changes 6 words; at most 5" in six.json()["problems"]
        same = client.post(where, headers=bearer(tokens["bo"]), json={"rewrite": "Cover the pan with a lid."})
        assert same.status_code == 422 and "rewrite: it is the original target" in same.json()["problems"]
        good = {"rewrite": "cover the pan with a wet paper towel", "violates": [0]}
        assert client.post(where, headers=bearer(tokens["bo"]), json=good).status_code == 201
    assert _all_human(tmp_path, resume=True).waiting_for == {"wsv": 1}  # type: ignore[attr-defined]  # a review, too
    all_four = {"minimal": True, "violates": True, "flips": True, "on_topic": True}
    with TestClient(create_app(url)) as client:
        _work_two(client, "wsv", tokens, lambda i, item: {"conditions": all_four})
        admin = client.get("/admin", headers=bearer(store.invite("root", role="admin")))
        assert admin.status_code == 200 and "cka" in admin.text and "wsv" in admin.text  # every stage's progress
    done = _all_human(tmp_path, resume=True)
    assert done.state == "done"  # type: ignore[attr-defined]
    rows = [json.loads(line) for line in (tmp_path / "run" / "dataset" / "safety.jsonl").read_text().splitlines()]
    assert [(r["action"], r["label"], [t["head"] for t in r["knowledge"]]) for r in rows] == [
        ("cover the pan with a lid", 1, ["lid"]),
        ("cover the pan with a wet paper towel", 0, ["lid"]),
    ]
    cost = json.loads((tmp_path / "run" / "cost.json").read_text())
    assert cost["human_by_task"]["cka"]["judgements"] == 1 and cost["human_by_task"]["wsg"]["judgements"] == 1
    assert cost["human_by_task"]["ckv"]["judgements"] == 4 and cost["human_by_task"]["wsv"]["judgements"] == 2
    assert cost["stages"] == {} and cost["total_usd"] is None  # ckv and wsv had no --human-rate: unknown, not zero
    store.close()


def _work_two(client: TestClient, task: str, tokens: dict[str, str], answer: object) -> None:
    for index, person in enumerate(PEOPLE[:2]):
        while (got := client.post(f"/api/{task}/next", headers=bearer(tokens[person]))).status_code != 204:
            body = got.json()
            fields = answer(index, body["item"])  # type: ignore[operator]
            sent = client.post(f"/api/{task}/{body['assignment_id']}", headers=bearer(tokens[person]), json=fields)
            assert sent.status_code == 201, sent.text


def _triple_check(n: int, head: str) -> object:
    from senseforge.data.crow_items import KnowledgeCheckItem

    return KnowledgeCheckItem.model_validate(
        {
            "id": f"safety/q{n}/0/0",
            "task": "safety",
            "lang": "en",
            "context_name": "scenario",
            "context": "A pan of oil catches fire",
            "target_name": "action",
            "target": "cover it with a lid",
            "label": "safe",
            "triple": {"head": head, "relation": "UsedFor", "tail": "smothering a fire"},
        }
    )


def test_a_qualification_comes_first_and_gates_the_real_tasks(tmp_path: Path) -> None:
    from senseforge.pipelines.quality import qualification, set_quality
    from senseforge.pipelines.taskqueue import QueuedTask

    url = sqlite_url(tmp_path / "run.db")
    store = AnnotationStore(url)
    store.queue([QueuedTask(type="ckv", input=_triple_check(n, "lid"), k=2, group="crow-review") for n in (1, 2)])
    gold = [(_triple_check(10, "lid"), {"accept": "yes"}), (_triple_check(11, "petrol"), {"accept": "no"})]
    assert store.add_gold("ckv", gold) == 2
    set_quality(store.runs, task_type="ckv", qualify=0.8)
    tokens = {person: store.invite(person) for person in ("ana", "bo")}
    with TestClient(create_app(url)) as client:
        served: dict[str, list[str]] = {"ana": [], "bo": []}
        answers = {"ana": {"lid": True, "petrol": False}, "bo": {"lid": True, "petrol": True}}  # bo gets one wrong
        for person in ("ana", "bo"):
            while (got := client.post("/api/ckv/next", headers=bearer(tokens[person]))).status_code != 204:
                body = got.json()
                served[person].append(body["item"]["id"])
                fields = {"accept": answers[person][body["item"]["triple"]["head"]]}
                sent = client.post(f"/api/ckv/{body['assignment_id']}", headers=bearer(tokens[person]), json=fields)
                assert sent.status_code == 201
        # both take the whole test first; only ana, with every answer right, goes on to the real tasks
        assert served["ana"] == ["safety/q10/0/0", "safety/q11/0/0", "safety/q1/0/0", "safety/q2/0/0"]
        assert served["bo"] == ["safety/q10/0/0", "safety/q11/0/0"]
    assert qualification(store.runs, "ana", "ckv") == "passed" and qualification(store.runs, "bo", "ckv") == "failed"
    assert qualification(store.runs, "cy", "ckv") == "testing" and qualification(store.runs, "ana", "wsv") == "none"
    store.close()


@pytest.mark.parametrize(
    ("label", "flipped", "valid", "asked", "not_asked"),
    [
        ("plausible", "implausible", False, "so that it is implausible, goes against the knowledge", "no longer"),
        ("implausible", "plausible", True, "so that it is plausible: the knowledge above no longer makes it "
         "implausible", "goes against"),
        ("safe", "unsafe", None, "so that it is unsafe instead of safe, breaking the link", "goes against"),
    ],
)  # fmt: skip
def test_the_wsg_page_words_the_rewrite_by_the_label_asked_for(
    tmp_path: Path, label: str, flipped: str, valid: bool | None, asked: str, not_asked: str
) -> None:
    from senseforge.data.crow_items import RewriteItem
    from senseforge.data.schema import KnowledgeTriple
    from senseforge.pipelines.taskqueue import QueuedTask

    url = sqlite_url(tmp_path / "run.db")
    store = AnnotationStore(url)
    rewrite = RewriteItem(
        id="d1", task="dialogue", lang="en", context_name="dialogue", context="A: I'm cold. B: Close the window.",
        target_name="response", target="I will open the oven", label=label, flipped=flipped, flipped_valid=valid,
        triples=[KnowledgeTriple(head="window", relation="UsedFor", tail="letting air in")],
    )  # fmt: skip
    store.queue([QueuedTask("wsg", rewrite)])
    token = store.invite("ana")
    store.close()
    with TestClient(create_app(url)) as client:
        page = client.get("/t/wsg", headers=bearer(token)).text
    instruction = page.split('id="instruction">', 1)[1].split("</label>", 1)[0]
    assert asked in instruction and not_asked not in instruction
    legend = page.split("<legend>", 1)[1].split("</legend>", 1)[0]
    assert legend == (
        "The knowledge that makes the response implausible" if valid else "The knowledge your rewrite goes against"
    )
