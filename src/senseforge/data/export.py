"""Exports: a Hugging Face ``DatasetDict``, Parquet files, and an lm-evaluation-harness task.

Every export takes splits — a mapping of split name to :class:`MCItem` list, or a folder of
``{split}.jsonl`` files read by :func:`read_splits` — and writes one folder atomically (into a
temporary sibling folder, then renamed), so an interrupted export leaves no half folder.

All three exports share one row shape: the published mCSQA schema
``id, question, question_concept, choices{label[], text[]}, answerKey, hard`` followed by
``lang, difficulty, category`` (:data:`COLUMNS`). ``answerKey`` is the choice *label* as a
string, not a ``ClassLabel``: labels belong to each item's own choices, mCSQA and
CommonsenseQA publish it as a string, and a withheld answer is ``""`` exactly as in mCSQA's
test split. ``hard`` is ``None`` when the difficulty is unknown.

The lm-eval task scores each choice as a continuation of :data:`PROMPT_TEMPLATE`; the
continuation starts with a space only for languages written with spaces
(:func:`choice_prefix`). ``senseforge eval run`` builds the identical prompt from
:func:`format_prompt` and :func:`choice_continuations`.

The exports live in private modules (the row shape and split reading in ``_export_rows``,
the Hugging Face and Parquet writers in ``_export_hf``, the lm-eval task in
``_export_lm_eval``); this module is where callers import them from.
"""

from __future__ import annotations

from senseforge.data._export_hf import dataset_card, export_hf, export_parquet, hf_features
from senseforge.data._export_lm_eval import (
    PROMPT_TEMPLATE,
    LmEvalTask,
    choice_continuations,
    choice_prefix,
    export_lm_eval,
    format_prompt,
    lm_eval_row,
    lm_eval_yaml,
)
from senseforge.data._export_rows import COLUMNS, SPLIT_FILES, Splits, SplitsLike, item_to_row, read_splits

__all__ = [
    "COLUMNS",
    "PROMPT_TEMPLATE",
    "SPLIT_FILES",
    "LmEvalTask",
    "Splits",
    "SplitsLike",
    "choice_continuations",
    "choice_prefix",
    "dataset_card",
    "export_hf",
    "export_lm_eval",
    "export_parquet",
    "format_prompt",
    "hf_features",
    "item_to_row",
    "lm_eval_row",
    "lm_eval_yaml",
    "read_splits",
]
