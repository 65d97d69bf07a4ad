"""The annotation app over HTTP (Starlette's TestClient), on SQLite and on PostgreSQL."""

from __future__ import annotations

import json
import re
import threading
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa

pytest.importorskip("starlette")
pytest.importorskip("httpx")

from starlette.testclient import TestClient

from senseforge.annotate.app import COOKIE, MAX_BODY, agreement_summary, create_app, csrf_token
from senseforge.annotate.store import AnnotationStore
from senseforge.data.schema import MCItem, judgement

LABELS = "ABCDE"


def item(n: int, question: str | None = None, creator: str | None = None) -> MCItem:
    return MCItem(
        id=f"q{n}",
        lang="en",
        question=question or f"Where would you keep item number {n}?",
        choices=[{"label": label, "text": f"place {label.lower()}{n}"} for label in LABELS],
        answer="B",
        metadata={"creator": creator} if creator else {},
    )


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def store(db_url: str) -> Iterator[AnnotationStore]:
    annotation = AnnotationStore(db_url)
    yield annotation
    annotation.close()


@pytest.fixture
def client(db_url: str, store: AnnotationStore) -> Iterator[TestClient]:
    with TestClient(create_app(db_url)) as test_client:
        yield test_client


def login(client: TestClient, token: str) -> None:
    response = client.get(f"/login?token={token}", follow_redirects=False)
    assert response.status_code == 303 and response.headers["location"] == "/"


def form_of(html: str) -> dict[str, str]:
    """The hidden fields of the page's judgement form."""
    return dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)">', html.split('id="judge"', 1)[1]))


def judgement_rows(url: str) -> list[tuple[str, str, str]]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(sa.text("SELECT item_id, annotator, task FROM judgements")).all()
    finally:
        engine.dispose()
    return [(str(a), str(b), str(c)) for a, b, c in rows]


# -- who may do what ---------------------------------------------------------------------


def test_without_a_valid_token_everything_is_401(client: TestClient, store: AnnotationStore) -> None:
    store.add_tasks("verify", [item(1)], k=1, group="g")
    page = client.get("/")
    assert page.status_code == 401 and "invite link" in page.text
    assert client.get("/t/verify").status_code == 401
    assert client.get("/admin").status_code == 401
    assert client.get("/login?token=not-a-token").status_code == 401
    api = client.post("/api/verify/next")
    assert api.status_code == 401 and api.json() == {"error": "use your invite link to sign in"}
    assert client.post("/api/verify/next", headers=bearer("forged")).status_code == 401
    client.cookies.set(COOKIE, "forged")
    assert client.get("/").status_code == 401
    assert 'http-equiv="refresh"' not in page.text
    # a Strict cookie is withheld on a cross-site navigation: the 401 page reloads once from the site itself
    cross = client.get("/", headers={"Sec-Fetch-Site": "cross-site"})
    assert cross.status_code == 401 and 'http-equiv="refresh"' in cross.text


def test_the_invite_link_sets_a_strict_httponly_cookie(client: TestClient, store: AnnotationStore) -> None:
    token = store.invite("ana")
    response = client.get(f"/login?token={token}", follow_redirects=False)
    assert response.status_code == 303 and response.headers["location"] == "/"
    cookie = response.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=strict" in cookie and f"{COOKIE}={token}".lower() in cookie
    home = client.get("/")
    assert home.status_code == 200 and "Hello, ana" in home.text
    assert "viewport" in home.text and "script-src 'nonce-" in home.headers["content-security-policy"]


def test_annotators_are_kept_out_of_admin_pages(client: TestClient, store: AnnotationStore) -> None:
    store.add_tasks("verify", [item(1)], k=1, group="g")
    worker, boss = store.invite("ana"), store.invite("boss", "admin")
    assert client.get("/admin", headers=bearer(worker)).status_code == 403
    assert client.get("/export/verify.jsonl", headers=bearer(worker)).status_code == 403
    login(client, worker)
    denied = client.get("/admin")
    assert denied.status_code == 403 and "Not allowed" in denied.text
    admin = client.get("/admin", headers=bearer(boss))
    assert admin.status_code == 200 and 'id="progress"' in admin.text


def test_another_annotators_assignment_is_forbidden(client: TestClient, store: AnnotationStore) -> None:
    store.add_tasks("verify", [item(1), item(2)], k=2, group="g")
    ana, ben = store.invite("ana"), store.invite("ben")
    anas = client.post("/api/verify/next", headers=bearer(ana)).json()["assignment_id"]
    stolen = client.post(f"/api/verify/{anas}", headers=bearer(ben), json={"accept": True})
    assert stolen.status_code == 403
    login(client, ben)
    page = client.get("/t/verify")
    fields = {**form_of(page.text), "assignment_id": str(anas), "accept": "yes"}
    assert client.post("/t/verify", data=fields, follow_redirects=False).status_code == 403
    assert client.post("/api/verify/999999", headers=bearer(ben), json={"accept": True}).status_code == 404
    assert judgement_rows(store.runs.url) == []


