"""The Hugging Face exports of :mod:`senseforge.data.export`: a ``DatasetDict``, Parquet files, their dataset card."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from senseforge._version import __version__
from senseforge.data._card_run import built_lines, run_facts
from senseforge.data._export_rows import (
    Splits,
    SplitsLike,
    atomic_dir,
    item_to_row,
    require,
    resolve_splits,
    write_text,
)


def _arrow_schema() -> Any:
    pa = require("pyarrow", "pyarrow")
    strings = pa.list_(pa.string())
    return pa.schema(
        [
            ("id", pa.string()),
            ("question", pa.string()),
            ("question_concept", pa.string()),
            ("choices", pa.struct([("label", strings), ("text", strings)])),
            ("answerKey", pa.string()),
            ("hard", pa.bool_()),
            ("lang", pa.string()),
            ("difficulty", pa.string()),
            ("category", pa.string()),
        ]
    )


def hf_features() -> Any:
    """The ``datasets.Features`` of :func:`export_hf` (its Arrow schema is the Parquet schema)."""
    datasets = require("datasets", "datasets")
    string = datasets.Value("string")
    return datasets.Features(
        {
            "id": string,
            "question": string,
            "question_concept": string,
            "choices": {"label": datasets.List(string), "text": datasets.List(string)},
            "answerKey": string,
            "hard": datasets.Value("bool"),
            "lang": string,
            "difficulty": string,
            "category": string,
        }
    )


def _facts(splits: SplitsLike) -> dict[str, Any] | None:
    """The run facts of a split folder (``None`` for items given in memory)."""
    return run_facts(Path(splits)) if isinstance(splits, str | os.PathLike) else None


def export_hf(
    splits: SplitsLike, out_dir: str | os.PathLike[str], *, card: bool = True, overwrite: bool = False
) -> Path:
    """Save the splits as a ``datasets.DatasetDict`` (``save_to_disk``), with a README.md dataset card.

    Load it back with ``datasets.load_from_disk(out_dir)``. Features: :func:`hf_features`.

    Args:
        splits: split name → items, or a folder of split files (MCItem JSONL).
        out_dir: the folder to create.
        card: write README.md with counts and provenance.
        overwrite: replace ``out_dir`` when it exists and is not empty.

    Returns:
        The written folder.
    """
    resolved = resolve_splits(splits)
    datasets = require("datasets", "datasets")
    features = hf_features()
    target = Path(out_dir).absolute()
    dataset = datasets.DatasetDict(
        {
            name: datasets.Dataset.from_list([item_to_row(item) for item in items], features=features, split=name)
            for name, items in resolved.items()
        }
    )
    with atomic_dir(target, overwrite=overwrite) as tmp:
        dataset.save_to_disk(str(tmp))
        if card:
            write_text(tmp / "README.md", dataset_card(resolved, title=target.name, layout="hf", facts=_facts(splits)))
    return target


def export_parquet(
    splits: SplitsLike, out_dir: str | os.PathLike[str], *, card: bool = True, overwrite: bool = False
) -> Path:
    """Write one ``{split}.parquet`` per split (columns :data:`COLUMNS`), with a README.md dataset card.

    The file names follow the Hugging Face Hub's split conventions, so the folder loads with
    ``load_dataset("parquet", data_dir=out_dir)`` or can be uploaded as is.

    Returns:
        The written folder.
    """
    resolved = resolve_splits(splits)
    pq = require("pyarrow.parquet", "pyarrow")
    pa = require("pyarrow", "pyarrow")
    schema = _arrow_schema()
    target = Path(out_dir).absolute()
    with atomic_dir(target, overwrite=overwrite) as tmp:
        for name, items in resolved.items():
            table = pa.Table.from_pylist([item_to_row(item) for item in items], schema=schema)
            pq.write_table(table, tmp / f"{name}.parquet")
        if card:
            card_text = dataset_card(resolved, title=target.name, layout="parquet", facts=_facts(splits))
            write_text(tmp / "README.md", card_text)
    return target


def dataset_card(splits: Splits, *, title: str, layout: str = "hf", facts: Mapping[str, Any] | None = None) -> str:
    """A README.md dataset card: languages, counts per split and difficulty, provenance, fields.

    Deterministic: the same items give the same bytes (no dates).

    Args:
        splits: split name → items.
        title: the card's heading (the dataset's folder name).
        layout: ``hf`` (a ``save_to_disk`` folder) or ``parquet`` (``{split}.parquet`` files); sets the load hint.
        facts: the manifest, funnel and cost of the run the items came from (:func:`run_facts`): the card
            then also says how the data was built, what it cost, its sources' licences and its intended use.
    """
    items = [item for split in splits.values() for item in split]
    langs = Counter(item.lang for item in items)
    total = len(items)
    size = "n<1K" if total < 1_000 else "1K<n<10K" if total < 10_000 else "10K<n<100K"
    lines = ["---", "language:", *(f"- {lang}" for lang in sorted(langs))]
    lines += ["task_categories:", "- question-answering", "task_ids:", "- multiple-choice-qa"]
    lines += ["size_categories:", f"- {size}", "---", "", f"# {title}", ""]
    lines += [
        f"Commonsense multiple-choice questions exported by senseforge {__version__}: {total:,} items "
        f"in {len(splits)} split(s), {len(langs)} language(s).",
        "",
        "## Splits",
        "",
        "| split | items | easy | hard | difficulty unknown | answer withheld |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, split in splits.items():
        level = Counter(item.difficulty for item in split)
        withheld = sum(item.answer is None for item in split)
        lines.append(
            f"| {name} | {len(split):,} | {level['easy']:,} | {level['hard']:,} | {level[None]:,} | {withheld:,} |"
        )
    lines += ["", "## Languages", "", "| language | " + " | ".join(splits) + " |", "|---|" + "---:|" * len(splits)]
    for lang in sorted(langs):
        counts = " | ".join(f"{sum(item.lang == lang for item in split):,}" for split in splits.values())
        lines.append(f"| {lang} | {counts} |")
    recipes = Counter(item.provenance.recipe or "(unrecorded)" for item in items)
    models = Counter(model for item in items for model in dict.fromkeys(item.provenance.model_ids))
    reviews = Counter(item.provenance.review or "(unrecorded)" for item in items)
    categories = Counter(item.category for item in items if item.category)
    lines += ["", "## Provenance", "", "Items per recipe, per model that wrote or changed them, and per review kind."]
    lines += ["(`review`: `human` = verified by people, `lm` = by an LM panel, `none` = not reviewed.)", ""]
    for heading, counter in (("recipe", recipes), ("model", models), ("review", reviews), ("category", categories)):
        if not counter:
            lines += [f"- {heading}: none recorded"]
            continue
        listed = ", ".join(f"`{key}` ({count:,})" for key, count in sorted(counter.items()))
        lines.append(f"- {heading}: {listed}")
    if facts is not None:
        share = reviews.get("human", 0) / total if total else None
        lines += built_lines(facts, share)
    lines += [
        "",
        "## Fields",
        "",
        "| field | type | meaning |",
        "|---|---|---|",
        "| id | string | stable item id |",
        "| question | string | the question |",
        "| question_concept | string or null | the concept the question is about |",
        "| choices | {label: [string], text: [string]} | the options in display order |",
        '| answerKey | string | label of the correct choice; `""` when withheld (a string label, not a ClassLabel) |',
        "| hard | bool or null | true: only humans verified it (Hard); false: an LM answered it (Easy) |",
        "| lang | string | BCP-47 language tag |",
        "| difficulty | string or null | `easy` or `hard` (same information as `hard`) |",
        "| category | string or null | topic or kind of commonsense |",
        "",
        "## Loading",
        "",
        "```python",
    ]
    if layout == "parquet":
        lines += [
            "from datasets import load_dataset",
            "",
            'dataset = load_dataset("parquet", data_dir="<this folder>")',
        ]
    else:
        lines += ["from datasets import load_from_disk", "", 'dataset = load_from_disk("<this folder>")']
    lines += ["```", ""]
    return "\n".join(lines)
