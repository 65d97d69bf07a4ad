"""The runner: build or resume any recipe in a run directory.

A run directory holds ``manifest.json`` (written once, at the start, before the run
store), the run store (``run.db`` unless a URL is given), and the outputs, rewritten
whole whenever the run finishes: the recipe's dataset, ``funnel.json``, ``cost.json``,
``rejects.jsonl`` and ``ledger.json``. While items wait for people the run stops with
``review/queue.jsonl``, the tasks queued in the annotation app (one shape for every
stage's: ``type``, ``id``, ``k``, ``judged_by``, ``needed``, ``eligible`` (only on a task
that only some people may take), ``creator``, ``input``), and state ``awaiting_review``;
``--resume`` reads their judgements and goes on.
A model that answers through an API's Batch API (``-o batch=true``) sends each stage's
requests as one batch; until the API has answered, the run stops with state
``awaiting_batch``, and ``--resume`` collects the answers (never submitting them twice);
:func:`senseforge.pipelines.batchwait.wait_for_batches` (``build --wait``) does those resumes by itself.
Records whose calls wait for a batch get no further call round: polling again at once would only find it running.
One process writes a run at a time: every build and resume takes the run store's writer lease
(:class:`~senseforge.pipelines.runlease.WriterLease`) for its whole run; a second is refused in one line
(:class:`~senseforge.errors.RunBusy`) before it writes anything.

The runner knows people's part in a stage only by two fields every stage has:
``people_tasks`` (the task types whose judgements it reads) and ``pauses_run`` (a record
waiting there stops the whole run, as a review does; at other people stages the decided
records go on). It queues every task any stage hands out, one batch at a time.

For every recipe alike the runner owns: the manifest and the refusal of a resume whose
config differs (each difference named), the model pool per stage, batches and call
rounds, stage results stored one batch per transaction (a killed run resumes at the
first unstored batch and repeats no paid call), judgements, the review queue and
imported decisions (routed by their task type), the funnel and cost, and the summary.
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import logging
import uuid
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from senseforge.data.io import atomic_open, read_judgements
from senseforge.errors import ConfigError, SenseforgeError
from senseforge.llm.base import LLM
from senseforge.llm.prices import PRICING_RULE, PriceTable
from senseforge.llm.registry import provider_info
from senseforge.pipelines.collection import spaced_out
from senseforge.pipelines.config import RecipeConfig, ReviewedConfig
from senseforge.pipelines.contamination import GATE, registry_of
from senseforge.pipelines.executor import Executor, ModelPool, make_executor
from senseforge.pipelines.finish import release
from senseforge.pipelines.flow import StageReport, run_stages
from senseforge.pipelines.outcomes import RunIncomplete
from senseforge.pipelines.progress import ProgressSink
from senseforge.pipelines.recheck import RECHECK_TASK, recheck_judgements
from senseforge.pipelines.recipe import Recipe, Source
from senseforge.pipelines.replay import Replayer
from senseforge.pipelines.report import calls_by_stage, cost, funnel_rows, write_json, write_rejects
from senseforge.pipelines.rundir import (
    DEFAULT_RUN_STORE,
    MANIFEST,
    _clear_failed_start,
    build_manifest,
    check_resume,
    recorded_url,
    resumed_stores,
    store_url_of,
)
from senseforge.pipelines.runlease import WriterLease
from senseforge.pipelines.runstore import Heartbeat, Record, RunStore, StageResult
from senseforge.pipelines.stage import InOrder, Stage
from senseforge.pipelines.taskqueue import PEOPLE_STAGES, QueuedTask, people_stages
from senseforge.pipelines.verification import PanelVerify, answered_by, saved_review, write_panels
from senseforge.runfolder.cost import Cost
from senseforge.runfolder.funnel import Funnel
from senseforge.store.batches import BatchRow
from senseforge.store.db import Store

logger = logging.getLogger(__name__)

"""The manifest's name for the default run store: ``run.db`` in the run directory."""
QUEUE = Path("review") / "queue.jsonl"
AWAITING_BATCH = "awaiting_batch"
"""The state of a run whose records wait for batches at an API (``-o batch=true``); ``--resume`` collects them."""
BATCHES = "awaiting_batches"
"""The run store's note of the batches an ``awaiting_batch`` run waits for (a JSON list of ids)."""
SOURCE_FACTS = "source_facts"