# -- submissions -------------------------------------------------------------------------

BAD_BODIES: list[tuple[str, str, Any, str]] = [
    ("verify", "bad JSON", b'{"accept": tru', "not valid JSON"),
    ("verify", "not an object", b"[1, 2]", "JSON object"),
    ("verify", "missing accept", b"{}", "accept: required"),
    ("verify", "accept not yes/no", b'{"accept": "perhaps"}', "accept: expected yes or no"),
    ("verify", "unknown flag", b'{"accept": true, "flags": ["too-easy"]}', "flags: unknown"),
    ("verify", "overlong comment", json.dumps({"accept": False, "comment": "x" * 2001}).encode(), "at most 2000"),
    ("answer", "choice outside labels", b'{"choice": "Z", "certain": true}', "not one of A, B, C, D, E"),
    ("answer", "missing certain", b'{"choice": "A"}', "certain: required"),
    ("adapt-check", "missing verdict", b"{}", "verdict: required"),
    ("adapt-check", "unknown verdict", b'{"verdict": "fine"}', "not one of correct-major"),
    ("adapt-check", "wrong without its error", b'{"verdict": "wrong"}', "names its error"),
    ("adapt-check", "an error on a right one", b'{"verdict": "correct-minor", "error": "translation"}', "only a wrong"),
    ("adapt-check", "unknown error", b'{"verdict": "wrong", "error": "spelling"}', "not one of translation"),
    ("label-errors", "missing both labels", b"{}", "question: required"),
    (
        "label-errors",
        "a question-only label on options",
        b'{"question": "none", "options": "subjectivity"}',
        "options: 'subjectivity' is not one of",
    ),
]


@pytest.mark.parametrize(("task", "case", "body", "problem"), BAD_BODIES, ids=[case[1] for case in BAD_BODIES])
def test_malformed_submissions_are_422_with_the_problems(
    client: TestClient, store: AnnotationStore, task: str, case: str, body: bytes, problem: str
) -> None:
    store.add_tasks(task, [item(1)], k=1, group="g")
    token = store.invite("ana")
    assignment = client.post(f"/api/{task}/next", headers=bearer(token)).json()["assignment_id"]
    response = client.post(
        f"/api/{task}/{assignment}", headers={**bearer(token), "Content-Type": "application/json"}, content=body
    )
    assert response.status_code == 422, case
    problems = response.json()["problems"]
    assert any(problem in p for p in problems), problems
    assert judgement_rows(store.runs.url) == []


def test_unknown_task_types_and_oversized_bodies(client: TestClient, store: AnnotationStore) -> None:
    token = store.invite("ana")
    assert client.post("/api/translate/next", headers=bearer(token)).status_code == 404
    assert client.get("/t/translate", headers=bearer(token)).status_code == 404
    store.add_tasks("verify", [item(1)], k=1, group="g")
    assignment = client.post("/api/verify/next", headers=bearer(token)).json()["assignment_id"]
    huge = json.dumps({"accept": True, "comment": "x" * MAX_BODY})
    assert client.post(f"/api/verify/{assignment}", headers=bearer(token), content=huge).status_code == 413


def test_api_submission_is_201_then_200_for_the_same_and_409_for_a_change(
    client: TestClient, store: AnnotationStore
) -> None:
    store.add_tasks("answer", [item(1)], k=1, group="g")
    token = store.invite("ana")
    nxt = client.post("/api/answer/next", headers=bearer(token))
    assert nxt.status_code == 200 and "answer" not in nxt.json()["item"]  # blind: the answer is not shown
    assignment = nxt.json()["assignment_id"]
    fields = {"choice": "C", "certain": False, "flags": ["ambiguous-option:D"], "reason": "D fits too"}
    assert client.post(f"/api/answer/{assignment}", headers=bearer(token), json=fields).status_code == 201
    assert client.post(f"/api/answer/{assignment}", headers=bearer(token), json=fields).status_code == 200
    changed = client.post(f"/api/answer/{assignment}", headers=bearer(token), json={**fields, "choice": "A"})
    assert changed.status_code == 409
    assert client.post("/api/answer/next", headers=bearer(token)).status_code == 204
    assert judgement_rows(store.runs.url) == [("q1", "ana", "answer")]


