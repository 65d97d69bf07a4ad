"""``build mcsqa``: question sets → generate → filter → refine → filter → distractors → shuffle
→ verify → review → moderate → split, resumable, with funnel and cost reports.

A run directory holds ``manifest.json`` (written once, at the start), the run store
(``run.db`` unless a URL is given), and the outputs, rewritten whole whenever the run
finishes: ``dataset/{train,validation,test}.jsonl`` (published mCSQA schema),
``items/`` (the same items as full records, with provenance), ``funnel.json``,
``cost.json``, ``rejects.jsonl`` and ``ledger.json``. While items wait for human
review the run stops with ``review/queue.jsonl`` and state ``awaiting_review``.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy.engine import make_url

from senseforge.data.io import atomic_open, read_jsonl
from senseforge.data.schema import Judgement
from senseforge.errors import ConfigError
from senseforge.kb.question_sets import extract_question_sets
from senseforge.llm.base import LLM
from senseforge.llm.cache import CachedLLM, open_llm
from senseforge.llm.prices import PriceTable
from senseforge.pipelines.mcsqa.config import McsqaConfig, build_manifest, config_differences
from senseforge.pipelines.mcsqa.report import (
    STAGES,
    cost,
    final_items,
    funnel,
    write_dataset,
    write_json,
    write_rejects,
)
from senseforge.pipelines.mcsqa.review import REVIEW_TASK, Review, Split, Verify, item_of
from senseforge.pipelines.mcsqa.stages import Distractors, Filter, Generate, Moderate, Refine, Shuffle
from senseforge.pipelines.moderation import Moderator, default_moderator
from senseforge.pipelines.runstore import RunStore, StageResult, sqlite_url
from senseforge.pipelines.stage import ProgressFactory, Stage, run_stage
from senseforge.store.db import Store

logger = logging.getLogger(__name__)

MANIFEST = "manifest.json"
DEFAULT_RUN_STORE = "run.db"
"""The manifest's name for the default run store: ``run.db`` in the run directory."""
QUEUE = Path("review") / "queue.jsonl"


@dataclass
class BuildSummary:
    """How a build ended and where its outputs are."""

    run_dir: Path
    state: str
    """``done`` or ``awaiting_review``."""
    funnel: dict[str, Any] | None = None
    cost: dict[str, Any] | None = None
    awaiting: int = 0
    ledger: dict[str, Any] = field(default_factory=dict)


def default_run_dir(config: McsqaConfig) -> Path:
    """``runs/<recipe>-<lang>``."""
    return Path("runs") / f"{config.recipe}-{config.lang}"


def _hide_password(url: str) -> str:
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return url


def read_manifest(run_dir: Path) -> dict[str, Any] | None:
    """The manifest of a run directory, or ``None`` when there is none."""
    path = run_dir / MANIFEST
    if not path.is_file():
        return None
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{path}: unreadable manifest ({exc})") from exc
    if not isinstance(value, dict) or "config" not in value:
        raise ConfigError(f"{path}: not a senseforge run manifest")
    return value


def check_resume(run_dir: Path, config: McsqaConfig, *, resume: bool) -> dict[str, Any] | None:
    """The existing manifest when resuming; refuse a fresh build over an old run, or a changed config.

    Raises:
        ConfigError: with what to do next.
    """
    manifest = read_manifest(run_dir)
    if manifest is None:
        if resume:
            raise ConfigError(f"{run_dir}: no run to resume (no {MANIFEST}); start it without --resume")
        if run_dir.exists() and any(run_dir.iterdir()):
            raise ConfigError(f"{run_dir}: folder is not empty and holds no run; choose another --out")
        return None
    if not resume:
        raise ConfigError(f"{run_dir}: a run already lives here; continue it with --resume, or choose another --out")
    if manifest.get("config_hash") != config.hash():
        changes = config_differences(manifest["config"], config.model_dump(mode="json"))
        raise ConfigError(
            f"{run_dir}: the config differs from the run's manifest ({'; '.join(changes) or 'hash differs'}); "
            "resume with the same settings, or start a new run in another --out"
        )
    return manifest


def _run_store_url(run_dir: Path, manifest: dict[str, Any] | None, given: str | None) -> str:
    recorded = (manifest or {}).get("run_store_url", DEFAULT_RUN_STORE)
    if given is not None:
        return given
    if recorded != DEFAULT_RUN_STORE:
        raise ConfigError(f"{run_dir}: this run's store is {recorded}; give its full URL with --run-store")
    return sqlite_url(run_dir / DEFAULT_RUN_STORE)


