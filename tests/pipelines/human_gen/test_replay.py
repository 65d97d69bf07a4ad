"""Acceptance: a whole human-gen run over the JSON API, replaying 30 of Putri et al.'s released Human_Gen items.

Six simulated annotators (W1–W6, the release's names) work through a real ``senseforge
annotate serve`` process: each creator writes its released item (some first tries are
answered 422, some items QC sends back and the creator revises to the released text),
each answerer gives its released answer, certainty, flags and reason. The server is
killed (SIGKILL) twice mid-run and restarted. The output must have the released keys
plus ours, reproduce every ``answer_majority`` and exclusion, and hold every judgement
exactly once.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("uvicorn")

import sqlalchemy as sa  # noqa: E402

from senseforge.annotate.store import AnnotationStore  # noqa: E402
from senseforge.data.loaders import load_dataset  # noqa: E402
from senseforge.data.matching import concept_appears  # noqa: E402
from senseforge.data.text import fold  # noqa: E402
from senseforge.pipelines.human_gen.config import HumanGenConfig  # noqa: E402
from senseforge.pipelines.human_gen.recipe import HUMAN_GEN  # noqa: E402
from senseforge.pipelines.runner import build  # noqa: E402
from senseforge.pipelines.runstore import sqlite_url  # noqa: E402
from senseforge.pipelines.tables import judgements  # noqa: E402

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "id-csqa" / "human_gen_replay" / "ind_30.json"
POOL = ("W1", "W2", "W3", "W4", "W5", "W6")
RELEASED_KEYS = {
    "id", "category", "question_concept", "question", "choices", "answer_creator", "answer_majority", "answers",
    "answers_uncertainty", "question_ambiguity", "option_ambiguity", "reason",
}  # fmt: skip
OURS = {"creator", "distractor", "qc_history", "lang"}
SENT_BACK_EVERY = 4
"""Every fourth item QC sees goes back to its creator once."""


def creator_of(row: dict[str, Any]) -> str:
    return next(name for name in POOL if name not in row["answers"])


def distractor_of(row: dict[str, Any]) -> str:
    """The hard distractor the creator marks: the wrong option most answerers picked (else the first wrong one)."""
    wrong = Counter(a for a in row["answers"].values() if a != row["answer_creator"])
    labels = [label for label in row["choices"]["label"] if label != row["answer_creator"]]
    return wrong.most_common(1)[0][0] if wrong else labels[0]


def concept_form(row: dict[str, Any]) -> str | None:
    """What the creator types as the concept's form when the question does not use it as given."""
    if fold(row["question_concept"]) in fold(row["question"]):
        return None
    words = row["question"].replace("?", " ").replace(",", " ").split()
    for size in (2, 1, 3):
        for start in range(len(words) - size + 1):
            form = " ".join(words[start : start + size])
            if concept_appears(form, row["question_concept"], "id"):
                return form
    raise AssertionError(f"no form of {row['question_concept']!r} in {row['question']!r}")


def draft_fields(row: dict[str, Any], question: str | None = None) -> dict[str, Any]:
    return {
        "question": question or row["question"],
        "options": list(row["choices"]["text"]),
        "answer": row["answer_creator"],
        "distractor": distractor_of(row),
        "concept_form": concept_form(row),
    }


