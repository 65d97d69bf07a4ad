"""``analyze irt`` end to end over the bundled model's evaluations (slow: llama.cpp on eight items, four set-ups).

The bundled Gemma 3 270M answers the first eight CommonsenseQA items of ``tests/fixtures/csqa/dev_sample.jsonl`` in
four set-ups (the log-likelihood of each option; the letter with the plain prompt and with two of Putri et al.'s
variants), each set-up a respondent; then the fit over those folders, and the report shows its item map. (Putri et
al.'s third variant, and ``putri-all`` scoring all three in one run, would double the model's time.)
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from senseforge.cli.main import app
from senseforge.evaluate.harness import run_eval
from senseforge.evaluate.run import EvalConfig

CSQA = Path(__file__).parents[1] / "fixtures" / "csqa" / "dev_sample.jsonl"
MODEL = "llamacpp/gemma-3-270m"
ITEMS = 8
SHOWN = [("loglik", "plain"), ("letter", "plain"), ("letter", "putri1"), ("letter", "putri2")]
"""The set-ups, each a respondent: (formulation, prompt variant)."""


@pytest.mark.slow
def test_a_fit_over_the_bundled_models_setups_is_labelled_and_reported(tmp_path: Path, models_dir: Path) -> None:
    from senseforge.llm.cache import open_llm

    llm = open_llm(MODEL)
    try:
        folders = []
        for formulation, variant in SHOWN:
            folder = tmp_path / f"{formulation}-{variant}"
            run_eval(CSQA, llm, EvalConfig(formulation=formulation, variant=variant, limit=ITEMS), folder)
            folders.append(folder)
    finally:
        llm.close()
    out = tmp_path / "irt"
    fitted = CliRunner().invoke(app, ["analyze", "irt", *map(str, folders), "--out", str(out)])
    assert fitted.exit_code == 0, fitted.output
    doc = json.loads((out / "irt.json").read_text())

    labels = [row["label"] for row in doc["respondents"]]
    assert len(labels) == len(set(labels)) == len(SHOWN)  # one respondent per set-up
    assert all(label.startswith(f"{MODEL} ") for label in labels)
    for formulation, variant in SHOWN:  # each respondent named by its set-up
        assert sum(formulation in label and variant in label for label in labels) == 1, (formulation, variant, labels)
    for row in doc["respondents"]:
        assert set(row) == {"label", "ability", "ability_se"}

    ids = {json.loads(line)["id"] for line in CSQA.read_text().splitlines()[:ITEMS]}
    assert {item["id"] for item in doc["items"]} == ids
    keys = {"id", "difficulty", "discrimination", "difficulty_se", "discrimination_se", "suspicious", "reasons"}
    for item in doc["items"]:
        assert keys <= set(item)
    assert any(item["difficulty"] is not None for item in doc["items"]), "no item split the set-ups"
    assert any("not a population" in warning and MODEL in warning for warning in doc["warnings"])
    assert any("fewer than 50" in warning for warning in doc["warnings"])
    assert (out / "irt.svg").is_file() and (out / "irt.csv").is_file()

    page = tmp_path / "report.html"
    shown = CliRunner().invoke(app, ["report", "--analysis", str(out), "--out", str(page)])
    assert shown.exit_code == 0, shown.output
    html = page.read_text()
    assert re.search(r'<figure id="fig\d+-irt"><img [^>]*src="data:image/svg\+xml;base64,', html), "no item map"
    assert "Item map" in html
    assert "not a population" in html
