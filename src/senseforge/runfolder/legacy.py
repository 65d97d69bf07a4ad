"""Funnels written before the typed form: each recipe wrote its own shape; here they become a
:class:`~senseforge.runfolder.funnel.Funnel`, so a run built by an earlier version still opens and reports.

Every old shape has ``stages`` and ``kept``; what else it holds depends on the recipe that wrote it (named in
the manifest; a folder without one is recognised by its shape: ``question_sets`` mCSQA, ``by_task`` CRoW,
``qc`` and ``answers`` human-gen, ``adapted`` culture-adapt, ``by_lang`` and ``slots`` culture-gen). The
culture recipes kept each language's rows in ``<lang>/funnel.json``, read here as the run's groups. The
figures made from an old file are those the recipe declares today (same names, kinds, titles, captions and
numbers), so a report over an old run and a new one of the same build shows the same figures.

Each old shape is read through a small model, so a file of the wrong shape is an error that names the place.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from senseforge.data.splits import SPLIT_NAMES
from senseforge.runfolder import files
from senseforge.runfolder.documents import located, read_document
from senseforge.runfolder.figures import Agreement, Counts, Figure, Number, Rated, Share, Table
from senseforge.runfolder.funnel import Funnel, Group, StageRow, summed_splits
from senseforge.runfolder.manifest import Manifest

PER_LANGUAGE_TITLE = "Records out of each stage per language (Putri et al.'s per-language construction)."
"""The caption of the culture recipes' chart of every language's stage rows."""


class _Old(BaseModel):
    """What every old shape holds; the rest of a file is read by the recipe's own model."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    stages: list[StageRow] = Field(default_factory=list)
    kept: int = 0


def _empty_is_none(value: Any) -> Any:
    return None if value == {} else value


# mCSQA


class _QuestionSets(BaseModel):
    sampled: int = 0
    extraction: dict[str, int] = Field(default_factory=dict)


class _Refined(BaseModel):
    refined_questions: int = 0
    changed: int = 0


class _EasyHard(BaseModel):
    easy: int = 0
    hard: int = 0


class _Mcsqa(_Old):
    lang: str | None = None
    question_sets: _QuestionSets | None = None
    refined: _Refined | None = None
    verify: dict[str, int] = Field(default_factory=dict)
    review: dict[str, int] = Field(default_factory=dict)
    splits: dict[str, _EasyHard] = Field(default_factory=dict)

    _none_if_empty = field_validator("question_sets", "refined", mode="before")(_empty_is_none)


def _mcsqa(old: _Mcsqa, manifest: Manifest | None) -> Funnel:
    figures: list[Figure] = []
    if old.question_sets is not None:
        values: dict[str, Number] = {"sampled": old.question_sets.sampled, **old.question_sets.extraction}
        figures.append(Counts(name="question-sets", title="Question sets", values=values, draw=False))
    refined = old.refined
    if refined is not None and refined.refined_questions > 0:
        changed, total = refined.changed, refined.refined_questions
        figures.append(
            Share(
                name="refined",
                title="Refinement",
                part=changed,
                whole=total,
                part_label="changed",
                rest_label="unchanged",
                unit="questions",
                caption=(
                    f"Refinement: {changed} of {total} questions changed by the refine step "
                    f"({100 * changed / total:.1f}%)."
                ),
                summary=True,
            )
        )
    if old.verify:
        figures.append(
            Counts(
                name="verify",
                title="Verification",
                values=dict(old.verify),
                unit="questions",
                caption=(
                    "Verification outcomes: Easy (the verifying model chose the answer), to review (it did not), of "
                    "them those it answered wrongly or unreadably."
                ),
            )
        )
    if old.review:
        kept_by = {key.removeprefix("hard_by_"): n for key, n in old.review.items()}
        figures.append(Counts(name="review", title="Hard kept by", values=dict(kept_by), draw=False))
    if old.splits:
        figures.append(
            Table(
                name="splits",
                title="Easy and Hard per split",
                rows=list(old.splits),
                columns=["Easy", "Hard"],
                values=[[split.easy, split.hard] for split in old.splits.values()],
                stacked=True,
                unit="questions",
                caption="Easy and Hard questions per split (mCSQA's Table 3 shape; stratified 80/10/10 by default).",
                summary=True,
            )
        )
    return Funnel(
        recipe="mcsqa",
        lang=old.lang or _config_lang(manifest),
        title="mCSQA's construction funnel (its Figure 3): records into and out of each step",
        cost_title="Cost per step (mCSQA's Figure 4)",
        kept_unit="question",
        stages=old.stages,
        kept=old.kept,
        splits={name: split.easy + split.hard for name, split in old.splits.items()},
        figures=figures,
    )


