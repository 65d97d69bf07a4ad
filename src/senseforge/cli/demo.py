"""``senseforge demo``: the whole loop offline, on embedded defaults.

For English and Japanese: import the demo knowledge base (ours, in ConceptNet's dump
format), run the mCSQA recipe with the bundled Gemma 3 270M (generate, filter, refine,
distractors, shuffle, verify by log-likelihood), let the same model act as an LM review
panel (``--lm-review-as-hard``; its Hard items say ``review: lm``), moderate, split, and
evaluate the model on the result. A base model of 270M parameters writes poor
questions; the demo proves the pipeline end to end, and quality comes from a capable
model (``senseforge build mcsqa --model openai/…``).

Running it again resumes the same runs: finished stages are read from the run store and
every model call is answered from the cache.
"""

from __future__ import annotations

from pathlib import Path

import typer

from senseforge.cli._common import StoreOption, err, out, progress_bar

DEMO_LANGS: tuple[str, ...] = ("en", "ja")
DEMO_SETS: dict[str, int] = {"en": 12, "ja": 16}
"""Question sets per language (three questions each): the small model's Japanese distractors
fail the duplicate checks more often, so Japanese starts with more; a few minutes on 2 cores."""


def demo(
    out_dir: Path = typer.Option(Path("senseforge-demo"), "--out", help="Where the demo writes its runs."),
    model: str = typer.Option("llamacpp/gemma-3-270m", "--model", "-m", help="provider/model of every stage."),
    n: int | None = typer.Option(None, "--n", min=1, help="Question sets per language (default: en 12, ja 16)."),
    store: str | None = StoreOption,
) -> None:
    """Build small English and Japanese mCSQA benchmarks offline with the bundled model, then evaluate it."""
    from senseforge.cli.build import print_summary
    from senseforge.cli.eval import print_results
    from senseforge.evaluate.harness import run_eval
    from senseforge.evaluate.run import EvalConfig
    from senseforge.kb.conceptnet import import_dump
    from senseforge.llm.cache import open_llm
    from senseforge.pipelines.mcsqa import McsqaConfig, build
    from senseforge.pipelines.mcsqa.recipe import read_manifest
    from senseforge.store.db import Store

    store_ = Store(store)
    kb_dir = out_dir / "kb"
    if not (kb_dir / "kb.json").is_file():
        err.print("importing the demo knowledge base (ours, in ConceptNet's format) …")
        import_dump("demo", kb_dir)
    err.print(f"model: {model} · cache and ledger: {store_.url}")
    finished = []
    for lang in DEMO_LANGS:
        run_dir = out_dir / "runs" / f"mcsqa-{lang}"
        config = McsqaConfig(
            lang=lang,
            n=n or DEMO_SETS[lang],
            kb=str(kb_dir.resolve()),
            model=model,
            reviewers=(model,),
            lm_review_as_hard=True,
        )
        resume = read_manifest(run_dir) is not None
        out.rule(f"mCSQA recipe · {lang}")
        summary = build(config, run_dir, resume=resume, store=store_, progress=progress_bar)
        print_summary(summary)
        finished.append(summary)

    llm = open_llm(model, store=store_, run="demo-eval")
    try:
        for summary in finished:
            eval_dir = summary.run_dir / "eval"
            out.rule(f"evaluation · {summary.run_dir.name} (all splits)")
            with progress_bar("evaluating", None) as advance:
                payload = run_eval(summary.run_dir, llm, EvalConfig(), eval_dir, split="all", progress=advance)
            print_results(payload)
    finally:
        llm.close()
    out.print(
        "Easy items are the ones this model already answered during verification, so it scores them "
        "right again; Hard ones it got wrong. Judge a real benchmark with other models."
    )
    out.rule("where everything is")
    for summary in finished:
        where = summary.run_dir
        out.print(f"{where}: dataset/ (mCSQA schema), items/ (with provenance), funnel.json, cost.json, eval/")