def test_the_app_and_imported_decisions_store_by_one_rule(client: TestClient, store: AnnotationStore) -> None:
    """One judgement per (item, annotator, task), whoever writes it: a different repeat replaces, the same changes
    nothing (the run store's rule, for the app's submissions as for ``--decisions``)."""
    store.add_tasks("verify", [item(1)], k=1, group="g")
    token = store.invite("ana")
    imported = judgement(item_id="q1", annotator="ana", task="verify", accept=False)
    assert store.runs.add_judgements([imported], "human") == 1
    assert store.runs.add_judgements([imported], "human") == 0  # the same again: nothing changes
    nxt = client.post("/api/verify/next", headers=bearer(token)).json()
    assert (
        client.post(f"/api/verify/{nxt['assignment_id']}", headers=bearer(token), json={"accept": True}).status_code
        == 201
    )
    stored = store.runs.judgements_for("verify")["q1"]
    assert [(s.judgement.annotator, s.judgement.vote()) for s in stored] == [("ana", "accept")]  # replaced, not doubled
    again = judgement(item_id="q1", annotator="ana", task="verify", accept=False)
    assert store.runs.add_judgements([again], "human") == 1
    assert [s.judgement.vote() for s in store.runs.judgements_for("verify")["q1"]] == ["reject"]


def adapted(n: int, source_question: str = "Where do you keep snow in winter?") -> MCItem:
    """An item as culture-adapt queues it: the adapted text, and its source in the metadata."""
    base = item(n, question=f"Di mana Anda menyimpan hujan abu vulkanik nomor {n}?")
    source = {"lang": "en", "question": source_question, "concept": "snow", "answer": "B",
              "choices": [[label, f"spot {label.lower()}"] for label in LABELS]}  # fmt: skip
    return base.model_copy(update={"question_concept": "hujan abu vulkanik", "metadata": {"source": source}})


def test_adapt_check_shows_the_source_beside_the_adaptation_and_stores_the_verdict(
    client: TestClient, store: AnnotationStore
) -> None:
    store.add_tasks("adapt-check", [adapted(1), adapted(2)], k=1, group="culture-adapt")
    token = store.invite("ana")
    first = client.post("/api/adapt-check/next", headers=bearer(token)).json()
    shown = first["item"]
    assert shown["source"]["question"] == "Where do you keep snow in winter?" and shown["source"]["concept"] == "snow"
    assert shown["concept"] == "hujan abu vulkanik" and shown["answer"] == "B"
    assert [c["label"] for c in shown["source"]["choices"]] == list(LABELS)
    body = {"verdict": "correct-major", "comment": "snow became volcanic ash"}
    assignment = first["assignment_id"]
    assert client.post(f"/api/adapt-check/{assignment}", headers=bearer(token), json=body).status_code == 201
    second = client.post("/api/adapt-check/next", headers=bearer(token)).json()["assignment_id"]
    wrong = {"verdict": "wrong", "error": "translation"}
    assert client.post(f"/api/adapt-check/{second}", headers=bearer(token), json=wrong).status_code == 201
    judged = store.judgements("adapt-check")
    verdicts = sorted((j.item_id, j.accept, j.verdict, j.error, j.comment) for js in judged.values() for j in js)
    assert verdicts == [
        ("q1", True, "correct-major", None, "snow became volcanic ash"),
        ("q2", False, "wrong", "translation", None),
    ]
    store.add_tasks("adapt-check", [adapted(3, "Who sells snow?")], k=1, group="culture-adapt")
    page = client.get("/t/adapt-check", headers=bearer(store.invite("bo")))
    assert page.status_code == 200 and "Who sells snow?" in page.text and "hujan abu vulkanik nomor 3" in page.text


def test_label_errors_stores_one_primary_label_for_the_question_and_one_for_the_options(
    client: TestClient, store: AnnotationStore
) -> None:
    store.add_tasks("label-errors", [item(1), item(2)], k=1, group="errors")
    token = store.invite("ana")
    for body in ({"question": "fluency", "options": "typo-mechanics", "comment": "kapitalisasi"},
                 {"question": "none", "options": "none"}):  # fmt: skip
        lease = client.post("/api/label-errors/next", headers=bearer(token)).json()
        assert lease["item"]["question_errors"][0] == "none" and "invalid-options" in lease["item"]["option_errors"]
        response = client.post(f"/api/label-errors/{lease['assignment_id']}", headers=bearer(token), json=body)
        assert response.status_code == 201
    judged = sorted(
        (j.accept, j.question_error, j.options_error, j.comment)
        for js in store.judgements("label-errors").values()
        for j in js
    )
    assert judged == [(False, "fluency", "typo-mechanics", "kapitalisasi"), (True, "none", "none", None)]


