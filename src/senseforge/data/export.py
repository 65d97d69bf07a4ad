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
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from senseforge.data.adapters import item_to_csqa_row, iter_items
from senseforge.data.io import iter_json_rows, read_jsonl
from senseforge.data.lang import normalize_tag
from senseforge.data.literals import MissingLiteralError, lookup
from senseforge.data.schema import MCItem
from senseforge.errors import ConfigError, DataValidationError, MissingDependencyError

Splits = Mapping[str, Sequence[MCItem]]
"""Split name (``train``, ``validation``, ``test`` …) → items."""

SplitsLike = Splits | str | os.PathLike[str]
"""Splits, or a folder of split files (see :func:`read_splits`)."""

SPLIT_FILES = ("train", "validation", "dev", "test")
"""Split files :func:`read_splits` looks for (``{name}.jsonl``); ``dev`` is read as ``validation``."""

COLUMNS = ("id", "question", "question_concept", "choices", "answerKey", "hard", "lang", "difficulty", "category")
"""Columns of every export, in order: the published mCSQA schema, then ``lang, difficulty, category``."""

PROMPT_TEMPLATE = "Question: {question}\nAnswer:"
"""The zero-shot prompt of exported lm-eval tasks; each choice is scored as its continuation."""

_VALIDATION_NAMES = ("validation", "dev")
_SPLIT_NAME = re.compile(r"^\w+(\.\w+)*$")
_TASK_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


# --------------------------------------------------------------------------- prompt


def choice_prefix(lang: str) -> str:
    """What goes between the prompt and a choice: a space, or nothing for ``ja``, ``zh``, ``th`` ….

    Read from the ``space_separated`` literal (:mod:`senseforge.data.literals`); a language
    without a row there is taken to be written with spaces.

    >>> choice_prefix("en"), choice_prefix("ja"), choice_prefix("zh-Hant")
    (' ', '', '')
    """
    try:
        spaced = lookup(lang, "space_separated")
    except MissingLiteralError:
        spaced = True
    return " " if spaced else ""


def format_prompt(item: MCItem) -> str:
    """The prompt for one item (:data:`PROMPT_TEMPLATE`)."""
    return PROMPT_TEMPLATE.format(question=item.question)


def choice_continuations(item: MCItem) -> list[str]:
    """The scored continuation of each choice, in choice order (prefix + choice text)."""
    prefix = choice_prefix(item.lang)
    return [prefix + choice.text for choice in item.choices]


# --------------------------------------------------------------------------- reading


def read_splits(folder: str | os.PathLike[str], *, lang: str | None = None) -> dict[str, list[MCItem]]:
    """Read the split files of a folder: ``train``, ``validation`` (or ``dev``) and ``test`` ``.jsonl``.

    Each file holds either our :class:`MCItem` records (choices as a list of objects) or rows
    of the flat mCSQA/CommonsenseQA schema (choices as ``{label: [...], text: [...]}``), which
    need ``lang``. ``dev.jsonl`` is returned as the ``validation`` split.

    Args:
        folder: the folder.
        lang: BCP-47 tag of flat-schema rows (MCItem records carry their own language).

    Raises:
        DataValidationError: no split file, an empty file, or a bad row (``file:line: field: problem``).
        ConfigError: flat rows without ``lang``, or both ``validation.jsonl`` and ``dev.jsonl``.
    """
    where = Path(folder)
    if not where.is_dir():
        raise DataValidationError(f"{where}: not a folder (expected a folder of split .jsonl files)")
    found = {name: where / f"{name}.jsonl" for name in SPLIT_FILES if (where / f"{name}.jsonl").is_file()}
    if not found:
        others = sorted(p.name for p in where.glob("*.jsonl"))
        seen = f"; found {', '.join(others)}" if others else ""
        raise DataValidationError(
            f"{where}: no split files (expected train.jsonl, validation.jsonl or dev.jsonl, test.jsonl){seen}"
        )
    if "validation" in found and "dev" in found:
        raise ConfigError(f"{where}: both validation.jsonl and dev.jsonl; keep one (dev is read as validation)")
    splits: dict[str, list[MCItem]] = {}
    for name, path in found.items():
        items = _read_split_file(path, lang)
        if not items:
            raise DataValidationError(f"{path}: no items (remove the file or fill it)")
        splits["validation" if name == "dev" else name] = items
    _check(splits)
    return splits