# human-gen


class _Qc(BaseModel):
    items: int = 0
    sent_back: int = 0
    revisions: int = 0
    rounds: dict[str, int] = Field(default_factory=dict)
    unresolved: int = 0


class _Answers(BaseModel):
    per_item: int | None = None
    items: int = 0
    excluded: int = 0
    fleiss_kappa: float | None = None
    krippendorff_alpha: float | None = None
    ratings: int | None = None
    majority_is_creator: int | None = None


class _HumanGen(_Old):
    lang: str | None = None
    qc: _Qc | None = None
    answers: _Answers | None = None

    _none_if_empty = field_validator("qc", "answers", mode="before")(_empty_is_none)


def _dataset_splits(folder: Path) -> dict[str, int]:
    """Rows per split of a dataset folder's ``<split>.jsonl`` files (what an old funnel did not record)."""
    out: dict[str, int] = {}
    for name in SPLIT_NAMES:
        path = folder / f"{name}.jsonl"
        if path.is_file():
            with path.open(encoding="utf-8") as handle:
                out[name] = sum(1 for line in handle if line.strip())
    return out


def _human_gen(old: _HumanGen, manifest: Manifest | None, folder: Path) -> Funnel:
    figures: list[Figure] = []
    qc = old.qc
    if qc is not None:
        if qc.rounds:
            figures.append(
                Counts(
                    name="qc",
                    title="QC rounds",
                    values={f"{k} round{'' if k == '1' else 's'}": n for k, n in qc.rounds.items()},
                    unit="items",
                    caption=(
                        f"Quality control: items by the rounds they took to pass ({qc.sent_back} sent back, "
                        f"{qc.revisions} revisions, {qc.unresolved} unresolved)."
                    ),
                )
            )
        totals: dict[str, Number] = {
            "items": qc.items,
            "sent_back": qc.sent_back,
            "revisions": qc.revisions,
            "unresolved": qc.unresolved,
        }
        figures.append(Counts(name="qc-totals", title="Quality control", values=totals, draw=False, summary=True))
    answers = old.answers
    if answers is not None:
        rated = Rated(
            label="answerers",
            items=answers.items,
            raters=answers.per_item,
            ratings=answers.ratings,
            fleiss_kappa=answers.fleiss_kappa,
            krippendorff_alpha=answers.krippendorff_alpha,
            extra={"excluded": answers.excluded, "majority is the creator's": answers.majority_is_creator},
        )
        figures.append(
            Agreement(
                name="answers",
                title="Answer agreement",
                groups=[rated],
                caption=f"Answer agreement: {answers.per_item} answers per item over {answers.items} items.",
                summary=True,
            )
        )
    lang = old.lang or _config_lang(manifest)
    dataset = f"{lang}/{files.DATASET}" if lang else files.DATASET
    return Funnel(
        recipe="human-gen",
        lang=lang,
        title="The human-written items: slots, creation, QC and answering",
        stages=old.stages,
        kept=old.kept,
        splits=_dataset_splits(folder / dataset),
        datasets=[dataset],
        figures=figures,
    )


# culture-gen and culture-adapt: a top-level file and one per language


class _CategoryStage(BaseModel):
    out: int = 0


