"""Annotator quality in the app: gold accuracy and the bar on the admin page, adjudication by page and API."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

pytest.importorskip("starlette")
pytest.importorskip("httpx")

from starlette.testclient import TestClient

from senseforge.annotate.app import create_app
from senseforge.annotate.store import AnnotationStore
from senseforge.data.schema import MCItem
from senseforge.errors import ConfigError
from senseforge.pipelines.quality import set_quality

HOSTILE = '<script>window.__pwned = 1</script>"&'


def item(n: int, question: str | None = None) -> MCItem:
    return MCItem(
        id=f"q{n}",
        lang="en",
        question=question or f"Where is thing {n}?",
        choices=[{"label": x, "text": f"place {x.lower()}{n}"} for x in "ABCDE"],
        answer="A",
    )


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def store(db_url: str) -> Iterator[AnnotationStore]:
    opened = AnnotationStore(db_url)
    yield opened
    opened.close()


@pytest.fixture
def client(db_url: str, store: AnnotationStore) -> Iterator[TestClient]:
    with TestClient(create_app(db_url)) as test_client:
        yield test_client


def verify(client: TestClient, token: str, accept: bool) -> str | None:
    lease = client.post("/api/verify/next", headers=bearer(token))
    if lease.status_code == 204:
        return None
    body = lease.json()
    client.post(f"/api/verify/{body['assignment_id']}", headers=bearer(token), json={"accept": accept})
    return str(body["item"]["id"])


def test_admin_page_shows_gold_accuracy_and_who_is_below_the_bar(client: TestClient, store: AnnotationStore) -> None:
    store.add_tasks("verify", [item(n) for n in range(1, 7)], k=1, group="g")
    store.add_gold("verify", [(item(90 + n), {"accept": "yes"}) for n in range(3)])
    set_quality(store.runs, task_type="verify", rate=0.5, min_accuracy=0.6, min_gold=1)
    ana, ben, boss = store.invite("ana"), store.invite("ben"), store.invite("boss", "admin")
    seen = [verify(client, ben, False) for _ in range(2)]  # a real item, then a gold one (half are gold), wrong
    assert seen[1] is not None and seen[1].startswith("q9")
    assert client.post("/api/verify/next", headers=bearer(ben)).status_code == 204  # below the bar: no more
    ana_seen = []
    while (got := verify(client, ana, True)) is not None:
        ana_seen.append(got)
    assert seen[0] in ana_seen  # ben's slot went back to the pool
    assert sum(i.startswith("q9") for i in ana_seen) == 3 and len(set(ana_seen)) == len(ana_seen)
    page = client.get("/admin", headers=bearer(boss)).text
    assert re.search(r"<td>ben</td><td>verify</td><td class=\"n\">1</td>\s*<td class=\"n\">0</td>", page)
    assert "<strong>excluded</strong>: below 0.60" in page
    assert client.get("/admin", headers=bearer(ana)).status_code == 403
    with pytest.raises(ConfigError, match="cast no vote"):
        from senseforge.data.schema import ConceptSlot

        slot = ConceptSlot(id="s1", lang="id", category="culinary", concept="rendang", creator="ana")
        store.add_gold("create", [(slot, {"question": "Apa rendang?", "options": list("abcde"), "answer": "A",
                                          "distractor": "B"})])  # fmt: skip


def test_an_admin_settles_a_split_by_page_and_by_api(client: TestClient, store: AnnotationStore) -> None:
    store.add_tasks("verify", [item(1, HOSTILE), item(2)], k=2, group="g")
    ana, ben, boss = store.invite("ana"), store.invite("ben"), store.invite("boss", "admin")
    for token, accepts in ((ana, (True, True)), (ben, (False, False))):
        for accept in accepts:
            verify(client, token, accept)
    page = client.get("/admin", headers=bearer(boss)).text
    assert 'href="/admin/adjudicate/verify">verify: 2 items people split on' in page
    listed = client.get("/admin/adjudicate/verify", headers=bearer(boss))
    assert listed.status_code == 200 and HOSTILE not in listed.text and "&lt;script&gt;" in listed.text
    assert client.get("/admin/adjudicate/verify", headers=bearer(ana)).status_code == 403
    csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', listed.text)
    assert csrf is not None
    client.cookies.set("senseforge_session", boss)
    ruled = client.post(
        "/admin/adjudicate/verify",
        data={"csrf": csrf.group(1), "item_id": "q1", "side": "ben", "comment": "not the only right one"},
        follow_redirects=False,
    )
    assert ruled.status_code == 303
    client.cookies.clear()
    (q1,) = [j for j in store.judgements("verify")["q1"] if j.adjudication]
    assert (q1.annotator, q1.accept, q1.comment) == ("adjudicator:boss", False, "not the only right one")
    bad = client.post("/api/adjudicate/verify/q2", headers=bearer(boss), json={"accept": "maybe"})
    assert bad.status_code == 422 and bad.json()["problems"][0].startswith("accept:")
    nobody = client.post("/api/adjudicate/verify/q2", headers=bearer(boss), json={"side": "cy"})
    assert nobody.status_code == 422
    good = client.post("/api/adjudicate/verify/q2", headers=bearer(boss), json={"accept": True})
    assert good.status_code == 201 and good.json()["judgement"]["adjudication"] is True
    assert store.splits("verify") == []
    missing = client.post("/api/adjudicate/verify/q9", headers=bearer(boss), json={"accept": True})
    assert missing.status_code == 404
