"""``transfer`` over three languages with a tiny random-weight encoder built in the test: both matrices, Table 7's
rows with Δ exactly Multi − Mono, Total equal to the count-weighted Easy/Hard mean, the heat map; and the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("transformers")
pytest.importorskip("torch")

from senseforge.evaluate.finetune import FinetuneConfig
from senseforge.evaluate.transfer import LanguageData, run_transfer, settings_of
from senseforge.evaluate.transfer_tables import total_is_weighted_mean

from .tiny_encoder import build_encoder, items

LANGS = ("en", "ja", "zh")


def _data() -> dict[str, LanguageData]:
    return {
        lang: LanguageData(items(lang, 10, "train"), items(lang, 4, "dev"), items(lang, 7, "test")) for lang in LANGS
    }


def test_three_languages_give_both_matrices_table_7_and_the_heat_map(tmp_path: Path) -> None:
    texts = [f"{i.question} {' '.join(c.text for c in i.choices)}" for lang in LANGS for i in items(lang, 10, "x")]
    model = build_encoder(tmp_path / "encoder", texts)
    config = FinetuneConfig(model=str(model), batch_size=5, learning_rates=(1e-3,), max_epochs=1, max_length=24)
    lines: list[str] = []
    result = run_transfer(_data(), config, tmp_path / "study", n_bootstrap=100, progress=lines.append)
    assert set(result["summary"]["models"]) == set(settings_of(list(LANGS))) and len(settings_of(list(LANGS))) == 7
    assert total_is_weighted_mean(result["cells"])
    document = json.loads((tmp_path / "study" / "transfer.json").read_text())
    check_tables(document)
    png = (tmp_path / "study" / "transfer_heatmap.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    for name in ("transfer_total_raw.csv", "transfer_easy_relative.csv", "table7_hard.csv"):
        assert (tmp_path / "study" / name).is_file(), name
    assert any(line.startswith("unseen:ja: training on en, zh") for line in lines)


def check_tables(document: dict[str, object]) -> None:
    """The study's tables: both matrices per subset (diagonal 100), Table 7 with Δ exactly Multi − Mono."""
    assert document["langs"] == list(LANGS)
    subsets = document["subsets"]
    assert isinstance(subsets, dict) and set(subsets) == {"total", "easy", "hard"}
    for subset, tables in subsets.items():
        raw, relative = tables["raw"], tables["relative"]
        assert set(raw) == set(relative) == set(LANGS)  # rows: the monolingual models, by training language
        for lang in LANGS:
            if raw[lang][lang]:
                assert relative[lang][lang] == 100.0, subset
        for row in tables["table7"]:
            if row["mono"] is not None and row["multi"] is not None:
                assert row["delta"] == row["multi"] - row["mono"], (subset, row)
            assert row["unseen"] is not None  # three languages: an unseen model per language
    assert "summary" in document["finding"]


def _run_dir(folder: Path, lang: str) -> Path:
    for split, n in (("train", 10), ("validation", 4), ("test", 5)):
        path = folder / "items" / f"{split}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(i.model_dump_json() + "\n" for i in items(lang, n, split)), encoding="utf-8")
    return folder


def test_the_transfer_and_finetune_commands(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from senseforge.cli.main import app

    texts = [
        f"{i.question} {' '.join(c.text for c in i.choices)}" for lang in ("en", "ja") for i in items(lang, 10, "x")
    ]
    model = str(build_encoder(tmp_path / "encoder", texts))
    runs = {lang: _run_dir(tmp_path / f"mcsqa-{lang}", lang) for lang in ("en", "ja")}
    quick = ["-m", model, "--learning-rates", "1e-3", "--max-epochs", "1", "--batch-size", "5", "--max-length", "24"]
    args = [
        "transfer",
        "--data",
        f"en={runs['en']}",
        "--data",
        f"ja={runs['ja']}",
        *quick,
        "--out",
        str(tmp_path / "t"),
    ]
    result = CliRunner().invoke(app, [*args, "--bootstrap", "100"])
    assert result.exit_code == 0, result.output
    assert "transfer.json" in result.output and (tmp_path / "t" / "transfer_heatmap.png").is_file()
    document = json.loads((tmp_path / "t" / "transfer.json").read_text())
    assert document["langs"] == ["en", "ja"] and "unseen:en" not in document["cells"]  # two languages: no unseen
    single = CliRunner().invoke(app, ["finetune", "--data", str(runs["en"]), *quick, "--out", str(tmp_path / "f")])
    assert single.exit_code == 0, single.output
    assert "test accuracy" in single.output and "on 5 items" in single.output
    bad = CliRunner().invoke(app, ["transfer", "--data", "en", *quick, "--out", str(tmp_path / "x")])
    assert bad.exit_code != 0 and "write LANG=PATH" in str(bad.exception)
