"""Writing, checking and revising questions in the annotation app (create, qc, revise), on SQLite and PostgreSQL."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("starlette")
pytest.importorskip("httpx")

from starlette.testclient import TestClient

from senseforge.annotate.app import create_app
from senseforge.annotate.store import AnnotationStore
from senseforge.data.matching import concept_appears
from senseforge.data.schema import (
    Choice,
    ConceptSlot,
    CreateJudgement,
    Draft,
    DraftItem,
    QCEvent,
    QCJudgement,
    ReviseJudgement,
)
from senseforge.pipelines.taskqueue import QueuedTask

HOSTILE = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=1</script>'
OPTIONS = ["an umbrella", "a raincoat", "sunglasses", "a scarf", "a kite"]


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def login(client: TestClient, token: str) -> None:
    response = client.get(f"/login?token={token}", follow_redirects=False)
    assert response.status_code == 303 and response.headers["location"] == "/"


def form_of(page: str) -> dict[str, str]:
    """The hidden fields of the page's judgement form."""
    return dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)">', page.split('id="judge"', 1)[1]))


def slot(n: int, *, concept: str = "umbrella", lang: str = "en", creator: str = "ana", **extra: Any) -> ConceptSlot:
    return ConceptSlot(id=f"w{n}", lang=lang, category="weather", concept=concept, creator=creator, **extra)


def create_task(written: ConceptSlot) -> QueuedTask:
    """A concept slot as a recipe queues it: only its creator may write it."""
    return QueuedTask(type="create", input=written, group="human-gen", eligible=(written.creator,))


def draft(
    question: str = "What do you open over your head in the rain: an umbrella?", texts: list[str] | None = None
) -> Draft:
    choices = [Choice(label=label, text=text) for label, text in zip("ABCDE", texts or OPTIONS, strict=True)]
    return Draft(question=question, choices=choices, answer="A", distractor="B")


def draft_item(
    n: int, *, rnd: int = 0, written: Draft | None = None, history: list[QCEvent] | None = None
) -> DraftItem:
    return DraftItem(
        id=f"w{n}@{rnd}",
        item_id=f"w{n}",
        lang="en",
        category="weather",
        concept="umbrella",
        creator="ana",
        draft=written or draft(),
        history=history if history is not None else [QCEvent(status="submitted", by="ana", round=0)],
    )


@pytest.fixture
def store(db_url: str) -> Iterator[AnnotationStore]:
    annotation = AnnotationStore(db_url)
    yield annotation
    annotation.close()


@pytest.fixture
def client(db_url: str, store: AnnotationStore) -> Iterator[TestClient]:
    with TestClient(create_app(db_url)) as test_client:
        yield test_client


def lease(client: TestClient, token: str, task: str) -> dict[str, Any]:
    response = client.post(f"/api/{task}/next", headers=bearer(token))
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


# -- create over the JSON API ------------------------------------------------------------------

VALID: dict[str, Any] = {
    "question": "Which umbrella do you take when it rains?",
    "options": OPTIONS,
    "answer": "A",
    "distractor": "B",
}

BAD_CREATES: list[tuple[str, dict[str, Any], str]] = [
    ("missing question", {"question": ""}, "question: required"),
    ("four options", {"options": OPTIONS[:4]}, "options: write exactly 5 options (got 4)"),
    ("an empty option", {"options": [*OPTIONS[:2], "  ", *OPTIONS[3:]]}, "options: option C is empty"),
    ("duplicate options", {"options": [*OPTIONS[:4], "AN  Umbrella"]}, "options: two options say the same thing"),
    ("no answer", {"answer": ""}, "answer: required (one of A, B, C, D, E)"),
    ("answer outside the labels", {"answer": "F"}, "answer: 'F' is not one of A, B, C, D, E"),
    ("answer is the distractor", {"distractor": "A"}, "distractor: the hard distractor is another option"),
    ("concept absent", {"question": "What do you take when it rains?"}, "the concept 'umbrella' does not appear"),
    ("concept_form not in question", {"concept_form": "umbrellas"}, "concept_form: 'umbrellas' does not appear"),
    (
        "concept_form not a variant",
        {"question": "What keeps the rain off?", "concept_form": "rain"},
        "concept_form: 'rain' is not a form of the concept 'umbrella'",
    ),
]