class _Models:
    """The run's models, opened once each, all through the cache and ledger."""

    def __init__(
        self, config: McsqaConfig, store: Store, run_label: str, given: Mapping[str, LLM] | None = None
    ) -> None:
        self.config = config
        self.store = store
        self.run_label = run_label
        self.given = dict(given or {})
        self.open: dict[str, CachedLLM] = {}

    def get(self, spec: str) -> CachedLLM:
        if spec not in self.open:
            if spec in self.given:
                self.open[spec] = CachedLLM(self.given[spec], self.store, run=self.run_label)
            else:
                self.open[spec] = open_llm(spec, self.config.options_for(spec), store=self.store, run=self.run_label)
        return self.open[spec]

    def identities(self) -> dict[str, dict[str, str]]:
        specs = {self.config.model_for(stage) for stage in ("generate", "refine", "distractors", "verify")}
        specs |= set(self.config.reviewers)
        return {spec: self.get(spec).identity() for spec in sorted(specs)}

    def close(self) -> None:
        for llm in self.open.values():
            llm.close()


def _select(config: McsqaConfig, run: RunStore) -> list[StageResult]:
    """The (question set, answer) records: extracted once, then read back from the run store."""
    stored = run.results("select", "ok")
    if stored or run.meta("question_sets") is not None:
        return stored
    kb = Path(config.kb) if config.kb else None
    sets, qs_funnel = extract_question_sets(
        kb, config.lang, config.n, config.seed, relations=config.relations, source_lang=config.source_lang
    )
    records = [
        StageResult(f"{qs.id}-{index}", "ok", {"qs": qs.model_dump(mode="json"), "answer": qs.targets[index]})
        for qs in sets
        for index in range(config.answers_per_set)
    ]
    facts = {"funnel": [list(row) for row in qs_funnel.rows()], "sampled": len(sets)}
    run.put("select", sorted(records, key=lambda r: r.record_id))
    run.set_meta({"question_sets": json.dumps(facts)})
    return run.results("select", "ok")


def _stages(config: McsqaConfig, models: _Models, run: RunStore, moderator: Moderator) -> list[Stage]:
    panel: dict[str, LLM] = {spec: models.get(spec) for spec in config.reviewers}
    return [
        Generate("generate", config, models.get(config.model_for("generate"))),
        Filter("filter", config, moderator),
        Refine("refine", config, models.get(config.model_for("refine"))),
        Filter("filter_refined", config, moderator),
        Distractors("distractors", config, models.get(config.model_for("distractors")), moderator),
        Shuffle("shuffle", config),
        Verify("verify", config, models.get(config.model_for("verify"))),
        Review("review", config, run, panel),
        Moderate("moderate", config, moderator),
        Split("split", config),
    ]


def import_decisions(run: RunStore, files: Iterable[Path]) -> int:
    """Store human review decisions (JSONL of :class:`~senseforge.data.schema.Judgement`, task ``verify``).

    Raises:
        DataValidationError: a malformed line (``file:line: field: problem``).
        ConfigError: a judgement of another task, or without ``accept``.
    """
    changed = 0
    for path in files:
        decisions = read_jsonl(path, Judgement)
        for number, judgement in enumerate(decisions, start=1):
            if judgement.task != REVIEW_TASK or judgement.accept is None:
                raise ConfigError(
                    f"{path}: decision {number} ({judgement.item_id}): review decisions need task "
                    f"{REVIEW_TASK!r} and accept true/false"
                )
        changed += run.add_judgements(decisions, "human")
    return changed


def _write_queue(run_dir: Path, waiting: Sequence[StageResult], k: int, run: RunStore) -> None:
    stored = run.judgements_for(REVIEW_TASK, [r.record_id for r in waiting])
    path = run_dir / QUEUE
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_open(path) as handle:
        for record in waiting:
            item = item_of(record)
            done = {j.judgement.annotator for j in stored.get(record.record_id, []) if j.source == "human"}
            row = {**item.model_dump(mode="json"), "reviews_needed": max(0, k - len(done)), "reviewed_by": sorted(done)}
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")


REVIEW_GROUP = "mcsqa-review"
"""The annotation app's group for the recipe's review queue."""


def _queue_for_the_app(url: str, waiting: Sequence[StageResult], k: int) -> None:
    """Put the waiting items in the annotation app's *verify* queue (same database as the run store)."""
    from senseforge.annotate.store import AnnotationStore

    annotation = AnnotationStore(url)
    try:
        annotation.add_tasks(REVIEW_TASK, [item_of(r) for r in waiting], k=k, group=REVIEW_GROUP)
    finally:
        annotation.close()


