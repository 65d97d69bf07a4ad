"""``build culture-adapt``: Putri et al.'s LLM_Adapt (§4.1) on the recipe engine.

source (the items of an existing benchmark, each keeping its split) → screen (offensive
words, ambiguous options: dropped before any call) → extract (person names and places) →
relevance (concept, names and places each judged by five prompts) → adapt (a full
rewrite for the culture and the adaptation language, a name-only rewrite, or nothing) →
check (five choices A–E, the answer among them, distinct choices) → localize (a draft
still in the source language translated into the adaptation language) → translate (field
by field into each further language) → back_translate (into the adaptation language) →
keep (the concept still in the question in every language; every translation faithful) → with ``--panel``,
verify (a verification panel answers each kept item in every language: :mod:`.verify`).

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

from senseforge.data.schema import Choice, MCItem, Provenance
from senseforge.llm.base import GenerateRequest, LoglikelihoodRequest
from senseforge.pipelines.contamination import gate, kept_stage, self_check
from senseforge.pipelines.contamination import manifest_facts as contamination_facts
from senseforge.pipelines.culture_adapt import templates
from senseforge.pipelines.culture_adapt.config import CultureAdaptConfig
from senseforge.pipelines.culture_adapt.dryrun import author_loglikelihood, author_reply
from senseforge.pipelines.culture_adapt.records import AdaptRecord, item_id
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
from senseforge.pipelines.culture_adapt.verify import AdaptVerify, difficulty, panel_figures
from senseforge.pipelines.moderation import Moderator, default_moderator
from senseforge.pipelines.recipe import Flag
from senseforge.pipelines.release import Finished, Release, Splitting
from senseforge.pipelines.runstore import Record, StageResult, as_stored
from senseforge.pipelines.stage import Stage
from senseforge.pipelines.taskqueue import QueuedTask, creator_of
from senseforge.registry.store import Unit
from senseforge.runfolder.figures import Counts, Figure

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


def to_item(config: CultureAdaptConfig, record: StageResult[AdaptRecord], lang: str) -> MCItem:
    """A kept record as its item in ``lang`` (its metadata as JSON with the keys the run store sorted)."""
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
    item = item_in(data, lang)
    return MCItem(
        id=item_id(lang, data.source_id),
        lang=lang,
        question=item.question,
        question_concept=item.concept,
        choices=[Choice(label=label.strip().upper(), text=text) for label, text in item.choices],
        answer=item.answer.strip().upper(),
        difficulty=difficulty(data, lang),
        provenance=Provenance(recipe="culture-adapt", source_ids=[data.source_id], model_ids=_models(config, data)),
        metadata=meta,
    )


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
    item = to_item(config, record, config.adaptation_lang)
    return QueuedTask(ADAPT_CHECK_TASK, item, k=config.adapt_check_k, group="culture-adapt", creator=creator_of(item))


def released_row(record: StageResult[AdaptRecord], item: MCItem) -> dict[str, Any]:
    """An item in Putri et al.'s released LLM_Adapt shape, plus ``lang``."""
    return {
        "id": item.id,
        "question": item.question,
        "question_concept": item.question_concept,
        "choices": {"label": [c.label for c in item.choices], "text": [c.text for c in item.choices]},
        "answer_creator": item.answer,
        "lang": item.lang,
    }


def _adapted(done: Finished[AdaptRecord]) -> list[Figure]:
    """Kept items by how they were adapted (all zero when nothing was kept)."""
    modes = {"full": 0, "names": 0, "none": 0}
    for record in done.kept:
        modes[record.data.mode or "none"] += 1
    caption = "Kept items by how they were adapted: full rewrite, names only, or none needed."
    values: dict[str, int | float | None] = dict(modes)
    return [Counts(name="adapted", title="Adaptation", values=values, unit="kept items", caption=caption, summary=True)]


def _language(done: Finished[AdaptRecord], lang: str) -> list[Figure]:
    """What the language kept, and how many of its items read as another language."""
    other = sum(1 for r in done.kept if (r.data.lang_detected or {}).get(lang) not in (lang, None))
    values: dict[str, int | float | None] = {"kept": len(done.items[lang]), "other_language": other}
    return [Counts(name="language", title="Language", values=values, draw=False)]


def _language_and_panel(done: Finished[AdaptRecord], lang: str) -> list[Figure]:
    """A language's figures with a verification panel: :func:`_language`'s, then the panel's."""
    return [*_language(done, lang), *panel_figures(done, lang)]


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
            *AdaptVerify.configured(config, config.langs),
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

    def release(self, config: CultureAdaptConfig) -> Release[AdaptRecord]:
        """Per language a folder: every kept item in it, in Putri et al.'s shape, in the split of its source."""
        return Release(
            kept=kept_stage(config, "verify" if config.panel else "keep"),
            record=AdaptRecord,
            item=lambda record, lang: to_item(config, record, str(lang)),
            row=released_row,
            split=Splitting(of=lambda record: str(record.data.split)),
            groups=config.langs,
            group_by="lang",
            folders=True,
            figures=_adapted,
            group_figures=_language_and_panel if config.panel else _language,
            groups_title="Records out of each stage per language (Putri et al.'s per-language construction).",
        )


CULTURE_ADAPT = CultureAdapt()
"""The recipe with the shipped moderation word lists."""