def test_form_posts_need_the_csrf_field(client: TestClient, store: AnnotationStore) -> None:
    store.add_tasks("verify", [item(1), item(2)], k=1, group="g")
    token = store.invite("ana")
    login(client, token)
    fields = {**form_of(client.get("/t/verify").text), "accept": "yes"}
    assert fields["csrf"] == csrf_token(token)
    without = {key: value for key, value in fields.items() if key != "csrf"}
    assert client.post("/t/verify", data=without, follow_redirects=False).status_code == 403
    wrong = {**fields, "csrf": csrf_token("someone else's token")}
    assert client.post("/t/verify", data=wrong, follow_redirects=False).status_code == 403
    assert client.post("/api/verify/next").status_code == 403  # cookie-only API call without X-CSRF-Token
    assert judgement_rows(store.runs.url) == []
    done = client.post("/t/verify", data=fields, follow_redirects=False)
    assert done.status_code == 303 and done.headers["location"] == "/t/verify"
    assert judgement_rows(store.runs.url) == [("q1", "ana", "verify")]


def test_an_invalid_form_comes_back_422_with_problems_and_choices_kept(
    client: TestClient, store: AnnotationStore
) -> None:
    store.add_tasks("answer", [item(1)], k=1, group="g")
    login(client, store.invite("ana"))
    page = client.get("/t/answer")
    assert page.status_code == 200 and "place b1" in page.text and "marked answer" not in page.text
    fields = {**form_of(page.text), "certain": "no", "flags": "ambiguous-question"}
    response = client.post("/t/answer", data=fields)
    assert response.status_code == 422
    assert 'id="problems"' in response.text and "choice: required" in response.text
    assert re.search(r'value="no" checked', response.text) and re.search(
        r'value="ambiguous-question" checked', response.text
    )


def test_bearer_form_posts_need_no_csrf(client: TestClient, store: AnnotationStore) -> None:
    store.add_tasks("verify", [item(1)], k=1, group="g")
    token = store.invite("ana")
    fields = {**form_of(client.get("/t/verify", headers=bearer(token)).text), "accept": "no"}
    del fields["csrf"]
    response = client.post("/t/verify", data=fields, headers=bearer(token), follow_redirects=False)
    assert response.status_code == 303


@pytest.mark.parametrize("task", ["verify", "answer", "adapt-check", "label-errors"])
def test_item_text_is_escaped(client: TestClient, store: AnnotationStore, task: str) -> None:
    hostile = "<script>alert(1)</script>"
    store.add_tasks(task, [item(1, question=f"{hostile} Where?")], k=1, group="g")
    page = client.get(f"/t/{task}", headers=bearer(store.invite("ana")))
    assert page.status_code == 200
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text and hostile not in page.text


# -- who gets which item -------------------------------------------------------------------


def drain(client: TestClient, token: str, task: str = "verify") -> list[str]:
    """Judge everything the API hands this annotator; the item ids judged."""
    judged: list[str] = []
    for _ in range(100):
        response = client.post(f"/api/{task}/next", headers=bearer(token))
        if response.status_code == 204:
            return judged
        body = response.json()
        stored = client.post(f"/api/{task}/{body['assignment_id']}", headers=bearer(token), json={"accept": True})
        assert stored.status_code == 201
        judged.append(body["item"]["id"])
    raise AssertionError(f"{token[:4]}… was never told that nothing is left")


def test_k_distinct_annotators_per_item_and_never_the_creator(client: TestClient, store: AnnotationStore) -> None:
    store.add_tasks("verify", [item(n, creator="cy" if n % 2 else None) for n in range(6)], k=2, group="g")
    tokens = {name: store.invite(name) for name in ("ana", "ben", "cy")}
    judged = {name: drain(client, token) for name, token in tokens.items()}
    assert all(int(i[1:]) % 2 == 0 for i in judged["cy"])  # never an item cy created
    per_item = Counter(i for ids in judged.values() for i in ids)
    assert per_item == {f"q{n}": 2 for n in range(6)}
    assert all(len(set(ids)) == len(ids) for ids in judged.values())
    rows = judgement_rows(store.runs.url)
    assert len(rows) == len(set(rows)) == 12


def test_an_expired_lease_goes_to_someone_else(db_url: str, store: AnnotationStore) -> None:
    clock = Clock()
    store.add_tasks("verify", [item(1)], k=1, group="g")
    ana, ben = store.invite("ana"), store.invite("ben")
    with TestClient(create_app(db_url, lease_s=600, clock=clock)) as client:
        first = client.post("/api/verify/next", headers=bearer(ana)).json()["assignment_id"]
        assert client.post("/api/verify/next", headers=bearer(ben)).status_code == 204  # leased to ana
        clock.now += 601
        second = client.post("/api/verify/next", headers=bearer(ben))
        assert second.status_code == 200 and second.json()["item"]["id"] == "q1"
        assert client.post(f"/api/verify/{first}", headers=bearer(ana), json={"accept": True}).status_code == 409
        late = second.json()["assignment_id"]
        assert client.post(f"/api/verify/{late}", headers=bearer(ben), json={"accept": False}).status_code == 201
    assert judgement_rows(db_url) == [("q1", "ben", "verify")]