def build(
    config: McsqaConfig,
    run_dir: Path | None = None,
    *,
    resume: bool = False,
    store: Store | None = None,
    run_store_url: str | None = None,
    decisions: Sequence[Path] = (),
    human_rate: float | None = None,
    moderator: Moderator | None = None,
    prices: PriceTable | None = None,
    progress: ProgressFactory | None = None,
    llms: Mapping[str, LLM] | None = None,
) -> BuildSummary:
    """Run (or resume) the mCSQA recipe for one language.

    Args:
        config: the resolved config (compared with the manifest on resume).
        run_dir: the run directory (default ``runs/mcsqa-<lang>``).
        resume: continue the run in ``run_dir``.
        store: where the LM cache and ledger live (default store when None).
        run_store_url: a SQLAlchemy URL for the run store (default ``run_dir/run.db``).
        decisions: JSONL files of human review decisions to import first.
        human_rate: US dollars per human judgement, for the cost report (remembered by the
            run: a resume without it uses the last rate given).
        moderator: the moderation filter (the shipped word lists by default).
        prices: the price table (default: shipped plus the user's file).
        progress: a factory of progress callbacks, ``(description, total)``.
        llms: backends already built, by the spec the config names them with (tests,
            custom providers); they too run through the cache and ledger.

    Raises:
        ConfigError: a fresh build over an existing run, a resume with a changed config …
        RunIncomplete: calls kept failing; ``--resume`` retries them.
    """
    run_dir = run_dir or default_run_dir(config)
    manifest = check_resume(run_dir, config, resume=resume)
    run_dir.mkdir(parents=True, exist_ok=True)
    url = _run_store_url(run_dir, manifest, run_store_url)
    store = store or Store()
    run_label = (manifest or {}).get("run_id") or f"{config.recipe}-{config.lang}-{uuid.uuid4().hex[:12]}"
    models = _Models(config, store, run_label, llms)
    moderator = moderator or default_moderator()
    run: RunStore | None = None
    try:
        if manifest is None:  # written before the run store exists: a run directory always has one
            manifest = build_manifest(
                config,
                identities=models.identities(),
                store_url=_hide_password(store.url),
                run_store_url=DEFAULT_RUN_STORE if run_store_url is None else _hide_password(url),
            )
            manifest["run_id"] = run_label
            write_json(run_dir / MANIFEST, manifest)
        run = RunStore(url)
        if human_rate is not None:
            run.set_meta({"human_rate": repr(human_rate)})
        elif run.meta("human_rate") is not None:
            human_rate = float(run.meta("human_rate") or "nan")
        if decisions:
            changed = import_decisions(run, decisions)
            logger.info("imported %d review decision(s)", changed)
        run.set_meta({"state": "running"})
        records = _select(config, run)
        for stage in _stages(config, models, run, moderator):
            report = run_stage(
                stage,
                records,
                run,
                batch_size=config.batch_for(stage.name),
                rounds=config.call_rounds,
                progress=progress,
            )
            if report.awaiting:
                _write_queue(run_dir, report.awaiting, config.review_k, run)
                _queue_for_the_app(url, report.awaiting, config.review_k)
                run.set_meta({"state": "awaiting_review"})
                ledger = dict(store.ledger_summary(run_label))
                return BuildSummary(run_dir, "awaiting_review", awaiting=len(report.awaiting), ledger=ledger)
            records = run.results(stage.name, "ok")
        (run_dir / QUEUE).unlink(missing_ok=True)
        return _finish(run_dir, config, run, store, run_label, human_rate, prices)
    finally:
        models.close()
        if run is not None:
            run.close()


def _human_judgements(run: RunStore) -> int:
    return sum(
        1 for entries in run.judgements_for(REVIEW_TASK).values() for entry in entries if entry.source == "human"
    )


def _finish(
    run_dir: Path,
    config: McsqaConfig,
    run: RunStore,
    store: Store,
    run_label: str,
    human_rate: float | None,
    prices: PriceTable | None,
) -> BuildSummary:
    facts = json.loads(run.meta("question_sets") or "{}")
    question_sets = {"sampled": facts.get("sampled"), "extraction": dict(facts.get("funnel", []))}
    splits = final_items(run)
    write_dataset(run_dir, splits)
    funnel_doc = funnel(run, config.lang, question_sets)
    kept = sum(len(items) for items in splits.values())
    cost_doc = cost(
        run, config.lang, kept=kept, human_judgements=_human_judgements(run), human_rate=human_rate, prices=prices
    )
    write_json(run_dir / "funnel.json", funnel_doc)
    write_json(run_dir / "cost.json", cost_doc)
    write_rejects(run_dir, run)
    ledger = dict(store.ledger_summary(run_label))
    write_json(run_dir / "ledger.json", {"run": run_label, **ledger})
    run.set_meta({"state": "done"})
    return BuildSummary(run_dir, "done", funnel=funnel_doc, cost=cost_doc, ledger=ledger)


__all__ = ["STAGES", "BuildSummary", "McsqaConfig", "build", "check_resume", "default_run_dir", "import_decisions"]
