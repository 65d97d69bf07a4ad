"""A small subset that ranks respondents like the whole, checked leaving one respondent out.

Selection (:func:`select`): the items, ordered by difficulty, cut into N equal strata; from each,
the item with the most information at the respondents' abilities, so the subset covers the whole
difficulty range. Suspicious and not-estimable items are never chosen.

The check, per respondent r: fit on the others, choose the subset, estimate r's ability from r's
answers to the subset alone (MAP with the fitted items), predict r's accuracy over all items as the
answers seen on the subset plus P(right) at that ability on every item not asked (the idea of
tinyBenchmarks' p-IRT), averaged with the plain accuracy on the subset, and compare with r's true
accuracy. Beside it, random subsets of the same size, each scored two ways: plain accuracy on the
subset, and by the same estimator.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from senseforge.analyze.irt.fit import Fit, Model, ability_of, fit

N_RANDOM = 20


@dataclass(frozen=True)
class SubsetCheck:
    """The chosen ids and the leave-one-out figures (errors: mean absolute accuracy error)."""

    ids: list[str]
    loo_error: float
    loo_rank_correlation: float
    random_loo_error: float
    """Median over random subsets, scored by plain accuracy."""
    random_rank_correlation: float
    random_loo_error_estimator: float
    """Median over random subsets, scored by the same estimator as the chosen subset."""
    random_rank_correlation_estimator: float


def select(fit_: Fit, n: int, allowed: np.ndarray) -> list[int]:
    """Indices of ``n`` items spread across difficulty: ``n`` equal strata of items ordered by difficulty,
    from each the item with the most information at the respondents' abilities."""
    candidates = [j for j in range(fit_.difficulty.shape[0]) if allowed[j] and fit_.discrimination[j] > 0]
    if len(candidates) <= n:
        return sorted(candidates)
    ordered = sorted(candidates, key=lambda j: float(fit_.difficulty[j]))
    info = fit_.information(fit_.ability).sum(axis=0)
    chosen = []
    for stratum in np.array_split(np.array(ordered), n):
        chosen.append(int(max(stratum, key=lambda j: float(info[j]))))
    return sorted(chosen)


def _predicted_accuracy(fit_: Fit, x: np.ndarray, subset: list[int]) -> float:
    """The answers seen on the subset, plus P(right) at the estimated ability for every item not asked."""
    asked = np.full_like(x, np.nan)
    asked[subset] = x[subset]
    theta = ability_of(fit_, asked[None, :])
    p = fit_.probability(theta)[0]
    total = ~np.isnan(x)
    unseen = total.copy()
    unseen[subset] = False
    # a not-estimable item went the same way for everyone the fit saw: count it so
    everyone = np.where(fit_.estimable, p, np.nan)
    for j in np.flatnonzero(~fit_.estimable & unseen):
        everyone[j] = 1.0 if fit_.all_right is not None and fit_.all_right[j] else 0.0
    right = np.nansum(x[subset]) + np.nansum(everyone[unseen])
    return float(right / max(total.sum(), 1))


def _estimate(fit_: Fit, x: np.ndarray, subset: list[int]) -> float:
    """The mean of the model's estimate (:func:`_predicted_accuracy`) and the plain accuracy on the subset:
    the two err in different ways (the model's bias, the subset's sampling), so their mean errs less."""
    seen = x[subset]
    plain = float(np.nanmean(seen)) if (~np.isnan(seen)).any() else 0.5
    return (_predicted_accuracy(fit_, x, subset) + plain) / 2


def _spearman(a: list[float], b: list[float]) -> float:
    from scipy.stats import spearmanr

    value = spearmanr(a, b).statistic
    return float(value) if np.isfinite(value) else 0.0


def loo_check(
    x: np.ndarray, items: list[str], n: int, allowed: np.ndarray, model: Model = "2pl", seed: int = 0
) -> SubsetCheck:
    """Choose ``n`` items on the whole data, and check the choice leaving each respondent out."""
    whole = fit(x, model)
    ids = [items[j] for j in select(whole, n, allowed)]
    rng = np.random.default_rng(seed)
    randoms = [sorted(rng.choice(x.shape[1], min(n, x.shape[1]), replace=False).tolist()) for _ in range(N_RANDOM)]
    truth, chosen_est = [], []
    plain = [[] for _ in randoms]  # type: list[list[float]]
    estimated = [[] for _ in randoms]  # type: list[list[float]]
    for r in range(x.shape[0]):
        others = np.delete(x, r, axis=0)
        sub_fit = fit(others, model, start=whole)
        row = x[r]
        truth.append(float(np.nanmean(row)))
        subset = select(sub_fit, n, allowed)
        chosen_est.append(_estimate(sub_fit, row, subset))
        for k, rand in enumerate(randoms):
            plain[k].append(float(np.nanmean(row[rand])) if (~np.isnan(row[rand])).any() else 0.5)
            estimated[k].append(_estimate(sub_fit, row, rand))

    def error(est: list[float]) -> float:
        return float(np.mean(np.abs(np.array(est) - np.array(truth))))

    return SubsetCheck(
        ids=ids,
        loo_error=error(chosen_est),
        loo_rank_correlation=_spearman(chosen_est, truth),
        random_loo_error=float(np.median([error(e) for e in plain])),
        random_rank_correlation=float(np.median([_spearman(e, truth) for e in plain])),
        random_loo_error_estimator=float(np.median([error(e) for e in estimated])),
        random_rank_correlation_estimator=float(np.median([_spearman(e, truth) for e in estimated])),
    )