def test_fifty_threads_store_every_judgement_exactly_once(client: TestClient, store: AnnotationStore) -> None:
    n_items, k, people = 20, 5, 50
    store.add_tasks("verify", [item(n) for n in range(n_items)], k=k, group="g")
    tokens = [store.invite(f"p{n:02d}") for n in range(people)]
    statuses: Counter[int] = Counter()
    lock = threading.Lock()
    start = threading.Barrier(people)
    failures: list[BaseException] = []

    def annotate(token: str) -> None:
        try:
            start.wait()
            for _ in range(n_items + 1):  # bounded: a store that hands out the same task forever fails, not hangs
                nxt = client.post("/api/verify/next", headers=bearer(token))
                if nxt.status_code == 204:
                    return
                assignment = nxt.json()["assignment_id"]
                for _ in range(2):  # a double submit, as an impatient client would send
                    code = client.post(f"/api/verify/{assignment}", headers=bearer(token), json={"accept": True})
                    with lock:
                        statuses[code.status_code] += 1
        except BaseException as exc:  # reported below, not lost in the thread
            failures.append(exc)
            return
        failures.append(AssertionError(f"{token[:4]}… was never told that nothing is left"))

    threads = [threading.Thread(target=annotate, args=(token,)) for token in tokens]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not failures, failures[0]
    rows = judgement_rows(store.runs.url)
    assert len(rows) == len(set(rows)) == n_items * k
    assert Counter(item_id for item_id, _, _ in rows) == {f"q{n}": k for n in range(n_items)}
    assert statuses[201] == n_items * k and statuses[200] == n_items * k and set(statuses) == {200, 201}


# -- what admins see ---------------------------------------------------------------------------


def test_admin_sees_progress_agreement_and_exports(client: TestClient, store: AnnotationStore) -> None:
    store.add_tasks("verify", [item(1), item(2)], k=2, group="g")
    ana, ben, boss = store.invite("ana"), store.invite("ben"), store.invite("boss", "admin")
    for token, accept in ((ana, True), (ben, True), (ana, False), (ben, False)):
        assignment = client.post("/api/verify/next", headers=bearer(token)).json()["assignment_id"]
        client.post(f"/api/verify/{assignment}", headers=bearer(token), json={"accept": accept})
    page = client.get("/admin", headers=bearer(boss))
    assert page.status_code == 200 and "4 / 4" in page.text and "1.000" in page.text
    assert re.search(r"<td>ana</td><td>verify</td><td class=\"n\">2</td>", page.text)
    export = client.get("/export/verify.jsonl", headers=bearer(boss))
    assert export.status_code == 200 and export.headers["content-type"].startswith("application/x-ndjson")
    lines = [json.loads(line) for line in export.text.splitlines()]
    assert [line["judgement"]["annotator"] for line in lines] == ["ana", "ben", "ana", "ben"]
    assert {frozenset(line) for line in lines} == {frozenset({"judgement"})}  # one shape, no trailer row
    assert {frozenset(line["judgement"]) for line in lines} == {frozenset(lines[0]["judgement"])}
    assert agreement_summary(store.judgements("verify"), "verify") == {
        "items": 2,
        "ratings": 4,
        "fleiss_kappa": 1.0,
        "krippendorff_alpha": 1.0,
    }  # what the admin page shows, not the export
    home = client.get("/", headers=bearer(ana))
    assert "0 open to you" in home.text and "you did 2" in home.text
    assert "ben" not in home.text  # nobody sees another's work


# -- the Human_Gen QC loop -----------------------------------------------------------------


