"""The transfer study and ``finetune`` on Ray: each fine-tune a Ray task, the same tables as in one process."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

pytest.importorskip("ray")
pytest.importorskip("transformers")
pytest.importorskip("torch")

from typer.testing import CliRunner

from senseforge.cli.main import app
from senseforge.cluster.training import task_resources
from senseforge.errors import ConfigError
from senseforge.evaluate.finetune import FinetuneConfig

from ..evaluate.tiny_encoder import build_encoder, items

LANGS = ("en", "ja")


@pytest.fixture
def ray_cluster(local_ray: object) -> None:
    """The session's local Ray (tests/cluster/conftest.py)."""


def _run_dir(folder: Path, lang: str) -> Path:
    for split, n in (("train", 10), ("validation", 4), ("test", 5)):
        path = folder / "items" / f"{split}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(i.model_dump_json() + "\n" for i in items(lang, n, split)), encoding="utf-8")
    return folder


@pytest.mark.xdist_group("ray")
def test_the_transfer_study_on_ray_gives_the_same_tables(tmp_path: Path, ray_cluster: None) -> None:
    texts = [f"{i.question} {' '.join(c.text for c in i.choices)}" for lang in LANGS for i in items(lang, 10, "x")]
    model = str(build_encoder(tmp_path / "encoder", texts))
    runs = {lang: _run_dir(tmp_path / f"mcsqa-{lang}", lang) for lang in LANGS}
    quick = ["-m", model, "--learning-rates", "1e-3", "--max-epochs", "1", "--batch-size", "5", "--max-length", "24"]
    data = [arg for lang in LANGS for arg in ("--data", f"{lang}={runs[lang]}")]
    base = ["transfer", *data, *quick, "--bootstrap", "100"]
    local = CliRunner().invoke(app, [*base, "--out", str(tmp_path / "local")])
    assert local.exit_code == 0, local.output
    ray = CliRunner().invoke(app, [*base, "--out", str(tmp_path / "ray"), "--executor", "ray"])
    assert ray.exit_code == 0, ray.output
    assert "a Ray task" in ray.output
    for name in ("transfer.json", "models.json", "transfer_total_raw.csv", "table7_total.csv"):
        assert (tmp_path / "local" / name).read_bytes() == (tmp_path / "ray" / name).read_bytes(), name
    assert json.loads((tmp_path / "ray" / "transfer.json").read_text())["langs"] == list(LANGS)
    single = CliRunner().invoke(
        app, ["finetune", "--data", str(runs["en"]), *quick, "--out", str(tmp_path / "f"), "--executor", "ray"]
    )
    assert single.exit_code == 0, single.output
    alone = CliRunner().invoke(app, ["finetune", "--data", str(runs["en"]), *quick, "--out", str(tmp_path / "g")])
    assert alone.exit_code == 0, alone.output
    said = [re.search(r"learning rate .* items", result.output) for result in (single, alone)]
    assert said[0] is not None and said[1] is not None and said[0].group(0) == said[1].group(0)
    # the training history (losses and selection accuracies per epoch) is the same bytes
    assert (tmp_path / "f" / "manifest.json").read_bytes() == (tmp_path / "g" / "manifest.json").read_bytes()


def test_task_resources_follow_the_device() -> None:
    config = FinetuneConfig(model="m", device="cuda")
    assert task_resources(config, 2, 0.0)["num_gpus"] == 1 and task_resources(config, 2, 0.0)["num_cpus"] == 2
    assert task_resources(FinetuneConfig(model="m"), 1, 0.0)["num_gpus"] == 0
    assert task_resources(FinetuneConfig(model="m"), 1, 4.0)["num_gpus"] == 1
    with pytest.raises(ConfigError):
        task_resources(config, 0, 0.0)


def test_an_unknown_executor_is_refused(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["finetune", "--data", str(tmp_path), "-m", str(tmp_path), "--out", str(tmp_path / "o"), "--executor", "x"]
    )
    assert result.exit_code != 0
