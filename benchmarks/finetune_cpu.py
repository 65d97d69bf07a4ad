#!/usr/bin/env python3
"""What fine-tuning a base-size multiple-choice encoder costs on this CPU, and our loop's overhead over bare PyTorch.

The weights do not change the arithmetic, so a randomly initialised encoder of BERT-base's
shape (12 layers, width 768, 12 heads, vocabulary 30,522; mBERT and XLM-R-base have the
same body and bigger vocabularies) stands in for a real one: nothing is downloaded. Both
sides train the same micro-batches of ``--micro`` items × 5 choices × 128 tokens:

* **ours**: ``senseforge.evaluate.finetune``'s step — tokenising the (question, choice)
  pairs, forward, backward — repeated ``--steps`` times;
* **bare**: the same model fed the same tensors, tokenised once beforehand — the peer;

the two alternate, step by step, so that other load on the machine falls on both.

It prints seconds per micro-batch for each, the ratio ours / bare, and from ours the cost
of one optimiser step of mCSQA's batch 64 and of an epoch of ``--train`` items (mCSQA's
Japanese training split is about 9,000 items).

    .venv/bin/python benchmarks/finetune_cpu.py
    .venv/bin/python benchmarks/finetune_cpu.py --layers 6 --steps 2     # quicker, a smaller encoder
"""

from __future__ import annotations

import argparse
import platform
import time
from typing import Any

from senseforge.data.schema import MCItem


def _items(n: int) -> list[MCItem]:
    words = [f"word{i}" for i in range(200)]
    return [
        MCItem(
            id=f"q{i}",
            lang="en",
            question=" ".join(words[(i * 7 + j) % 200] for j in range(60)),
            choices=[
                {"label": label, "text": " ".join(words[(i + k + j) % 200] for j in range(40))}
                for k, label in enumerate("ABCDE")
            ],
            answer="A",
        )
        for i in range(n)
    ]


def _tokenizer() -> Any:
    from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    raw = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    raw.pre_tokenizer = pre_tokenizers.Whitespace()
    raw.train_from_iterator(
        [f"word{i}" for i in range(200)], trainers.WordLevelTrainer(special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]"])
    )
    cls, sep = raw.token_to_id("[CLS]"), raw.token_to_id("[SEP]")
    raw.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", cls), ("[SEP]", sep)]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=raw, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]", sep_token="[SEP]"
    )


def _cpu() -> str:
    """The CPU's model name (``/proc/cpuinfo`` on Linux), else what ``platform`` knows."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--micro", type=int, default=4, help="items per forward pass")
    parser.add_argument("--steps", type=int, default=3, help="micro-batches timed per side")
    parser.add_argument("--train", type=int, default=9000, help="training items of the epoch estimate")
    args = parser.parse_args()

    import torch
    from transformers import BertConfig, BertForMultipleChoice

    from senseforge.evaluate.finetune import _encode

    torch.manual_seed(0)
    config = BertConfig(vocab_size=30522, hidden_size=768, num_hidden_layers=args.layers, num_attention_heads=12)
    model = BertForMultipleChoice(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5)
    tokenizer = _tokenizer()
    batches = [_items(args.micro) for _ in range(args.steps)]
    labels = torch.zeros(args.micro, dtype=torch.long)

    def step(inputs: dict[str, Any]) -> None:
        optimizer.zero_grad()
        model(**inputs, labels=labels).loss.backward()
        optimizer.step()

    step(_encode(tokenizer, batches[0], 128, torch))  # warm-up
    ready = [_encode(tokenizer, batch, 128, torch) for batch in batches]
    ours = bare = 0.0
    for batch, inputs in zip(batches, ready, strict=True):  # alternated, so that load on the machine hits both
        started = time.perf_counter()
        step(_encode(tokenizer, batch, 128, torch))
        ours += time.perf_counter() - started
        started = time.perf_counter()
        step(inputs)
        bare += time.perf_counter() - started
    ours, bare = ours / args.steps, bare / args.steps
    per_item = ours / args.micro
    params = sum(p.numel() for p in model.parameters()) / 1e6
    print(f"CPU: {_cpu()} · torch threads {torch.get_num_threads()}")
    print(f"encoder: {args.layers} layers, width 768, {params:.0f}M parameters (random weights)")
    print(f"micro-batch of {args.micro} items × 5 × 128 tokens: ours {ours:.2f} s, bare PyTorch {bare:.2f} s")
    print(f"ratio ours / bare: {ours / bare:.3f}")
    epoch_h = args.train * per_item / 3600
    print(f"one optimiser step of 64 items: {64 * per_item:.0f} s; an epoch of {args.train:,} items: {epoch_h:.1f} h")


if __name__ == "__main__":  # pragma: no cover
    main()
