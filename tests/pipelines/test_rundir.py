"""The run directory: a resume is the run it continues, its stores from its manifest (issue 44)."""

from __future__ import annotations

import shlex
import sqlite3
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from senseforge.errors import ConfigError
from senseforge.pipelines.culture_gen.recipe import CULTURE_GEN, CultureGenConfig
from senseforge.pipelines.rundir import (
    DEFAULT_RUN_STORE,
    read_manifest,
    recorded_url,
    resume_command,
    resume_note,
    resumed_stores,
    store_url_of,
)
from senseforge.pipelines.runner import build
from senseforge.pipelines.runstore import RunStore, sqlite_url
from senseforge.store.db import Store

PG = "postgresql+psycopg://ana:s3cret@db.example:5432/senseforge"
PG_SHOWN = "postgresql+psycopg://ana:***@db.example:5432/senseforge"
CONFIG = CultureGenConfig(langs=("id",), model="scripted/culture-gen-author")


def _ledger_rows(url: str) -> int:
    store = Store(url)
    try:
        return int(store.ledger_summary(None)["calls"])
    finally:
        store.close()


def test_a_manifest_keeps_a_store_without_its_password_and_a_sqlite_file_by_its_full_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert recorded_url(PG) == PG_SHOWN
    monkeypatch.chdir(tmp_path)
    assert recorded_url("sqlite:///calls.db") == f"sqlite:///{tmp_path.resolve() / 'calls.db'}"


def test_a_resume_takes_both_stores_from_the_manifest_and_refuses_others_in_one_line(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / DEFAULT_RUN_STORE).touch()
    (tmp_path / "calls.db").touch()
    manifest = {"store_url": f"sqlite:///{tmp_path / 'calls.db'}", "run_store_url": DEFAULT_RUN_STORE}
    ledger, run_store = resumed_stores(run, manifest, store=None, run_store=None)
    assert ledger == manifest["store_url"] and run_store == sqlite_url(run / DEFAULT_RUN_STORE)
    same = resumed_stores(run, manifest, store=f"sqlite:///{tmp_path}/./calls.db", run_store=None)  # another spelling
    assert same[0] == f"sqlite:///{tmp_path}/./calls.db"

    with pytest.raises(ConfigError) as other:
        resumed_stores(run, manifest, store=f"sqlite:///{tmp_path / 'other.db'}", run_store=None)
    message = str(other.value)
    assert "\n" not in message and manifest["store_url"] in message and str(tmp_path / "other.db") in message
    with pytest.raises(ConfigError, match=r"this run.s run store is sqlite:///.*run.db, not sqlite:///.*elsewhere.db"):
        resumed_stores(run, manifest, store=None, run_store=f"sqlite:///{tmp_path / 'elsewhere.db'}")


def test_a_store_file_that_is_gone_is_asked_for_not_made_anew_empty(tmp_path: Path) -> None:
    """A run moved from another machine: its SQLite store is not where the manifest says; the resume asks where
    it is now and takes the one given."""
    run = tmp_path / "run"
    run.mkdir()
    (run / DEFAULT_RUN_STORE).touch()
    manifest = {"store_url": "sqlite:////nowhere/home/senseforge.db", "run_store_url": DEFAULT_RUN_STORE}
    with pytest.raises(
        ConfigError, match=r"store .* sqlite:////nowhere/home/senseforge.db is no longer there; give --store"
    ):
        resumed_stores(run, manifest, store=None, run_store=None)
    moved = f"sqlite:///{tmp_path / 'moved.db'}"
    assert resumed_stores(run, manifest, store=moved, run_store=None)[0] == moved
    assert not Path("/nowhere").exists()


