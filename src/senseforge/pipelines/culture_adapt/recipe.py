"""``build culture-adapt``: Putri et al.'s LLM_Adapt (§4.1) on the recipe engine.

source (the items of an existing benchmark, each keeping its split) → screen (offensive
words, ambiguous options: dropped before any call) → extract (person names and places) →
relevance (concept, names and places each judged by five prompts) → adapt (a full
rewrite for the culture and the adaptation language, a name-only rewrite, or nothing) →
check (five choices A–E, the answer among them, distinct choices) → localize (a draft
still in the source language translated into the adaptation language) → translate (field
by field into each further language) → back_translate (into the adaptation language) →
keep (the concept still in the question in every language; every translation faithful).

Outputs, per language: ``<lang>/dataset/<split>.jsonl`` in Putri et al.'s released shape
(``id`` = ``adapt_<lang>_<source id>``, ``question``, ``question_concept``,
``choices{label,text}``, ``answer_creator``, plus ``lang``), ``<lang>/items/`` (full
records with provenance) and ``<lang>/funnel.json``; the run's ``funnel.json`` and
``cost.json`` cover the whole run (an item is kept or dropped in every language together).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from types import MappingProxyType
from typing import Any, ClassVar, Final, Literal

from rich.console import RenderableType

from senseforge.data.schema import Choice, MCItem, Provenance
from senseforge.data.splits import SPLIT_NAMES
from senseforge.data.text import plural
from senseforge.llm.base import GenerateRequest, LoglikelihoodRequest
from senseforge.pipelines.contamination import gate, kept_stage, self_check
from senseforge.pipelines.contamination import manifest_facts as contamination_facts
from senseforge.pipelines.culture_adapt import templates
from senseforge.pipelines.culture_adapt.config import CultureAdaptConfig
from senseforge.pipelines.culture_adapt.dryrun import author_loglikelihood, author_reply
from senseforge.pipelines.culture_adapt.records import AdaptRecord
from senseforge.pipelines.culture_adapt.similarity import similarity_for
from senseforge.pipelines.culture_adapt.source import SourceItems
from senseforge.pipelines.culture_adapt.stages import (
    BackTranslate,
    Check,
    Extract,
    Keep,
    Localize,
    Relevance,
    Rewrite,
    Screen,
    SpacyExtract,
    Translate,
    adapt,
    item_in,
)
from senseforge.pipelines.moderation import Moderator, default_moderator
from senseforge.pipelines.recipe import Flag
from senseforge.pipelines.report import Funnel, StageFunnel, write_json, write_splits
from senseforge.pipelines.runstore import Record, RunStore, StageResult, as_stored
from senseforge.pipelines.stage import Stage
from senseforge.pipelines.taskqueue import QueuedTask, creator_of
from senseforge.registry.store import Unit

ADAPT_CHECK_TASK = "adapt-check"
"""The annotation task adapted items are queued for (the source beside the adapted item)."""


def culture_adapt_author(request: GenerateRequest | LoglikelihoodRequest) -> str | float:
    """``scripted/culture-adapt-author``: the stand-in model of dry runs."""
    if isinstance(request, LoglikelihoodRequest):
        return author_loglikelihood(request)
    return author_reply(request)


def culture_of(config: CultureAdaptConfig) -> str:
    """The target culture: as given, or the culture of the adaptation language."""
    return config.target_culture or templates.default_culture(config.adaptation_lang)


def item_id(lang: str, source_id: str) -> str:
    """The released id: ``adapt_<lang>_<source id>``."""
    return f"adapt_{lang}_{source_id}"


def _models(config: CultureAdaptConfig, data: AdaptRecord) -> list[str]:
    stages = ["relevance"] if data.extractor != "lm" else ["extract", "relevance"]
    if data.mode == "full":
        stages.append("adapt")
    elif data.mode == "names":
        stages.append("rename")
    if len(config.langs) > 1 or data.draft_lang != config.adaptation_lang:
        stages.append("translate")
    return list(dict.fromkeys(config.model_for(stage) for stage in stages))


def stage_hashes(config: CultureAdaptConfig) -> dict[str, str]:
    """The hashes of every template the run's stages use, each in its stage's prompt style."""
    out: dict[str, str] = {}
    for stage in config.lm_stages:  # each model-calling stage (rename: adapt's names-only rewrite) has templates
        if stage == "extract" and config.extractor != "lm":
            continue
        hashes = templates.template_hashes(config.langs, config.style_for(stage))
        out.update({key: value for key, value in hashes.items() if key.split("/", 1)[0] == stage})
    return out


def _templates(config: CultureAdaptConfig, data: AdaptRecord) -> dict[str, str]:
    """The hashes of the templates this item went through."""
    skip = {"full": "rename", "names": "adapt"}.get(str(data.mode), "")
    skipped = {skip} if skip else {"adapt", "rename"}
    return {key: value for key, value in stage_hashes(config).items() if key.split("/", 1)[0] not in skipped}


def to_items(config: CultureAdaptConfig, record: StageResult[AdaptRecord]) -> dict[str, MCItem]:
    """A kept record as one item per language (its metadata as JSON with the keys the run store sorted)."""
    data = record.data
    meta: dict[str, Any] = {
        "split": data.split,
        "adapted": bool(data.adapted),
        "mode": data.mode,
        "irrelevant": list(data.irrelevant or []),
        "relevance": as_stored(data.relevance or {}),
        "names": list(data.names or []),
        "places": list(data.places or []),
        "extractor": data.extractor,
        "similarity": as_stored(data.similarity),
        "lang_detected": as_stored(data.lang_detected),
        "source": {"lang": data.source_lang, **data.source.to_json()},
        "templates": _templates(config, data),
        **({"contamination": data.contamination} if data.contamination else {}),
    }
    models = _models(config, data)
    out: dict[str, MCItem] = {}
    for lang in config.langs:
        item = item_in(data, lang)
        out[lang] = MCItem(
            id=item_id(lang, data.source_id),
            lang=lang,
            question=item.question,
            question_concept=item.concept,
            choices=[Choice(label=label.strip().upper(), text=text) for label, text in item.choices],
            answer=item.answer.strip().upper(),
            provenance=Provenance(recipe="culture-adapt", source_ids=[data.source_id], model_ids=models),
            metadata=meta,
        )
    return out


CONTAMINATION_DEFAULT: Final = "flag"
"""culture-adapt rewrites existing items, related to their source by design: a match is flagged for people to
see, not rejected (``--contamination reject`` rejects)."""


def draft_unit(record_id: str, data: AdaptRecord) -> Unit:
    """An adapted item as the contamination check sees it: the draft's question, in its language, with its answer."""
    draft = data.draft or data.source
    return Unit(record_id, data.draft_lang or data.source_lang, draft.question, draft.answer_text())


