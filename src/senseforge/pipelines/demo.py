"""The demo: the whole loop offline, on embedded defaults, for every recipe that is built.

**mCSQA** (:func:`run_demo`), for English and Japanese: import the demo knowledge base (ours, in ConceptNet's dump
format), run the mCSQA recipe with the bundled Gemma 3 270M (generate, filter, refine,
distractors, shuffle, verify by log-likelihood), let the same model act as an LM review
panel (its Hard items say ``review: lm``), moderate, split, and evaluate the model on the
result. A base model of 270M parameters writes poor questions; the demo proves the
pipeline end to end, and quality comes from a capable model.

**culture-gen** (:func:`run_recipe_demo`): our small Indonesian and Sundanese concept
table, two concepts a call, written by the same model from a few-shot completion page; it
shows what the checks kept and why the rest was rejected.

**culture-adapt** (:func:`run_recipe_demo`): our bundled sample of eight CommonsenseQA
items carried into Indonesian culture and language and translated into Sundanese by the
same model; it shows what survived and why the rest was rejected.

**crow** (:func:`run_recipe_demo`): our eight hand-written rows of five CRoW tasks; the same
model annotates knowledge, rewrites targets and, as three validators by log-likelihood,
keeps or drops triples and rewrites; it shows what was kept and why the rest was left out.

**The verification panel** (:func:`run_panel_demo`, ``senseforge demo --panel``): English mCSQA in its own run,
``runs/mcsqa-en-panel``, verified by a panel of two members made of the one bundled model answering two ways:
``<model>@loglik`` (the log-likelihood of each choice's text) and ``<model>@letter`` (of each choice's letter after
the listed choices). A member is a model spec and, after ``@``, how it answers; the same spec twice is the same
model, so the two members' agreement is one model's consistency, not two models' — the demo says so. Items neither
answers right go to the LM review (the same model), the rest are Easy.

Running it again resumes the same runs: finished stages are read from the run store and
every model call is answered from the cache.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from senseforge.evaluate.harness import run_eval
from senseforge.evaluate.records import EvalResults
from senseforge.evaluate.run import EvalConfig
from senseforge.kb.conceptnet import import_dump
from senseforge.llm.base import Progress
from senseforge.llm.cache import open_llm
from senseforge.llm.registry import DEFAULT_MODEL
from senseforge.pipelines.config import RecipeConfig
from senseforge.pipelines.crow import config as crow_config
from senseforge.pipelines.crow.config import CrowConfig
from senseforge.pipelines.crow.recipe import CROW
from senseforge.pipelines.culture_adapt import config as culture_adapt_config
from senseforge.pipelines.culture_adapt.config import CultureAdaptConfig
from senseforge.pipelines.culture_adapt.recipe import CULTURE_ADAPT
from senseforge.pipelines.culture_gen import recipe as culture_gen_recipe
from senseforge.pipelines.culture_gen.recipe import CULTURE_GEN, CultureGenConfig
from senseforge.pipelines.mcsqa import MCSQA, McsqaConfig
from senseforge.pipelines.mcsqa.config import McsqaReviewSettings
from senseforge.pipelines.progress import ProgressSink, StageTally
from senseforge.pipelines.recipe import Recipe
from senseforge.pipelines.rundir import read_manifest
from senseforge.pipelines.runner import BuildSummary, build
from senseforge.store.db import Store

DEMO_RECIPES: tuple[str, ...] = ("mcsqa", "culture-gen", "culture-adapt", "crow")
"""The recipes the demo runs, in order."""
DEMO_LANGS: tuple[str, ...] = ("en", "ja")
DEMO_SETS: dict[str, int] = {"en": 12, "ja": 16}
"""Question sets per language (three questions each): the small model's Japanese distractors
fail the duplicate checks more often, so Japanese starts with more; a few minutes on 2 cores."""


@dataclass
class DemoEvents:
    """What the demo tells its caller as it goes (the CLI prints; tests may listen)."""

    note: Callable[[str], None] = lambda _text: None
    """A line of progress (importing, which model)."""
    building: Callable[[str], None] = lambda _lang: None
    built: Callable[[BuildSummary], None] = lambda _summary: None
    evaluating: Callable[[BuildSummary], None] = lambda _summary: None
    evaluated: Callable[[EvalResults], None] = lambda _payload: None


def demo_config(
    lang: str, kb_dir: Path, model: str = DEFAULT_MODEL, n: int | None = None, panel: tuple[str, ...] = ()
) -> McsqaConfig:
    """The config of one demo language: the model writes, verifies (or ``panel`` does) and reviews (as an LM
    panel)."""
    return McsqaConfig(
        lang=lang,
        n=n or DEMO_SETS[lang],
        kb=str(kb_dir.resolve()),
        model=model,
        review=McsqaReviewSettings(reviewers=(model,), lm_review_final=True),
        panel=panel,
    )


PANEL_RUN = "mcsqa-en-panel"
"""The folder of the panel demo's run (under ``runs/``)."""
PANEL_NOTE = (
    "The panel's two members are the one bundled model answering two ways ({members}): a demonstration of the "
    "panel, not two independent models. Name other models with --panel on build mcsqa (spec@loglik, spec@letter, "
    "spec@generate) for a panel that means something."
)


def demo_kb(out_dir: Path, events: DemoEvents) -> Path:
    """``out_dir/kb``, the demo knowledge base imported there unless it already is."""
    kb_dir = out_dir / "kb"
    if not (kb_dir / "kb.json").is_file():
        events.note("importing the demo knowledge base (ours, in ConceptNet's format) …")
        import_dump("demo", kb_dir)
    return kb_dir


