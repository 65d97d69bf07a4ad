"""``senseforge runs``: where a run stands, while it runs or after it stopped."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape
from rich.table import Table

from senseforge.cli._common import StoreOption, money, out
from senseforge.data.text import plural

app = typer.Typer(help="Runs of a recipe: their state, funnel so far, failures and cost.", no_args_is_help=True)


def when(ts: float) -> str:
    """A ledger time as UTC, to the second."""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _state_line(status: Any) -> str:
    state = status.state
    resume = status.resume or f"senseforge build {status.recipe} --out {status.run_dir} --resume"
    beat = status.heartbeat
    if state == "running" and beat is not None:
        return f"state: running (pid {beat['pid']} on {beat['host']}, last heartbeat {when(beat['ts'])})"
    if state == "running":  # a run from before heartbeats
        return f"state: running, or stopped before it finished (continue: {resume})"
    if state == "stopped" and beat is not None:
        stopped = f"at {when(beat['ended'])}" if beat.get("ended") else f"last heartbeat {when(beat['ts'])}"
        return f"state: stopped before it finished ({stopped}, pid {beat['pid']} on {beat['host']}; continue: {resume})"
    if state == "awaiting_review":
        return f"state: awaiting review (people work in: senseforge annotate serve {status.run_dir}; then {resume})"
    if state == "awaiting_batch":
        return (
            f"state: awaiting batches at the API (collect their answers: {resume}; or wait for them: {resume} --wait)"
        )
    if state == "done":
        return "state: done"
    return f"state: {state} (run the same build again)"


def _funnel(status: Any) -> Table:
    table = Table(title="funnel so far")
    for column in ("stage", "stored", "ok", "rejected"):
        table.add_column(column, justify="right" if column in ("stored", "ok") else "left")
    for row in status.stages:
        reasons = ", ".join(f"{reason} {n}" for reason, n in row.rejected.items())
        table.add_row(escape(row.stage), str(row.total), str(row.ok), escape(reasons))
    return table


def _batches(status: Any) -> Table:
    table = Table(title="open batches at the API")
    for column in ("batch", "stage", "requests", "submitted", "status"):
        table.add_column(column, justify="right" if column == "requests" else "left")
    for batch in status.batches:
        seen = f"{batch.api_status} (polled {when(batch.polled_at)})" if batch.api_status and batch.polled_at else "–"
        table.add_row(
            escape(batch.batch_id), escape(batch.stage or "–"), str(batch.requests), when(batch.submitted_at), seen
        )
    return table


def _cost_line(ledger: dict[str, Any]) -> str:
    spent = ledger.get("cost_usd")
    unpriced = ", ".join(ledger.get("unpriced_models") or []) or "a model not in the price table"
    shown = f"unknown ({unpriced})" if spent is None else money(spent)
    return (
        f"calls so far: {ledger.get('calls', 0)} ({ledger.get('cache_hits', 0)} from cache), "
        f"{ledger.get('retried_calls', 0)} retried, {ledger.get('failed_calls', 0)} failed · "
        f"tokens: {ledger.get('tokens_in', 0):,} in, {ledger.get('tokens_out', 0):,} out · cost: {shown}"
    )


def _time_line(ledger: dict[str, Any]) -> str | None:
    """The server's time over the run's backend calls (not the time they queued in this client first)."""
    sent = int(ledger.get("calls", 0)) - int(ledger.get("cache_hits", 0))
    if sent <= 0:
        return None
    service = float(ledger.get("service_s", 0.0))
    queued = float(ledger.get("queue_s", 0.0))
    line = f"server time: {service:,.1f} s over {plural(sent, 'backend call')} ({service / sent:.2f} s a call)"
    return line + (f" · queued in this client before sending: {queued:,.1f} s" if queued >= 0.05 else "")


@app.command("show")
def show(
    run_dir: Path = typer.Argument(..., help="The run directory (the build's --out)."),
    failures: int = typer.Option(5, "--failures", min=0, help="Failure causes and failed calls to list."),
    as_json: bool = typer.Option(False, "--json", help="Print everything as one JSON object."),
    store: str | None = StoreOption,
    run_store: str | None = typer.Option(
        None, "--run-store", help="SQLAlchemy URL of the run store (default: run.db in the run)."
    ),
) -> None:
    """Show a run's recipe, state, funnel so far, open batches at an API, failed calls with their causes, and cost
    so far.

    Reads what the run keeps as it goes (its manifest, run store and the LM ledger), so it
    works on a run that is running or stopped incomplete. The ledger is the store the
    manifest names unless --store is given.
    """
    from senseforge.pipelines.status import run_status

    status = run_status(run_dir, store=store, run_store_url=run_store, failures=failures)
    if as_json:
        out.print_json(json.dumps(status.model_dump(mode="json"), ensure_ascii=False))
        return
    model = f" · model: {status.model}" if status.model else ""
    out.print(f"run: {status.run_dir} · recipe: {status.recipe}{model}", markup=False)
    out.print(_state_line(status), markup=False)
    if status.stages:
        out.print(_funnel(status))
    if status.batches:
        out.print(_batches(status))
    if status.causes:
        out.print("failed calls by cause, commonest first:")
        for cause in status.causes:
            out.print(f"  {plural(cause.calls, 'call')} (last {when(cause.last_ts)}): {cause.line()}", markup=False)
    if status.last_failures:
        out.print(f"each failed call: senseforge llm ledger --run {status.run_dir} --failed", markup=False)
    if status.ledger:
        out.print(_cost_line(status.ledger), markup=False)
        timing = _time_line(status.ledger)
        if timing:
            out.print(timing, markup=False)
        if status.pricing:
            out.print(status.pricing, markup=False)
    if status.ledger_unread:
        out.print(f"calls so far: not read ({status.ledger_unread})", markup=False)
