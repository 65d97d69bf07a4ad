"""``build human-gen``: Putri et al.'s Human_Gen (§4.2, Appendix C) — people write, check and answer.

slots (a concept table assigned to a pool of creators) → create (each creator writes
from their concepts) → qc (a checker marks each item complete or sends it back; the
creator revises; again, until complete) → answer (every other pool member answers blind)
→ the dataset. Every human stage stops the run "awaiting review" with the tasks it
queued in the annotation app (``senseforge annotate serve``); ``--resume`` reads the new
judgements, moves each item on, and queues what comes next. Items go on one by one: a
checker need not wait for the last creator.

Outputs under the run directory, for the run's language: ``<lang>/dataset/test.jsonl``
in the released shape of Putri et al.'s Human_Gen (``id``, ``category``,
``question_concept``, ``question``, ``choices{label,text}``, ``answer_creator``,
``answer_majority``, ``answers``, ``answers_uncertainty``, ``question_ambiguity``,
``option_ambiguity``, ``reason``, each keyed by answerer) plus ``creator``,
``distractor``, ``qc_history`` and ``lang``; ``<lang>/items/test.jsonl`` (full items);
``funnel.json`` with QC rounds and the answerers' agreement (Fleiss' κ, Krippendorff's α);
``cost.json`` pricing judgements per task type (``--human-rate create=…,answer=…``).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, ClassVar, Final

from senseforge.data.concepts import Concept, example_table, read_concepts
from senseforge.data.schema import MCItem, Provenance
from senseforge.errors import ConfigError
from senseforge.evaluate import policies
from senseforge.pipelines.contamination import gate, kept_stage, self_check
from senseforge.pipelines.contamination import manifest_facts as contamination_facts
from senseforge.pipelines.human_gen.config import HumanGenConfig
from senseforge.pipelines.human_gen.records import HumanGenRecord
from senseforge.pipelines.human_gen.stages import BlindAnswers, CreateByPeople, QualityControl, assign, slot_id
from senseforge.pipelines.recipe import Flag
from senseforge.pipelines.release import Finished, Release
from senseforge.pipelines.runstore import Record, StageResult, as_stored
from senseforge.pipelines.stage import Stage
from senseforge.registry.store import Unit
from senseforge.runfolder.figures import Agreement, Counts, Figure, Rated

logger = logging.getLogger(__name__)


CONTAMINATION_DEFAULT: Final = "reject"
"""People write human-gen's items anew: a copy of a registered benchmark's item, or of another item of the
build, is rejected (see ``--contamination``)."""


def draft_unit(record_id: str, data: HumanGenRecord) -> Unit:
    """An item as the contamination check sees it: the question as written (or revised), with its answer."""
    draft = data.current_draft()
    gold = next((c.text for c in draft.choices if c.label == draft.answer), None)
    return Unit(record_id, data.lang, draft.question, gold)


class Slots:
    """The first records: one per (creator, concept) the assignment makes, for the run's language."""

    name = "slots"

    def records(self, config: HumanGenConfig) -> tuple[list[StageResult], dict[str, Any]]:
        path = Path(config.concepts) if config.concepts else example_table()
        every = read_concepts(path)
        rows = [row for row in every if row.lang in (None, config.lang)]
        if len(rows) < len(every):
            other = sorted({str(row.lang) for row in every if row.lang not in (None, config.lang)})
            logger.warning(
                "%s: %d row(s) in other languages (%s) were left out; this run is for %s",
                path,
                len(every) - len(rows),
                ", ".join(other),
                config.lang,
            )
        unique = list(dict.fromkeys(Concept(row.category, row.concept) for row in rows))
        if not unique:
            raise ConfigError(f"{path}: no concepts for language {config.lang}")
        seen: Counter[tuple[str, Concept]] = Counter()
        slots: list[StageResult[HumanGenRecord]] = []
        for creator, concept in assign(unique, config.pool, config.assignment):
            occurrence = seen[(creator, concept)]
            seen[(creator, concept)] += 1
            slot = HumanGenRecord(lang=config.lang, category=concept.category, concept=concept.concept, creator=creator)
            slots.append(StageResult(slot_id(config.lang, creator, concept, occurrence), "ok", slot))
        per_creator = Counter(r.data.creator for r in slots)
        facts = {
            "concept_table": str(path),
            "concepts": len(unique),
            "slots": len(slots),
            "per_creator": {name: per_creator.get(name, 0) for name in config.pool},
        }
        return list(slots), facts


def to_item(record: StageResult[HumanGenRecord]) -> MCItem:
    """A kept record as a full item (answers and QC history in ``metadata``, their keys sorted)."""
    data = record.data
    draft = data.current_draft()
    return MCItem(
        id=record.record_id,
        lang=data.lang,
        question=draft.question,
        question_concept=data.concept,
        choices=[c.model_copy() for c in draft.choices],
        answer=draft.answer,
        category=data.category,
        provenance=Provenance(recipe="human-gen", source_ids=[record.record_id], review="human"),
        metadata={
            "creator": data.creator,
            "distractor": draft.distractor,
            "concept_form": draft.concept_form,
            "answer_majority": data.answer_majority,
            "answers": as_stored([a.model_dump(mode="json") for a in data.answers or ()]),
            "qc_history": as_stored([e.model_dump(mode="json") for e in data.qc_history or ()]),
            **({"contamination": data.contamination} if data.contamination else {}),
        },
    )