class _Language(_Old):
    """``<lang>/funnel.json`` of either culture recipe."""

    lang: str | None = None
    slots: int | None = None
    by_category: dict[str, dict[str, _CategoryStage]] = Field(default_factory=dict)
    other_language: int = 0
    splits: dict[str, int] = Field(default_factory=dict)


class _GenCounts(BaseModel):
    slots: int = 0
    kept: int = 0
    other_language: int = 0


class _CultureGen(_Old):
    langs: list[str] = Field(default_factory=list)
    by_lang: dict[str, _GenCounts] = Field(default_factory=dict)


class _AdaptCounts(BaseModel):
    kept: int = 0
    splits: dict[str, int] = Field(default_factory=dict)
    other_language: int = 0


class _CultureAdapt(_Old):
    langs: list[str] = Field(default_factory=list)
    adapted: dict[str, int] | None = None
    by_lang: dict[str, _AdaptCounts] = Field(default_factory=dict)


def _language_file(folder: Path, lang: str) -> _Language | None:
    path = folder / lang / files.FUNNEL
    document = read_document(path)
    if document is None:
        return None
    try:
        return _Language.model_validate(document)
    except ValidationError as exc:
        raise located(path, exc) from exc


def _categories(lang: str, own: _Language) -> list[Figure]:
    """Items per category out of the first stage and the last (of those the categories were counted at)."""
    if not own.by_category:
        return []
    stages = list(dict.fromkeys(stage for part in own.by_category.values() for stage in part))
    first, last = stages[0], stages[-1]
    names = sorted(own.by_category)

    def out(category: str, stage: str) -> Number:
        found = own.by_category[category].get(stage)
        return found.out if found is not None else 0

    return [
        Table(
            name="categories",
            title="Per category",
            rows=names,
            columns=[first, f"after {last}"],
            values=[[out(c, first), out(c, last)] for c in names],
            unit="items",
            caption=f"{lang}: items per category out of the first ({first}) and the last ({last}) stage.",
        )
    ]


def _culture_group(lang: str, own: _Language | None, kept: int, splits: dict[str, int], language: Counts) -> Group:
    return Group(
        name=lang,
        stages=own.stages if own is not None else [],
        kept=own.kept if own is not None else kept,
        splits=own.splits if own is not None else splits,
        folder=lang,
        figures=[*(_categories(lang, own) if own is not None else []), language],
    )


def _culture(recipe: str, old: _CultureGen | _CultureAdapt, groups: list[Group], figures: list[Figure]) -> Funnel:
    return Funnel(
        recipe=recipe,
        group_by="lang",
        stages=old.stages,
        kept=old.kept,
        splits=summed_splits(groups),
        datasets=[f"{lang}/{files.DATASET}" for lang in old.langs] or [files.DATASET],
        groups=groups,
        groups_title=PER_LANGUAGE_TITLE,
        figures=figures,
    )


def _culture_gen(old: _CultureGen, folder: Path) -> Funnel:
    groups = []
    for lang in old.langs:
        counts = old.by_lang.get(lang) or _GenCounts()
        language = Counts(
            name="language",
            title="Language",
            values={"slots": counts.slots, "kept": counts.kept, "other_language": counts.other_language},
            draw=False,
        )
        groups.append(_culture_group(lang, _language_file(folder, lang), counts.kept, {}, language))
    kept_of_slots = Table(
        name="kept-of-slots",
        title="Kept of the concept slots",
        rows=list(old.by_lang),
        columns=["kept", "slots"],
        values=[[counts.kept, counts.slots] for counts in old.by_lang.values()],
        draw=False,
        summary=True,
    )
    return _culture("culture-gen", old, groups, [kept_of_slots])


