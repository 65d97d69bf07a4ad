"""Where a run stands, read while it runs or after it stopped: state, funnel so far, failures, cost.

Everything comes from what a run keeps as it goes (its manifest, its run store, the LM
ledger), not from the files written when it finishes, so a run that stopped incomplete or
is still running shows why and how far it got (``senseforge runs show RUN_DIR``).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from pydantic import BaseModel, ConfigDict, Field

from senseforge.errors import ConfigError
from senseforge.llm.prices import PriceTable
from senseforge.pipelines.rundir import (
    DEFAULT_RUN_STORE,
    password_hidden,
    resume_command,
    resume_note,
    store_url_of,
)
from senseforge.pipelines.runner import BATCHES
from senseforge.pipelines.runstore import HEARTBEAT_STALE_S, RunStore
from senseforge.pipelines.tables import stage_results
from senseforge.runfolder import files
from senseforge.runfolder.folder import read_manifest
from senseforge.runfolder.manifest import Manifest
from senseforge.store.batches import BatchRow
from senseforge.store.db import Store
from senseforge.store.ledger import FailureCause, LedgerRow

logger = logging.getLogger(__name__)

NOTHING_STORED = "started, nothing stored"
"""The state of a run whose manifest was written but whose store holds nothing yet."""
STOPPED = "stopped"
"""The state of a run that was running and whose process stopped before it finished (its heartbeat says so)."""


class StageCounts(BaseModel):
    """One stage of the funnel so far: records kept and records rejected, by reason."""

    model_config = ConfigDict(extra="forbid")

    stage: str
    ok: int = 0
    """Records the stage passed on."""
    rejected: dict[str, int] = Field(default_factory=dict)
    """Rejected records by reason (most first)."""

    @property
    def total(self) -> int:
        """Records the stage stored a result for."""
        return self.ok + sum(self.rejected.values())


class RunStatus(BaseModel):
    """Where a run stands (:func:`run_status`)."""

    model_config = ConfigDict(extra="forbid")

    run_dir: str
    recipe: str | None = None
    run_id: str | None = None
    """The run's label in the LM ledger."""
    state: str
    """``running``, ``stopped`` (before it finished: its process's heartbeat ended or went stale),
    ``awaiting_review``, ``awaiting_batch``, ``done``, or ``started, nothing stored``. A run from before
    heartbeats that stopped shows ``running``: ``heartbeat`` is then ``None``."""
    heartbeat: dict[str, Any] | None = None
    """The newest heartbeat of the process that builds (or built) the run: ``ts``, ``pid``, ``host``, and ``ended``
    (when it stopped building, if it said so)."""
    model: str | None = None
    stages: list[StageCounts] = Field(default_factory=list)
    """The funnel so far, in the recipe's order."""
    causes: list[FailureCause] = Field(default_factory=list)
    """The commonest causes of the run's failed calls, most frequent first."""
    last_failures: list[LedgerRow] = Field(default_factory=list)
    """The run's newest failed calls, newest first."""
    ledger: dict[str, Any] = Field(default_factory=dict)
    """Totals of the run's calls so far (:class:`senseforge.store.ledger.LedgerSummary`): tokens, cost, failures."""
    store_url: str | None = None
    """Where the LM cache and ledger were read (``None``: no ledger read)."""
    batches: list[BatchRow] = Field(default_factory=list)
    """The batches at an API (``-o batch=true``) the run submitted or waits for whose answers are not collected
    yet, oldest first: id, stage, requests, when submitted, status as last polled."""
    ledger_unread: str | None = None
    """Why the ledger was not read (its store's password is not in the manifest and was not given)."""
    resume: str | None = None
    """The command that continues the run (its settings and stores from its manifest), with what to add by hand."""
    pricing: str | None = None
    """How the cost was priced, one line (see :data:`senseforge.llm.prices.PRICING_RULE`): the rule and the price
    table's sources."""


def _stage_names(manifest: Manifest, run: RunStore) -> list[str]:
    """The recipe's stage names in order (source first), then any other stage the store holds."""
    from senseforge.pipelines.recipes import recipes

    names: list[str] = []
    recipe = recipes().get(str(manifest.recipe))
    if recipe is not None:
        try:
            config = recipe.config_model.model_validate(manifest.config)
            names = [recipe.source(config).name, *(stage.name for stage in recipe.stages(config))]
        except Exception:  # a config this version cannot rebuild, a model it cannot ask: the stored order below
            logger.debug("cannot list the stages of %s from its recipe", manifest.recipe, exc_info=True)
            names = []
    first = sa.func.min(stage_results.c.created_at)
    query = sa.select(stage_results.c.stage, first).group_by(stage_results.c.stage).order_by(first)
    with run.engine.connect() as conn:
        stored = [str(stage) for stage, _ in conn.execute(query)]
    return names + [name for name in stored if name not in names]