def test_the_qc_queue_follows_create_qc_revise_and_the_admin_sees_it(
    client: TestClient, store: AnnotationStore
) -> None:
    from senseforge.data.schema import ConceptSlot, Draft, DraftItem, QCEvent
    from senseforge.pipelines.taskqueue import QueuedTask

    cy, ana, boss = store.invite("cy"), store.invite("ana"), store.invite("boss", "admin")
    empty = {"awaiting_qc": 0, "needs_revision": 0, "revised": 0, "complete": 0}
    slot = ConceptSlot(id="h1", lang="en", category="objects", concept="umbrella", creator="cy")
    store.queue([QueuedTask("create", slot, eligible=("cy",))])
    assert store.qc_queue() == {"items": [], "counts": empty}

    def step(token: str, task: str, fields: dict[str, Any]) -> dict[str, Any]:
        lease = client.post(f"/api/{task}/next", headers=bearer(token))
        assert lease.status_code == 200, lease.text
        stored = client.post(f"/api/{task}/{lease.json()['assignment_id']}", headers=bearer(token), json=fields)
        assert stored.status_code == 201, stored.text
        shown: dict[str, Any] = lease.json()["item"]
        return shown

    written = {
        "question": "Where would you leave a wet umbrella?",
        "options": ["by the door", "in bed", "in the oven", "on the roof", "in a drawer"],
        "answer": "A",
        "distractor": "E",
    }
    step(cy, "create", written)
    assert store.qc_queue()["items"] == []  # written, but its qc task is queued when the build resumes
    created = store.judgements("create")["h1"][0]
    assert isinstance(created.draft, Draft)

    def draft_item(round_: int, draft: Draft, history: list[QCEvent]) -> DraftItem:
        return DraftItem(
            id=f"h1@{round_}", item_id="h1", lang="en", category="objects", concept="umbrella", creator="cy",
            draft=draft, history=history,
        )  # fmt: skip

    submitted = [QCEvent(status="submitted", by="cy", round=0)]
    done_item = draft_item(1, created.draft, submitted).model_copy(update={"id": "h2@1", "item_id": "h2"})
    store.queue([
        QueuedTask("qc", draft_item(1, created.draft, submitted), creator="cy"),
        QueuedTask("qc", done_item, eligible=("ana",)),  # no creator on the task: the draft names them
    ])  # fmt: skip
    queue = store.qc_queue()
    assert [(r["item"], r["state"], r["round"], r["creator"], r["comment"]) for r in queue["items"]] == [
        ("h1", "awaiting_qc", 1, "cy", None),
        ("h2", "awaiting_qc", 1, "cy", None),
    ]
    assert client.post("/api/qc/next", headers=bearer(cy)).status_code == 204  # never the creator's own item

    hostile = "<b>which</b> door? say it"
    assert step(ana, "qc", {"verdict": "needs_revision", "comment": hostile})["id"] == "h1@1"
    assert step(ana, "qc", {"verdict": "complete"})["id"] == "h2@1"
    queue = store.qc_queue()
    assert queue["counts"] == {**empty, "needs_revision": 1, "complete": 1}
    assert queue["items"][0] == {
        "item": "h1",
        "state": "needs_revision",
        "round": 1,
        "creator": "cy",
        "comment": hostile,
    }

    sent_back = [*submitted, QCEvent(status="needs_revision", by="ana", round=1, comment=hostile)]
    store.queue([QueuedTask("revise", draft_item(1, created.draft, sent_back), eligible=("cy",))])
    assert store.qc_queue()["items"][0]["state"] == "needs_revision"  # queued, not revised yet
    rewritten = {**written, "question": "Where by the front door would you leave a wet umbrella?"}
    assert step(cy, "revise", rewritten)["feedback"] == hostile
    queue = store.qc_queue()
    assert queue["counts"] == {**empty, "revised": 1, "complete": 1}
    assert queue["items"][0]["state"] == "revised" and queue["items"][0]["round"] == 1

    revised = store.judgements("revise")["h1@1"][0]
    history = [*sent_back, QCEvent(status="revised", by="cy", round=1)]
    store.queue([QueuedTask("qc", draft_item(2, revised.draft, history), creator="cy")])
    queue = store.qc_queue()
    assert queue["counts"] == {**empty, "awaiting_qc": 1, "complete": 1}
    assert queue["items"][0] == {"item": "h1", "state": "awaiting_qc", "round": 2, "creator": "cy", "comment": hostile}

    page = client.get("/admin", headers=bearer(boss))
    assert page.status_code == 200 and 'id="qc-counts"' in page.text and 'id="qc-queue"' in page.text
    queue_table = page.text.split('id="qc-queue"', 1)[1].split("</table>", 1)[0]
    assert "<td>h1</td>" in queue_table and "<td>awaiting qc</td>" in queue_table and "h2" not in queue_table
    assert "&lt;b&gt;which&lt;/b&gt; door? say it" in queue_table and hostile not in page.text
    assert re.search(
        r"<td data-label=\"task type\">qc</td>\s*<td class=\"n\" data-label=\"tasks\">3</td>", page.text
    )  # three qc tasks, two rounds of h1

    def export(name: str) -> list[dict[str, Any]]:
        response = client.get(f"/export/{name}.jsonl", headers=bearer(boss))
        assert response.status_code == 200 and response.headers["content-type"].startswith("application/x-ndjson")
        assert f'filename="{name}.jsonl"' in response.headers["content-disposition"]
        return [json.loads(line) for line in response.text.splitlines()]

    [create_line] = export("create")
    assert create_line["judgement"]["draft"]["choices"][4] == {"label": "E", "text": "in a drawer"}
    assert create_line["judgement"]["draft"]["distractor"] == "E" and create_line["judgement"]["annotator"] == "cy"
    assert agreement_summary(store.judgements("create"), "create")["krippendorff_alpha"] is None  # no vote
    qc_lines = export("qc")
    assert [(line["judgement"]["item_id"], line["judgement"]["verdict"]) for line in qc_lines] == [
        ("h1@1", "needs_revision"),
        ("h2@1", "complete"),
    ]
    assert qc_lines[0]["judgement"]["comment"] == hostile
    [revise_line] = export("revise")
    assert revise_line["judgement"]["draft"]["question"] == rewritten["question"]
    everything = export("all")
    assert {frozenset(line) for line in everything} == {frozenset({"judgement"})}
    bodies = [line["judgement"] for line in everything]
    assert sorted((j["task"], j["item_id"]) for j in bodies) == [
        ("create", "h1"),
        ("qc", "h1@1"),
        ("qc", "h2@1"),
        ("revise", "h1@1"),
    ]
    assert client.get("/export/all.jsonl", headers=bearer(ana)).status_code == 403

    step(ana, "qc", {"verdict": "complete", "comment": "clear now"})
    final = store.qc_queue()
    assert final["counts"] == {**empty, "complete": 2}
    assert final["items"][0] == {"item": "h1", "state": "complete", "round": 2, "creator": "cy", "comment": "clear now"}
    page = client.get("/admin", headers=bearer(boss))
    assert 'id="qc-queue"' not in page.text and "Every item that went through QC is complete." in page.text


