"""``senseforge runs show`` and ``senseforge llm ledger``: a run's state and its failures, while it runs or after
it stopped (loopback only: a dead port, a server that answers 500)."""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from senseforge.cli._common import money
from senseforge.cli.main import app
from senseforge.llm.loopback import LoopbackOpenAI
from senseforge.pipelines.culture_gen.recipe import CULTURE_GEN, CultureGenConfig
from senseforge.pipelines.outcomes import RunIncomplete
from senseforge.pipelines.runner import build
from senseforge.pipelines.runstore import HEARTBEAT_STALE_S, RunStore, sqlite_url
from senseforge.pipelines.status import NOTHING_STORED, STOPPED, run_status
from senseforge.store.db import Store

SPEC = "openai/loopback"
FAST = {"timeout_s": 0.5, "backoff_base_s": 0.01, "backoff_max_s": 0.02, "max_retries": 1, "max_concurrency": 4}


def _closed_port() -> str:
    """A loopback URL nothing listens on (connection refused at once)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def _config(base_url: str) -> CultureGenConfig:
    return CultureGenConfig(
        langs=("id",), model=SPEC, model_options={SPEC: {"base_url": base_url, **FAST}}, call_rounds=1
    )


def _invoke(*args: str) -> Any:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    return result


def _failed_run(tmp_path: Path, base_url: str) -> tuple[Path, str, RunIncomplete]:
    store_url = f"sqlite:///{tmp_path / 'store.db'}"
    run_dir = tmp_path / "run"
    with pytest.raises(RunIncomplete) as caught:
        build(CULTURE_GEN, _config(base_url), run_dir, store=Store(store_url))
    return run_dir, store_url, caught.value


def test_a_dead_base_url_names_its_cause_and_the_command_that_shows_the_rest(tmp_path: Path) -> None:
    run_dir, _, error = _failed_run(tmp_path, _closed_port())
    message = str(error)
    assert "still failing" in message and "most often connection: " in message
    assert "ConnectError" in message or "Connection" in message
    assert f"(causes: senseforge runs show {run_dir})" in message and message.endswith("--resume to retry them")
    assert "see the ledger" not in message
    assert not (run_dir / "ledger.json").exists()  # written only when a run finishes: show reads the ledger

    shown = _invoke("runs", "show", str(run_dir)).output
    assert f"run: {run_dir} · recipe: culture-gen · model: {SPEC}" in shown
    assert "state: stopped before it finished (at " in shown  # it said so on its way out
    assert f"continue: senseforge build culture-gen --out {run_dir} --resume)" in shown
    assert "funnel so far" in shown and "batches" in shown and "generate" in shown
    assert "connection: " in shown and f"senseforge llm ledger --run {run_dir} --failed" in shown
    assert "calls so far:" in shown and "failed" in shown

    status = json.loads(_invoke("runs", "show", str(run_dir), "--json").output)
    assert status["state"] == "stopped" and status["recipe"] == "culture-gen"
    assert status["heartbeat"]["pid"] == os.getpid() and status["heartbeat"]["ended"] is not None
    stages = {row["stage"]: row for row in status["stages"]}
    assert list(stages)[:2] == ["batches", "generate"]  # the recipe's order, stages not reached included
    assert stages["batches"]["ok"] > 0 and stages["generate"]["ok"] == 0
    assert status["causes"][0]["kind"] == "connection" and status["causes"][0]["calls"] == stages["batches"]["ok"]
    assert status["ledger"]["failed_calls"] == stages["batches"]["ok"]
    assert all(row["failure_kind"] == "connection" for row in status["last_failures"])


def test_llm_ledger_lists_a_runs_failed_calls(tmp_path: Path) -> None:
    with LoopbackOpenAI(lambda body: "", fault_rate=1.0, faults=("500",)) as server:
        run_dir, store_url, error = _failed_run(tmp_path, server.base_url)
    assert "most often " in str(error) and "500" in str(error)
    rows = json.loads(_invoke("llm", "ledger", "--run", str(run_dir), "--failed", "--json").output)  # its store
    assert rows and all(row["failure_kind"] for row in rows)
    assert all(row["attempts"] == 2 for row in rows)  # one retry (FAST)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    by_label = _invoke("llm", "ledger", "--run", manifest["run_id"], "-n", "1", "--json", "--store", store_url)
    assert len(json.loads(by_label.output)) == 1
    table = _invoke("llm", "ledger", "--failed", "--store", store_url).output
    assert "newest first" in table and SPEC in table and "500" in table
    assert "no failed calls" in _invoke("llm", "ledger", "--run", "nope", "--failed", "--store", store_url).output


def test_show_a_finished_run(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'store.db'}")
    run_dir = tmp_path / "run"
    config = CultureGenConfig(langs=("id",), model="scripted/culture-gen-author")
    assert build(CULTURE_GEN, config, run_dir, store=store).state == "done"
    status = run_status(run_dir)
    assert status.state == "done" and not status.causes and status.ledger["calls"] > 0
    assert [row.stage for row in status.stages][:3] == ["batches", "generate", "check"]
    assert status.stages[1].ok > 0
    shown = _invoke("runs", "show", str(run_dir)).output
    assert "state: done" in shown and "failed calls" not in shown


def test_a_price_added_later_prices_the_calls_made_before_it_everywhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One rule (costs priced from recorded tokens with the table as of now): a price added after the run prices
    its calls in ``runs show`` and ``llm ledger`` alike, and both say so; the ledger row keeps its cost at call
    time as a record."""
    store_url = f"sqlite:///{tmp_path / 'store.db'}"
    run_dir = tmp_path / "run"
    config = CultureGenConfig(langs=("id",), model="scripted/culture-gen-author")
    monkeypatch.setenv("SENSEFORGE_PRICES", str(tmp_path / "prices.toml"))  # none yet: the shipped $0 holds
    assert build(CULTURE_GEN, config, run_dir, store=Store(store_url)).state == "done"
    before = _invoke("runs", "show", str(run_dir)).output
    assert "cost: $0\n" in before and f"no user file at {tmp_path / 'prices.toml'}" in before

    (tmp_path / "prices.toml").write_text('["scripted/culture-gen-author"]\ninput = 3.0\noutput = 7.0\n')
    rows = Store(store_url).ledger_rows()
    fresh = [row for row in rows if not row.cache_hit]
    expected = sum(((row.tokens_in or 0) * 3.0 + (row.tokens_out or 0) * 7.0) / 1e6 for row in fresh)
    assert expected > 0 and all(row.cost_usd == 0.0 for row in rows)  # recorded at call time
    shown = _invoke("runs", "show", str(run_dir)).output
    assert f"cost: {money(expected)}" in shown
    assert "costs: priced from recorded tokens with the price table as of now (sources: " in shown
    assert str(tmp_path / "prices.toml") in shown
    status = json.loads(_invoke("runs", "show", str(run_dir), "--json").output)
    assert status["ledger"]["cost_usd"] == pytest.approx(expected) and status["ledger"]["priced"] == "now"

    listed = json.loads(_invoke("llm", "ledger", "--run", str(run_dir), "-n", "0", "--json").output)
    assert sum(row["cost_usd"] for row in listed) == pytest.approx(expected)
    assert all(row["cost_usd_at_call"] == 0.0 for row in listed)
    table = _invoke("llm", "ledger", "--run", str(run_dir)).output
    assert "as of now" in table and str(tmp_path / "prices.toml") in table


