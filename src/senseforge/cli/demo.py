"""``senseforge demo``: the offline loop on embedded defaults.

Until the mCSQA recipe lands this runs the two things every later stage is built on,
with the bundled model and no network: a real generation, and real multiple-choice
scoring by log-likelihood on a handful of everyday questions (written for this demo),
both through the cache and the ledger.
"""

from __future__ import annotations

import typer
from rich.table import Table

from senseforge.cli._common import ModelOption, NoCacheOption, StoreOption, describe_stats, err, out, progress_bar

# Everyday questions written for this demo (not from any dataset): (lang, question, choices, answer index).
DEMO_QUESTIONS: list[tuple[str, str, list[str], int]] = [
    ("en", "What do people use to cut paper?", ["scissors", "a spoon", "a pillow", "a cloud", "a sock"], 0),
    ("en", "Where do fish live?", ["in water", "in a desert", "on the moon", "in a chimney", "in a wallet"], 0),
    ("en", "What falls from clouds when it rains?", ["water", "sand", "bread", "coins", "paper"], 0),
    ("en", "What do you wear on your feet?", ["shoes", "hats", "gloves", "scarves", "earrings"], 0),
    ("ja", "雨の日に外で使うものは何？", ["傘", "枕", "鍋", "時計", "財布"], 0),
    ("ja", "寒い冬に着るものは何？", ["コート", "水着", "帽子の箱", "靴べら", "扇風機"], 0),
]
DEMO_PROMPT = "A short list of things you can find in a kitchen:\n1."


def demo(
    model: str = ModelOption,
    store: str | None = StoreOption,
    no_cache: bool = NoCacheOption,
) -> None:
    """Run the offline loop on the bundled model: generate, then answer questions by log-likelihood."""
    from senseforge.llm.base import GenerateRequest, LoglikelihoodRequest
    from senseforge.llm.cache import open_llm
    from senseforge.store.db import Store

    store_ = Store(store)
    err.print(f"model: {model} · store: {store_.url}")
    llm = open_llm(model, store=store_, read_cache=not no_cache, run="demo")
    try:
        completion = llm.generate([GenerateRequest(prompt=DEMO_PROMPT, max_tokens=40, stop=("\n\n",))])[0]
        out.rule("generation (greedy)")
        out.print(DEMO_PROMPT + (completion.text if completion.ok else f"<failed: {completion.failure}>"), markup=False)

        requests: list[LoglikelihoodRequest] = []
        for lang, question, choices, _ in DEMO_QUESTIONS:
            cue = "答え:" if lang == "ja" else "Answer:"
            sep = "" if lang == "ja" else " "
            context = f"{'質問' if lang == 'ja' else 'Question'}: {question}\n{cue}"
            requests.extend(LoglikelihoodRequest(context=context, continuation=sep + c) for c in choices)
        with progress_bar("scoring choices", len(requests)) as advance:
            scores = llm.loglikelihood(requests, progress=advance)
    finally:
        llm.close()

    table = Table(title="multiple choice by log-likelihood")
    for column in ("lang", "question", "model's pick", "gold", "ok"):
        table.add_column(column)
    correct, cursor = 0, 0
    for lang, question, choices, answer in DEMO_QUESTIONS:
        chunk = scores[cursor : cursor + len(choices)]
        cursor += len(choices)
        logprobs = [s.logprob if s.logprob is not None else float("-inf") for s in chunk]
        pick = max(range(len(choices)), key=logprobs.__getitem__)
        correct += pick == answer
        table.add_row(lang, question, choices[pick], choices[answer], "✓" if pick == answer else "✗")
    out.print(table)
    out.print(f"accuracy: {correct}/{len(DEMO_QUESTIONS)} (chance: {len(DEMO_QUESTIONS) / 5:.1f})")
    err.print(describe_stats(llm))
    if not completion.ok:
        raise typer.Exit(1)