@pytest.mark.parametrize(("case", "change", "problem"), BAD_CREATES, ids=[case[0] for case in BAD_CREATES])
def test_an_invalid_create_is_422_with_its_problem(
    client: TestClient, store: AnnotationStore, case: str, change: dict[str, Any], problem: str
) -> None:
    store.queue([create_task(slot(1))])
    token = store.invite("ana")
    assignment = lease(client, token, "create")["assignment_id"]
    response = client.post(f"/api/create/{assignment}", headers=bearer(token), json={**VALID, **change})
    assert response.status_code == 422, case
    problems = response.json()["problems"]
    assert any(problem in p for p in problems), problems
    assert store.judgements("create") == {}


def test_create_lists_every_problem_at_once_then_stores_a_valid_draft(
    client: TestClient, store: AnnotationStore
) -> None:
    store.queue([create_task(slot(1))])
    token = store.invite("ana")
    shown = lease(client, token, "create")
    assert shown["item"] == {
        "id": "w1",
        "lang": "en",
        "category": "weather",
        "concept": "umbrella",
        "options": 5,
        "labels": list("ABCDE"),
    }
    assignment = shown["assignment_id"]
    everything_wrong = {
        "question": "What do you take when it rains?",
        "options": ["a coat", "", "A coat", "boots"],
        "answer": "B",
        "distractor": "B",
    }
    response = client.post(f"/api/create/{assignment}", headers=bearer(token), json=everything_wrong)
    assert response.status_code == 422
    problems = response.json()["problems"]
    for expected in (
        "options: write exactly 5 options (got 4)",
        "options: option B is empty",
        "options: two options say the same thing",
        "distractor: the hard distractor is another option",
        "question: the concept 'umbrella' does not appear",
    ):
        assert any(expected in p for p in problems), (expected, problems)
    # a question with no text is reported as missing (the concept is not looked for in nothing)
    empty = client.post(f"/api/create/{assignment}", headers=bearer(token), json={**VALID, "question": "  "})
    assert empty.json()["problems"] == ["question: required"]

    body = {**VALID, "comment": "the kite is the odd one out"}
    assert client.post(f"/api/create/{assignment}", headers=bearer(token), json=body).status_code == 201
    assert client.post(f"/api/create/{assignment}", headers=bearer(token), json=body).status_code == 200
    (judgement,) = store.judgements("create")["w1"]
    assert isinstance(judgement, CreateJudgement) and judgement.annotator == "ana"
    assert judgement.comment == "the kite is the odd one out"
    assert judgement.draft.question == VALID["question"]
    assert [(c.label, c.text) for c in judgement.draft.choices] == list(zip("ABCDE", OPTIONS, strict=True))
    assert (judgement.draft.answer, judgement.draft.distractor, judgement.draft.concept_form) == ("A", "B", None)


def test_create_honours_the_slots_number_of_options(client: TestClient, store: AnnotationStore) -> None:
    store.queue([create_task(slot(1, options=3))])
    token = store.invite("ana")
    shown = lease(client, token, "create")
    assert shown["item"]["labels"] == ["A", "B", "C"]
    assignment = shown["assignment_id"]
    five = client.post(f"/api/create/{assignment}", headers=bearer(token), json=VALID)
    assert "options: write exactly 3 options (got 5)" in five.json()["problems"]
    three = {**VALID, "options": OPTIONS[:3], "answer": "C", "distractor": "A"}
    assert client.post(f"/api/create/{assignment}", headers=bearer(token), json=three).status_code == 201


