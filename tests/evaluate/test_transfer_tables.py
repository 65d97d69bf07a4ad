"""mCSQA §5 transfer tables: hand-computed matrices, Table 7, the finding, and the written files."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import pytest

from senseforge.errors import MissingDependencyError
from senseforge.evaluate import transfer_tables as tt
from senseforge.evaluate.transfer_tables import ItemOutcome

LANGS = ["en", "ja", "zh"]

# Right answers out of 10 Easy and 10 Hard items per (train language, test language).
EASY = {"en": {"en": 8, "ja": 7, "zh": 8}, "ja": {"en": 8, "ja": 8, "zh": 9}, "zh": {"en": 7, "ja": 8, "zh": 8}}
HARD = {"en": {"en": 10, "ja": 7, "zh": 9}, "ja": {"en": 6, "ja": 10, "zh": 8}, "zh": {"en": 7, "ja": 9, "zh": 10}}
MULTI = {"en": (9, 9), "ja": (8, 10), "zh": (9, 8)}
UNSEEN = {"en": (7, 6), "ja": (6, 7), "zh": (8, 5)}


def _items(
    easy_right: int, hard_right: int, *, n_easy: int = 10, n_hard: int = 10, n_none: int = 0
) -> list[ItemOutcome]:
    easy = [ItemOutcome(id=f"e{i}", correct=i < easy_right, difficulty="easy") for i in range(n_easy)]
    hard = [ItemOutcome(id=f"h{i}", correct=i < hard_right, difficulty="hard") for i in range(n_hard)]
    none = [ItemOutcome(id=f"u{i}", correct=True, difficulty=None) for i in range(n_none)]
    return easy + hard + none


def _evaluations() -> dict[tuple[str, str], list[ItemOutcome]]:
    evals = {(f"mono:{tr}", te): _items(EASY[tr][te], HARD[tr][te]) for tr in LANGS for te in LANGS}
    for lang in LANGS:
        evals[("multi", lang)] = _items(*MULTI[lang])
        evals[(f"unseen:{lang}", lang)] = _items(*UNSEEN[lang])
    return evals


def _flat(grid: dict[str, dict[str, float | None]]) -> dict[str, float | None]:
    return {f"{tr}>{te}": v for tr, row in grid.items() for te, v in row.items()}


@pytest.fixture(scope="module")
def cells() -> tt.Cells:
    return tt.accuracy_cells(_evaluations(), n_bootstrap=200)


def test_languages_are_the_sorted_test_languages() -> None:
    assert tt.languages(_evaluations()) == LANGS


def test_cells_have_accuracy_size_and_interval(cells: tt.Cells) -> None:
    cell = cells[("mono:en", "ja")]
    assert cell["easy"] == {"acc": 0.7, "n": 10, "ci95": cell["easy"]["ci95"]}
    assert cell["hard"]["acc"] == 0.7 and cell["total"]["acc"] == 0.7 and cell["total"]["n"] == 20
    for sub in tt.SUBSETS:
        ci = cell[sub]["ci95"]
        assert ci is not None and ci[0] <= cell[sub]["acc"] <= ci[1]  # type: ignore[operator]


def test_raw_matrix_by_hand(cells: tt.Cells) -> None:
    for subset, expected in (
        ("easy", {tr: {te: EASY[tr][te] / 10 for te in LANGS} for tr in LANGS}),
        ("hard", {tr: {te: HARD[tr][te] / 10 for te in LANGS} for tr in LANGS}),
        ("total", {tr: {te: (EASY[tr][te] + HARD[tr][te]) / 20 for te in LANGS} for tr in LANGS}),
    ):
        raw = tt.transfer_matrix(cells, LANGS, subset)["raw"]  # type: ignore[arg-type]
        assert _flat(raw) == pytest.approx(_flat(expected), abs=1e-12)  # type: ignore[arg-type]


def test_relative_matrix_by_hand_with_diagonal_100(cells: tt.Cells) -> None:
    easy = tt.transfer_matrix(cells, LANGS, "easy")["relative"]
    assert _flat(easy) == pytest.approx(
        _flat(
            {
                "en": {"en": 100.0, "ja": 87.5, "zh": 100.0},
                "ja": {"en": 100.0, "ja": 100.0, "zh": 112.5},
                "zh": {"en": 87.5, "ja": 100.0, "zh": 100.0},
            }
        )
    )
    hard = tt.transfer_matrix(cells, LANGS, "hard")["relative"]
    expected_hard = {"en": [100, 70, 90], "ja": [60, 100, 80], "zh": [70, 90, 100]}
    assert _flat(hard) == pytest.approx(
        _flat({tr: dict(zip(LANGS, map(float, row), strict=True)) for tr, row in expected_hard.items()})
    )
    total = tt.transfer_matrix(cells, LANGS, "total")["relative"]
    assert total["en"]["ja"] == pytest.approx(0.7 / 0.9 * 100)
    assert all(total[lang][lang] == 100.0 for lang in LANGS)


def test_table7_delta_is_exactly_multi_minus_mono(cells: tt.Cells) -> None:
    rows = tt.table7_rows(cells, LANGS, "total")
    assert [r["lang"] for r in rows] == LANGS
    for row in rows:
        lang = row["lang"]
        assert row["mono"] == pytest.approx((EASY[lang][lang] + HARD[lang][lang]) / 20)
        assert row["multi"] == pytest.approx(sum(MULTI[lang]) / 20)
        assert row["unseen"] == pytest.approx(sum(UNSEEN[lang]) / 20)
        assert row["delta"] == row["multi"] - row["mono"]  # type: ignore[operator]
    hard = {r["lang"]: r for r in tt.table7_rows(cells, LANGS, "hard")}
    assert hard["zh"]["delta"] == pytest.approx(-0.2) and hard["ja"]["delta"] == 0.0


def test_total_is_the_item_weighted_mean_not_the_plain_average() -> None:
    cells = tt.accuracy_cells({("multi", "en"): _items(8, 0, n_easy=8, n_hard=2)}, n_bootstrap=50)
    cell = cells[("multi", "en")]
    assert (cell["easy"]["acc"], cell["hard"]["acc"], cell["total"]["acc"]) == (1.0, 0.0, 0.8)
    assert cell["total"]["acc"] != (1.0 + 0.0) / 2
    assert tt.total_is_weighted_mean(cells)


def test_weighted_mean_check(cells: tt.Cells) -> None:
    assert tt.total_is_weighted_mean(cells)
    broken = {key: {**cell, "total": {**cell["total"], "acc": 0.123}} for key, cell in cells.items()}
    assert not tt.total_is_weighted_mean(broken)  # type: ignore[arg-type]


def test_items_without_difficulty_count_in_total_only() -> None:
    cells = tt.accuracy_cells({("multi", "en"): _items(0, 0, n_easy=2, n_hard=0, n_none=2)}, n_bootstrap=50)
    cell = cells[("multi", "en")]
    assert cell["total"]["acc"] == 0.5 and cell["total"]["n"] == 4
    assert cell["hard"] == {"acc": None, "n": 0, "ci95": None}
    assert tt.total_is_weighted_mean(cells)  # skipped: not every item has a difficulty


def test_missing_evaluation_gives_null() -> None:
    evals = _evaluations()
    del evals[("mono:zh", "ja")], evals[("unseen:zh", "zh")], evals[("multi", "en")]
    cells = tt.accuracy_cells(evals, n_bootstrap=50)
    matrix = tt.transfer_matrix(cells, LANGS, "total")
    assert matrix["raw"]["zh"]["ja"] is None and matrix["relative"]["zh"]["ja"] is None
    rows = {r["lang"]: r for r in tt.table7_rows(cells, LANGS, "total")}
    assert rows["zh"]["unseen"] is None and rows["zh"]["mono"] is not None
    assert rows["en"]["multi"] is None and rows["en"]["delta"] is None


def test_zero_mono_accuracy_gives_null_relative_cells() -> None:
    evals = _evaluations()
    evals[("mono:ja", "ja")] = _items(0, 0)
    matrix = tt.transfer_matrix(tt.accuracy_cells(evals, n_bootstrap=50), LANGS, "easy")
    assert matrix["raw"]["ja"]["ja"] == 0.0
    assert [matrix["relative"][tr]["ja"] for tr in LANGS] == [None, None, None]
    assert matrix["relative"]["en"]["zh"] == pytest.approx(100.0)


def test_finding_counts(cells: tt.Cells) -> None:
    result = tt.finding({s: tt.transfer_matrix(cells, LANGS, s) for s in tt.SUBSETS})
    assert (result["easy_kept"], result["easy_cells"], result["hard_lost"], result["hard_cells"]) == (4, 6, 3, 6)
    assert result["easy_share"] == pytest.approx(4 / 6) and result["hard_share"] == 0.5
    assert "4 of 6 cells keep ≥ 90% on Easy; 3 of 6 fall below 80% on Hard" in result["summary"]
    with pytest.raises(ValueError, match="hard"):
        tt.finding({"easy": tt.transfer_matrix(cells, LANGS, "easy")})


def test_invalid_input_is_refused() -> None:
    with pytest.raises(ValueError, match="train setting"):
        tt.accuracy_cells({("bilingual", "en"): _items(1, 1)})
    with pytest.raises(ValueError, match="repeats"):
        tt.accuracy_cells({("multi", "en"): _items(1, 1) + _items(1, 1)})
    with pytest.raises(ValueError, match="subset"):
        tt.transfer_matrix({}, LANGS, "medium")  # type: ignore[arg-type]


def _read_csv(path: Path) -> list[list[str]]:
    with path.open(encoding="utf-8", newline="") as handle:
        return list(csv.reader(handle))


def _num(field: str) -> float | None:
    return None if field == "" else float(field)


def test_write_tables_writes_files_that_parse_back(tmp_path: Path) -> None:
    evals = _evaluations()
    del evals[("unseen:ja", "ja")]
    cells = tt.accuracy_cells(evals, n_bootstrap=50)
    paths = tt.write_tables(tmp_path / "out", cells, LANGS)
    names = {p.name for p in paths}
    assert len(names) == 1 + 3 * 3 + 1 and all(p.is_file() for p in paths)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(names)  # no temporary files left
    payload = json.loads((tmp_path / "out" / "transfer.json").read_text(encoding="utf-8"))
    assert payload["langs"] == LANGS and payload["cells"]["mono:en"]["ja"]["total"]["n"] == 20
    assert payload["finding"]["summary"].startswith("off-diagonal:")
    for subset in tt.SUBSETS:
        matrix = tt.transfer_matrix(cells, LANGS, subset)
        assert payload["subsets"][subset]["relative"] == matrix["relative"]
        for kind in ("raw", "relative"):
            header, *rows = _read_csv(tmp_path / "out" / f"transfer_{subset}_{kind}.csv")
            assert header == ["train\\test", *LANGS]
            parsed = {row[0]: {te: _num(v) for te, v in zip(LANGS, row[1:], strict=True)} for row in rows}
            assert parsed == matrix[kind]
        header, *rows = _read_csv(tmp_path / "out" / f"table7_{subset}.csv")
        assert header == ["lang", "mono", "multi", "delta", "unseen"]
        parsed7 = [{"lang": r[0], **{k: _num(v) for k, v in zip(header[1:], r[1:], strict=True)}} for r in rows]
        assert parsed7 == tt.table7_rows(cells, LANGS, subset) == payload["subsets"][subset]["table7"]
        assert parsed7[1]["unseen"] is None
    png = (tmp_path / "out" / "transfer_heatmap.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"


def test_heat_map_without_matplotlib_names_the_extra(
    cells: tt.Cells, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(MissingDependencyError, match=r"pip install 'senseforge\[report\]'"):
        tt.write_tables(tmp_path / "out", cells, LANGS)
    assert not (tmp_path / "out").exists()