def answer_fields(row: dict[str, Any], who: str) -> dict[str, Any]:
    flags = ["ambiguous-question"] if row["question_ambiguity"][who] == "ambiguous" else []
    labels = row["choices"]["label"]
    flags += [f"ambiguous-option:{labels[i]}" for i, v in enumerate(row["option_ambiguity"][who]) if v == "ambiguous"]
    return {
        "choice": row["answers"][who],
        "certain": row["answers_uncertainty"][who] == "certain",
        "flags": flags,
        "reason": row["reason"][who],
    }


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Server:
    """``senseforge annotate serve`` in its own process, killed with SIGKILL and started again."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None
        self.kills = 0

    def start(self) -> None:
        command = [sys.executable, "-m", "senseforge", "annotate", "serve", str(self.run_dir)]
        self.process = subprocess.Popen(
            [*command, "--port", str(self.port), "--no-access-log"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.base}/favicon.ico", timeout=1.0).status_code == 204:
                    return
            except httpx.TransportError:
                time.sleep(0.1)
        raise AssertionError("the annotation server did not come up")

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)
        self.kills += 1

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)


class Crowd:
    """The six annotators, acting in turn over the JSON API."""

    def __init__(self, server: Server, tokens: dict[str, str], rows: dict[tuple[str, str], dict[str, Any]]) -> None:
        self.server = server
        self.tokens = tokens
        self.rows = rows
        self.refused: list[list[str]] = []
        self.qc_seen = 0
        self.submitted: Counter[str] = Counter()
        self.kill_at = {"create": 17, "answer": 61}
        """After this many stored submissions of a type, the server is killed (once each)."""

    def post(self, who: str, path: str, body: Any = None) -> Any:
        headers = {"Authorization": f"Bearer {self.tokens[who]}"}
        return httpx.post(f"{self.server.base}{path}", headers=headers, json=body, timeout=30.0)

    def submit(self, who: str, task: str, assignment: int, fields: dict[str, Any]) -> int:
        response = self.post(who, f"/api/{task}/{assignment}", fields)
        if response.status_code == 422:
            self.refused.append(response.json()["problems"])
            return 422
        assert response.status_code == 201, response.text
        self.submitted[task] += 1
        if self.submitted[task] == self.kill_at.get(task):
            # the submission landed; the server dies before anything else; the client never saw the
            # reply for sure, so after the restart it sends the same submission again
            self.server.kill()
            self.server.start()
            again = self.post(who, f"/api/{task}/{assignment}", fields)
            assert again.status_code == 200 and again.json()["status"] == "already stored", again.text
        return 201

    def work(self) -> int:
        done = 0
        for who in POOL:
            for task in ("create", "qc", "revise", "answer"):
                while True:
                    lease = self.post(who, f"/api/{task}/next")
                    if lease.status_code == 204:
                        break
                    assert lease.status_code == 200, lease.text
                    self.act(who, task, lease.json())
                    done += 1
        return done

    def act(self, who: str, task: str, lease: dict[str, Any]) -> None:
        item, assignment = lease["item"], lease["assignment_id"]
        if task == "create":
            row = self.rows[(who, item["concept"])]
            if len(self.refused) < 6:  # a sloppy first try: four options, and the concept left out
                sloppy = {**draft_fields(row, question="Apa yang biasanya ada?"), "concept_form": None}
                sloppy["options"] = sloppy["options"][:4]
                assert self.submit(who, task, assignment, sloppy) == 422
            fields = draft_fields(row)
            if concept_form(row) is not None:  # forgets the form first: 422, then types it
                assert self.submit(who, task, assignment, {**fields, "concept_form": None}) == 422
            assert self.submit(who, task, assignment, fields) == 201
        elif task == "qc":
            assert item["history"][0]["by"] != who  # never one's own item
            self.qc_seen += 1
            first_round = len(item["history"]) == 1
            if first_round and self.qc_seen % SENT_BACK_EVERY == 0:
                body = {"verdict": "needs_revision", "comment": "Periksa lagi ejaan dan pilihan jawabannya."}
            else:
                body = {"verdict": "complete"}
            assert self.submit(who, task, assignment, body) == 201
        elif task == "revise":
            assert item["feedback"] == "Periksa lagi ejaan dan pilihan jawabannya."
            row = self.rows[(who, item["concept"])]
            assert self.submit(who, task, assignment, draft_fields(row)) == 201
        else:
            assert set(item) == {"id", "lang", "question", "choices", "flags"}  # blind: no answer, no creator
            row = next(
                r for (creator, _), r in self.rows.items() if r["question"] == item["question"] and creator != who
            )
            assert creator_of(row) != who
            assert self.submit(who, task, assignment, answer_fields(row, who)) == 201


@pytest.fixture
def released() -> list[dict[str, Any]]:
    return json.loads(FIXTURE.read_text(encoding="utf-8"))


def test_replay_of_30_released_items_through_a_killed_and_restarted_server(
    tmp_path: Path, released: list[dict[str, Any]]
) -> None:
    # the concept table: per category, the three pairs' concepts in pair order (so "pairs" gives them back)
    categories = list(dict.fromkeys(row["category"] for row in released))
    concepts = {
        cat: list(dict.fromkeys(r["question_concept"] for r in released if r["category"] == cat)) for cat in categories
    }
    table = tmp_path / "concepts.csv"
    table.write_text(
        "category,concept\n" + "".join(f"{cat},{c}\n" for cat in categories for c in concepts[cat]), encoding="utf-8"
    )
    run_dir = tmp_path / "run"
    config = HumanGenConfig(concepts=str(table), lang="id", pool=POOL)
    rows = {(creator_of(r), r["question_concept"]): r for r in released}

    first = build(HUMAN_GEN, config, run_dir)
    assert first.state == "awaiting_review" and first.awaiting == 30
    store = AnnotationStore(sqlite_url(run_dir / "run.db"))
    tokens = {name: store.invite(name) for name in POOL}
    store.close()
    server = Server(run_dir)
    server.start()
    crowd = Crowd(server, tokens, rows)
    try:
        for _ in range(12):
            crowd.work()
            summary = build(HUMAN_GEN, config, run_dir, resume=True, human_rate={"create": 0.4, "answer": 0.05})
            if summary.state == "done":
                break
        else:
            raise AssertionError("the run never finished")
    finally:
        server.stop()
    assert server.kills == 2

    # every kind of 422 the sloppy tries made was named
    problems = [p for refusal in crowd.refused for p in refusal]
    assert any(p.startswith("options: write exactly 5") for p in problems)
    assert any("does not appear in it" in p for p in problems)

    out = [json.loads(line) for line in (run_dir / "id" / "dataset" / "test.jsonl").read_text().splitlines()]
    assert len(out) == 30
    by_source = {(row["creator"], row["question_concept"]): row for row in out}
    assert set(by_source) == set(rows)
    for key, row in by_source.items():
        source = rows[key]
        assert set(row) == RELEASED_KEYS | OURS
        for field in RELEASED_KEYS - {"id", "reason"}:
            assert row[field] == source[field], (key, field)
        assert row["reason"] == {who: text.strip() for who, text in source["reason"].items()}  # the app trims
        assert row["answers"] == source["answers"] and row["answer_majority"] == source["answer_majority"]
        assert [e["status"] for e in row["qc_history"]][-1] == "complete"
        assert row["distractor"] == distractor_of(source)
    sent_back = [row for row in out if any(e["status"] == "needs_revision" for e in row["qc_history"])]
    assert sent_back and all(
        [e["status"] for e in r["qc_history"]] == ["submitted", "needs_revision", "revised", "complete"]
        for r in sent_back
    )

    # every judgement exactly once, none by an item's creator on their own item
    engine = sa.create_engine(sqlite_url(run_dir / "run.db"))
    with engine.connect() as conn:
        counted = Counter(t for (t,) in conn.execute(sa.select(judgements.c.task)))
        made = conn.execute(sa.select(judgements.c.item_id, judgements.c.annotator, judgements.c.task)).all()
    engine.dispose()
    assert counted == {"create": 30, "qc": 30 + len(sent_back), "revise": len(sent_back), "answer": 150}
    assert len(made) == len(set(made))
    creators = {row["id"]: row["creator"] for row in out}
    for item_id, annotator, task in made:
        if task in ("qc", "answer"):
            assert annotator != creators[item_id.split("@")[0]]

    funnel = json.loads((run_dir / "funnel.json").read_text())
    figures = {figure["name"]: figure for figure in funnel["figures"]}
    (answers,) = figures["answers"]["groups"]
    assert funnel["kept"] == 30 and answers["extra"]["excluded"] == 0 and answers["ratings"] == 150
    assert answers["krippendorff_alpha"] is not None and answers["fleiss_kappa"] is not None
    assert figures["qc-totals"]["values"]["sent_back"] == len(sent_back)
    cost = json.loads((run_dir / "cost.json").read_text())
    assert cost["human_by_task"]["create"]["cost_usd"] == pytest.approx(30 * 0.4)
    assert cost["human_by_task"]["answer"]["cost_usd"] == pytest.approx(150 * 0.05)

    # senseforge eval reads the output, with either gold answer
    loaded = load_dataset(run_dir / "id" / "dataset" / "test.jsonl")
    assert loaded.fmt == "putri" and len(loaded.items) == 30
    majority = {item.id: item.metadata["answer_majority"] for item in loaded.items}
    assert majority == {row["id"]: row["answer_majority"] for row in out}