# -- undo, and where a task stands in one's queue -------------------------------------------


def test_the_page_says_n_of_n_and_undo_brings_the_last_judgement_back(
    client: TestClient, store: AnnotationStore
) -> None:
    store.add_tasks("verify", [item(1), item(2)], k=1, group="g")
    login(client, store.invite("ana"))
    first = client.get("/t/verify").text
    assert 'id="position">Task 1 of 2<' in first and 'id="undo"' not in first  # nothing submitted yet
    client.post("/t/verify", data={**form_of(first), "accept": "no"})
    second = client.get("/t/verify").text
    assert 'id="position">Task 2 of 2<' in second and "item number 2" in second
    assert form_of(second)["assignment_id"] != form_of(first)["assignment_id"]  # the undo form adds no field
    action = re.search(r'<form method="post" action="([^"]+)" id="undo">', second)
    assert action is not None and action.group(1) == f"/t/verify/undo/{form_of(first)['assignment_id']}"
    assert f'id="undo-last" name="csrf" value="{form_of(first)["csrf"]}"' in second and "<kbd>u</kbd>" in second
    back = client.post(action.group(1), data={"csrf": form_of(first)["csrf"]}, follow_redirects=False)
    assert back.status_code == 303 and back.headers["location"] == "/t/verify"
    again = client.get("/t/verify").text
    assert "item number 1" in again and 'id="position">Task 1 of 2<' in again  # the task taken back comes next
    assert judgement_rows(store.runs.url) == []
    client.post("/t/verify", data={**form_of(again), "accept": "yes"})
    assert [j.accept for j in store.judgements("verify")["q1"]] == [True]  # judged anew
    assert [(u["item_id"], u["annotator"], u["judgement"]["accept"]) for u in store.undone()] == [("q1", "ana", False)]
    assert client.post(action.group(1)).status_code == 403  # without the form's security token


