"""``senseforge export``: a dataset as a Hugging Face DatasetDict, Parquet files, or an lm-eval task."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import typer

from senseforge.cli._common import err

app = typer.Typer(
    help="Export split files: Hugging Face DatasetDict, Parquet, lm-evaluation-harness task.", no_args_is_help=True
)

DataDirArgument = typer.Argument(
    ...,
    help="Folder with train/validation (or dev)/test .jsonl split files: MCItem records or flat mCSQA/CSQA rows.",
)
OutOption = typer.Option(..., "--out", help="Folder to write (atomically).")
LangOption = typer.Option(None, "--lang", help="BCP-47 tag of flat mCSQA/CSQA rows (MCItem rows carry their own).")
OverwriteOption = typer.Option(False, "--overwrite", help="Replace --out when it exists and is not empty.")
CardOption = typer.Option(True, "--card/--no-card", help="Write a README.md dataset card with provenance.")


def _export_tables(writer: Any, data_dir: Path, out: Path, lang: str | None, card: bool, overwrite: bool) -> None:
    """Read the split files and hand them to one of the table writers (HF or Parquet)."""
    from senseforge.data.export import read_splits

    _check_out(data_dir, out)
    splits = read_splits(data_dir, lang=lang)
    written = writer(splits, out, card=card, overwrite=overwrite)
    err.print(f"wrote {_describe(splits)} to {written}", markup=False)


@app.command("hf")
def hf(
    data_dir: Path = DataDirArgument,
    out: Path = OutOption,
    lang: str | None = LangOption,
    card: bool = CardOption,
    overwrite: bool = OverwriteOption,
) -> None:
    """Save a datasets.DatasetDict (save_to_disk) in the mCSQA schema; load it with load_from_disk."""
    from senseforge.data.export import export_hf

    _export_tables(export_hf, data_dir, out, lang, card, overwrite)


@app.command("parquet")
def parquet(
    data_dir: Path = DataDirArgument,
    out: Path = OutOption,
    lang: str | None = LangOption,
    card: bool = CardOption,
    overwrite: bool = OverwriteOption,
) -> None:
    """Write one {split}.parquet per split in the mCSQA schema."""
    from senseforge.data.export import export_parquet

    _export_tables(export_parquet, data_dir, out, lang, card, overwrite)


@app.command("lm-eval")
def lm_eval(
    data_dir: Path = DataDirArgument,
    out: Path = OutOption,
    task_name: str = typer.Option(..., "--task-name", help="lm-eval task name, e.g. mcsqa_ja."),
    lang: str | None = typer.Option(
        None,
        "--lang",
        help="Language of the task: labels flat mCSQA/CSQA rows and keeps only MCItem rows in it.",
    ),
    overwrite: bool = OverwriteOption,
) -> None:
    """Write an lm-evaluation-harness task (YAML + JSONL) that lm_eval runs unmodified."""
    from senseforge.data.export import export_lm_eval, read_splits

    _check_out(data_dir, out)
    splits = read_splits(data_dir, lang=lang)
    task = export_lm_eval(splits, out, task_name=task_name, lang=lang, overwrite=overwrite)
    scored = f"scores {task.test_split}" + (f", few-shot from {task.fewshot_split}" if task.fewshot_split else "")
    err.print(
        f"wrote task {task.task_name} ({task.lang}, {_counts(task.counts)}; {scored}) to {task.yaml_path}", markup=False
    )
    err.print(
        f"run: lm_eval --model hf --model_args pretrained=MODEL_DIR --tasks {task.task_name} "
        f"--include_path {task.yaml_path.parent}",
        markup=False,
    )


def _check_out(data_dir: Path, out: Path) -> None:
    """Refuse an --out that would replace the input folder (or a folder holding it)."""
    from senseforge.errors import ConfigError

    source, target = data_dir.resolve(), out.resolve()
    if source == target or target in source.parents:
        raise ConfigError(f"--out {out} would replace the input folder {data_dir}; choose another --out")


def _describe(splits: Mapping[str, Sequence[Any]]) -> str:
    return f"{sum(len(items) for items in splits.values()):,} items ({_counts({k: len(v) for k, v in splits.items()})})"


def _counts(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{name} {count:,}" for name, count in counts.items())