def test_a_store_whose_password_the_manifest_hid_is_asked_for_never_replaced_by_the_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = tmp_path / "run"
    manifest = {"store_url": PG_SHOWN, "run_store_url": PG_SHOWN}
    with pytest.raises(
        ConfigError, match=r"run store is .*:\*\*\*@.* no password: give the URL again with --run-store"
    ):
        resumed_stores(run, manifest, store=None, run_store=None)
    with pytest.raises(ConfigError, match=r"--store URL \(or set SENSEFORGE_STORE_URL to it\)"):
        resumed_stores(run, manifest, store=None, run_store=PG)
    assert resumed_stores(run, manifest, store=PG, run_store=PG) == (PG, PG)
    monkeypatch.setenv("SENSEFORGE_STORE_URL", PG)  # the environment may give the password of the same store
    assert resumed_stores(run, manifest, store=None, run_store=PG) == (PG, PG)
    monkeypatch.setenv("SENSEFORGE_STORE_URL", PG.replace("db.example", "elsewhere"))  # not of another one
    with pytest.raises(ConfigError, match="keeps no password"):
        resumed_stores(run, manifest, store=None, run_store=PG)

    command = resume_command("mcsqa", run, manifest)
    assert shlex.split(command)[-4:] == [
        "--store",
        PG_SHOWN.replace("***", "PASSWORD"),
        "--run-store",
        PG_SHOWN.replace("***", "PASSWORD"),
    ]
    assert "password where PASSWORD stands" in resume_note(manifest)
    with pytest.raises(ConfigError, match="give its full URL with --run-store"):
        store_url_of(tmp_path, None, manifest, recorded=True)
    no_password = "postgresql+psycopg://ana@db.example/sf"  # what a manifest keeps whole, status opens
    assert store_url_of(tmp_path, None, {"run_store_url": no_password}, recorded=True) == no_password


def test_a_resume_command_quotes_a_folder_and_adds_nothing_the_manifest_keeps(tmp_path: Path) -> None:
    run = tmp_path / "my run"
    manifest = {"store_url": f"sqlite:///{tmp_path / 'calls.db'}", "run_store_url": DEFAULT_RUN_STORE}
    command = resume_command("culture-gen", run, manifest)
    assert shlex.split(command) == ["senseforge", "build", "culture-gen", "--out", str(run), "--resume"]
    assert resume_note(manifest) == ""


def test_build_resumed_without_stores_writes_to_the_ones_it_started_with(tmp_path: Path) -> None:
    calls, run_db = f"sqlite:///{tmp_path / 'calls.db'}", f"sqlite:///{tmp_path / 'elsewhere' / 'run.db'}"
    run_dir = tmp_path / "run"
    assert build(CULTURE_GEN, CONFIG, run_dir, store=Store(calls), run_store_url=run_db).state == "done"
    manifest = read_manifest(run_dir)
    assert manifest is not None and manifest["store_url"] == calls and manifest["run_store_url"] == run_db
    before = _ledger_rows(calls)
    source = CULTURE_GEN.source(CONFIG).name
    with sqlite3.connect(tmp_path / "elsewhere" / "run.db") as conn:  # as if it had stopped after its source
        conn.execute("delete from stage_results where stage != ?", (source,))

    again = build(CULTURE_GEN, CONFIG, run_dir, resume=True)  # no store, no run store: the manifest's
    assert again.state == "done" and _ledger_rows(calls) > before
    assert not (run_dir / DEFAULT_RUN_STORE).exists()
    assert _ledger_rows(Store().url) == 0  # the default store got nothing
    store = RunStore(run_db)
    try:
        assert store.meta("state") == "done"
    finally:
        store.close()

    with pytest.raises(ConfigError, match=r"this run.s store .* is sqlite:///.*calls.db, not sqlite:///.*other.db"):
        build(CULTURE_GEN, CONFIG, run_dir, resume=True, store=Store(f"sqlite:///{tmp_path / 'other.db'}"))


@pytest.mark.postgres
def test_a_postgresql_store_with_a_password_resumes_only_with_it_given_again(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server trusts any password: the one in the URL only has to be kept out of the manifest and asked for."""
    with_password = make_url(pg_url).set(password="s3cret").render_as_string(hide_password=False)
    run_dir = tmp_path / "run"
    assert build(CULTURE_GEN, CONFIG, run_dir, store=Store(with_password)).state == "done"
    manifest = read_manifest(run_dir)
    assert manifest is not None and manifest["store_url"] == make_url(with_password).render_as_string()
    assert "s3cret" not in (run_dir / "manifest.json").read_text(encoding="utf-8")
    with sqlite3.connect(run_dir / DEFAULT_RUN_STORE) as conn:  # as if it had stopped after its source
        conn.execute("delete from stage_results where stage != ?", (CULTURE_GEN.source(CONFIG).name,))
    before = _ledger_rows(with_password)

    with pytest.raises(ConfigError, match=r":\*\*\*@.* keeps no password: give the URL again with --store URL"):
        build(CULTURE_GEN, CONFIG, run_dir, resume=True)
    monkeypatch.setenv("SENSEFORGE_STORE_URL", with_password)
    assert build(CULTURE_GEN, CONFIG, run_dir, resume=True).state == "done"
    assert _ledger_rows(with_password) > before