def test_an_indonesian_concept_variant_passes_through_concept_form(client: TestClient, store: AnnotationStore) -> None:
    question = "Tempat apa yang biasanya dikunjungi keluarga saat Lebaran?"
    # the lenient matcher of culture-adapt: the passive dikunjungi and the noun kunjungan share the stem of
    # berkunjung (Sastrawi); an unrelated word does not
    assert concept_appears("dikunjungi", "berkunjung", "id") and concept_appears("kunjungan", "berkunjung", "id")
    assert not concept_appears("keluarga", "berkunjung", "id")
    store.queue(
        [create_task(slot(1, concept="berkunjung", lang="id")), create_task(slot(2, concept="kunjung", lang="id"))]
    )
    token = store.invite("ana")
    options = ["rumah nenek", "kantor pos", "pasar malam", "bengkel", "bandara"]
    body = {"question": question, "options": options, "answer": "A", "distractor": "C"}
    first = lease(client, token, "create")
    assert first["item"]["concept"] == "berkunjung"
    url = f"/api/create/{first['assignment_id']}"
    without = client.post(url, headers=bearer(token), json=body)
    assert without.status_code == 422 and "concept 'berkunjung' does not appear" in without.json()["problems"][0]
    unrelated = client.post(url, headers=bearer(token), json={**body, "concept_form": "keluarga"})
    assert unrelated.json()["problems"] == ["concept_form: 'keluarga' is not a form of the concept 'berkunjung'"]
    assert client.post(url, headers=bearer(token), json={**body, "concept_form": " dikunjungi "}).status_code == 201
    (judgement,) = store.judgements("create")["w1"]
    assert judgement.draft.concept_form == "dikunjungi"
    # the concept inside a longer word of the question needs no concept_form (folded substring)
    second = lease(client, token, "create")
    assert second["item"]["concept"] == "kunjung"
    affixed = {**body, "question": "Tempat apa yang biasanya dikunjungi keluarga?"}
    assert client.post(f"/api/create/{second['assignment_id']}", headers=bearer(token), json=affixed).status_code == 201


# -- who is offered what ---------------------------------------------------------------------


def test_a_concept_slot_is_offered_to_its_creator_only(client: TestClient, store: AnnotationStore) -> None:
    store.queue([create_task(slot(1))])
    ana, bo = store.invite("ana"), store.invite("bo")
    assert client.post("/api/create/next", headers=bearer(bo)).status_code == 204
    assert "task-create" not in client.get("/", headers=bearer(bo)).text
    assert lease(client, ana, "create")["item"]["id"] == "w1"
    assert client.get("/t/create", headers=bearer(bo)).text.count("Nothing left for you in create") == 1


def test_qc_is_never_offered_to_the_creator_and_needs_a_comment_to_send_back(
    client: TestClient, store: AnnotationStore
) -> None:
    store.queue([QueuedTask(type="qc", input=draft_item(1), group="human-gen", creator="ana")])
    store.queue([QueuedTask(type="qc", input=draft_item(2), group="human-gen", creator="ana")])
    ana, bo = store.invite("ana"), store.invite("bo")
    assert client.post("/api/qc/next", headers=bearer(ana)).status_code == 204
    shown = lease(client, bo, "qc")
    item = shown["item"]
    assert item["id"] == "w1@0" and item["question"] == "What do you open over your head in the rain: an umbrella?"
    assert (item["answer"], item["distractor"], item["verdicts"]) == ("A", "B", ["complete", "needs_revision"])
    assert item["history"] == [{"status": "submitted", "round": 0, "comment": None, "by": "ana"}]
    url = f"/api/qc/{shown['assignment_id']}"
    bare = client.post(url, headers=bearer(bo), json={"verdict": "needs_revision"})
    assert bare.status_code == 422
    assert bare.json()["problems"] == ["comment: say what to change when the item goes back to its creator"]
    blank = client.post(url, headers=bearer(bo), json={"verdict": "needs_revision", "comment": "   "})
    assert blank.status_code == 422
    unknown = client.post(url, headers=bearer(bo), json={"verdict": "fine"})
    assert "verdict: 'fine' is not one of complete, needs_revision" in unknown.json()["problems"]
    back = {"verdict": "needs_revision", "comment": "B is right too when it drizzles"}
    assert client.post(url, headers=bearer(bo), json=back).status_code == 201
    second = lease(client, bo, "qc")
    done = client.post(f"/api/qc/{second['assignment_id']}", headers=bearer(bo), json={"verdict": "complete"})
    assert done.status_code == 201
    assert client.post("/api/qc/next", headers=bearer(ana)).status_code == 204
    verdicts = {
        item_id: [(j.annotator, j.verdict, j.comment) for j in js] for item_id, js in store.judgements("qc").items()
    }
    assert verdicts == {
        "w1@0": [("bo", "needs_revision", "B is right too when it drizzles")],
        "w2@0": [("bo", "complete", None)],
    }
    assert all(isinstance(j, QCJudgement) for js in store.judgements("qc").values() for j in js)


