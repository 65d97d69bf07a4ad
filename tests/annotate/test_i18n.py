"""The app in its reader's language: invited with --lang, switched on the page, declared in <html lang>."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("starlette")
pytest.importorskip("babel")

from starlette.testclient import TestClient
from typer.testing import CliRunner

from senseforge.annotate import i18n
from senseforge.annotate.app import create_app, csrf_token
from senseforge.annotate.store import AnnotationStore
from senseforge.cli.annotate import app as annotate_cli
from senseforge.data.schema import MCItem
from senseforge.errors import ConfigError
from senseforge.pipelines.runstore import sqlite_url


def item(n: int) -> MCItem:
    return MCItem(
        id=f"q{n}",
        lang="en",
        question=f"Where would you keep item number {n}?",
        choices=[{"label": label, "text": f"place {label.lower()}{n}"} for label in "ABC"],
        answer="B",
    )


def invite(run_dir: Path, name: str, *extra: str) -> str:
    """Invite ``name`` through the CLI; their token."""
    result = CliRunner().invoke(annotate_cli, ["invite", name, str(run_dir), *extra])
    assert result.exit_code == 0, result.output
    return result.stdout.strip().splitlines()[-1].split("token=", 1)[1]


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    store = AnnotationStore(sqlite_url(tmp_path / "run.db"))
    try:
        store.add_tasks("verify", [item(1), item(2)], k=2, group="g")
    finally:
        store.close()
    return tmp_path


@pytest.fixture
def client(run_dir: Path) -> Iterator[TestClient]:
    with TestClient(create_app(sqlite_url(run_dir / "run.db"))) as test_client:
        yield test_client


def page_lang(html: str) -> str:
    found = re.search(r'<html lang="([^"]+)">', html)
    assert found, html[:200]
    return found.group(1)


def test_an_annotator_invited_with_lang_id_gets_indonesian_pages_and_items_keep_their_language(
    run_dir: Path, client: TestClient
) -> None:
    token = invite(run_dir, "sari", "--lang", "id")
    client.get(f"/login?token={token}")
    home = client.get("/")
    assert page_lang(home.text) == "id"
    assert "Halo, sari" in home.text and "Hello" not in home.text
    task = client.get("/t/verify")
    assert task.status_code == 200
    assert page_lang(task.text) == "id"
    assert "Verifikasi" in task.text and ">Kirim <kbd>Enter</kbd>" in task.text and "Pintasan keyboard" in task.text
    question = r'<p class="question" lang="en" dir="auto" id="question">Where would you keep'
    assert re.search(question, task.text)  # the item keeps its words …
    assert '<ol class="choices" lang="en">' in task.text  # … and keep their language
    assert '<span class="muted" lang="id">(jawaban yang ditandai)</span>' in task.text  # the page's words in it: id
    assert re.search(r'<label class="option"><input type="radio"[^>]*value="yes"[^>]*>\s*Ya <kbd>', task.text)


def test_the_language_switch_on_the_page_is_remembered_with_the_person(run_dir: Path, client: TestClient) -> None:
    token = invite(run_dir, "sari", "--lang", "id")
    client.get(f"/login?token={token}")
    page = client.get("/t/verify").text
    assert re.search(r'<button type="submit" class="plain" name="lang" value="en" lang="en">English</button>', page)
    switched = client.post(
        "/lang", data={"csrf": csrf_token(token), "lang": "en", "back": "/t/verify"}, follow_redirects=False
    )
    assert switched.status_code == 303 and switched.headers["location"] == "/t/verify"
    again = client.get("/t/verify").text
    assert page_lang(again) == "en" and "Verify" in again and "Kirim" not in again
    assert 'value="id" lang="id">Indonesia</button>' in again  # the way back, named in its own language
    store = AnnotationStore(sqlite_url(run_dir / "run.db"))
    try:
        who = store.who(token)
        assert who is not None and who.lang == "en"
    finally:
        store.close()
    # a re-invite without --lang keeps the language; with one it sets it
    token = invite(run_dir, "sari")
    client.get(f"/login?token={token}")
    assert page_lang(client.get("/").text) == "en"
    token = invite(run_dir, "sari", "--lang", "id")
    client.get(f"/login?token={token}")
    assert page_lang(client.get("/").text) == "id"


def test_the_switch_refuses_an_unknown_language_a_forged_form_and_a_way_out_of_the_app(
    run_dir: Path, client: TestClient
) -> None:
    token = invite(run_dir, "sari", "--lang", "id")
    client.get(f"/login?token={token}")
    unknown = client.post("/lang", data={"csrf": csrf_token(token), "lang": "xx", "back": "/"})
    assert unknown.status_code == 422
    assert page_lang(unknown.text) == "id"
    assert "tidak ada bahasa antarmuka &#39;xx&#39;: yang tersedia en, id" in unknown.text
    assert client.post("/lang", data={"csrf": "wrong", "lang": "en"}).status_code == 403
    for away in ("https://elsewhere.example/", "//elsewhere.example/", "/\\elsewhere.example"):
        moved = client.post(
            "/lang", data={"csrf": csrf_token(token), "lang": "en", "back": away}, follow_redirects=False
        )
        assert moved.status_code == 303 and moved.headers["location"] == "/", away


def test_errors_read_in_the_readers_language_on_pages_and_stay_english_over_json(
    run_dir: Path, client: TestClient
) -> None:
    token = invite(run_dir, "sari", "--lang", "id")
    client.get(f"/login?token={token}")
    page = client.get("/t/nosuch")
    assert page.status_code == 404 and page_lang(page.text) == "id"
    assert "Tidak ditemukan" in page.text and "tidak ada jenis tugas &#39;nosuch&#39;" in page.text
    api = client.post("/api/nosuch/next", headers={"Authorization": f"Bearer {token}"})
    assert api.status_code == 404 and api.json() == {"error": "no task type 'nosuch'"}


def test_without_a_stored_language_the_browsers_first_known_one_is_used(run_dir: Path, client: TestClient) -> None:
    token = invite(run_dir, "ben")
    client.get(f"/login?token={token}")
    assert page_lang(client.get("/", headers={"Accept-Language": "fr-FR, id;q=0.8, en;q=0.5"}).text) == "id"
    assert page_lang(client.get("/", headers={"Accept-Language": "fr-FR"}).text) == "en"
    assert page_lang(client.get("/").text) == "en"
    signed_out = TestClient(client.app)
    assert page_lang(signed_out.get("/", headers={"Accept-Language": "id-ID"}).text) == "id"  # 401, in Indonesian
    assert "Silakan masuk" in signed_out.get("/", headers={"Accept-Language": "id-ID"}).text


def test_invite_with_an_unknown_language_lists_the_available_ones(run_dir: Path) -> None:
    result = CliRunner().invoke(annotate_cli, ["invite", "ana", str(run_dir), "--lang", "su"])
    assert result.exit_code != 0
    assert isinstance(result.exception, ConfigError)
    assert "no interface language 'su': available are en, id" in str(result.exception)
    store = AnnotationStore(sqlite_url(run_dir / "run.db"))
    try:
        assert store.annotator_names() == []  # refused before anyone was made
    finally:
        store.close()


def test_a_language_is_added_by_dropping_in_its_catalogue(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for lang, said in (("id", "Kirim"), ("su", "Kintun")):
        po = tmp_path / lang / "LC_MESSAGES" / "messages.po"
        po.parent.mkdir(parents=True)
        po.write_text(f'msgid ""\nmsgstr ""\n"Language: {lang}\\n"\n\nmsgid "Submit"\nmsgstr "{said}"\n', "utf-8")
    (tmp_path / "not a language" / "LC_MESSAGES").mkdir(parents=True)
    monkeypatch.setattr(i18n, "LOCALE_DIR", tmp_path)
    i18n.translations.cache_clear()
    try:
        assert i18n.languages() == ("en", "id", "su")
        assert i18n.check_language("su") == "su"
        assert i18n.translate(i18n.translations("su"), "Submit") == "Kintun"
        assert i18n.translate(i18n.translations("su"), "Not in it") == "Not in it"
        assert i18n.language_name("su") == "Basa Sunda"
    finally:
        i18n.translations.cache_clear()


def test_a_said_message_is_english_as_a_string_and_translated_with_its_values() -> None:
    said = i18n.Said(i18n.N_("no task type %(name)s"), name="'x'")
    assert said == "no task type 'x'" and said.msgid == "no task type %(name)s"
    assert i18n.translate(i18n.translations("id"), said) == "tidak ada jenis tugas 'x'"
    assert i18n.translate(i18n.translations("en"), said) == "no task type 'x'"
    assert i18n.html_lang("pt_BR") == "pt-BR"
    with pytest.raises(ConfigError, match="available are en, id"):
        i18n.translations("xx")


def test_a_rejected_form_lists_its_problems_in_the_readers_language(run_dir: Path, client: TestClient) -> None:
    token = invite(run_dir, "sari", "--lang", "id")
    client.get(f"/login?token={token}")
    page = client.get("/t/verify").text
    assignment = re.search(r'name="assignment_id" value="(\d+)"', page)
    assert assignment is not None
    rejected = client.post("/t/verify", data={"csrf": csrf_token(token), "assignment_id": assignment.group(1)})
    assert rejected.status_code == 422
    assert "Mohon perbaiki:" in rejected.text and "<li>accept: wajib diisi (ya atau tidak)</li>" in rejected.text
    api = client.post(f"/api/verify/{assignment.group(1)}", json={}, headers={"Authorization": f"Bearer {token}"})
    assert api.status_code == 422 and "accept: required (yes or no)" in api.json()["problems"]
