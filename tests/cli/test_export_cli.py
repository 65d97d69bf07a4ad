"""``senseforge export``: the Typer app invoked in-process with its test runner."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from senseforge.cli.export import app
from senseforge.errors import ConfigError, DataValidationError

FIXTURES = Path(__file__).parent.parent / "fixtures"
ITEMS = FIXTURES / "export" / "items"

runner = CliRunner()
yaml = pytest.importorskip("yaml")


def test_hf_writes_a_dataset_dict(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    result = runner.invoke(app, ["hf", str(ITEMS), "--out", str(tmp_path / "hf")])
    assert result.exit_code == 0, result.output
    assert "wrote 12 items (train 4, validation 4, test 4)" in result.output
    loaded = datasets.load_from_disk(str(tmp_path / "hf"))
    assert {name: len(split) for name, split in loaded.items()} == {"train": 4, "validation": 4, "test": 4}
    assert (tmp_path / "hf" / "README.md").is_file()


def test_parquet_from_flat_rows_with_lang_and_no_card(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    data = tmp_path / "data"
    data.mkdir()
    shutil.copy(FIXTURES / "csqa" / "dev_sample.jsonl", data / "dev.jsonl")
    result = runner.invoke(app, ["parquet", str(data), "--lang", "en", "--no-card", "--out", str(tmp_path / "pq")])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (tmp_path / "pq").iterdir()) == ["validation.parquet"]


def test_lm_eval_writes_a_task_and_says_how_to_run_it(tmp_path: Path) -> None:
    out = tmp_path / "task"
    result = runner.invoke(app, ["lm-eval", str(ITEMS), "--out", str(out), "--task-name", "sf_ja", "--lang", "ja"])
    assert result.exit_code == 0, result.output
    assert "scores validation, few-shot from train" in result.output
    assert f"--tasks sf_ja --include_path {out}" in result.output
    config = yaml.safe_load((out / "sf_ja.yaml").read_text(encoding="utf-8"))
    assert config["task"] == "sf_ja" and config["test_split"] == "validation" and config["target_delimiter"] == ""
    first = json.loads((out / "test.jsonl").read_text(encoding="utf-8").splitlines()[0])
    assert first["answerKey"] == "" and first["lang"] == "ja"


def test_lm_eval_on_two_languages_without_lang_is_a_config_error(tmp_path: Path) -> None:
    result = runner.invoke(app, ["lm-eval", str(ITEMS), "--out", str(tmp_path / "t"), "--task-name", "t"])
    assert result.exit_code != 0
    assert isinstance(result.exception, ConfigError) and "--lang" in str(result.exception)


def test_folder_without_split_files_is_a_located_error(tmp_path: Path) -> None:
    result = runner.invoke(app, ["parquet", str(tmp_path), "--out", str(tmp_path / "pq")])
    assert result.exit_code != 0
    assert isinstance(result.exception, DataValidationError)
    assert str(result.exception).startswith(f"{tmp_path}: no split files")
    assert not (tmp_path / "pq").exists()


def test_malformed_row_is_a_located_error(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    lines = (ITEMS / "test.jsonl").read_text(encoding="utf-8").splitlines()
    lines[2] = lines[2].replace('"choices": [', '"choices": 7, "x": [', 1)
    (data / "test.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = runner.invoke(app, ["hf", str(data), "--out", str(tmp_path / "hf")])
    assert isinstance(result.exception, DataValidationError)
    assert str(result.exception).startswith(f"{data / 'test.jsonl'}:3: ")


def test_existing_out_needs_overwrite(tmp_path: Path) -> None:
    out = tmp_path / "task"
    args = ["lm-eval", str(ITEMS), "--out", str(out), "--task-name", "sf_en", "--lang", "en"]
    assert runner.invoke(app, args).exit_code == 0
    again = runner.invoke(app, args)
    assert isinstance(again.exception, ConfigError) and "--overwrite" in str(again.exception)
    assert runner.invoke(app, [*args, "--overwrite"]).exit_code == 0


def test_out_may_not_replace_the_input(tmp_path: Path) -> None:
    data = tmp_path / "data"
    shutil.copytree(ITEMS, data)
    for out in (data, tmp_path):
        result = runner.invoke(app, ["parquet", str(data), "--out", str(out), "--overwrite"])
        assert isinstance(result.exception, ConfigError) and "would replace the input folder" in str(result.exception)
    assert sorted(p.name for p in data.iterdir()) == ["test.jsonl", "train.jsonl", "validation.jsonl"]


# -- the language of a build's run folder, from its manifest -----------------------------------


def _run(folder: Path, config: dict[str, object], datasets: dict[str, Path]) -> Path:
    """A run folder as a build leaves it: manifest.json and, per sub-folder, flat released rows."""
    folder.mkdir(parents=True)
    manifest = {"recipe": config["recipe"], "config": config, "config_hash": "0" * 64}
    (folder / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    for sub in datasets.values():
        sub.mkdir(parents=True)
        shutil.copy(FIXTURES / "csqa" / "dev_sample.jsonl", sub / "test.jsonl")
    return folder


def _mcsqa_run(tmp_path: Path) -> Path:
    from senseforge.pipelines.mcsqa.config import McsqaConfig

    run = tmp_path / "runs" / "mcsqa-ja"
    return _run(run, McsqaConfig(lang="ja").model_dump(mode="json"), {"dataset": run / "dataset"})


@pytest.mark.parametrize("where", ["dataset", "."])
def test_lm_eval_takes_the_language_from_the_run_manifest(tmp_path: Path, where: str) -> None:
    run = _mcsqa_run(tmp_path)
    out = tmp_path / "task"
    result = runner.invoke(app, ["lm-eval", str(run / where), "--out", str(out), "--task-name", "mcsqa_ja"])
    assert result.exit_code == 0, result.output
    assert f"language ja (from {run / 'manifest.json'}" in result.output
    assert "wrote task mcsqa_ja (ja, test 10;" in result.output
    first = json.loads((out / "test.jsonl").read_text(encoding="utf-8").splitlines()[0])
    assert first["lang"] == "ja"


def test_lang_given_wins_over_the_manifest(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    run = _mcsqa_run(tmp_path)
    result = runner.invoke(app, ["parquet", str(run / "dataset"), "--lang", "en", "--out", str(tmp_path / "pq")])
    assert result.exit_code == 0, result.output
    assert "from" not in result.output and "manifest" not in result.output


def test_a_run_with_a_folder_per_language_names_it_by_the_folder(tmp_path: Path) -> None:
    from senseforge.pipelines.human_gen.config import HumanGenConfig

    run = tmp_path / "runs" / "human-gen"
    _run(run, HumanGenConfig(lang="id").model_dump(mode="json"), {"dataset": run / "id" / "dataset"})
    out = tmp_path / "task"
    result = runner.invoke(app, ["lm-eval", str(run / "id" / "dataset"), "--out", str(out), "--task-name", "hg_id"])
    assert result.exit_code == 0, result.output
    assert json.loads((out / "test.jsonl").read_text(encoding="utf-8").splitlines()[0])["lang"] == "id"


def test_a_folder_outside_any_run_still_needs_lang(tmp_path: Path) -> None:
    data = tmp_path / "dataset"
    data.mkdir()
    shutil.copy(FIXTURES / "csqa" / "dev_sample.jsonl", data / "test.jsonl")
    (tmp_path / "manifest.json").write_text('{"not": "a run"}', encoding="utf-8")  # another tool's manifest
    result = runner.invoke(app, ["lm-eval", str(data), "--out", str(tmp_path / "t"), "--task-name", "t"])
    assert isinstance(result.exception, ConfigError) and "--lang" in str(result.exception)