def panel_members(model: str) -> tuple[str, str]:
    """The demo panel: ``model`` by log-likelihood of each choice's text, and of each choice's letter."""
    return (f"{model}@loglik", f"{model}@letter")


def run_panel_demo(
    out_dir: Path,
    *,
    model: str = DEFAULT_MODEL,
    n: int | None = None,
    store: Store | None = None,
    progress: ProgressSink | None = None,
    events: DemoEvents | None = None,
) -> BuildSummary:
    """English mCSQA verified by a two-member panel of the bundled model (:func:`panel_members`), into
    ``out_dir/runs/mcsqa-en-panel`` (resuming what exists)."""
    events = events or DemoEvents()
    store = store or Store()
    kb_dir = demo_kb(out_dir, events)
    members = panel_members(model)
    events.note(PANEL_NOTE.format(members=", ".join(members)))
    config = demo_config("en", kb_dir, model, n, panel=members)
    run_dir = out_dir / "runs" / PANEL_RUN
    events.building("en, a two-member verification panel")
    summary = build(MCSQA, config, run_dir, resume=read_manifest(run_dir) is not None, store=store, progress=progress)
    events.built(summary)
    return summary


def run_demo(
    out_dir: Path,
    *,
    model: str = DEFAULT_MODEL,
    n: int | None = None,
    store: Store | None = None,
    progress: ProgressSink | None = None,
    events: DemoEvents | None = None,
) -> list[BuildSummary]:
    """Build the demo languages into ``out_dir/runs`` (resuming what exists), then evaluate the model on each."""
    events = events or DemoEvents()
    store = store or Store()
    kb_dir = demo_kb(out_dir, events)
    events.note(f"model: {model} · cache and ledger: {store.url}")
    finished = []
    for lang in DEMO_LANGS:
        run_dir = out_dir / "runs" / f"mcsqa-{lang}"
        config = demo_config(lang, kb_dir, model, n)
        events.building(lang)
        summary = build(
            MCSQA, config, run_dir, resume=read_manifest(run_dir) is not None, store=store, progress=progress
        )
        events.built(summary)
        finished.append(summary)
    llm = open_llm(model, store=store, run="demo-eval")
    try:
        for summary in finished:
            events.evaluating(summary)
            items = StageTally("evaluating", 0, None, progress or _ignore)
            try:
                payload = run_eval(
                    summary.run_dir,
                    llm,
                    EvalConfig(),
                    summary.run_dir / "eval",
                    split="all",
                    progress=_items_of(items),
                )
            finally:
                items.close()
            events.evaluated(payload)
    finally:
        llm.close()
    return finished


def _ignore(_event: object) -> None:
    """No progress shown."""


def _items_of(tally: StageTally) -> Progress:
    """The evaluation's progress (items scored) as records done of ``tally``."""
    return lambda n: tally.records(done=n)


CULTURE_GEN_DEMO = {
    "batch_concepts": culture_gen_recipe.LOCAL_BATCH_CONCEPTS,
    "max_tokens": culture_gen_recipe.LOCAL_MAX_TOKENS,
}
"""Two concepts a call and short replies: a base model of 270M writes one JSON line per call at best. The
recipe's defaults for a local base model, fixed here so the demo is the same whatever ``--model`` it gets."""
CULTURE_ADAPT_DEMO = {"max_tokens": culture_adapt_config.LOCAL_MAX_TOKENS}
"""Short replies: the adapting call's one-line JSON item fits, and the demo stays within two minutes on 2 cores
(the recipe's default for a local base model)."""
CROW_DEMO: dict[str, float | int] = {
    "max_tokens": crow_config.LOCAL_MAX_TOKENS,
    "cka_temperature": 0.7,
    "wsg_temperature": 1.0,
}
"""Short replies, and sampling (seeded): greedy, a 270M base model copies the worked example or the original
target; sampled, some of its rewrites change a few words and reach the validators."""


def run_recipe_demo(
    name: str,
    out_dir: Path,
    *,
    model: str = DEFAULT_MODEL,
    store: Store | None = None,
    progress: ProgressSink | None = None,
    events: DemoEvents | None = None,
) -> BuildSummary:
    """Build one recipe's small demo (``culture-gen``, ``culture-adapt`` or ``crow``) into ``out_dir/runs/<name>``,
    resuming what exists: culture-gen on our Indonesian and Sundanese example table, culture-adapt on our
    CommonsenseQA sample, English → Indonesian, then Sundanese; crow on our eight rows of five tasks, every
    stage by the same model (its validators by log-likelihood)."""
    demos: dict[str, tuple[Recipe, Callable[[], RecipeConfig], str]] = {
        "culture-gen": (CULTURE_GEN, lambda: CultureGenConfig(model=model, **CULTURE_GEN_DEMO), "id, su"),
        "culture-adapt": (CULTURE_ADAPT, lambda: CultureAdaptConfig(model=model, **CULTURE_ADAPT_DEMO), "en → id, su"),
        "crow": (CROW, lambda: CrowConfig(model=model, **CROW_DEMO), "safety, intent, dialogue, stance, mt-zh-en"),
    }
    recipe, config, label = demos[name]
    events = events or DemoEvents()
    run_dir = out_dir / "runs" / name
    events.building(label)
    resume = read_manifest(run_dir) is not None
    summary = build(recipe, config(), run_dir, resume=resume, store=store or Store(), progress=progress)
    events.built(summary)
    return summary
