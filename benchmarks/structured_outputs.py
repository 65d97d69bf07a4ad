#!/usr/bin/env python3
"""Structured outputs on the embedded model: how often each stage's replies fail to parse, with and without the
shape the stage declares for them, and what constraining the decoding costs.

The prompts are the demo's (``make demo``): the demo configs of :mod:`senseforge.pipelines.demo` (mCSQA in English
and Japanese on the demo knowledge base, culture-gen on our concept table, culture-adapt on our CommonsenseQA
sample, CRoW on our rows), each recipe's source records, and the requests of every model stage that declares a
reply shape (:attr:`~senseforge.llm.base.GenerateRequest.reply_shape`) built over them by the stage itself. A stage
that needs an earlier stage's reply to build its request (mCSQA's distractors need the question set only, so they
are in; culture-adapt's rewrite is built for every source item, as if the relevance stage had flagged it) is built
from the source records where it can be, and left out where it cannot (said so in the output).

Each request is sent to the bundled Gemma 3 270M (``llamacpp``, no cache) four times: at temperature 0 and 0.7,
with its shape and with the shape stripped. Each reply is read by the stage's own parser, and counted:

* **malformed**: rejected as ``malformed_output`` (a complete reply that does not parse);
* **truncated**: the same, but the reply stopped at the token limit (rejected as ``truncated``);
* **constrained**: how many replies the backend says it constrained (``Completion.constrained``, where the
  backend reports it; ``n/a`` before it does).

Then tokens/s (completion tokens over wall time, per pass) with and without the shape, and their ratio.

Examples::

    .venv/bin/python benchmarks/structured_outputs.py --limit 2
    .venv/bin/python benchmarks/structured_outputs.py --limit 1 --stages culture-adapt
    .venv/bin/python benchmarks/structured_outputs.py --limit 8 --json /tmp/structured.json

Run it on an otherwise idle machine: the timings are wall-clock, one pass after the other.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

TEMPERATURES = (0.0, 0.7)


@dataclass
class Probe:
    """One stage's requests over the demo's records, and the records they were built for."""

    recipe: str
    stage: Any
    records: list[Any]
    requests: list[Any]

    @property
    def label(self) -> str:
        shape = next(r.reply_shape.name for r in self.requests if r.reply_shape is not None)
        return f"{self.recipe}/{self.stage.name} ({shape})"


@dataclass
class Tally:
    """What one pass (a stage, a temperature, with or without the shape) came to."""

    n: int = 0
    malformed: int = 0
    truncated: int = 0
    constrained: int | None = None
    tokens_out: int = 0
    seconds: float = 0.0
    reasons: dict[str, int] = field(default_factory=dict)


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _stages(stage: Any) -> Iterator[Any]:
    """A stage and the stages inside it (a route's two branches)."""
    inner = [getattr(stage, name) for name in ("chosen", "others") if hasattr(stage, name)]
    if not inner:
        yield stage
    for part in inner:
        yield from _stages(part)


def demo_recipes(model: str, workdir: Path) -> list[tuple[str, Any, Any]]:
    """``(name, recipe, config)`` of every recipe the demo builds, with the demo's settings."""
    from senseforge.pipelines import demo
    from senseforge.pipelines.crow.config import CrowConfig
    from senseforge.pipelines.crow.recipe import CROW
    from senseforge.pipelines.culture_adapt.config import CultureAdaptConfig
    from senseforge.pipelines.culture_adapt.recipe import CULTURE_ADAPT
    from senseforge.pipelines.culture_gen.recipe import CULTURE_GEN, CultureGenConfig
    from senseforge.pipelines.mcsqa import MCSQA

    kb_dir = demo.demo_kb(workdir, demo.DemoEvents(note=log))
    out: list[tuple[str, Any, Any]] = [
        (f"mcsqa-{lang}", MCSQA, demo.demo_config(lang, kb_dir, model)) for lang in demo.DEMO_LANGS
    ]
    out.append(("culture-gen", CULTURE_GEN, CultureGenConfig(model=model, **demo.CULTURE_GEN_DEMO)))
    out.append(("culture-adapt", CULTURE_ADAPT, CultureAdaptConfig(model=model, **demo.CULTURE_ADAPT_DEMO)))
    out.append(("crow", CROW, CrowConfig(model=model, **demo.CROW_DEMO)))
    return out


def probes(model: str, workdir: Path, limit: int) -> list[Probe]:
    """The shaped requests of every demo stage that can be built from its recipe's source records."""
    from senseforge.errors import SenseforgeError
    from senseforge.pipelines.stage import LMStage

    found: list[Probe] = []
    for name, recipe, config in demo_recipes(model, workdir):
        records, _ = recipe.source(config).records(config)
        for outer in recipe.stages(config):
            for stage in _stages(outer):
                if not isinstance(stage, LMStage):
                    continue
                try:
                    requests = stage.requests(records[:limit])
                except (AttributeError, TypeError, ValueError, KeyError, SenseforgeError) as exc:
                    log(f"{name}/{stage.name}: not built from the source records ({type(exc).__name__}: {exc})")
                    continue
                if not any(request.reply_shape is not None for request in requests):
                    log(f"{name}/{stage.name}: declares no shape for these requests (left out)")
                    continue
                found.append(Probe(name, stage, list(records[:limit]), list(requests)))
    return found


def classify(probe: Probe, record: Any, completion: Any) -> str:
    """``ok``, or the reason the stage's parser (and the truncation rule) gives the reply."""
    from senseforge.pipelines.outcomes import Reject, cut_off

    if not completion.ok:
        return f"failed:{completion.failure.kind}"
    parsed = cut_off(probe.stage.parse(record, completion.text), [completion])
    parts = parsed if isinstance(parsed, list) else [parsed]
    reasons = [part.reason for part in parts if isinstance(part, Reject)]
    for wanted in ("truncated", "malformed_output"):
        if wanted in reasons:
            return wanted
    return "ok"


def run_pass(llm: Any, probe: Probe, temperature: float, shaped: bool) -> Tally:
    requests = [
        request.model_copy(update={"temperature": temperature, **({} if shaped else {"reply_shape": None})})
        for request in probe.requests
    ]
    began = time.perf_counter()
    done = llm.generate(requests)
    tally = Tally(n=len(done), seconds=time.perf_counter() - began)
    flags = [getattr(c, "constrained", None) for c in done]
    tally.constrained = None if all(f is None for f in flags) else sum(1 for f in flags if f)
    for record, completion in zip(probe.records, done, strict=True):
        reason = classify(probe, record, completion)
        tally.reasons[reason] = tally.reasons.get(reason, 0) + 1
        tally.malformed += reason == "malformed_output"
        tally.truncated += reason == "truncated"
        tally.tokens_out += completion.tokens_out or 0
    return tally


def _rate(part: int, whole: int) -> str:
    return f"{part / whole:6.1%}" if whole else "   n/a"


def table(results: Sequence[tuple[str, float, bool, Tally]]) -> str:
    head = (
        f"{'stage':48} {'temp':>4} {'shape':>5} {'n':>3} {'malformed':>9} {'truncated':>9} "
        f"{'constrained':>11} {'tok/s':>7}"
    )
    lines = [head, "-" * len(head)]
    for label, temperature, shaped, t in results:
        constrained = "n/a" if t.constrained is None else f"{t.constrained}/{t.n}"
        speed = t.tokens_out / t.seconds if t.seconds else 0.0
        lines.append(
            f"{label:48} {temperature:4.1f} {'yes' if shaped else 'no':>5} {t.n:3d} {_rate(t.malformed, t.n):>9} "
            f"{_rate(t.truncated, t.n):>9} {constrained:>11} {speed:7.1f}"
        )
    return "\n".join(lines)


def totals(results: Sequence[tuple[str, float, bool, Tally]]) -> dict[str, dict[str, float]]:
    """Per (temperature, shape): malformed and truncated rates over all stages, and tokens/s."""
    out: dict[str, dict[str, float]] = {}
    for temperature in TEMPERATURES:
        for shaped in (False, True):
            mine = [t for _, temp, s, t in results if temp == temperature and s == shaped]
            n = sum(t.n for t in mine)
            seconds = sum(t.seconds for t in mine)
            out[f"t={temperature} shape={'yes' if shaped else 'no'}"] = {
                "n": n,
                "malformed_rate": sum(t.malformed for t in mine) / n if n else 0.0,
                "truncated_rate": sum(t.truncated for t in mine) / n if n else 0.0,
                "tokens_per_s": sum(t.tokens_out for t in mine) / seconds if seconds else 0.0,
            }
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--limit", type=int, default=8, help="records per stage (default 8)")
    parser.add_argument("--stages", default="", help="only the stages whose label holds this text (e.g. culture-gen)")
    parser.add_argument("--model", default=None, help="model spec (default: the bundled embedded model)")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args(argv)

    from senseforge.llm.registry import DEFAULT_MODEL, get_llm

    model = args.model or DEFAULT_MODEL
    with tempfile.TemporaryDirectory(prefix="senseforge-structured-") as tmp:
        found = [p for p in probes(model, Path(tmp), args.limit) if args.stages in p.label]
    if not found:
        log("no shaped requests found")
        return 1
    log(f"model: {model} · stages: {', '.join(p.label for p in found)} · {args.limit} records each")
    llm = get_llm(model)
    try:
        llm.generate([found[0].requests[0].model_copy(update={"max_tokens": 4})])  # load and warm
        results: list[tuple[str, float, bool, Tally]] = []
        for probe in found:
            for temperature in TEMPERATURES:
                for shaped in (False, True):
                    tally = run_pass(llm, probe, temperature, shaped)
                    results.append((probe.label, temperature, shaped, tally))
                    speed = tally.tokens_out / tally.seconds if tally.seconds else 0.0
                    shown = "yes" if shaped else "no"
                    log(f"{probe.label} t={temperature} shape={shown}: {tally.reasons} · {speed:.1f} tok/s")
    finally:
        llm.close()

    print(table(results))
    summary = totals(results)
    print()
    for key, row in summary.items():
        print(
            f"{key:22} n={int(row['n']):4d} malformed {row['malformed_rate']:6.1%} "
            f"truncated {row['truncated_rate']:6.1%} {row['tokens_per_s']:7.1f} tok/s"
        )
    for temperature in TEMPERATURES:
        free = summary[f"t={temperature} shape=no"]["tokens_per_s"]
        bound = summary[f"t={temperature} shape=yes"]["tokens_per_s"]
        ratio = bound / free if free else float("nan")
        print(f"t={temperature}: tokens/s with the shape / without = {ratio:.2f}")
    if args.json is not None:
        rows = [
            {"stage": label, "temperature": temp, "shape": shaped, **tally.__dict__}
            for label, temp, shaped, tally in results
        ]
        args.json.write_text(json.dumps({"model": model, "rows": rows, "totals": summary}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
