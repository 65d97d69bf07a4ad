"""``analyze irt`` on simulated answers with known parameters (seconds)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from senseforge.analyze.irt.fit import fit
from senseforge.analyze.irt.inputs import Responses, read_responses
from senseforge.analyze.irt.simulate import simulate
from senseforge.analyze.irt.subset import loo_check, select
from senseforge.analyze.irt.suspicious import suspicious_reasons
from senseforge.cli.main import app
from senseforge.errors import DataValidationError


def _responses(seed: int, with_keys: bool = True) -> tuple[Responses, object]:
    sim = simulate(seed)
    responses = Responses()
    for row in sim.rows:
        responses.add(row["respondent"], row["item"], row["correct"], row["choice"], row["key"] if with_keys else None)
    return responses, sim


@pytest.mark.parametrize("seed", [0, 3])
def test_the_fit_recovers_difficulty_and_ability(seed: int) -> None:
    responses, sim = _responses(seed)
    fitted = fit(responses.matrix())
    unflipped = [j for j, i in enumerate(responses.items) if i not in sim.flipped and fitted.estimable[j]]  # type: ignore[attr-defined]
    truth = np.array([sim.difficulty[sim.items.index(responses.items[j])] for j in unflipped])  # type: ignore[attr-defined]
    assert np.corrcoef(fitted.difficulty[unflipped], truth)[0, 1] >= 0.85
    assert np.corrcoef(fitted.ability, sim.theta)[0, 1] >= 0.95  # type: ignore[attr-defined]
    assert np.all(fitted.ability_se > 0) and np.all(np.isfinite(fitted.difficulty_se[fitted.estimable]))


def test_flipped_keys_are_flagged_and_few_others() -> None:
    responses, sim = _responses(0, with_keys=False)
    fitted = fit(responses.matrix())
    flagged = suspicious_reasons(fitted, responses.items, responses.respondents, responses.choices, responses.keys)
    assert len(set(flagged) & set(sim.flipped)) >= 8  # type: ignore[attr-defined]
    assert len(set(flagged) - set(sim.flipped)) <= 19  # type: ignore[attr-defined]


def test_an_item_everyone_gets_right_is_not_estimable_not_suspicious() -> None:
    x = np.array([[1, 0, 1], [1, 1, 0], [1, 0, 0], [1, 1, 1]], dtype=float)
    fitted = fit(x)
    assert not fitted.estimable[0] and np.isnan(fitted.difficulty[0])
    assert fitted.all_right is not None and fitted.all_right[0]
    assert "i0" not in suspicious_reasons(fitted, ["i0", "i1", "i2"], ["a", "b", "c", "d"], {}, {})


def test_the_1pl_shares_one_slope() -> None:
    responses, _ = _responses(1)
    fitted = fit(responses.matrix(), "1pl")
    slopes = fitted.discrimination[fitted.estimable]
    assert np.allclose(slopes, slopes[0])


def test_the_subset_spreads_and_is_checked_against_random_subsets() -> None:
    responses, _ = _responses(2)
    x = responses.matrix()[:12]  # fewer respondents: a quick leave-one-out
    fitted = fit(x)
    allowed = fitted.estimable.copy()
    chosen = select(fitted, 20, allowed)
    assert len(chosen) == 20 and len(set(chosen)) == 20
    check = loo_check(x, responses.items, 20, allowed)
    assert len(check.ids) == 20
    assert 0 <= check.loo_error < 0.2 and 0 <= check.random_loo_error < 0.3
    assert -1 <= check.loo_rank_correlation <= 1


def test_bad_rows_are_located(tmp_path: Path) -> None:
    bad = tmp_path / "rows.jsonl"
    bad.write_text('{"respondent": "a", "item": "x", "correct": true}\n{"respondent": "b", "item": "x"}\n')
    with pytest.raises(DataValidationError, match=r"rows.jsonl:2: a row needs"):
        read_responses([bad])


def test_the_command_writes_the_analysis(tmp_path: Path) -> None:
    rows = tmp_path / "sim.jsonl"
    sim = simulate(4)
    rows.write_text("".join(json.dumps({k: v for k, v in r.items() if k != "key"}) + "\n" for r in sim.rows))
    out = tmp_path / "irt"
    result = CliRunner().invoke(app, ["analyze", "irt", str(rows), "--out", str(out)])
    assert result.exit_code == 0, result.output
    doc = json.loads((out / "irt.json").read_text())
    assert {"id", "difficulty", "discrimination", "difficulty_se", "discrimination_se", "suspicious", "reasons"} <= set(
        doc["items"][0]
    )
    assert {"label", "ability", "ability_se"} == set(doc["respondents"][0])
    assert doc["warnings"] and "fewer than 50" in doc["warnings"][0]
    assert sum(item["suspicious"] for item in doc["items"]) >= 8
    assert (out / "irt.csv").read_text().startswith("id,difficulty,discrimination")
    page = tmp_path / "report.html"
    shown = CliRunner().invoke(app, ["report", "--analysis", str(out), "--out", str(page)])
    assert shown.exit_code == 0, shown.output
    html = page.read_text()
    assert "Item map" in html and "Suspicious items (" in html
    assert "Respondents (30)" in html and "Warning: 30 respondents (fewer than 50)" in html


def test_eval_runs_of_different_data_are_refused(tmp_path: Path) -> None:
    def run(name: str, data: str, answers: dict[str, str] | None = None) -> Path:
        folder = tmp_path / name
        folder.mkdir()
        results = {
            "results": {},
            "breakdowns": {},
            "config": {},
            "data": {"path": data, "name": data, "format": "jsonl", "kind": "mc"},
            "model": {"name": name, "identity": {}},
            "seeds": {},
            "prompt_hashes": {},
            "versions": {},
            "timing": {},
        }
        (folder / "results.json").write_text(json.dumps(results))
        samples = [
            {"id": item, "lang": "en", "difficulty": None, "category": None, "recipe": None, "review": None}
            | {"prompt": "?", "choices": ["x", "y"], "labels": ["A", "B"], "continuations": [" A", " B"], "gold": "A"}
            | {"prediction": choice, "correct": choice == "A"}
            for item, choice in (answers or {}).items()
        ]
        (folder / "samples.jsonl").write_text("".join(json.dumps(row) + "\n" for row in samples))
        return folder

    read = read_responses([run("m1", "mine", {"q1": "A", "q2": "B"}), run("m2", "mine", {"q1": "B", "q2": "B"})])
    assert read.respondents == ["m1 (m1)", "m2 (m2)"] and read.items == ["q1", "q2"] and read.models == {"m1", "m2"}
    assert read.answers[("m1 (m1)", "q1")] and not read.answers[("m2 (m2)", "q1")]
    assert read.choices[("m2 (m2)", "q2")] == "B" and read.keys["q1"] == "A"

    with pytest.raises(DataValidationError, match=r"evaluated 'other'.*evaluated 'mine'"):
        read_responses([run("a", "mine"), run("b", "other")])