def _read_split_file(path: Path, lang: str | None) -> list[MCItem]:
    first = next(iter_json_rows(path), None)
    if first is None:
        return []
    _, row = first
    if isinstance(row.get("choices"), list):
        return read_jsonl(path, MCItem)
    if lang is None:
        raise ConfigError(f"{path}: rows in the flat mCSQA/CSQA schema need their language: pass --lang (lang=...)")
    try:
        tag = normalize_tag(lang)
    except ValueError as exc:
        raise ConfigError(f"--lang: {exc}") from exc
    return list(iter_items(path, tag))


def _resolve(splits: SplitsLike, lang: str | None = None) -> dict[str, list[MCItem]]:
    if isinstance(splits, str | os.PathLike):
        return read_splits(splits, lang=lang)
    resolved = {name: list(items) for name, items in splits.items()}
    _check(resolved)
    return resolved


def _check(splits: Mapping[str, Sequence[MCItem]]) -> None:
    """Split names usable as file and HF split names, no empty split, no id in two places."""
    if not splits:
        raise DataValidationError("no splits to export")
    seen: dict[str, str] = {}
    for name, items in splits.items():
        if not _SPLIT_NAME.match(name):
            raise ConfigError(f"split name {name!r}: use letters, digits and underscores (e.g. train, validation)")
        if not items:
            raise DataValidationError(f"split {name!r}: no items")
        for index, item in enumerate(items):
            if not isinstance(item, MCItem):
                raise DataValidationError(
                    f"split {name!r}, item {index}: expected an MCItem, got {type(item).__name__}"
                )
            if item.id in seen:
                where = "twice in" if seen[item.id] == name else f"in both {seen[item.id]!r} and"
                raise DataValidationError(f"item id {item.id!r} appears {where} split {name!r} (ids must be unique)")
            seen[item.id] = name


# --------------------------------------------------------------------------- rows


def item_to_row(item: MCItem) -> dict[str, Any]:
    """One item as an export row (:data:`COLUMNS`): the published mCSQA schema plus lang, difficulty, category."""
    row = item_to_csqa_row(item)
    extra = {"hard": row.get("hard"), "lang": item.lang, "difficulty": item.difficulty, "category": item.category}
    return {column: row[column] if column in row else extra[column] for column in COLUMNS}


def _arrow_schema() -> Any:
    pa = _require("pyarrow", "pyarrow")
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
    datasets = _require("datasets", "datasets")
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


