"""The lm-evaluation-harness export of :mod:`senseforge.data.export`: the prompt, the split files, the task YAML."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from senseforge._version import __version__
from senseforge.data._export_rows import SplitsLike, atomic_dir, item_to_row, resolve_splits, write_text
from senseforge.data.lang import normalize_tag
from senseforge.data.literals import MissingLiteralError, lookup
from senseforge.data.schema import MCItem
from senseforge.errors import ConfigError, DataValidationError

PROMPT_TEMPLATE = "Question: {question}\nAnswer:"
"""The zero-shot prompt of exported lm-eval tasks; each choice is scored as its continuation."""

_VALIDATION_NAMES = ("validation", "dev")
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


# --------------------------------------------------------------------------- rows


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
    write_text(path, "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))


# --------------------------------------------------------------------------- task


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
    resolved = resolve_splits(splits, lang)
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
    with atomic_dir(target, overwrite=overwrite) as tmp:
        for name, items in resolved.items():
            _write_lm_eval_rows(tmp / files[name].name, items, with_hard=with_hard)
        write_text(tmp / f"{task_name}.yaml", yaml_text)
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