def _split_of(data: AdaptRecord) -> str | None:
    return data.split


def adapt_check(config: CultureAdaptConfig, record: StageResult[AdaptRecord]) -> QueuedTask | None:
    """The ``adapt-check`` task of a kept item that was adapted (its adaptation-language item), for
    ``adapt_check_k`` people; ``None`` for an item kept unchanged."""
    if config.adapt_check_k is None or not record.data.adapted:
        return None
    item = to_items(config, record)[config.adaptation_lang]
    return QueuedTask(ADAPT_CHECK_TASK, item, k=config.adapt_check_k, group="culture-adapt", creator=creator_of(item))


def released_row(item: MCItem) -> dict[str, Any]:
    """An item in Putri et al.'s released LLM_Adapt shape, plus ``lang``."""
    return {
        "id": item.id,
        "question": item.question,
        "question_concept": item.question_concept,
        "choices": {"label": [c.label for c in item.choices], "text": [c.text for c in item.choices]},
        "answer_creator": item.answer,
        "lang": item.lang,
    }


class CultureAdaptFunnel(Funnel):
    """The run's funnel: the stage rows, how items were adapted, and what each language kept per split."""

    key_order: ClassVar[tuple[str, ...]] = ("langs", "stages", "kept", "adapted", "by_lang")
    langs: list[str]
    adapted: dict[str, int]
    """Kept items by how they were adapted: ``full``, ``names`` (name-only rewrite), ``none`` (unchanged)."""
    by_lang: dict[str, dict[str, Any]]

    def summary(self) -> list[RenderableType]:
        """What each language kept per split, and how the kept items were adapted."""
        shown = " · ".join(
            f"{lang} {c['kept']}"
            + (f" ({', '.join(f'{name} {n}' for name, n in c['splits'].items())})" if c["splits"] else "")
            for lang, c in self.by_lang.items()
        )
        lines: list[RenderableType] = [f"kept {plural(self.kept, 'item')}" + (f": {shown}" if shown else "")]
        if self.adapted:
            lines.append(
                f"of them adapted: {self.adapted.get('full', 0)} rewritten for the culture, "
                f"{self.adapted.get('names', 0)} names only, {self.adapted.get('none', 0)} unchanged"
            )
        return lines

    def datasets(self, run_dir: Path) -> list[Path]:
        return [run_dir / lang / "dataset" for lang in self.langs] or super().datasets(run_dir)