def released_row(record: StageResult[HumanGenRecord], item: MCItem) -> dict[str, Any]:
    """An item in the released Human_Gen shape, plus ``creator``, ``distractor``, ``qc_history``, ``lang``."""
    data = record.data
    labels = [c.label for c in item.choices]
    answers = data.answers or []
    return {
        "id": item.id,
        "category": item.category,
        "question_concept": item.question_concept,
        "question": item.question,
        "choices": {"label": labels, "text": [c.text for c in item.choices]},
        "answer_creator": item.answer,
        "answer_majority": data.answer_majority,
        "answers": {a.annotator: a.choice for a in answers},
        "answers_uncertainty": {a.annotator: "certain" if a.certain else "uncertain" for a in answers},
        "question_ambiguity": {
            a.annotator: "ambiguous" if "ambiguous-question" in a.flags else "clear" for a in answers
        },
        "option_ambiguity": {
            a.annotator: ["ambiguous" if f"ambiguous-option:{label}" in a.flags else "clear" for label in labels]
            for a in answers
        },
        "reason": {a.annotator: a.reason or "" for a in answers},
        "creator": data.creator,
        "distractor": data.current_draft().distractor,
        "qc_history": as_stored([e.model_dump(mode="json") for e in data.qc_history or ()]),
        "lang": item.lang,
    }


@dataclass
class HumanGen:
    """Putri et al.'s Human_Gen."""

    name = "human-gen"
    summary = "People write, check and answer culture-grounded questions in the app (Human_Gen)."
    config_model = HumanGenConfig
    record: type[Record] = HumanGenRecord
    flags: ClassVar[Mapping[str, Flag]] = MappingProxyType({"concepts": Flag(path=True)})
    authors: ClassVar[Mapping[str, Any]] = MappingProxyType({})

    def default_run_dir(self, config: HumanGenConfig) -> Path:
        return Path("runs") / f"human-gen-{config.lang}"

    def source(self, config: HumanGenConfig) -> Slots:
        return Slots()

    def stages(self, config: HumanGenConfig) -> list[Stage]:
        return [
            CreateByPeople("create", options=config.options),
            *gate(config, draft_unit, CONTAMINATION_DEFAULT),
            QualityControl("qc", pool=config.pool, checkers=config.checkers, max_rounds=config.max_qc_rounds),
            BlindAnswers.of_panel("answer", config.panels()["answer"], pool=config.pool),
            *self_check(config, draft_unit, CONTAMINATION_DEFAULT),
        ]

    def splitting(self) -> frozenset[str]:
        return frozenset()

    def manifest(self, config: HumanGenConfig) -> dict[str, Any]:
        return {
            "people": {"pool": list(config.pool), "checkers": list(config.checkers), "answers_per_item": config.k},
            **contamination_facts(config, CONTAMINATION_DEFAULT),
        }

    def release(self, config: HumanGenConfig) -> Release[HumanGenRecord]:
        """The answered items, in the released Human_Gen shape under ``<lang>/``, all in test."""
        return Release(
            kept=kept_stage(config, "answer"),
            record=HumanGenRecord,
            item=lambda record, _group: to_item(record),
            row=released_row,
            folder=config.lang,
            figures=lambda done: [*_qc_figures(done), _answer_figure(config, done)],
            lang=config.lang,
            title="The human-written items: slots, creation, QC and answering",
        )


def _qc_figures(done: Finished[HumanGenRecord]) -> list[Figure]:
    """Items by the QC rounds they took, and what QC did in all."""
    decided = [*done.run.results("qc", "ok", HumanGenRecord), *done.run.results("qc", "rejected", HumanGenRecord)]
    rounds: Counter[int] = Counter()
    sent_back = revisions = 0
    for record in decided:
        history = record.data.qc_history or []
        rounds[sum(1 for e in history if e.status in ("complete", "needs_revision"))] += 1
        sent_back += any(e.status == "needs_revision" for e in history)
        revisions += sum(1 for e in history if e.status == "revised")
    unresolved = len(done.run.results("qc", "rejected"))
    totals = {"items": len(decided), "sent_back": sent_back, "revisions": revisions, "unresolved": unresolved}
    caption = (
        f"Quality control: items by the rounds they took to pass ({sent_back} sent back, {revisions} revisions, "
        f"{unresolved} unresolved)."
    )
    by_rounds: list[Figure] = []
    if rounds:
        values: dict[str, int | float | None] = {f"{n} round{'' if n == 1 else 's'}": rounds[n] for n in sorted(rounds)}
        by_rounds.append(Counts(name="qc", title="QC rounds", values=values, unit="items", caption=caption))
    return [
        *by_rounds,
        Counts(name="qc-totals", title="Quality control", values=dict(totals), draw=False, summary=True),
    ]


def _answer_figure(config: HumanGenConfig, done: Finished[HumanGenRecord]) -> Figure:
    """How far the pool's blind answers agreed, over every answered item."""
    run = done.run
    ids = {r.record_id for r in (*run.results("answer", "ok"), *run.results("answer", "rejected"))}
    by_item = {
        item: [s.judgement for s in stored if s.source == "human" and s.judgement.annotator in config.pool]
        for item, stored in run.judgements_for("answer", ids).items()
    }
    stats = policies.agreement(by_item, "answer")
    agree = sum(1 for r in done.kept if r.data.answer_majority == r.data.current_draft().answer)
    rated = Rated(
        label="answerers",
        items=len(ids),
        raters=config.k,
        ratings=stats.ratings,
        fleiss_kappa=stats.fleiss_kappa,
        krippendorff_alpha=stats.krippendorff_alpha,
        extra={"excluded": len(ids) - len(done.kept), "majority is the creator's": agree},
    )
    caption = f"Answer agreement: {config.k} answers per item over {len(ids)} items."
    return Agreement(name="answers", title="Answer agreement", groups=[rated], caption=caption, summary=True)


HUMAN_GEN = HumanGen()
"""The recipe."""
