"""``build crow``: CRoW's knowledge-grounded Winograd-style perturbation (Ismayilzada et al., 2023) on the engine.

contexts (source rows, filtered) → cka (knowledge triples: annotated by a model, or the
source's own) → ckv (an LM panel keeps triples with ≥ 2 of 3 votes) → wsg (one minimal
rewrite per kept triple, breaking it and flipping the label) → edits (≤ 5 words changed;
negation-only flagged) → dedup → wsv (an LM panel keeps rewrites with ≥ 2 of 3 votes) →
the dataset. Each task runs the stages its spec names (:mod:`.tasks`); the rest pass.

Outputs under the run directory: ``dataset/<task>.jsonl`` (binary examples, see
:mod:`.assemble`), ``release/`` (public file without labels, private file, a baseline
submission), ``funnel.json`` (per stage, and per task: stages proposed → kept, contexts
kept and why the rest were left out, the dimension histograms of CRoW's Figure 3, κ and α
of each panel), ``cost.json`` (LM tokens and money; human HITs at ``--human-rate``, per
stage: ``cka=…,ckv=…``), ``cost_by_task.json`` and ``rejects.jsonl``.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any, ClassVar, Final

from rich.console import RenderableType
from rich.table import Table

from senseforge.data.text import plural
from senseforge.errors import ConfigError
from senseforge.llm.base import GenerateRequest, LoglikelihoodRequest
from senseforge.pipelines.contamination import GATE, gate
from senseforge.pipelines.contamination import manifest_facts as contamination_facts
from senseforge.pipelines.crow.assemble import assemble, dimension_counts, validation_figures, write_outputs
from senseforge.pipelines.crow.config import CrowConfig
from senseforge.pipelines.crow.dryrun import crow_author
from senseforge.pipelines.crow.records import CrowRecord, required
from senseforge.pipelines.crow.source import read_sources, source_records
from senseforge.pipelines.crow.stages import (
    NEGATION_ONLY,
    Annotate,
    CheckEdits,
    Dedup,
    PeopleAnnotate,
    PeopleRewrite,
    Rewrite,
    ValidateKnowledge,
    ValidateSchema,
)
from senseforge.pipelines.crow.tasks import TaskSpec
from senseforge.pipelines.crow.templates import template_hashes
from senseforge.pipelines.recipe import Flag
from senseforge.pipelines.report import Funnel, StageFunnel, cost_by, funnel_rows_by, write_json
from senseforge.pipelines.runstore import Record, RunStore, StageResult
from senseforge.pipelines.stage import Stage
from senseforge.registry.store import Unit

_TASK_STAGES = {
    "contexts": None,
    GATE: None,
    "cka": None,
    "ckv": "ckv",
    "wsg": "wsg",
    "edits": "wsg",
    "dedup": "wsg",
    "wsv": "wsv",
}
"""Per stage, the task-spec stage a task must run for the stage to be its (``None``: every task's)."""
DEMO_SOURCE = "demo_source.jsonl"


def demo_source() -> Path:
    """Our small bundled input (hand-written, not CRoW's data): a few contexts of four tasks."""
    return Path(str(resources.files("senseforge.pipelines.crow") / "data" / DEMO_SOURCE))


class CrowFunnel(Funnel):
    """The run's funnel: the stage rows, and per task its own rows and figures."""

    key_order: ClassVar[tuple[str, ...]] = ("tasks", "stages", "kept", "by_task")
    tasks: list[str]
    by_task: dict[str, dict[str, Any]]
    kept_unit: ClassVar[str] = "example"

    def summary(self) -> list[RenderableType]:
        """Per task: contexts kept, examples, why contexts were left out, the panels' agreement."""
        if not self.by_task:
            return [f"kept {plural(self.kept, 'item')}"]
        table = Table(title="per task: contexts kept of those in; examples = originals+rewrites")
        for column in ("task", "contexts", "examples", "left out", "CKV", "WSV"):
            table.add_column(column, justify="right" if column in ("contexts", "examples") else "left")
        for task, row in self.by_task.items():
            contexts, examples = row["contexts"], row["examples"]
            shown = str(examples["total"])
            if examples.get("rewrite") is not None:
                shown += f" = {examples['original']}+{examples['rewrite']}"
            left = ", ".join(f"{reason} {n}" for reason, n in contexts["left_out"].items())
            agree = row["agreement"]
            table.add_row(
                task,
                f"{contexts['kept']}/{contexts['in']}",
                shown,
                left,
                *map(_agreement, (agree.get("ckv"), agree.get("wsv"))),
            )
        return [table, f"kept {plural(self.kept, 'example')}"]


def _agreement(cell: dict[str, Any] | None) -> str:
    if not cell:
        return "–"
    kappa, alpha = cell.get("fleiss_kappa"), cell.get("krippendorff_alpha")
    return f"κ {'–' if kappa is None else f'{kappa:.2f}'} α {'–' if alpha is None else f'{alpha:.2f}'}"


def _author(request: GenerateRequest | LoglikelihoodRequest) -> str | float:
    return crow_author(request)


@dataclass(frozen=True)
class Contexts:
    """The source: one record per (context, original target), or per translation context."""

    name: str = "contexts"

    def records(self, config: CrowConfig) -> tuple[list[StageResult], dict[str, Any]]:
        specs = config.specs()
        paths = [Path(p) for p in config.source] or [demo_source()]
        default = config.task[0] if len(config.task) == 1 else None
        contexts = read_sources(paths, specs, default)
        tasks = list(config.task) or list(dict.fromkeys(c.task for c in contexts))
        if not tasks:
            raise ConfigError(f"{', '.join(map(str, paths))}: no rows to build from")
        made, facts = source_records(contexts, specs, tasks, n=config.n, seed=config.seed)
        records: list[StageResult] = list(made)
        return records, {**facts, "sources": [str(p) for p in paths], "task_order": tasks}


CONTAMINATION_DEFAULT: Final = "flag"
"""CRoW perturbs real task examples, often of public sets (CommonMT, the task datasets CRoW itself drew on): a
context a registered benchmark holds is flagged, not rejected (``--contamination reject`` rejects)."""


def context_unit(specs: Mapping[str, TaskSpec], record_id: str, data: CrowRecord) -> Unit:
    """A source record as the contamination check sees it: its context, in the task's language (a translation
    task's source language), as a registered binary benchmark keeps its contexts."""
    spec = specs.get(data.task)
    lang = None if spec is None else (spec.source_lang if spec.translation else spec.lang)
    return Unit(record_id, lang, data.context)


def _task(record: StageResult[CrowRecord]) -> str:
    return record.data.task


def _human_rate(run: RunStore) -> float | dict[str, float] | None:
    recorded = run.meta("human_rate")
    if recorded is None:
        return None
    value = json.loads(recorded) if recorded.startswith("{") else float(recorded)
    return value if isinstance(value, dict) else float(value)


@dataclass
class Crow:
    """CRoW's recipe: every stage by an LM panel (people come through the app next)."""

    name = "crow"
    summary = "Real task examples → knowledge triples → Winograd-style minimal rewrites, each stage validated (CRoW)."
    config_model = CrowConfig
    record: type[Record] = CrowRecord
    flags: ClassVar[Mapping[str, Flag]] = MappingProxyType(
        {
            "source": Flag(
                repeat=True,
                path=True,
                help="Source file or folder: CRoW-shaped JSON, CommonMT CSV, or JSONL mapped by a task spec; "
                "repeat for several. Default: our small bundled input.",
            ),
            "task_spec": Flag(
                path=True,
                aliases=("--task-file",),
                help="TOML of task specs, one table per task as in the built-in data/tasks.toml, adding to or "
                "replacing the built-in ones.",
            ),
            "n": Flag(help="Contexts per task: a seeded sample of those that pass the filters (default: all)."),
        }
    )
    authors: ClassVar[Mapping[str, Any]] = MappingProxyType({"crow-author": _author})

    def default_run_dir(self, config: CrowConfig) -> Path:
        return Path("runs") / ("crow-" + "-".join(config.task) if config.task else "crow")

    def source(self, config: CrowConfig) -> Contexts:
        return Contexts()

    def stages(self, config: CrowConfig) -> list[Stage]:
        tasks = config.specs()
        panels = config.panels()
        common: dict[str, Any] = {"tasks": tasks, "seed": config.seed}
        review: dict[str, Any] = {"seed": config.seed, "group": "crow-review", "tasks": tasks}
        annotate: Stage = (
            PeopleAnnotate("cka", tasks=tasks, max_triples=config.max_triples)
            if config.by("cka") == "human"
            else Annotate(
                "cka",
                config.model_for("cka"),
                style=config.style_for("cka"),
                temperature=config.cka_temperature,
                max_tokens=config.max_tokens,
                max_triples=config.max_triples,
                **common,
            )
        )
        rewrite: Stage = (
            PeopleRewrite("wsg", tasks=tasks, max_edits=config.max_edits)
            if config.by("wsg") == "human"
            else Rewrite(
                "wsg",
                config.model_for("wsg"),
                style=config.style_for("wsg"),
                temperature=config.wsg_temperature,
                max_tokens=config.max_tokens,
                **common,
            )
        )
        return [
            *gate(config, partial(context_unit, tasks), CONTAMINATION_DEFAULT),
            annotate,
            ValidateKnowledge.of_panel("ckv", "ckv", panels["ckv"], **review),
            rewrite,
            CheckEdits("edits", tasks=tasks, max_edits=config.max_edits, negation_only=config.negation_only),
            Dedup("dedup", tasks=tasks),
            ValidateSchema.of_panel("wsv", "wsv", panels["wsv"], **review),
        ]

    def splitting(self) -> frozenset[str]:
        return frozenset({"cka"})

    def manifest(self, config: CrowConfig) -> dict[str, Any]:
        styles = sorted({config.style_for("cka"), config.style_for("wsg")})
        specs = config.specs()
        return {
            "seeds": {"sample": config.seed, "validators": [config.seed + i for i in range(config.k)]},
            "sampling": {
                "cka": {"temperature": config.cka_temperature, "max_tokens": config.max_tokens},
                "wsg": {"temperature": config.wsg_temperature, "max_tokens": config.max_tokens},
                "validators": {"temperature": config.validator_temperature},
            },
            "panel": [f"lm:{spec}#{i}" for i, spec in enumerate(config.panel)],
            "templates": template_hashes(styles),
            "task_specs": {name: spec.model_dump(mode="json") for name, spec in sorted(specs.items())},
            **contamination_facts(config, CONTAMINATION_DEFAULT),
        }

    def finish(
        self, config: CrowConfig, run: RunStore, run_dir: Path, rows: list[StageFunnel], facts: dict[str, Any]
    ) -> Funnel:
        specs = config.specs()
        tasks = list(facts.get("task_order") or config.task)
        outputs = assemble(run, specs, tasks, final_stage="wsv", kept_stage="ckv")
        write_outputs(run_dir, outputs, specs)
        names = [row.stage for row in rows]
        kept = run.results("ckv", "ok", CrowRecord)
        task_rows = funnel_rows_by(run, names, _task, CrowRecord, self.splitting(), tasks)
        costs = cost_by(
            run,
            names,
            _task,
            kept={task: len(outputs[task].rows) for task in tasks},
            human_judgements={task: _human_counts(run, task, specs[task]) for task in tasks},
            human_rate=_human_rate(run),
            kept_unit=CrowFunnel.kept_unit,
            record_model=CrowRecord,
        )
        by_task: dict[str, dict[str, Any]] = {}
        for task in tasks:
            spec, out = specs[task], outputs[task]
            mine = [required(r.data.triple, "triple") for r in kept if r.data.task == task]
            labels = Counter(row["label"] for row in out.rows)
            origins = Counter(row["origin"] for row in out.rows)
            by_task[task] = {
                "stages_run": list(spec.stages),
                "source": facts.get("tasks", {}).get(task, {}),
                "stages": [
                    row.model_dump(mode="json", by_alias=True)
                    for row in task_rows[task]
                    if _TASK_STAGES[row.stage] is None or spec.runs(str(_TASK_STAGES[row.stage]))
                ],
                "contexts": {"in": out.contexts, "kept": out.kept, "left_out": dict(sorted(out.dropped.items()))},
                "examples": {
                    "total": len(out.rows),
                    "original": origins["source"] if spec.rewrites else None,
                    "rewrite": origins["rewrite"] if spec.rewrites else None,
                    "valid": labels[1],
                    "invalid": labels[0],
                    "negation_only": sum(NEGATION_ONLY in (row.get("flags") or []) for row in out.rows),
                },
                "dimensions": {
                    "kept_triples": dimension_counts(t.dimension for t in mine),
                    "examples": dimension_counts(t.get("dimension") for row in out.rows for t in row["knowledge"]),
                },
                "agreement": {name: validation_figures(run, name, task) for name in ("ckv", "wsv") if spec.runs(name)},
            }
        write_json(
            run_dir / "cost_by_task.json", {task: c.model_dump(mode="json", by_alias=True) for task, c in costs.items()}
        )
        total = sum(len(out.rows) for out in outputs.values())
        return CrowFunnel(tasks=tasks, stages=rows, kept=total, by_task=by_task)


def _human_counts(run: RunStore, task: str, spec: TaskSpec) -> dict[str, int]:
    counts: dict[str, int] = {}
    for name in ("ckv", "wsv"):
        if not spec.runs(name):
            continue
        stored = run.judgements_for(name)
        counts[name] = sum(
            1 for item, votes in stored.items() if item.startswith(f"{task}/") for v in votes if v.source == "human"
        )
    return counts


CROW = Crow()
"""The recipe."""
