"""A tiny random-weight multiple-choice encoder and its tokenizer, built in the test (nothing downloaded)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from senseforge.data.schema import MCItem


def build_encoder(folder: Path, texts: Sequence[str]) -> Path:
    """A 2-layer BERT of width 32 with a word-level tokenizer trained on ``texts``, saved in ``folder``."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers
    from transformers import BertConfig, BertForMultipleChoice, PreTrainedTokenizerFast

    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"]
    raw = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    raw.pre_tokenizer = pre_tokenizers.Whitespace()
    raw.train_from_iterator(texts, trainers.WordLevelTrainer(special_tokens=special))
    cls, sep = raw.token_to_id("[CLS]"), raw.token_to_id("[SEP]")
    raw.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", cls), ("[SEP]", sep)]
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=raw, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]", sep_token="[SEP]"
    )
    config = BertConfig(
        vocab_size=raw.get_vocab_size(),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
    )
    import torch

    torch.manual_seed(0)
    BertForMultipleChoice(config).save_pretrained(str(folder))
    tokenizer.save_pretrained(str(folder))
    return folder


def items(lang: str, n: int, split: str, hard_every: int = 3) -> list[MCItem]:
    """``n`` items of one language whose right choice is the one that repeats a word of the question."""
    out = []
    for i in range(n):
        key = f"{lang}{split}{i}"
        choices = [{"label": label, "text": f"w{lang}{(i + k) % 7}"} for k, label in enumerate("ABCDE")]
        right = "ABCDE"[i % 5]
        word = next(c["text"] for c in choices if c["label"] == right)
        out.append(
            MCItem(
                id=key,
                lang=lang,
                question=f"which goes with {word} in {lang} ?",
                choices=choices,
                answer=right,
                difficulty="hard" if i % hard_every == 0 else "easy",
            )
        )
    return out