@dataclass
class CultureAdapt:
    """Putri et al.'s LLM_Adapt (its moderator replaceable, like every recipe's)."""

    moderator: Moderator = field(default_factory=default_moderator)

    name = "culture-adapt"
    summary = "An existing benchmark carried into a culture and its languages, kept where it survives (LLM_Adapt)."
    config_model = CultureAdaptConfig
    record: type[Record] = AdaptRecord
    flags: ClassVar[Mapping[str, Flag]] = MappingProxyType(
        {
            "source": Flag(
                repeat=True, help="Source items, SPLIT=FILE or FILE (= test); repeat for several files. Default: ours."
            )
        }
    )
    authors: ClassVar[Mapping[str, Any]] = MappingProxyType({"culture-adapt-author": culture_adapt_author})

    def default_run_dir(self, config: CultureAdaptConfig) -> Path:
        return Path("runs") / f"culture-adapt-{'-'.join(config.langs)}"

    def source(self, config: CultureAdaptConfig) -> SourceItems:
        return SourceItems()

    def stages(self, config: CultureAdaptConfig) -> list[Stage]:
        culture = culture_of(config)
        first = config.adaptation_lang
        extract: Stage = (
            SpacyExtract("extract", model=config.spacy_model or "")
            if config.extractor == "spacy"
            else Extract("extract", config.model_for("extract"), style=config.style_for("extract"), seed=config.seed)
        )

        def rewrite(kind: Literal["full", "names"], stage: str) -> Rewrite:
            return Rewrite(
                "adapt",
                config.model_for(stage),
                kind=kind,
                style=config.style_for(stage),
                target_lang=first,
                culture=culture,
                temperature=config.temperature,
                max_tokens=config.max_tokens,
                seed=config.seed,
            )

        translate = config.model_for("translate")
        style = config.style_for("translate")
        return [
            Screen("screen", moderator=self.moderator),
            extract,
            Relevance(
                "relevance",
                config.model_for("relevance"),
                culture,
                votes=config.relevance_votes,
                seed=config.seed,
            ),
            adapt("adapt", full=rewrite("full", "adapt"), names=rewrite("names", "rename")),
            Check("check"),
            *gate(config, draft_unit, CONTAMINATION_DEFAULT),
            Localize("localize", translate, style=style, seed=config.seed, target=first),
            Translate(
                "translate", translate, style=style, seed=config.seed, source=first, targets=config.further_langs
            ),
            BackTranslate(
                "back_translate", translate, style=style, seed=config.seed, target=first, sources=config.further_langs
            ),
            Keep(
                "keep",
                config.langs,
                measure=config.similarity,
                min_similarity=config.min_similarity,
                min_chrf=config.min_chrf,
                # the scripted stand-ins "translate" by returning the text: flag their copies, reject a model's
                untranslated="flag" if translate.startswith("scripted/") else "reject",
                check=partial(adapt_check, config) if config.adapt_check_k is not None else None,
            ),
            *self_check(config, draft_unit, CONTAMINATION_DEFAULT, split_of=_split_of),
        ]

    def splitting(self) -> frozenset[str]:
        return frozenset()

    def manifest(self, config: CultureAdaptConfig) -> dict[str, Any]:
        return {
            "seeds": {"sampling.adapt": config.seed, "sampling.rename": config.seed, "test_from_train": config.seed},
            "sampling": {"adapt": {"temperature": config.temperature, "max_tokens": config.max_tokens}},
            "culture": culture_of(config),
            "similarity": similarity_for(config.similarity).identity(),
            "templates": stage_hashes(config),
            **contamination_facts(config, CONTAMINATION_DEFAULT),
        }

    def finish(
        self, config: CultureAdaptConfig, run: RunStore, run_dir: Path, rows: list[StageFunnel], facts: dict[str, Any]
    ) -> Funnel:
        kept = sorted(run.results(kept_stage(config, "keep"), "ok", AdaptRecord), key=lambda r: r.record_id)
        per_lang: dict[str, list[MCItem]] = {lang: [] for lang in config.langs}
        adapted = {"full": 0, "names": 0, "none": 0}
        for record in kept:
            adapted[record.data.mode or "none"] += 1
            for lang, item in to_items(config, record).items():
                per_lang[lang].append(item)
        by_lang: dict[str, dict[str, Any]] = {}
        stage_rows = [row.model_dump(mode="json", by_alias=True) for row in rows]
        for lang, items in per_lang.items():
            splits: dict[str, list[MCItem]] = {}
            for item in items:
                splits.setdefault(str(item.metadata["split"]), []).append(item)
            write_splits(run_dir / lang, splits, released_row)
            detected = [item.metadata.get("lang_detected") or {} for item in items]
            other = sum(1 for found in detected if isinstance(found, dict) and found.get(lang) not in (lang, None))
            counts = {name: len(splits.get(name, [])) for name in SPLIT_NAMES if name in splits}
            by_lang[lang] = {"kept": len(items), "splits": counts, "other_language": other}
            write_json(
                run_dir / lang / "funnel.json",
                {"lang": lang, "stages": stage_rows, "kept": len(items), "splits": counts, "other_language": other},
            )
        return CultureAdaptFunnel(
            langs=list(config.langs), stages=rows, kept=len(kept), adapted=adapted, by_lang=by_lang
        )


CULTURE_ADAPT = CultureAdapt()
"""The recipe with the shipped moderation word lists."""
