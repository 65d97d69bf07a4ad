"""``open-judge``: people grade the free answers of an ``open`` eval; their verdicts meet the LM judge's."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("starlette")
pytest.importorskip("httpx")

from starlette.testclient import TestClient
from typer.testing import CliRunner

from senseforge.annotate.app import create_app
from senseforge.annotate.store import AnnotationStore
from senseforge.annotate.tasktypes import TASK_TYPES
from senseforge.cli.main import app as cli
from senseforge.data.schema import JUDGEMENT, OpenAnswer, OpenJudgeJudgement
from senseforge.evaluate.harness import run_eval
from senseforge.evaluate.judge import judge_agreement, majority_verdict
from senseforge.evaluate.records import MCSample
from senseforge.evaluate.run import EvalConfig
from senseforge.llm.base import GenerateRequest
from senseforge.llm.mock import ScriptedLLM
from senseforge.pipelines.taskqueue import QueuedTask

from ..evaluate.open_items import answer as _answer
from ..evaluate.open_items import items_file as _items_file

TASK = "open-judge"


def answer(n: int, text: str = "a small river", question: str | None = None) -> OpenAnswer:
    return OpenAnswer(
        id=f"q{n}::scripted/answerer",
        item_id=f"q{n}",
        model="scripted/answerer",
        lang="en",
        question=question or f"What carries water to the sea, number {n}?",
        gold="river",
        answer=text,
    )


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def store(db_url: str) -> Iterator[AnnotationStore]:
    annotation = AnnotationStore(db_url)
    yield annotation
    annotation.close()


@pytest.fixture
def client(db_url: str, store: AnnotationStore) -> Iterator[TestClient]:
    with TestClient(create_app(db_url)) as test_client:
        yield test_client


def test_people_grade_free_answers_over_the_json_api(client: TestClient, store: AnnotationStore) -> None:
    store.queue([QueuedTask(type=TASK, input=answer(n), k=1, group=TASK) for n in (1, 2)])
    token = store.invite("ana")
    first = client.post(f"/api/{TASK}/next", headers=bearer(token)).json()
    shown = first["item"]
    assert shown["gold"] == "river" and shown["answer"] == "a small river" and "water" in shown["question"]
    assert shown["verdicts"] == ["correct", "incorrect"]
    missing = client.post(f"/api/{TASK}/{first['assignment_id']}", headers=bearer(token), json={"comment": "hm"})
    assert missing.status_code == 422 and any("verdict" in p for p in missing.json()["problems"])
    odd = client.post(f"/api/{TASK}/{first['assignment_id']}", headers=bearer(token), json={"verdict": "maybe"})
    assert odd.status_code == 422
    ok = {"verdict": "correct", "comment": "a river, said loosely"}
    assert client.post(f"/api/{TASK}/{first['assignment_id']}", headers=bearer(token), json=ok).status_code == 201
    second = client.post(f"/api/{TASK}/next", headers=bearer(token)).json()["assignment_id"]
    no = {"verdict": "incorrect"}
    assert client.post(f"/api/{TASK}/{second}", headers=bearer(token), json=no).status_code == 201
    assert client.post(f"/api/{TASK}/next", headers=bearer(token)).status_code == 204
    judged = sorted(
        (j.item_id, j.verdict, j.comment, j.vote())
        for js in store.judgements(TASK).values()
        for j in js
        if isinstance(j, OpenJudgeJudgement)
    )
    assert judged == [
        ("q1::scripted/answerer", "correct", "a river, said loosely", "accept"),
        ("q2::scripted/answerer", "incorrect", None, "reject"),
    ]


def test_the_page_shows_question_reference_and_answer_escaped(client: TestClient, store: AnnotationStore) -> None:
    hostile = "<script>alert(1)</script>"
    store.queue([QueuedTask(type=TASK, input=answer(1, text=f"{hostile} a brook", question=f"{hostile} Where?"))])
    page = client.get(f"/t/{TASK}", headers=bearer(store.invite("ana")))
    assert page.status_code == 200
    assert hostile not in page.text and page.text.count("&lt;script&gt;alert(1)&lt;/script&gt;") == 2
    assert 'id="gold"' in page.text and ">river<" in page.text and "a brook" in page.text
    assert 'name="verdict" value="correct"' in page.text and "<kbd>y</kbd>" in page.text


def test_the_body_is_a_judgement_and_majority_ties_go_to_the_first() -> None:
    made = JUDGEMENT.validate_python({"item_id": "q1::m", "annotator": "ana", "task": TASK, "verdict": "correct"})
    assert isinstance(made, OpenJudgeJudgement) and made.vote() == "accept"
    verdict = TASK_TYPES[TASK].form.field("verdict")
    assert verdict is not None and verdict.options == ("correct", "incorrect") and verdict.required
    assert not hasattr(TASK_TYPES[TASK], "policy")  # the recipe's config decides, not the task type
    assert majority_verdict(["incorrect", "correct"]) == "incorrect"
    assert majority_verdict(["correct", "incorrect", "incorrect"]) == "incorrect"
    assert majority_verdict([]) is None


# --- end to end: an open eval, people's verdicts, the agreement report --------------------


def _judge(request: GenerateRequest) -> str:
    prompt = request.as_messages()[-1].content
    if "a stream" in prompt or "storm cloud" in prompt:
        return '{"verdict": "correct", "reason": "same thing"}'
    if "mountain of fire" in prompt:
        return "Hmm, hard to say."  # unread: counts as incorrect
    return '{"verdict": "incorrect", "reason": "something else"}'


# the judge: q0 correct, q1 correct, q2 incorrect, q3 unread (incorrect), q4 incorrect
PEOPLE = {  # (ana, ben); ana judges first, so a tie goes to ana
    "q0": ("correct", "correct"),  # correct
    "q1": ("incorrect", "correct"),  # tie: incorrect
    "q2": ("correct", "correct"),  # correct
    "q3": ("correct", "incorrect"),  # tie: correct
    "q4": ("incorrect", "incorrect"),  # incorrect
}


def test_open_judge_end_to_end(tmp_path: Path) -> None:
    llm = ScriptedLLM(responder=_answer, name="scripted/answerer")
    judge = ScriptedLLM(responder=_judge, name="scripted/judge")
    config = EvalConfig(formulation="open", judge="scripted/judge", n_bootstrap=100)
    eval_dir = tmp_path / "eval"
    run_eval(_items_file(tmp_path), llm, config, eval_dir / "answerer", judge=judge)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    runner = CliRunner()
    queued = runner.invoke(cli, ["annotate", "open-judge", str(run_dir), str(eval_dir), "--k", "2"])
    assert queued.exit_code == 0, queued.output
    again = runner.invoke(cli, ["annotate", "open-judge", str(run_dir), str(eval_dir)])
    assert again.exit_code == 0 and "0 new" in again.output

    store = AnnotationStore(f"sqlite:///{run_dir / 'run.db'}")
    try:
        tasks = {t.id: t for t, _, _ in store.inputs(TASK) if isinstance(t, OpenAnswer)}
        assert sorted(tasks) == [f"q{n}::scripted/answerer" for n in range(5)]
        assert tasks["q0::scripted/answerer"].gold == "thunderstorm"
        assert tasks["q1::scripted/answerer"].answer == "a stream"
        assert "What carries water to the sea?" in tasks["q1::scripted/answerer"].question
        for who, index in (("ana", 0), ("ben", 1)):
            store.invite(who)
            for _ in range(5):
                lease = store.next_assignment(who, TASK)
                assert lease is not None and isinstance(lease.input, OpenAnswer)
                verdict = PEOPLE[lease.input.item_id][index]
                store.submit(lease.id, who, TASK_TYPES[TASK].parse(lease.input, {"verdict": verdict}))
            assert store.next_assignment(who, TASK) is None
    finally:
        store.close()

    report = runner.invoke(cli, ["annotate", "open-agreement", str(run_dir), str(eval_dir)])
    assert report.exit_code == 0, report.output
    assert "0.600" in report.output and "-0.154" in report.output  # people's accuracy, kappa
    written = json.loads((eval_dir / "open_agreement.json").read_text(encoding="utf-8"))
    row = written["models"]["scripted/answerer"]
    # people: C I C C I → 3/5; judge: C C I I I → 2/5; same on q0 and q4 → 2/5
    # kappa: p_o = 0.4, p_e = 0.6 * 0.4 + 0.4 * 0.6 = 0.48 → (0.4 - 0.48) / 0.52
    assert row["items"] == 5 and row["judge_unread"] == 1 and row["undecided"] == 0
    assert row["human_acc"] == pytest.approx(0.6)
    assert row["judge_acc"] == pytest.approx(0.4)
    assert row["agreement"] == pytest.approx(0.4)
    assert row["kappa"] == pytest.approx(-0.08 / 0.52)
    other = tmp_path / "elsewhere.json"
    moved = runner.invoke(cli, ["annotate", "open-agreement", str(run_dir), str(eval_dir), "--out", str(other)])
    assert moved.exit_code == 0 and json.loads(other.read_text(encoding="utf-8"))["models"] == written["models"]


def test_open_judge_creates_a_fresh_run_folder_as_the_readme_shows(tmp_path: Path) -> None:
    """The docs: `senseforge annotate open-judge runs/open-check evals/open --k 2` on a folder that is not there yet."""
    eval_dir = tmp_path / "evals" / "open"
    llm = ScriptedLLM(responder=_answer, name="scripted/answerer")
    judge = ScriptedLLM(responder=_judge, name="scripted/judge")
    run_eval(_items_file(tmp_path), llm, EvalConfig(formulation="open", judge="scripted/judge"), eval_dir, judge=judge)
    run_dir = tmp_path / "runs" / "open-check"
    runner = CliRunner()
    nothing = runner.invoke(cli, ["annotate", "open-judge", str(run_dir), str(tmp_path / "no-eval")])
    assert nothing.exit_code != 0 and not run_dir.exists()  # a wrong eval folder leaves no empty run folder
    queued = runner.invoke(cli, ["annotate", "open-judge", str(run_dir), str(eval_dir), "--k", "2"])
    assert queued.exit_code == 0, queued.output
    assert "5 new open-judge task(s)" in queued.output and (run_dir / "run.db").is_file()
    status = runner.invoke(cli, ["annotate", "status", str(run_dir), "--json"])
    assert status.exit_code == 0, status.output


def test_agreement_counts_only_judged_and_decided_items() -> None:
    def sample(n: int, verdict: str | None, *, error: str | None = None) -> MCSample:
        return MCSample.model_validate(
            {"id": f"q{n}", "lang": "en", "difficulty": None, "category": None, "recipe": None, "review": None,
             "prompt": "?", "choices": ["a", "b"], "labels": ["A", "B"], "continuations": [], "gold": "A",
             "response": "a", "judge": "scripted/judge", "error": error,
             **({"judge_verdict": verdict} if verdict else {})}
        )  # fmt: skip

    samples = [
        sample(0, "correct"),
        sample(1, "correct"),
        sample(2, None, error="judge backend: down"),
        sample(3, None),
    ]
    stats = judge_agreement(samples, {"q0": ["correct"], "q1": ["correct"], "q2": ["incorrect"]})
    assert stats["items"] == 2 and stats["undecided"] == 1 and stats["agreement"] == 1.0
    assert stats["kappa"] is None  # every rating "correct": chance agreement is total
    empty = judge_agreement([], {})
    assert empty["items"] == 0 and empty["human_acc"] is None and empty["kappa"] is None