def _counts(run: RunStore, stage: str) -> StageCounts:
    counts = run.counts(stage)
    ok = counts.pop("ok", 0)
    rejected = dict(sorted(counts.items(), key=lambda pair: (-pair[1], pair[0])))
    return StageCounts(stage=stage, ok=ok, rejected=rejected)


def ledger_url_of(manifest: Manifest, given: str | None) -> str | None:
    """The store a run's calls went to: ``given``, else the manifest's (unless its password was hidden)."""
    if given:
        return given
    recorded = manifest.store_url
    if recorded is not None and "***" not in recorded:
        return recorded
    return None


def run_status(
    run_dir: Path,
    *,
    store: str | None = None,
    run_store_url: str | None = None,
    failures: int = 5,
    now: float | None = None,
    stale_s: float = HEARTBEAT_STALE_S,
) -> RunStatus:
    """Where the run in ``run_dir`` stands, from its manifest, run store and ledger.

    Args:
        run_dir: the run directory.
        store: the LM cache and ledger (default: the one the manifest names, else the default store).
        run_store_url: the run store when it is not the run's ``run.db``.
        failures: how many causes and failed calls to list.
        now: the time a heartbeat's age is measured at (default: now).
        stale_s: a heartbeat older than this says the building process stopped.

    Raises:
        ConfigError: no run in ``run_dir`` (no manifest), or its store is elsewhere and not given.
    """
    manifest = read_manifest(run_dir) if run_dir.is_dir() else None
    if manifest is None:
        raise ConfigError(f"{run_dir}: no run here (no {files.MANIFEST}); give the folder a build wrote (its --out)")
    if "config" not in manifest.model_fields_set:
        raise ConfigError(f"{run_dir / files.MANIFEST}: not a senseforge run manifest")
    written = manifest.as_dict()  # for the run directory's helpers, which read it as written
    model = manifest.config.get("model")
    status = RunStatus(
        run_dir=str(run_dir),
        recipe=manifest.recipe,
        run_id=manifest.run_id,
        state=NOTHING_STORED,
        model=str(model) if model is not None else None,
    )
    url = store_url_of(run_dir, run_store_url, written, recorded=True)
    local = run_store_url is None and manifest.run_store_url in (None, DEFAULT_RUN_STORE)
    awaited: list[str] = []
    if not local or (run_dir / DEFAULT_RUN_STORE).is_file():
        run = RunStore(url)
        try:
            awaited = json.loads(run.meta(BATCHES) or "[]")
            state = run.meta("state")
            if state is not None and run.stored():
                status.state = state
            beat = run.last_beat()
            if beat is not None:
                status.heartbeat = beat.as_json()
                if status.state == "running" and not beat.alive(now, stale_s):
                    status.state = STOPPED
            status.stages = [_counts(run, name) for name in _stage_names(manifest, run)]
        finally:
            run.close()
    if status.recipe:
        status.resume = resume_command(status.recipe, run_dir, written) + resume_note(written)
    ledger_url = ledger_url_of(manifest, store)
    if status.run_id is None:
        return status
    recorded = manifest.store_url
    if ledger_url is None and recorded is not None and password_hidden(recorded):
        status.ledger_unread = f"its store is {recorded} and the manifest keeps no password: give --store URL"
        return status
    ledger = Store(ledger_url)
    try:
        status.store_url = ledger.url
        status.causes = ledger.failure_causes(status.run_id, limit=failures)
        status.last_failures = ledger.ledger_recent(run=status.run_id, failed=True, limit=failures)
        table = PriceTable.load()
        status.ledger = dict(ledger.ledger_summary(status.run_id, price=table.cost))
        status.pricing = table.statement()
        status.batches = ledger.batches(run=status.run_id, ids=awaited)
    finally:
        ledger.close()
    return status


__all__ = ["NOTHING_STORED", "STOPPED", "RunStatus", "StageCounts", "ledger_url_of", "run_status"]
