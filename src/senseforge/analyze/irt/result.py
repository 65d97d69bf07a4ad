"""The whole analysis: read, fit, flag, optionally choose a subset; the JSON document and CSV rows."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from senseforge.analyze.irt.fit import MIN_RESPONDENTS_2PL, Fit, Model, fit
from senseforge.analyze.irt.inputs import Responses, read_responses
from senseforge.analyze.irt.subset import SubsetCheck, loo_check
from senseforge.analyze.irt.suspicious import suspicious_reasons

NOT_ESTIMABLE = "not estimable: every respondent who answered it was {}"


@dataclass(frozen=True)
class IrtResult:
    """The fit with its flags, warnings and optional subset."""

    responses: Responses
    fit: Fit
    reasons: dict[str, list[str]]
    warnings: list[str] = field(default_factory=list)
    subset: SubsetCheck | None = None

    def item_rows(self) -> list[dict[str, Any]]:
        """One row per item (the CSV, the JSON's ``items``)."""
        rows = []
        f = self.fit
        for j, item in enumerate(self.responses.items):
            estimable = bool(f.estimable[j])
            note = (
                []
                if estimable
                else [NOT_ESTIMABLE.format("right" if f.all_right is not None and f.all_right[j] else "wrong")]
            )
            rows.append(
                {
                    "id": item,
                    "difficulty": _num(f.difficulty[j]),
                    "discrimination": _num(f.discrimination[j]),
                    "difficulty_se": _num(f.difficulty_se[j]),
                    "discrimination_se": _num(f.discrimination_se[j]),
                    "infit": _num(f.infit[j]),
                    "estimable": estimable,
                    "suspicious": item in self.reasons,
                    "reasons": self.reasons.get(item, note),
                }
            )
        return rows

    def summary(self) -> str:
        """One line for the report's caption."""
        estimable = int(self.fit.estimable.sum())
        return (
            f"{self.fit.model.upper()} fit of {len(self.responses.items)} items ({estimable} estimable) over "
            f"{len(self.responses.respondents)} respondents; {len(self.reasons)} suspicious."
        )

    def to_json(self) -> dict[str, Any]:
        """``irt.json``."""
        grid = np.linspace(-3, 3, 25)
        doc: dict[str, Any] = {
            "model": self.fit.model,
            "data": self.responses.data,
            "summary": self.summary(),
            "warnings": self.warnings,
            "items": self.item_rows(),
            "respondents": [
                {"label": r, "ability": _num(t), "ability_se": _num(se)}
                for r, t, se in zip(self.responses.respondents, self.fit.ability, self.fit.ability_se, strict=True)
            ],
            "test_information": {
                "ability": [round(float(t), 3) for t in grid],
                "information": [round(float(v), 4) for v in self.fit.information(grid).sum(axis=1)],
            },
        }
        if self.subset is not None:
            doc["subset"] = {
                "ids": self.subset.ids,
                "loo_error": self.subset.loo_error,
                "loo_rank_correlation": self.subset.loo_rank_correlation,
                "random_loo_error": self.subset.random_loo_error,
                "random_rank_correlation": self.subset.random_rank_correlation,
                "random_loo_error_estimator": self.subset.random_loo_error_estimator,
                "random_rank_correlation_estimator": self.subset.random_rank_correlation_estimator,
            }
        return doc


def _num(value: Any) -> float | None:
    v = float(value)
    return None if not np.isfinite(v) else round(v, 4)


def analyze_irt(inputs: list[Path], model: Model = "2pl", select_n: int | None = None, seed: int = 0) -> IrtResult:
    """Read the inputs, fit, flag suspicious items and, with ``select_n``, choose and check a subset."""
    responses = read_responses(inputs)
    x = responses.matrix()
    fitted = fit(x, model)
    warnings = []
    if model == "2pl" and len(responses.respondents) < MIN_RESPONDENTS_2PL:
        warnings.append(
            f"{len(responses.respondents)} respondents (fewer than {MIN_RESPONDENTS_2PL}): discriminations are "
            "unstable (standard errors of 0.3-0.5 at 30); read them with their SEs, or fit --model 1pl"
        )
    if len(responses.models) == 1 and len(responses.respondents) > 1:
        warnings.append(
            f"every respondent is one model ({next(iter(responses.models))}) in different set-ups: the fit describes "
            "how those set-ups differ, not a population of models"
        )
    reasons = suspicious_reasons(fitted, responses.items, responses.respondents, responses.choices, responses.keys)
    subset = None
    if select_n is not None:
        allowed = np.array(
            [bool(fitted.estimable[j]) and item not in reasons for j, item in enumerate(responses.items)]
        )
        subset = loo_check(x, responses.items, select_n, allowed, model, seed=seed)
    return IrtResult(responses, fitted, reasons, warnings, subset)