def test_show_a_run_that_stored_nothing_and_a_folder_without_a_run(tmp_path: Path) -> None:
    run_dir = tmp_path / "started"
    run_dir.mkdir()
    config = CultureGenConfig(langs=("id",), model="scripted/culture-gen-author")
    manifest = {"recipe": "culture-gen", "config": config.model_dump(mode="json"), "run_id": "culture-gen-x"}
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    assert run_status(run_dir).state == NOTHING_STORED
    assert NOTHING_STORED in _invoke("runs", "show", str(run_dir)).output

    result = CliRunner().invoke(app, ["runs", "show", str(tmp_path / "nothing")])
    assert result.exit_code != 0


def test_show_tells_a_running_build_from_one_whose_heartbeat_went_stale(tmp_path: Path) -> None:
    """A build killed outright says nothing on its way out: its heartbeat only stops; ``running`` is shown while a
    beat is fresh (times given, no waiting)."""
    run_dir, _, _ = _failed_run(tmp_path, _closed_port())
    run = RunStore(sqlite_url(run_dir / "run.db"))
    try:
        beat = run.beat()  # this process, building and beating
    finally:
        run.close()
    fresh = run_status(run_dir, now=beat.ts + 1.0)
    assert fresh.state == "running" and fresh.heartbeat == beat.as_json()
    shown = _invoke("runs", "show", str(run_dir)).output
    assert f"state: running (pid {os.getpid()} on {socket.gethostname()}, last heartbeat " in shown

    stale = run_status(run_dir, now=beat.ts + HEARTBEAT_STALE_S + 1.0)
    assert stale.state == STOPPED
    assert run_status(run_dir, now=beat.ts + 10.0, stale_s=5.0).state == STOPPED
    when = time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime(beat.ts))
    assert stale.resume == f"senseforge build culture-gen --out {run_dir} --resume"
    from senseforge.cli.runs import _state_line

    assert _state_line(stale).startswith(f"state: stopped before it finished (last heartbeat {when}, pid ")
