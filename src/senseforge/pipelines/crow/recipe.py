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

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import partial
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any, ClassVar, Final

from senseforge.errors import ConfigError
from senseforge.llm.base import GenerateRequest, LoglikelihoodRequest
from senseforge.pipelines.contamination import GATE, gate
from senseforge.pipelines.contamination import manifest_facts as contamination_facts
from senseforge.pipelines.crow.assemble import (
    TaskOutput,
    assemble,
    dimension_counts,
    leave_out,
    validation_figures,
    write_outputs,
)
from senseforge.pipelines.crow.config import CrowConfig
from senseforge.pipelines.crow.dryrun import crow_author
from senseforge.pipelines.crow.records import CrowRecord
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
from senseforge.pipelines.release import OwnFiles
from senseforge.pipelines.runstore import Record, RunStore, StageResult
from senseforge.pipelines.stage import Stage
from senseforge.registry.store import Unit
from senseforge.runfolder import files
from senseforge.runfolder.figures import Agreement, Counts, Figure, Number, Rated, Table

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

    def release(self, config: CrowConfig) -> OwnFiles[CrowRecord, Assembled]:
        """Binary rows per task and the ``release/`` files (:mod:`.assemble`); the funnel grouped by task."""
        specs = config.specs()

        def write(run: RunStore, run_dir: Path, facts: Mapping[str, Any], dropped: frozenset[str]) -> Assembled:
            tasks = list(facts.get("task_order") or config.task)
            outputs = assemble(run, specs, tasks, final_stage="wsv", kept_stage="ckv")
            removed = leave_out(outputs, dropped) if dropped else {}
            write_outputs(run_dir, outputs, specs)
            return Assembled(specs, outputs, facts.get("tasks", {}), removed)

        def shown(task: str, stage: str) -> bool:
            return _TASK_STAGES[stage] is None or specs[task].runs(str(_TASK_STAGES[stage]))

        return OwnFiles(
            write=write,
            kept=lambda done: {task: len(out.rows) for task, out in done.outputs.items()},
            record=CrowRecord,
            group_by="task",
            group_of=_task,
            shown=shown,
            judgements=lambda run, task: _human_counts(run, task, specs[task]),
            figures=_figures,
            group_figures=_task_figures,
            cost_file=files.COST_BY_TASK,
            rechecked=lambda done: done.rechecked,
            title="CRoW's construction funnel over every task: records into and out of each stage",
            kept_unit="example",
            judges_in_figures=True,
        )


@dataclass(frozen=True)
class Assembled:
    """What a finished CRoW run wrote: per task its rows and what became of its contexts, and the source's facts."""

    specs: Mapping[str, TaskSpec]
    outputs: Mapping[str, TaskOutput]
    source: Mapping[str, Any]
    rechecked: Mapping[str, Mapping[str, Mapping[str, Any]]] = field(default_factory=dict)
    """Per task, the examples people rejected on a re-check (left out), by id, each its released row."""


def _examples(spec: TaskSpec, out: TaskOutput) -> dict[str, Number]:
    labels = Counter(row["label"] for row in out.rows)
    origins = Counter(row["origin"] for row in out.rows)
    return {
        "total": len(out.rows),
        "original": origins["source"] if spec.rewrites else None,
        "rewrite": origins["rewrite"] if spec.rewrites else None,
        "valid": labels[1],
        "invalid": labels[0],
        "negation_only": sum(NEGATION_ONLY in (row.get("flags") or []) for row in out.rows),
    }


def _task_figures(run: RunStore, done: Assembled, task: str) -> list[Figure]:
    """A task's source, its contexts (kept, and why the rest were left out) and its examples, as numbers."""
    out = done.outputs[task]
    contexts: dict[str, Number] = {"in": out.contexts, "kept": out.kept}
    contexts.update({f"left out: {reason}": n for reason, n in sorted(out.dropped.items())})
    return [
        Counts(name="source", title="Source", values=dict(done.source.get(task, {})), draw=False),
        Counts(name="contexts", title="Contexts", values=contexts, draw=False),
        Counts(name="examples", title="Examples", values=_examples(done.specs[task], out), draw=False),
    ]


def _figures(run: RunStore, done: Assembled) -> list[Figure]:
    """Per task, the dimensions of the examples (CRoW's Table 2) and the validators' agreement."""
    tasks = list(done.outputs)
    per_task = [_examples(done.specs[t], done.outputs[t]) for t in tasks]
    out: list[Figure] = [
        Table(
            name="tasks",
            title="Per task",
            rows=tasks,
            columns=["contexts kept", "examples", "valid"],
            values=[[done.outputs[t].kept, x["total"], x["valid"]] for t, x in zip(tasks, per_task, strict=True)],
            unit="count",
            caption="CRoW per task: contexts kept, examples written and those valid (a rewrite that flips the label).",
            summary=True,
        )
    ]
    dims = {
        t: dimension_counts(k.get("dimension") for row in done.outputs[t].rows for k in row["knowledge"]) for t in tasks
    }
    labels = sorted({d for found in dims.values() for d in found})
    if labels:
        out.append(
            Table(
                name="dimensions",
                title="Dimensions",
                rows=labels,
                columns=tasks,
                values=[[dims[t].get(d) for t in tasks] for d in labels],
                unit="examples",
                caption="Commonsense dimensions of the examples per task (CRoW's Table 2 shape).",
            )
        )
    rated = [
        Rated(
            label=f"{task} · {stage}",
            items=found["items"],
            raters=found["raters"],
            fleiss_kappa=found["fleiss_kappa"],
            krippendorff_alpha=found["krippendorff_alpha"],
            extra={"accept_rate": found["accept_rate"]},
        )
        for task in tasks
        for stage in ("ckv", "wsv")
        if done.specs[task].runs(stage) and (found := validation_figures(run, stage, task))
    ]
    if rated:
        caption = "Validators' agreement per task and validation stage (CKV: knowledge, WSV: rewrites)."
        out.append(Agreement(name="validators", title="Validators' agreement", groups=rated, caption=caption))
    return out


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