# -- the HTML forms ------------------------------------------------------------------------------


def test_the_create_form_comes_back_422_with_every_typed_value_then_stores(
    client: TestClient, store: AnnotationStore
) -> None:
    store.queue([create_task(slot(1))])
    login(client, store.invite("ana"))
    page = client.get("/t/create")
    assert page.status_code == 200
    assert (
        '<dd id="category" dir="auto">weather</dd>' in page.text
        and '<dd id="concept" dir="auto">umbrella</dd>' in page.text
    )
    assert page.text.count('<input type="text" id="option-') == 5 and "Shift+" in page.text
    typed = ["a coat & hat", "boots", HOSTILE, "a scarf", "a kite"]
    fields: dict[str, Any] = {
        **form_of(page.text),
        "question": "What do you take <when> it rains?",
        "option": typed,
        "answer": "A",
        "distractor": "C",
        "concept_form": "parasol",
        "comment": "first try",
    }
    response = client.post("/t/create", data=fields)
    assert response.status_code == 422
    assert 'id="problems"' in response.text and "concept_form: &#39;parasol&#39; does not appear" in response.text
    assert ">What do you take &lt;when&gt; it rains?</textarea>" in response.text
    for label, text in zip("ABCDE", typed, strict=True):
        option = re.search(rf'id="option-{label}"[^>]*value="([^"]*)"', response.text)
        assert option is not None and html.unescape(option.group(1)) == text
    assert re.search(r'name="answer" value="A" required checked', response.text)
    assert re.search(r'name="distractor" value="C" required checked', response.text)
    assert 'value="parasol"' in response.text and ">first try</textarea>" in response.text
    assert HOSTILE not in response.text and "&lt;script&gt;" in response.text

    fixed = {**fields, "question": "Which umbrella do you take when it rains?", "concept_form": ""}
    done = client.post("/t/create", data=fixed, follow_redirects=False)
    assert done.status_code == 303 and done.headers["location"] == "/t/create"
    (judgement,) = store.judgements("create")["w1"]
    assert [c.text for c in judgement.draft.choices] == typed and judgement.draft.distractor == "C"
    assert judgement.draft.concept_form is None and judgement.comment == "first try"


def test_the_qc_form_marks_the_answer_and_distractor_and_keeps_the_verdict(
    client: TestClient, store: AnnotationStore
) -> None:
    history = [
        QCEvent(status="submitted", by="ana", round=0),
        QCEvent(status="needs_revision", by="bo", round=1, comment="make B less right"),
        QCEvent(status="revised", by="ana", round=1, comment="B is now a scarf"),
    ]
    store.queue([QueuedTask(type="qc", input=draft_item(1, rnd=1, history=history), creator="ana")])
    login(client, store.invite("cy"))
    page = client.get("/t/qc")
    assert page.status_code == 200
    assert re.search(r'class="marked">\s*<strong>A\.</strong> an umbrella ✓', page.text)
    assert re.search(r'class="distractor">\s*<strong>B\.</strong> a raincoat ≈', page.text)
    assert "make B less right" in page.text and "B is now a scarf" in page.text and 'id="history"' in page.text
    assert '<details id="comment-box">' in page.text  # closed until a revision is asked for
    fields = {**form_of(page.text), "verdict": "needs_revision"}
    response = client.post("/t/qc", data=fields)
    assert response.status_code == 422 and "comment: say what to change" in response.text
    assert re.search(r'value="needs_revision" required checked', response.text)
    assert '<details id="comment-box" open>' in response.text
    done = client.post("/t/qc", data={**fields, "comment": "still two right answers"}, follow_redirects=False)
    assert done.status_code == 303
    assert [(j.verdict, j.comment) for j in store.judgements("qc")["w1@1"]] == [
        ("needs_revision", "still two right answers")
    ]


