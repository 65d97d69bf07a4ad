"""The names of what a run folder holds, in one place."""

from __future__ import annotations

from typing import Final

MANIFEST: Final = "manifest.json"
"""What the run was asked to do, with what (written once, before the run store)."""
FUNNEL: Final = "funnel.json"
"""Stage rows, groups and figures (written when the run finishes)."""
COST: Final = "cost.json"
"""Tokens and money per stage and per kept item (written when the run finishes)."""
COST_BY_TASK: Final = "cost_by_task.json"
"""The cost per task, for a run grouped by task."""
LEDGER: Final = "ledger.json"
"""What this run's processes sent to models (attempts, retries, cache hits)."""
REJECTS: Final = "rejects.jsonl"
"""Every rejected record with its stage, reason and evidence."""
RUN_STORE: Final = "run.db"
"""The run store (SQLite) unless the run was given another."""
DATASET: Final = "dataset"
"""The released rows, one ``<split>.jsonl`` per split."""
ITEMS: Final = "items"
"""The full items, one ``<split>.jsonl`` per split."""
PANEL: Final = "panel.jsonl"
"""Each verification-panel member's answer to each item (``--panel``), beside the dataset folder."""
REVIEW_QUEUE: Final = "review/queue.jsonl"
"""The items waiting for people's review."""
LOGS: Final = "logs"

RUN_FILES: Final[tuple[str, ...]] = (MANIFEST, FUNNEL)
"""A folder holding either is a run folder."""