@dataclass
class BuildSummary:
    """How a build ended and where its outputs are."""

    run_dir: Path
    state: str
    """``done``, ``awaiting_review`` or ``awaiting_batch``."""
    recipe: str = ""
    funnel: Funnel | None = None
    """The recipe's funnel (``funnel.json``: ``model_dump(mode="json", by_alias=True)``), once done."""
    cost: Cost | None = None
    """The run's cost (``cost.json``), once done."""
    awaiting: int = 0
    waiting_for: dict[str, int] = field(default_factory=dict)
    """Tasks queued for people, per task type."""
    batches: list[str] = field(default_factory=list)
    """``awaiting_batch``: the batches at the API whose answers the run waits for, by id."""
    open_batches: list[BatchRow] = field(default_factory=list)
    """``awaiting_batch``: those batches as the store remembers them (stage, requests, when submitted, status)."""
    ledger: dict[str, Any] = field(default_factory=dict)
    diagnoses: list[str] = field(default_factory=list)
    """One line per model whose replies looked wrong as a whole (all cut at the token limit, or echoing a chat
    template): the likely cause and the fix (see :func:`senseforge.llm.prompting.diagnose`)."""


def _diagnoses(pool: ModelPool) -> list[str]:
    """The diagnosis of every model the run opened that has one."""
    return pool.diagnoses()


# -- running stages -----------------------------------------------------------------------------


def segments(stages: Sequence[Stage]) -> list[list[Stage]]:
    """The stages in the runs records stream through: a barrier stands alone."""
    out: list[list[Stage]] = []
    for stage in stages:
        if stage.barrier or not out or out[-1][-1].barrier:
            out.append([stage])
        else:
            out[-1].append(stage)
    return out


STREAM_DEPTH = 4
"""Streaming: batches in flight per concurrency slot's worth of records (enough queued at the endpoint's limiter
that a slot never waits for the next stage's batch)."""