def _culture_adapt(old: _CultureAdapt, folder: Path) -> Funnel:
    groups = []
    for lang in old.langs:
        counts = old.by_lang.get(lang) or _AdaptCounts()
        values: dict[str, Number] = {"kept": counts.kept, "other_language": counts.other_language}
        language = Counts(name="language", title="Language", values=values, draw=False)
        groups.append(_culture_group(lang, _language_file(folder, lang), counts.kept, counts.splits, language))
    figures: list[Figure] = []
    if old.adapted is not None:
        figures.append(
            Counts(
                name="adapted",
                title="Adaptation",
                values=dict(old.adapted),
                unit="kept items",
                caption="Kept items by how they were adapted: full rewrite, names only, or none needed.",
                summary=True,
            )
        )
    return _culture("culture-adapt", old, groups, figures)


# CRoW


class _Contexts(BaseModel):
    in_: int = Field(default=0, alias="in")
    kept: int = 0
    left_out: dict[str, int] = Field(default_factory=dict)


class _Dimensions(BaseModel):
    examples: dict[str, int] = Field(default_factory=dict)


class _Agreement(BaseModel):
    items: int = 0
    raters: int | None = None
    fleiss_kappa: float | None = None
    krippendorff_alpha: float | None = None
    accept_rate: float | None = None


class _Task(BaseModel):
    source: dict[str, Number] = Field(default_factory=dict)
    stages: list[StageRow] = Field(default_factory=list)
    contexts: _Contexts = Field(default_factory=_Contexts)
    examples: dict[str, Number] = Field(default_factory=dict)
    dimensions: _Dimensions = Field(default_factory=_Dimensions)
    agreement: dict[str, _Agreement | None] = Field(default_factory=dict)


class _Crow(_Old):
    tasks: list[str] = Field(default_factory=list)
    by_task: dict[str, _Task] = Field(default_factory=dict)


def _crow_group(name: str, task: _Task) -> Group:
    contexts: dict[str, Number] = {"in": task.contexts.in_, "kept": task.contexts.kept}
    contexts.update({f"left out: {reason}": n for reason, n in task.contexts.left_out.items()})
    total = task.examples.get("total")
    return Group(
        name=name,
        stages=task.stages,
        kept=int(total) if isinstance(total, int | float) else 0,
        figures=[
            Counts(name="source", title="Source", values=dict(task.source), draw=False),
            Counts(name="contexts", title="Contexts", values=contexts, draw=False),
            Counts(name="examples", title="Examples", values=dict(task.examples), draw=False),
        ],
    )


def _crow(old: _Crow) -> Funnel:
    tasks = list(old.by_task)
    figures: list[Figure] = []
    if tasks:
        figures.append(
            Table(
                name="tasks",
                title="Per task",
                rows=tasks,
                columns=["contexts kept", "examples", "valid"],
                values=[
                    [task.contexts.kept, task.examples.get("total", 0), task.examples.get("valid", 0)]
                    for task in old.by_task.values()
                ],
                unit="count",
                caption=(
                    "CRoW per task: contexts kept, examples written and those valid (a rewrite that flips the label)."
                ),
                summary=True,
            )
        )
    dimensions = sorted({dim for task in old.by_task.values() for dim in task.dimensions.examples})
    if dimensions:
        figures.append(
            Table(
                name="dimensions",
                title="Dimensions",
                rows=dimensions,
                columns=tasks,
                values=[[task.dimensions.examples.get(dim) for task in old.by_task.values()] for dim in dimensions],
                unit="examples",
                caption="Commonsense dimensions of the examples per task (CRoW's Table 2 shape).",
            )
        )
    rated = [
        Rated(
            label=f"{name} · {stage}",
            items=found.items,
            raters=found.raters,
            fleiss_kappa=found.fleiss_kappa,
            krippendorff_alpha=found.krippendorff_alpha,
            extra={"accept_rate": found.accept_rate},
        )
        for name, task in old.by_task.items()
        for stage, found in task.agreement.items()
        if found is not None
    ]
    if rated:
        figures.append(
            Agreement(
                name="validators",
                title="Validators' agreement",
                groups=rated,
                caption="Validators' agreement per task and validation stage (CKV: knowledge, WSV: rewrites).",
            )
        )
    return Funnel(
        recipe="crow",
        title="CRoW's construction funnel over every task: records into and out of each stage",
        kept_unit="example",
        group_by="task",
        stages=old.stages,
        kept=old.kept,
        groups=[_crow_group(name, task) for name, task in old.by_task.items()],
        figures=figures,
        judges_in_figures=True,
    )