def test_the_qc_page_shows_the_writers_comment_read_only_and_labelled(
    client: TestClient, store: AnnotationStore
) -> None:
    said = [QCEvent(status="submitted", by="ana", round=0, comment="from my grandmother's <recipe>")]
    store.queue([QueuedTask(type="qc", input=draft_item(1, rnd=1, history=said), creator="ana")])
    store.queue([QueuedTask(type="qc", input=draft_item(2, rnd=1), creator="ana")])
    token = store.invite("cy")
    login(client, token)
    page = client.get("/t/qc").text
    block = page.split('id="creator-comment"', 1)[1].split("</section>", 1)[0]
    assert "The writer's comment" in block and "from my grandmother&#39;s &lt;recipe&gt;" in block
    assert "<textarea" not in block and "<input" not in block  # shown, not editable
    assert lease(client, token, "qc")["item"]["creator_comment"] == "from my grandmother's <recipe>"
    client.post("/t/qc", data={**form_of(page), "verdict": "complete"})
    assert 'id="creator-comment"' not in client.get("/t/qc").text  # the next one's writer said nothing


def test_the_revise_form_shows_the_feedback_and_starts_from_the_draft(
    client: TestClient, store: AnnotationStore
) -> None:
    history = [
        QCEvent(status="submitted", by="ana", round=0),
        QCEvent(status="needs_revision", by="bo", round=1, comment="B is right too: make it <less> right"),
    ]
    written = draft().model_copy(update={"concept_form": None})
    store.queue(
        [QueuedTask(type="revise", input=draft_item(1, rnd=1, written=written, history=history), eligible=("ana",))]
    )
    token = store.invite("ana")
    assert client.post("/api/revise/next", headers=bearer(store.invite("bo"))).status_code == 204
    login(client, token)
    page = client.get("/t/revise")
    assert page.status_code == 200 and "Revise your question" in page.text
    assert '<p class="said" id="feedback" dir="auto">B is right too: make it &lt;less&gt; right</p>' in page.text
    assert ">What do you open over your head in the rain: an umbrella?</textarea>" in page.text
    assert re.search(r'id="option-B"[^>]*value="a raincoat"', page.text)
    assert re.search(r'name="answer" value="A" required checked', page.text)
    assert re.search(r'name="distractor" value="B" required checked', page.text)
    options = ["an umbrella", "a scarf", "sunglasses", "a raincoat", "a kite"]
    fields = {
        **form_of(page.text),
        "question": "What do you open over your head in the rain: an umbrella?",
        "option": options,
        "answer": "A",
        "distractor": "D",
        "comment": "B is now a scarf",
    }
    bad = client.post("/t/revise", data={**fields, "distractor": "A"})
    assert bad.status_code == 422 and "the hard distractor is another option" in bad.text
    assert re.search(r'id="option-B"[^>]*value="a scarf"', bad.text)  # what was typed, not the draft
    assert client.post("/t/revise", data=fields, follow_redirects=False).status_code == 303
    (judgement,) = store.judgements("revise")["w1@1"]
    assert isinstance(judgement, ReviseJudgement) and judgement.comment == "B is now a scarf"
    assert [c.text for c in judgement.draft.choices] == options and judgement.draft.distractor == "D"


@pytest.mark.parametrize("task", ["create", "qc", "revise"])
def test_hostile_text_is_escaped(client: TestClient, store: AnnotationStore, task: str) -> None:
    if task == "create":
        queued = create_task(slot(1, concept=HOSTILE))
    else:
        history = [QCEvent(status="needs_revision", by="bo", round=1, comment=HOSTILE)]
        item = draft_item(1, rnd=1, written=draft(f"{HOSTILE} umbrella?", [HOSTILE, *OPTIONS[1:]]), history=history)
        queued = QueuedTask(type=task, input=item.model_copy(update={"category": HOSTILE}), eligible=("ana",))
    store.queue([queued])
    page = client.get(f"/t/{task}", headers=bearer(store.invite("ana")))
    assert page.status_code == 200
    assert HOSTILE not in page.text and "&lt;img src=x onerror=" in page.text
    assert "<script>window.__pwned" not in page.text
