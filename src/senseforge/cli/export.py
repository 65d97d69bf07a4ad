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
    help="Folder with train/validation (or dev)/test .jsonl split files: MCItem records or flat mCSQA/CSQA rows; "
    "or a build's run folder (its dataset/ is read).",
)
OutOption = typer.Option(..., "--out", help="Folder to write (atomically).")
LangOption = typer.Option(
    None,
    "--lang",
    help="BCP-47 tag of flat mCSQA/CSQA rows (MCItem rows carry their own); default: the run's language, "
    "from the manifest.json of the run the folder belongs to.",
)
OverwriteOption = typer.Option(False, "--overwrite", help="Replace --out when it exists and is not empty.")
CardOption = typer.Option(True, "--card/--no-card", help="Write a README.md dataset card with provenance.")


def _export_tables(writer: Any, data_dir: Path, out: Path, lang: str | None, card: bool, overwrite: bool) -> None:
    """Read the split files and hand them to one of the table writers (HF or Parquet)."""
    from senseforge.data.export import read_splits

    data_dir, lang = _source(data_dir, lang)
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
        help="Language of the task: labels flat mCSQA/CSQA rows and keeps only MCItem rows in it; "
        "default: the run's language, from the manifest.json of the run the folder belongs to.",
    ),
    overwrite: bool = OverwriteOption,
) -> None:
    """Write an lm-evaluation-harness task (YAML + JSONL) that lm_eval runs unmodified."""
    from senseforge.data.export import export_lm_eval, read_splits

    data_dir, lang = _source(data_dir, lang)
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


def _source(data_dir: Path, lang: str | None) -> tuple[Path, str | None]:
    """The folder to read and its language.

    A build's run folder (``manifest.json``, no split files of its own) is read through its
    ``dataset/``. Without ``--lang`` the language is the run's, from its manifest: ``config.lang``
    for a one-language recipe (``RUN/dataset``, ``RUN/items``), or the folder's name for a recipe
    that writes one folder per language (``RUN/<lang>/dataset``).
    """
    from senseforge.data.export import SPLIT_FILES
    from senseforge.pipelines.rundir import MANIFEST

    has_splits = any((data_dir / f"{name}.jsonl").is_file() for name in SPLIT_FILES)
    if not has_splits and (data_dir / MANIFEST).is_file() and (data_dir / "dataset").is_dir():
        data_dir = data_dir / "dataset"
    if lang is None:
        lang, manifest = _run_language(data_dir)
        if lang is not None:
            err.print(f"language {lang} (from {manifest}; --lang to choose another)", markup=False)
    return data_dir, lang


def _run_language(folder: Path) -> tuple[str | None, Path | None]:
    """The language a run's manifest gives ``folder`` (a run, its ``dataset/`` or ``items/``), and the manifest."""
    run = folder.parent if folder.name in ("dataset", "items") else folder
    config, manifest = _run_config(run)
    if manifest is not None:  # one language per run: RUN/dataset
        lang = config.get("lang")
        return (lang, manifest) if isinstance(lang, str) else (None, None)
    config, manifest = _run_config(run.parent)  # one folder per language: RUN/<lang>/dataset
    langs = [config.get("lang"), *(config.get("langs") or [])]
    return (run.name, manifest) if manifest is not None and run.name in langs else (None, None)


def _run_config(run: Path) -> tuple[dict[str, Any], Path | None]:
    """The config in ``run``'s manifest and the manifest's path; ``({}, None)`` without a readable run manifest."""
    from senseforge.errors import ConfigError
    from senseforge.pipelines.rundir import MANIFEST, read_manifest

    try:
        manifest = read_manifest(run)
    except ConfigError:  # not a run's manifest: --lang has to say
        return {}, None
    if manifest is None or not isinstance(manifest.get("config"), dict):
        return {}, None
    return manifest["config"], run / MANIFEST


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