def stream_width(segment: Sequence[Stage], config: RecipeConfig, streaming: bool | None = None) -> int:
    """Batches of ``segment`` run at once: 1 (one at a time) unless its models are all behind an API, or
    ``streaming`` says so; then enough batches to hold :data:`STREAM_DEPTH` × the largest concurrency bound of its
    models in flight."""
    specs = sorted({spec for stage in segment for spec in stage.specs})
    remote = bool(specs) and all(provider_info(spec).remote for spec in specs)
    if streaming is False or (streaming is None and not remote):
        return 1
    bound = max((int(config.options_for(spec).get("max_concurrency", 8)) for spec in specs), default=8)
    smallest = min(config.batch_for(stage.name) for stage in segment)
    return max(2, -(-STREAM_DEPTH * bound // smallest))


def _width(segment: Sequence[Stage], config: RecipeConfig, streaming: bool | None, work: Executor) -> int:
    """Batches of ``segment`` in flight: :func:`stream_width`, or as many as the executor takes at once (replicas on a
    cluster) unless streaming is off."""
    width = stream_width(segment, config, streaming)
    return width if streaming is False else max(width, work.width(segment))


def _clip(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _failure_hint(store: Store, run_label: str, run_dir: Path, since_id: int) -> Callable[[], str]:
    """What a run that stops incomplete says about why: the commonest cause in the ledger, and the command that
    shows the rest (``senseforge runs show RUN_DIR``)."""

    def hint() -> str:
        try:
            found = store.failure_causes(run_label, since_id=since_id, limit=1)
        except Exception:  # the hint must never hide the error it explains
            logger.debug("cannot read the ledger's failure causes", exc_info=True)
            found = []
        common = f", most often {_clip(found[0].line())}" if found else ""
        return f"{common} (causes: senseforge runs show {run_dir})"

    return hint


# -- people's work -----------------------------------------------------------------------------


def people_tasks(stages: Sequence[Stage]) -> list[str]:
    """The task types whose judgements the recipe's stages read, sorted."""
    return sorted({task for stage in stages for task in stage.people_tasks})


def import_decisions(run: RunStore, files: Iterable[Path], tasks: Collection[str]) -> int:
    """Store people's judgements given as files (JSONL of :class:`~senseforge.data.schema.Judgement`), each for
    the stage that reads its ``task`` (one of ``tasks``); how many were new or changed.

    Raises:
        DataValidationError: a malformed line (``file:line: field: problem``).
        ConfigError: a judgement of a task no stage reads, or one with an ``accept`` field left empty.
    """
    changed = 0
    for path in files:
        decisions = read_judgements(path)
        for number, judgement in enumerate(decisions, start=1):
            where = f"{path}: decision {number} ({judgement.item_id})"
            if judgement.task not in tasks:
                known = ", ".join(sorted(tasks)) or "none"
                raise ConfigError(f"{where}: no stage of this recipe reads task {judgement.task!r} (it reads: {known})")
            if judgement.vote() is None and "accept" in type(judgement).model_fields:
                raise ConfigError(f"{where}: a {judgement.task} decision needs accept true/false")
        changed += run.add_judgements(decisions, "human")
    return changed


def _write_queue(run_dir: Path, queued: Sequence[QueuedTask], run: RunStore) -> None:
    """``review/queue.jsonl``: the tasks people are waiting on, one per line, with who judged each so far."""
    judged: dict[tuple[str, str], set[str]] = {}
    for kind in sorted({task.type for task in queued}):
        ids = [task.id for task in queued if task.type == kind]
        for item_id, stored in run.judgements_for(kind, ids).items():
            judged[kind, item_id] = {s.judgement.annotator for s in stored if s.source == "human"}
    path = run_dir / QUEUE
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_open(path) as handle:
        for task in queued:
            done = sorted(judged.get((task.type, task.id), set()))
            row = {
                "type": task.type,
                "id": task.id,
                "k": task.k,
                "judged_by": done,
                "needed": max(0, task.k - len(done)),
                "eligible": list(task.eligible),
                "creator": task.creator,
                "input": task.input.model_dump(mode="json"),
            }
            if not task.eligible:  # anyone may take it: an empty list would read as "no one"
                del row["eligible"]
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")


# -- build -------------------------------------------------------------------------------------


@spaced_out
def build(
    recipe: Recipe,
    config: RecipeConfig,
    run_dir: Path | None = None,
    *,
    resume: bool = False,
    store: Store | None = None,
    run_store_url: str | None = None,
    decisions: Sequence[Path] = (),
    human_rate: float | Mapping[str, float] | None = None,
    prices: PriceTable | None = None,
    progress: ProgressSink | None = None,
    llms: Mapping[str, LLM] | None = None,
    responders: Mapping[str, Any] | None = None,
    executor: str = "local",
    streaming: bool | None = None,
    manifest: dict[str, Any] | None = None,
    replay: bool = True,
) -> BuildSummary:
    """Run (or resume) ``recipe`` with ``config`` in ``run_dir``.

    Args:
        recipe: the recipe.
        config: the resolved config (compared with the manifest on resume).
        run_dir: the run directory (default: the recipe's).
        resume: continue the run in ``run_dir``.
        store: where the LM cache and ledger live (``None``: the default store, or on a resume the one the run
            started with; a resume given another is refused).
        run_store_url: a SQLAlchemy URL for the run store (default ``run_dir/run.db``, or on a resume the one the
            run started with; a resume given another is refused).
        decisions: JSONL files of people's review decisions to import first.
        human_rate: US dollars per human judgement (or per task type), for the cost report
            (remembered by the run: a resume without it uses the last rate given).
        prices: the price table (default: shipped plus the user's file).
        progress: where each stage's progress goes, in records (:mod:`senseforge.pipelines.progress`).
        llms: backends already built, by the spec the config names them with (tests,
            custom providers); they too run through the cache and ledger.
        responders: named scripted responders beyond the recipe's own dry-run authors
            (``scripted/<name>``; the CLI passes every recipe's).
        executor: where stage work runs (``local``).
        streaming: records go on to their next stage as soon as their batch is stored, several batches at once
            (``None``: where every model of the stages is behind an API; see :func:`stream_width`).
        manifest: on a resume, the run's manifest when the caller has read it already (the CLI reads it once per
            command); read here otherwise.
        replay: keep what each stage makes of each record, and store a kept outcome as it is when the same record
            comes to the same stage again (:mod:`senseforge.pipelines.replay`; only with the ``local`` executor).

    Raises:
        ConfigError: a fresh build over an existing run, a resume with a changed config …
        RunIncomplete: calls kept failing; ``--resume`` retries them.
        RunBusy: another process builds the run now (it holds the writer lease).
    """
    run_dir = run_dir or recipe.default_run_dir(config)
    manifest = check_resume(run_dir, config, resume=resume, manifest=manifest)
    opened: Store | None = None
    if manifest is not None:  # a resume is the run it continues: its stores from its manifest, unless given again
        given = store.url if store is not None else None
        ledger_url, run_store_url = resumed_stores(run_dir, manifest, store=given, run_store=run_store_url)
        if store is None:
            store = opened = Store(ledger_url)
    elif store is None:
        store = opened = Store()
    prices = prices or PriceTable.load()  # one table for every figure of the run (a bad user file fails here)
    run_label = (manifest or {}).get("run_id") or f"{config.recipe}-{_label(config)}-{uuid.uuid4().hex[:12]}"
    stages = recipe.stages(config)
    source = recipe.source(config)  # built once per run: it makes the first records and names the first stage
    if config.registry and config.contamination != "off":  # checked before a run folder is made
        if not any(stage.name == GATE for stage in stages):
            raise ConfigError(
                f"{recipe.name} has no contamination gate yet: leave --registry out, and check its dataset once "
                "built with `senseforge analyze contamination RUN_DIR`"
            )
        registry_of(config.registry)
    pool = ModelPool(config, store, run_label, llms, {**recipe.authors, **(responders or {})})
    causes = _failure_hint(store, run_label, run_dir, store.ledger_last_id())
    work = make_executor(executor, pool)
    # a stage's outcomes are kept and replayed where its models run in this process (see .replay)
    replayer = Replayer(store, recipe.record, pool.get) if replay and executor == "local" else None
    run: RunStore | None = None
    lease: WriterLease | None = None
    heartbeat: Heartbeat | None = None
    try:
        first: tuple[list[StageResult], dict[str, Any]] | None = None
        if manifest is None:
            # a fresh run checks what it can before its folder exists: the models open and the source reads
            # its inputs, so a bad model or input leaves no half-made run behind
            specs = [spec for stage in stages for spec in stage.specs]
            identities = pool.identities(specs)
            first = source.records(config)
        if manifest is None:
            _clear_failed_start(run_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
        url = store_url_of(run_dir, run_store_url, manifest or {})
        if manifest is None:  # written before the run store exists: a run directory always has one
            manifest = build_manifest(
                recipe,
                config,
                identities=identities,
                store_url=recorded_url(store.url),
                run_store_url=DEFAULT_RUN_STORE if run_store_url is None else recorded_url(url),
            )
            manifest["run_id"] = run_label
            write_json(run_dir / MANIFEST, manifest)
        run = RunStore(url)
        lease = WriterLease(run).acquire()  # one writer per run: a second build or resume is refused here
        heartbeat = Heartbeat(run).start()  # `runs show` tells a running build from a stopped one
        human_rate = _remember_rate(run, human_rate)
        if decisions:
            tasks = people_tasks(stages)
            if not tasks:
                raise ConfigError(f"recipe {recipe.name} has no stage people do to take --decisions")
            changed = import_decisions(run, decisions, tasks)
            logger.info("imported %d decision(s) of people", changed)
        run.set_meta({"state": "running"})
        run.set_meta({PEOPLE_STAGES: json.dumps(people_stages(stages), sort_keys=True)})  # the app's undo reads it
        records = _source(recipe, config, source, run, first)
        waiting: list[StageReport] = []
        before: Stage | None = None
        for whole in segments(stages):
            if before is not None:  # the ok results of the segment before (read only when a segment follows)
                records = run.results(before.name, "ok", recipe.record)
            cut = len(whole)
            if waiting:  # a stage that needs every record (or every one before it), or would pause the run, waits
                cut = next((i for i, stage in enumerate(whole) if _needs_all_before(stage)), cut)
                if cut == 0:
                    break
            segment = whole[:cut]
            try:
                reports = run_stages(
                    segment,
                    records,
                    run,
                    work,
                    sizes=[config.batch_for(stage.name) for stage in segment],
                    rounds=config.call_rounds,
                    width=_width(segment, config, streaming, work),
                    stored_inputs=_stored_inputs(run, recipe, segment),
                    model=recipe.record,
                    progress=progress,
                    causes=causes,
                    awaiting_batches=lambda: bool(pool.awaiting_batches()),
                    replayer=replayer,
                )
            except RunIncomplete:
                batches = pool.awaiting_batches()
                if not batches:
                    raise
                # the records wait for the API's batches: not a failure
                run.set_meta({"state": AWAITING_BATCH, BATCHES: json.dumps(batches)})
                return BuildSummary(
                    run_dir,
                    AWAITING_BATCH,
                    recipe=recipe.name,
                    batches=batches,
                    open_batches=store.batches(ids=batches),
                    ledger=dict(store.ledger_summary(run_label, price=prices.cost)),
                    diagnoses=_diagnoses(pool),
                )
            paused = False
            for stage, report in zip(segment, reports, strict=True):
                if report.awaiting:
                    if not stage.people_tasks:
                        raise SenseforgeError(f"stage {stage.name} waits for people but reads none of their tasks")
                    waiting.append(report)
                    paused = paused or stage.pauses_run
            if paused or cut < len(whole):
                break
            before = segment[-1]
        if waiting:
            # stage by stage, each stage's by id: its batches finish in any order when streamed
            queued = [
                task for report in waiting for task in sorted(report.tasks, key=lambda task: (task.id, task.type))
            ]
            _write_queue(run_dir, queued, run)
            _write_panels(run_dir, run, stages, recipe.record)
            run.set_meta({"state": "awaiting_review"})
            return BuildSummary(
                run_dir,
                "awaiting_review",
                recipe=recipe.name,
                awaiting=sum(len(report.awaiting) for report in waiting),
                waiting_for=dict(sorted(Counter(task.type for task in queued).items())),
                ledger=dict(store.ledger_summary(run_label, price=prices.cost)),
                diagnoses=_diagnoses(pool),
            )
        (run_dir / QUEUE).unlink(missing_ok=True)
        summary = _finish(recipe, config, source, stages, run_dir, run, store, run_label, human_rate, prices)
        summary.diagnoses = _diagnoses(pool)
        return summary
    finally:
        work.close()
        if heartbeat is not None:
            heartbeat.stop()
        if lease is not None:
            lease.release()
        if run is not None:
            run.close()
        if opened is not None:
            opened.close()


def _write_panels(
    run_dir: Path, run: RunStore, stages: Sequence[Stage], record: type[Record]
) -> list[StageResult] | None:
    """``panel.jsonl`` of the run's verification panel, when one was named (beside each dataset folder, as the
    stage places its verdicts); what it answered (``None``: none)."""
    panel = next((stage for stage in stages if isinstance(stage, PanelVerify) and stage.recorded), None)
    if panel is None:
        return None
    found = answered_by(run, panel, record)
    write_panels(run_dir, panel, found)
    return found


def _needs_all_before(stage: Stage) -> bool:
    """Whether ``stage`` waits for people's decisions before it: it needs every record (a barrier), every record
    before each one (it decides in order), or would pause the run itself."""
    return stage.barrier or isinstance(stage, InOrder) or stage.pauses_run


def _stored_inputs(run: RunStore, recipe: Recipe, segment: Sequence[Stage]) -> Callable[[int], list[StageResult]]:
    """The stored input of the segment's stage ``index``: the ok results of the stage before it."""

    def read(index: int) -> list[StageResult]:
        return run.results(segment[index - 1].name, "ok", recipe.record)

    return read


def _label(config: RecipeConfig) -> str:
    lang = getattr(config, "lang", None)
    return str(lang) if lang else "run"


def _remember_rate(run: RunStore, rate: float | Mapping[str, float] | None) -> float | Mapping[str, float] | None:
    if rate is not None:
        run.set_meta({"human_rate": json.dumps(rate) if isinstance(rate, Mapping) else repr(rate)})
        return rate
    recorded = run.meta("human_rate")
    if recorded is None:
        return None
    value = json.loads(recorded) if recorded.startswith("{") else float(recorded)
    return value if isinstance(value, dict) else float(value)


def _source(
    recipe: Recipe,
    config: RecipeConfig,
    source: Source,
    run: RunStore,
    made: tuple[Sequence[StageResult], dict[str, Any]] | None = None,
) -> list[StageResult]:
    """The first records: made once by the recipe's source (or given, ``made`` before the run folder existed),
    then read back from the run store."""
    stored = run.results(source.name, "ok", recipe.record)
    if stored or run.meta(SOURCE_FACTS) is not None:
        return stored
    records, facts = made if made is not None else source.records(config)
    run.put(source.name, sorted(records, key=lambda r: r.record_id))
    run.set_meta({SOURCE_FACTS: json.dumps(facts)})
    return run.results(source.name, "ok", recipe.record)


def _finish(
    recipe: Recipe,
    config: RecipeConfig,
    source: Source,
    stages: Sequence[Stage],
    run_dir: Path,
    run: RunStore,
    store: Store,
    run_label: str,
    human_rate: float | Mapping[str, float] | None,
    prices: PriceTable | None,
) -> BuildSummary:
    names = [source.name, *(stage.name for stage in stages)]
    facts = json.loads(run.meta(SOURCE_FACTS) or "{}")
    with cf.ThreadPoolExecutor(max_workers=1, thread_name_prefix="senseforge-calls") as reader:
        # the calls the cost report sums are read beside the release: the database takes them out of every stage's
        # payloads, and lets go of the interpreter meanwhile
        calls = reader.submit(calls_by_stage, run, names)
        rows = funnel_rows(run, names, recipe.splitting())
        released = release(
            recipe.release(config),
            recipe.name,
            run,
            run_dir,
            rows,
            splitting=recipe.splitting(),
            facts=facts,
            human_rate=human_rate,
            prices=prices,
        )
        funnel_doc = released.funnel
        judged = {task: run.count_judgements(task, "human") for task in people_tasks(stages)}
        if RECHECK_TASK in judged:  # re-checks come after the build: not its cost (see .recheck)
            judged[RECHECK_TASK] -= recheck_judgements(run)
        cost_doc = cost(
            run,
            names,
            kept=funnel_doc.kept,
            human_judgements=judged,
            human_rate=human_rate,
            lang=getattr(config, "lang", None),
            prices=prices,
            kept_unit=funnel_doc.kept_unit,
            calls=calls.result(),
        )
    answered = _write_panels(run_dir, run, stages, recipe.record)
    if answered is not None and isinstance(config, ReviewedConfig):
        # the review's task: people's part of the stage the run pauses for (the runner names no kind of stage)
        task = next((stage.people_tasks[0] for stage in stages if stage.pauses_run and stage.people_tasks), "verify")
        cost_doc.review_saved = saved_review(answered, config.review.k, human_rate, task)
    write_json(run_dir / "funnel.json", funnel_doc)
    write_json(run_dir / "cost.json", cost_doc)
    write_rejects(run_dir, run, names, recipe.record, released.rechecked)
    table = prices or PriceTable.load()
    totals = store.ledger_summary(run_label, price=table.cost)
    ledger = dict(totals)
    priced = [model for stage in cost_doc.stages.values() for model in stage.models] + totals["models"]
    pricing = {"rule": PRICING_RULE, "sources": table.sources, "models": table.used_for(priced)}
    write_json(run_dir / "ledger.json", {"run": run_label, **ledger, "pricing": pricing})
    run.set_meta({"state": "done"})
    return BuildSummary(
        run_dir,
        "done",
        recipe=recipe.name,
        funnel=funnel_doc,
        cost=cost_doc,
        ledger=ledger,
    )


__all__ = [
    "BuildSummary",
    "build",
    "import_decisions",
]
