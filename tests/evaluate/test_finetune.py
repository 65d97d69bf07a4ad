"""Fine-tuning a tiny random-weight encoder built in the test: the learning-rate search, early stopping, the
manifest, a resume that trains no finished rate again, and predictions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("transformers")
pytest.importorskip("torch")

from senseforge.errors import ConfigError, DataValidationError
from senseforge.evaluate.finetune import FinetuneConfig, finetune, predict, selection_split

from .tiny_encoder import build_encoder, items


def _texts() -> list[str]:
    return [f"{item.question} {' '.join(c.text for c in item.choices)}" for item in items("en", 30, "all")]


def test_the_rate_search_keeps_the_best_and_a_rerun_trains_nothing_again(tmp_path: Path) -> None:
    model = build_encoder(tmp_path / "encoder", _texts())
    config = FinetuneConfig(
        model=str(model),
        batch_size=4,
        micro_batch=2,
        learning_rates=(1e-3, 5e-4),
        max_epochs=2,
        patience=1,
        max_length=32,
    )
    lines: list[str] = []
    result = finetune(items("en", 12, "train"), items("en", 5, "dev"), config, tmp_path / "run", progress=lines.append)
    assert result.learning_rate in (1e-3, 5e-4) and (result.model_dir / "config.json").is_file()
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["learning_rate"] == result.learning_rate and set(manifest["history"]) == {"0.001", "0.0005"}
    for rate in manifest["history"].values():
        assert 1 <= rate["epochs"] <= 2 and len(rate["history"]) == rate["epochs"]
        assert rate["best_accuracy"] == max(rate["history"])
    assert lines and all(line.startswith("lr ") for line in lines)
    again: list[str] = []
    rerun = finetune(items("en", 12, "train"), items("en", 5, "dev"), config, tmp_path / "run", progress=again.append)
    assert again == [] and rerun.learning_rate == result.learning_rate  # every rate was done: nothing retrained
    picked = predict(result.model_dir, items("en", 6, "test"), config)
    assert len(picked) == 6 and all(0 <= p < 5 for p in picked)


def test_a_seeded_selection_split_and_the_errors_are_named(tmp_path: Path) -> None:
    train, held = selection_split(items("en", 20, "train"), seed=42)
    assert len(held) == 2 and len(train) == 18 and not {i.id for i in held} & {i.id for i in train}
    assert selection_split(items("en", 20, "train"), seed=42)[1] == held
    with pytest.raises(ConfigError, match="no such folder"):
        finetune(items("en", 4, "t"), None, FinetuneConfig(model=str(tmp_path / "none")), tmp_path / "run")
    model = build_encoder(tmp_path / "encoder", _texts())
    broken = items("en", 4, "t")
    broken[0] = broken[0].model_copy(update={"answer": "Z"})
    with pytest.raises(DataValidationError, match="no answer among its choices"):
        finetune(broken, None, FinetuneConfig(model=str(model), max_epochs=1), tmp_path / "run")