def _config_lang(manifest: Manifest | None) -> str | None:
    lang = manifest.config.get("lang") if manifest is not None else None
    return lang if isinstance(lang, str) else None


def recognise(document: dict[str, Any]) -> str | None:
    """The recipe that wrote an old funnel, told by its shape (``None``: a shape no recipe wrote)."""
    if "question_sets" in document:
        return "mcsqa"
    if "by_task" in document:
        return "crow"
    if "qc" in document and "answers" in document:
        return "human-gen"
    if "adapted" in document:
        return "culture-adapt"
    if "by_lang" in document or "slots" in document:
        return "culture-gen"
    if "other_language" in document:
        return "culture-adapt"  # one language's own file
    return None


def _one_language(recipe: str, old: _Language, manifest: Manifest | None) -> Funnel:
    """A culture recipe's ``<lang>/funnel.json`` opened on its own: that language's rows and figures."""
    lang = old.lang or _config_lang(manifest) or ""
    values: dict[str, Number] = {"kept": old.kept, "other_language": old.other_language}
    if old.slots is not None:
        values = {"slots": old.slots, **values}
    language = Counts(name="language", title="Language", values=values, draw=False)
    return Funnel(
        recipe=recipe,
        lang=lang or None,
        stages=old.stages,
        kept=old.kept,
        splits=old.splits,
        figures=[*_categories(lang, old), language],
    )


def _culture_reader(
    recipe: str, whole: Callable[[dict[str, Any], Path], Funnel]
) -> Callable[[dict[str, Any], Manifest | None, Path], Funnel]:
    def read(document: dict[str, Any], manifest: Manifest | None, folder: Path) -> Funnel:
        if "by_lang" in document or "langs" in document:
            return whole(document, folder)
        return _one_language(recipe, _Language.model_validate(document), manifest)

    return read


_READERS: dict[str, Callable[[dict[str, Any], Manifest | None, Path], Funnel]] = {
    "mcsqa": lambda document, manifest, _: _mcsqa(_Mcsqa.model_validate(document), manifest),
    "human-gen": lambda document, manifest, folder: _human_gen(_HumanGen.model_validate(document), manifest, folder),
    "culture-gen": _culture_reader(
        "culture-gen", lambda d, folder: _culture_gen(_CultureGen.model_validate(d), folder)
    ),
    "culture-adapt": _culture_reader(
        "culture-adapt", lambda d, folder: _culture_adapt(_CultureAdapt.model_validate(d), folder)
    ),
    "crow": lambda document, _, __: _crow(_Crow.model_validate(document)),
}
"""How each recipe's old shape is read (the recipes that wrote funnels before the typed form)."""


def funnel_from_legacy(document: Any, manifest: Manifest | None, folder: Path) -> Funnel:
    """An old ``funnel.json`` in the typed form (``folder``: the run folder, whose group folders hold more).

    Raises:
        ValueError: the document is not an object.
        pydantic.ValidationError: a part of it is of the wrong shape (where, in the error).
        ConfigError: a group's own ``funnel.json`` is unreadable or of the wrong shape (that file named).
    """
    if not isinstance(document, dict):
        raise ValueError("a funnel is a JSON object")
    recipe = (manifest.recipe if manifest is not None else None) or recognise(document)
    reader = _READERS.get(recipe or "")
    if reader is not None:
        return reader(document, manifest, folder)
    old = _Old.model_validate(document)
    return Funnel(recipe=recipe or "unknown", lang=_config_lang(manifest), stages=old.stages, kept=old.kept)