def _require(module: str, package: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingDependencyError(
            f"exporting needs {package}: pip install -c constraints.txt {package} ({exc})"
        ) from exc


# --------------------------------------------------------------------------- atomic folders


@contextlib.contextmanager
def _atomic_dir(out_dir: Path, *, overwrite: bool) -> Iterator[Path]:
    """Yield a temporary sibling of ``out_dir`` to fill; on success it replaces ``out_dir``."""
    if out_dir.exists():
        if not out_dir.is_dir():
            raise ConfigError(f"{out_dir}: exists and is not a folder")
        if any(out_dir.iterdir()) and not overwrite:
            raise ConfigError(f"{out_dir}: folder is not empty; choose another --out or pass --overwrite")
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_dir.with_name(f".{out_dir.name}.{secrets.token_hex(4)}.tmp")
    tmp.mkdir()
    try:
        yield tmp
        if out_dir.exists():
            old = out_dir.with_name(f".{out_dir.name}.{secrets.token_hex(4)}.old")
            os.rename(out_dir, old)
            os.rename(tmp, out_dir)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _write_text(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8", newline="\n")


def lm_eval_row(item: MCItem, *, with_hard: bool) -> dict[str, Any]:
    """An export row without nulls, for lm-eval's JSON loader.

    ``datasets`` infers a JSON file's column types from its first rows and casts every other
    split to them, so a column that starts out null breaks loading. Missing strings are
    written as ``""``; ``hard`` is written only when ``with_hard`` (every item has a
    difficulty), and ``difficulty`` carries ``easy``, ``hard`` or ``""`` either way.
    """
    row = item_to_row(item)
    if not with_hard:
        del row["hard"]
    return {key: "" if value is None else value for key, value in row.items()}


def _write_lm_eval_rows(path: Path, items: Sequence[MCItem], *, with_hard: bool) -> None:
    rows = (lm_eval_row(item, with_hard=with_hard) for item in items)
    _write_text(path, "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))


# --------------------------------------------------------------------------- Hugging Face and Parquet


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
    resolved = _resolve(splits)
    datasets = _require("datasets", "datasets")
    features = hf_features()
    target = Path(out_dir).absolute()
    dataset = datasets.DatasetDict(
        {
            name: datasets.Dataset.from_list([item_to_row(item) for item in items], features=features, split=name)
            for name, items in resolved.items()
        }
    )
    with _atomic_dir(target, overwrite=overwrite) as tmp:
        dataset.save_to_disk(str(tmp))
        if card:
            _write_text(tmp / "README.md", dataset_card(resolved, title=target.name, layout="hf"))
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
    resolved = _resolve(splits)
    pq = _require("pyarrow.parquet", "pyarrow")
    pa = _require("pyarrow", "pyarrow")
    schema = _arrow_schema()
    target = Path(out_dir).absolute()
    with _atomic_dir(target, overwrite=overwrite) as tmp:
        for name, items in resolved.items():
            table = pa.Table.from_pylist([item_to_row(item) for item in items], schema=schema)
            pq.write_table(table, tmp / f"{name}.parquet")
        if card:
            _write_text(tmp / "README.md", dataset_card(resolved, title=target.name, layout="parquet"))
    return target


def dataset_card(splits: Splits, *, title: str, layout: str = "hf") -> str:
    """A README.md dataset card: languages, counts per split and difficulty, provenance, fields.

    Deterministic: the same items give the same bytes (no dates).

    Args:
        splits: split name → items.
        title: the card's heading (the dataset's folder name).
        layout: ``hf`` (a ``save_to_disk`` folder) or ``parquet`` (``{split}.parquet`` files); sets the load hint.
    """
    from senseforge import __version__

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


# --------------------------------------------------------------------------- lm-evaluation-harness


@dataclass(frozen=True)
class LmEvalTask:
    """What :func:`export_lm_eval` wrote."""

    yaml_path: Path
    """The task file; pass its folder to lm-eval as ``--include_path``."""
    task_name: str
    """The lm-eval task name (``--tasks``)."""
    lang: str
    """Language of the items (decides the choice prefix)."""
    test_split: str
    """The split lm-eval scores."""
    validation_split: str | None
    """The validation split, when there is one with every answer."""
    fewshot_split: str | None
    """Where few-shot examples come from (``train``, when it has every answer)."""
    counts: dict[str, int]
    """Items per written split."""


def export_lm_eval(
    splits: SplitsLike,
    out_dir: str | os.PathLike[str],
    *,
    task_name: str,
    lang: str | None = None,
    overwrite: bool = False,
) -> LmEvalTask:
    """Write an lm-evaluation-harness task folder: ``{split}.jsonl`` files and ``{task_name}.yaml``.

    The YAML runs unmodified: ``lm_eval --model hf --model_args pretrained=DIR --tasks TASK
    --include_path OUT_DIR``. It loads the split files by absolute path (move the folder →
    export again), scores each choice as a continuation of :data:`PROMPT_TEMPLATE` (acc and
    acc_norm), and records the senseforge version and prompt under ``metadata.senseforge``.

    lm-eval scores ``test`` when every test item has an answer, else ``validation``/``dev``.
    A split with withheld answers is still written but never named as a split to evaluate or
    to draw few-shot examples from.

    Args:
        splits: split name → items, or a folder of split files.
        out_dir: the folder to create.
        task_name: the lm-eval task name (also the YAML file name).
        lang: keep only items of this language (and label flat-schema rows with it when
            ``splits`` is a folder); ``None`` requires all items to share one language.
        overwrite: replace ``out_dir`` when it exists and is not empty.

    Raises:
        ConfigError: a bad task name or language, mixed languages without ``lang``.
        DataValidationError: no split with every answer to evaluate.
    """
    if not _TASK_NAME.match(task_name):
        raise ConfigError(f"task name {task_name!r}: use letters, digits, '_', '-' or '.' (e.g. mcsqa_ja)")
    resolved = _resolve(splits, lang)
    resolved, tag = _one_language(resolved, lang)
    test_split, validation_split, fewshot_split = _choose_splits(resolved)
    target = Path(out_dir).absolute()
    files = {name: target / f"{name}.jsonl" for name in resolved}
    yaml_text = lm_eval_yaml(
        task_name,
        files,
        lang=tag,
        test_split=test_split,
        validation_split=validation_split,
        fewshot_split=fewshot_split,
        counts={name: len(items) for name, items in resolved.items()},
        withheld={name: sum(item.answer is None for item in items) for name, items in resolved.items()},
    )
    with_hard = all(item.difficulty is not None for items in resolved.values() for item in items)
    with _atomic_dir(target, overwrite=overwrite) as tmp:
        for name, items in resolved.items():
            _write_lm_eval_rows(tmp / files[name].name, items, with_hard=with_hard)
        _write_text(tmp / f"{task_name}.yaml", yaml_text)
    return LmEvalTask(
        yaml_path=target / f"{task_name}.yaml",
        task_name=task_name,
        lang=tag,
        test_split=test_split,
        validation_split=validation_split,
        fewshot_split=fewshot_split,
        counts={name: len(items) for name, items in resolved.items()},
    )


def _one_language(splits: dict[str, list[MCItem]], lang: str | None) -> tuple[dict[str, list[MCItem]], str]:
    if lang is None:
        langs = sorted({item.lang for items in splits.values() for item in items})
        if len(langs) > 1:
            raise ConfigError(
                f"items are in {len(langs)} languages ({', '.join(langs)}); export one lm-eval task per "
                "language with --lang (lang=...)"
            )
        return splits, langs[0]
    try:
        tag = normalize_tag(lang)
    except ValueError as exc:
        raise ConfigError(f"--lang: {exc}") from exc
    kept = {name: [item for item in items if item.lang == tag] for name, items in splits.items()}
    kept = {name: items for name, items in kept.items() if items}
    if not kept:
        langs = sorted({item.lang for items in splits.values() for item in items})
        raise DataValidationError(f"no items in language {tag!r} (the items are in {', '.join(langs)})")
    return kept, tag


def _choose_splits(splits: Mapping[str, Sequence[MCItem]]) -> tuple[str, str | None, str | None]:
    """(test, validation, few-shot) split names; only splits where every item has an answer qualify."""
    withheld = {name: sum(item.answer is None for item in items) for name, items in splits.items()}

    def usable(name: str) -> bool:
        return name in splits and withheld[name] == 0

    validation = next((name for name in _VALIDATION_NAMES if usable(name)), None)
    test = "test" if usable("test") else validation
    if test is None:
        partial = ", ".join(f"{name} withholds {n} of {len(splits[name])}" for name, n in withheld.items() if n)
        raise DataValidationError(
            "lm-eval needs a test or validation split where every item has an answer"
            + (f" ({partial} answers)" if partial else f" (splits: {', '.join(splits)})")
        )
    return test, validation, "train" if usable("train") else None


def lm_eval_yaml(
    task_name: str,
    files: Mapping[str, Path],
    *,
    lang: str,
    test_split: str,
    validation_split: str | None,
    fewshot_split: str | None,
    counts: Mapping[str, int],
    withheld: Mapping[str, int] | None = None,
) -> str:
    """The task YAML of :func:`export_lm_eval` (scalars are JSON-quoted, which YAML reads as is).

    ``withheld`` (split → items without an answer) only adds a comment saying why those
    splits are not scored.
    """
    from senseforge import __version__

    def q(value: str) -> str:
        return json.dumps(value)

    prefix = choice_prefix(lang)
    doc_to_text = PROMPT_TEMPLATE.replace("{question}", "{{question}}")
    lines = [
        f"# lm-evaluation-harness task written by senseforge {__version__} (senseforge export lm-eval).",
        f"# Prompt: {q(PROMPT_TEMPLATE)}; each choice is scored as the continuation {q(prefix)} + choice text.",
        "# acc compares the choices' summed log-likelihoods; acc_norm divides them by the choice's length.",
        "# `senseforge eval run` reads metadata.senseforge to build the identical prompt.",
        "# Split files are referenced by absolute path: after moving this folder, export again.",
        *(
            f"# {name}: {n} of {counts[name]} answers withheld, so lm-eval neither scores it nor draws shots from it."
            for name, n in (withheld or {}).items()
            if n
        ),
        f"task: {task_name}",
        "dataset_path: json",
        "dataset_kwargs:",
        "  data_files:",
        *(f"    {name}: {q(str(path))}" for name, path in files.items()),
        "output_type: multiple_choice",
    ]
    if fewshot_split is not None:
        lines.append(f"training_split: {fewshot_split}")
    if validation_split is not None:
        lines.append(f"validation_split: {validation_split}")
    lines.append(f"test_split: {test_split}")
    if fewshot_split is not None:
        lines.append(f"fewshot_split: {fewshot_split}")
    lines += [
        f"doc_to_text: {q(doc_to_text)}",
        'doc_to_choice: "{{choices.text}}"',
        'doc_to_target: "{{choices.label.index(answerKey)}}"',
        f"target_delimiter: {q(prefix)}",
        "metric_list:",
    ]
    for metric in ("acc", "acc_norm"):
        lines += [f"  - metric: {metric}", "    aggregation: mean", "    higher_is_better: true"]
    lines += [
        "metadata:",
        "  version: 1.0",
        "  senseforge:",
        f"    version: {q(__version__)}",
        f"    prompt: {q(PROMPT_TEMPLATE)}",
        f"    choice_prefix: {q(prefix)}",
        f"    lang: {q(lang)}",
        "    items:",
        *(f"      {name}: {count}" for name, count in counts.items()),
        "",
    ]
    return "\n".join(lines)
