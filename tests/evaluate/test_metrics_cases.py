"""Run every hand-worked metric case in ``tests/evaluate/cases/*.json`` (lighteval style).

Each file holds ``cases``; each case names the function (``function`` on the case or on the
file), its keyword ``args``, and either ``expected`` or ``raises``, with a ``why`` that works
the number out by hand. ``expected`` may be a number, a fraction string such as ``"11/15"``,
``"nan"``, or a mapping of those (for per-dimension results). ``tolerance`` (absolute)
defaults to 1e-12.
"""

from __future__ import annotations

import builtins
import json
import math
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from senseforge.evaluate import crow_metrics, metrics

CASES_DIR = Path(__file__).parent / "cases"


def _load_cases() -> list[Any]:
    params = []
    for path in sorted(CASES_DIR.glob("*.json")):
        table = json.loads(path.read_text(encoding="utf-8"))
        for case in table["cases"]:
            function = case.get("function", table.get("function"))
            params.append(pytest.param(function, case, id=f"{path.stem}::{function}::{case['name']}"))
    return params


def _number(value: Any) -> float:
    if isinstance(value, str):
        return math.nan if value == "nan" else float(Fraction(value))
    return float(value)


def _assert_close(got: float, expected: Any, tolerance: float) -> None:
    want = _number(expected)
    if math.isnan(want):
        assert math.isnan(got)
    else:
        assert got == pytest.approx(want, abs=tolerance, rel=0)


CASES = _load_cases()


def test_case_tables_are_not_empty() -> None:
    assert len(CASES) >= 50


@pytest.mark.parametrize(("function", "case"), CASES)
def test_metric_case(function: str, case: dict[str, Any]) -> None:
    assert case.get("why"), "every case says why its expected value is right"
    fn = getattr(metrics, function, None) or getattr(crow_metrics, function)  # CRoW's metrics live apart
    if "raises" in case:
        with pytest.raises(getattr(builtins, case["raises"])):
            fn(**case["args"])
        return
    got = fn(**case["args"])
    tolerance = float(case.get("tolerance", 1e-12))
    expected = case["expected"]
    if isinstance(expected, dict):
        assert isinstance(got, dict)
        assert set(got) == set(expected)
        for key, value in expected.items():
            _assert_close(got[key], value, tolerance)
    else:
        assert isinstance(got, float)
        _assert_close(got, expected, tolerance)