def test_the_json_api_gives_the_position_and_undoes_only_ones_own_last_undecided_judgement(
    client: TestClient, store: AnnotationStore
) -> None:
    from senseforge.pipelines.runstore import StageResult
    from senseforge.pipelines.taskqueue import PEOPLE_STAGES

    store.add_tasks("verify", [item(n) for n in range(1, 4)], k=1, group="g")
    ana, ben = store.invite("ana"), store.invite("ben")
    done = []
    for n in (1, 2):
        nxt = client.post("/api/verify/next", headers=bearer(ana)).json()
        assert nxt["position"] == {"n": n, "of": 3}
        assert (
            client.post(f"/api/verify/{nxt['assignment_id']}", headers=bearer(ana), json={"accept": True}).status_code
            == 201
        )
        done.append(nxt["assignment_id"])
    older = client.post(f"/api/verify/{done[0]}/undo", headers=bearer(ana))
    assert older.status_code == 409 and "only your last verify judgement" in older.json()["error"]
    theirs = client.post(f"/api/verify/{done[1]}/undo", headers=bearer(ben))
    assert theirs.status_code == 403 and "not yours" in theirs.json()["error"]
    undone = client.post(f"/api/verify/{done[1]}/undo", headers=bearer(ana))
    assert undone.status_code == 200 and undone.json()["status"] == "undone" and undone.json()["item"]["id"] == "q2"
    twice = client.post(f"/api/verify/{done[1]}/undo", headers=bearer(ana))
    assert twice.status_code == 409 and "no judgement of yours to undo" in twice.json()["error"]
    assert client.post("/api/verify/next", headers=bearer(ana)).json()["assignment_id"] == done[1]
    # a build recorded which stage reads verify; while it has not decided q2, q2 judged anew can be taken back
    store.runs.set_meta({PEOPLE_STAGES: json.dumps({"verify": ["review"]})})
    store.runs.put("review", [StageResult("q1", "ok", _loose())])
    client.post(f"/api/verify/{done[1]}", headers=bearer(ana), json={"accept": False})
    assert client.post(f"/api/verify/{done[1]}/undo", headers=bearer(ana)).status_code == 200
    store.runs.put("review", [StageResult("q2", "ok", _loose())])  # now the stage decides q2
    client.post(f"/api/verify/{done[1]}", headers=bearer(ana), json={"accept": False})
    decided = client.post(f"/api/verify/{done[1]}/undo", headers=bearer(ana))
    assert decided.status_code == 409 and "stage review has decided its record" in decided.json()["error"]
    assert [j.accept for j in store.judgements("verify")["q2"]] == [False]
    assert [u["item_id"] for u in store.undone()] == ["q2", "q2"]


def _loose() -> Any:
    from senseforge.pipelines.runstore import Loose

    return Loose()


def test_the_undo_key_is_no_task_pages_key() -> None:
    """``u`` undoes on every page: no task type declares it and no page binds it to anything else."""
    from pathlib import Path

    from senseforge.annotate.tasktypes import TASK_TYPES

    for kind in TASK_TYPES.values():
        assert all("u" not in keys for field in kind.form.fields for keys in field.keys), kind.name
    templates = Path(__file__).parents[2] / "src" / "senseforge" / "annotate" / "templates"
    for page in templates.glob("*.html"):
        assert not re.search(r"""["']u["']\s*:""", page.read_text(encoding="utf-8")), page.name


def test_the_admin_page_warns_of_task_types_too_few_people_could_complete(
    client: TestClient, store: AnnotationStore
) -> None:
    from senseforge.pipelines.taskqueue import QueuedTask

    store.add_tasks("verify", [item(1, creator="ana"), item(2)], k=2, group="g")
    boss = store.invite("boss", "admin")
    store.invite("ana")
    page = client.get("/admin", headers=bearer(boss)).text
    box = page.split('id="short"', 1)[1].split("</div>", 1)[0]
    # q1: ana wrote it, so only boss could judge it; q2: boss and ana, enough
    assert "verify: 1 open task(s) need 2 different people but only 1 of the 2 invited can take them" in box
    store.queue([QueuedTask("answer", item(3), k=2, eligible=("ana", "zoe"))])  # zoe is not invited
    short = {row["type"]: row for row in store.short_of_people()}
    assert (short["answer"]["tasks"], short["answer"]["k"], short["answer"]["people"]) == (1, 2, 1)
    store.invite("cy")
    store.invite("zoe")
    assert store.short_of_people() == []
    assert 'id="short"' not in client.get("/admin", headers=bearer(boss)).text


def test_flags_show_in_words_with_the_key_that_ticks_them(client: TestClient, store: AnnotationStore) -> None:
    store.add_tasks("verify", [item(1)], k=2, group="g")
    store.add_tasks("answer", [item(2)], k=1, group="g")
    login(client, store.invite("ana"))
    verify = client.get("/t/verify").text
    for flag, words, key in [
        ("ambiguous-question", "The question is ambiguous", "a"),
        ("several-right", "More than one option is right", "s"),
        ("offensive", "Offensive", "o"),
        ("wrong-language", "Not in the item&#39;s language", "l"),
    ]:
        assert re.search(rf'value="{flag}">\s*{words} <kbd>{key}</kbd></label>', verify), flag
        assert (
            f'"{key}": () => {{ document.getElementById("flags-box").open = true; flip("flags", "{flag}"); }}' in verify
        )
    assert "<kbd>s</kbd>: more than one option is right" in verify  # in the list of keys too
    answer = client.get("/t/answer").text
    assert re.search(r'value="ambiguous-question">\s*the question <kbd>q</kbd>', answer)
    assert re.search(r'value="ambiguous-option:C">\s*option C <kbd>Shift\+3</kbd>', answer)
    # the JSON API and the exports still speak the identifiers
    nxt = client.post("/api/verify/next", headers=bearer(store.invite("bo"))).json()
    assert nxt["item"]["flags"] == ["ambiguous-question", "several-right", "offensive", "wrong-language"]
