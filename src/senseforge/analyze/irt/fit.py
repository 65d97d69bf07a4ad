"""The 1PL / 2PL fit: P(right) = sigmoid(a (theta - b)), by MAP with weak priors (scipy's L-BFGS-B).

The fit works in slope-intercept form, logit = a theta + c (convex in each item's pair, and a
crosses zero smoothly), and reports b = -c / a. Priors: theta ~ N(0, 1) (fixes the scale),
c ~ N(0, 2^2), a ~ N(1, 1). The prior is on a itself, not on log a, so a wrongly keyed item can
show the negative discrimination that gives it away. Standard errors come from the inverse of
each item's 2x2 block (and each respondent's 1x1 block) of the posterior's information, the
other parameters held at their estimates (the delta method for b).
An item everyone answers right (or wrong) has no finite difficulty: it is left out of the fit and
reported *not estimable*.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from senseforge.errors import DataValidationError

Model = Literal["1pl", "2pl"]
MIN_RESPONDENTS_2PL = 50
"""Below this many respondents a 2PL discrimination rests on too few answers per item to be stable
(its standard error is about 0.3-0.5 at 30 respondents, comparable to the spread of true discriminations)."""
A_FLOOR = 0.5
"""The divisor floor of b = -c / a: an item with a below it (flat or reversed, flagged anyway) gets b = -c / A_FLOOR,
a finite location, instead of one that runs off to infinity as a nears zero."""
PRIOR_THETA_SD = 1.0
PRIOR_B_SD = 2.0
PRIOR_A_MEAN, PRIOR_A_SD = 1.0, 1.0

Array = NDArray[np.float64]


@dataclass(frozen=True)
class Fit:
    """The fitted parameters; NaN for items that are not estimable."""

    model: Model
    difficulty: Array
    discrimination: Array
    difficulty_se: Array
    discrimination_se: Array
    ability: Array
    ability_se: Array
    estimable: NDArray[np.bool_]
    infit: Array
    """Infit mean square per item (about 1 when the item fits; well above 1: noisier than the model says)."""
    all_right: NDArray[np.bool_] | None = None
    """Per item: everyone who answered it was right (a not-estimable item that is not this was all wrong)."""

    def probability(self, theta: Array) -> Array:
        """P(right) of each estimable-item column at each theta row (not-estimable columns are NaN)."""
        return _sigmoid(self.discrimination[None, :] * (theta[:, None] - self.difficulty[None, :]))

    def information(self, theta: Array) -> Array:
        """Fisher information of each item at each theta (rows: theta)."""
        p = self.probability(theta)
        return np.nan_to_num(self.discrimination[None, :] ** 2 * p * (1 - p))


def _sigmoid(x: Array) -> Array:
    return np.asarray(1.0 / (1.0 + np.exp(-np.clip(x, -35, 35))), dtype=np.float64)


def fit(responses: Array, model: Model = "2pl", *, start: Fit | None = None, max_iter: int = 500) -> Fit:
    """Fit a response matrix (respondents x items; 1 right, 0 wrong, NaN unanswered)."""
    from scipy.optimize import minimize

    x = np.asarray(responses, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] < 2 or x.shape[1] < 1:
        raise DataValidationError(f"item response fit: need at least 2 respondents and 1 item, got shape {x.shape}")
    seen = ~np.isnan(x)
    right = np.where(seen, x, 0.0)
    n_right = right.sum(axis=0)
    n_seen = seen.sum(axis=0)
    estimable = (n_seen > 0) & (n_right > 0) & (n_right < n_seen)
    cols = np.flatnonzero(estimable)
    xs, ms = right[:, cols], seen[:, cols].astype(np.float64)
    n_resp, n_items = xs.shape
    shared_a = model == "1pl"
    n_a = 1 if shared_a else n_items

    def unpack(v: Array) -> tuple[Array, Array, Array]:
        theta = v[:n_resp]
        c = v[n_resp : n_resp + n_items]
        a = v[n_resp + n_items :]
        return theta, c, (np.full(n_items, a[0]) if shared_a else a)

    def objective(v: Array) -> tuple[float, Array]:
        theta, c, a = unpack(v)
        p = _sigmoid(a[None, :] * theta[:, None] + c[None, :])
        eps = 1e-12
        ll = (ms * (xs * np.log(p + eps) + (1 - xs) * np.log(1 - p + eps))).sum()
        a_free = v[n_resp + n_items :]
        lp = -0.5 * (
            ((theta / PRIOR_THETA_SD) ** 2).sum()
            + ((c / PRIOR_B_SD) ** 2).sum()
            + (((a_free - PRIOR_A_MEAN) / PRIOR_A_SD) ** 2).sum()
        )
        r = ms * (xs - p)
        g_theta = (r * a[None, :]).sum(axis=1) - theta / PRIOR_THETA_SD**2
        g_c = r.sum(axis=0) - c / PRIOR_B_SD**2
        g_a_items = (r * theta[:, None]).sum(axis=0)
        g_a = (np.array([g_a_items.sum()]) if shared_a else g_a_items) - (a_free - PRIOR_A_MEAN) / PRIOR_A_SD**2
        return -(ll + lp), -np.concatenate([g_theta, g_c, g_a])

    v0 = np.concatenate([_start_theta(xs, ms), -_start_b(xs, ms), np.ones(n_a)])
    if start is not None and start.model == model and start.difficulty.shape[0] == x.shape[1]:
        a_start = start.discrimination[cols]
        c_start = np.nan_to_num(-a_start * start.difficulty[cols])
        v0[n_resp:] = np.concatenate([c_start, np.nan_to_num(a_start[:1] if shared_a else a_start, nan=1.0)])
    result = minimize(objective, v0, jac=True, method="L-BFGS-B", options={"maxiter": max_iter})
    theta, c, a = unpack(np.asarray(result.x, dtype=np.float64))
    b, theta_se, b_se, a_se, infit = _errors(xs, ms, theta, c, a, shared_a)

    def spread(values: Array) -> Array:
        full = np.full(x.shape[1], np.nan)
        full[cols] = values
        return full

    return Fit(
        model=model,
        difficulty=spread(b),
        discrimination=spread(a),
        difficulty_se=spread(b_se),
        discrimination_se=spread(a_se),
        ability=theta,
        ability_se=theta_se,
        estimable=estimable,
        infit=spread(infit),
        all_right=(n_seen > 0) & (n_right == n_seen),
    )


def _start_theta(xs: Array, ms: Array) -> Array:
    share = (xs.sum(axis=1) + 0.5) / (ms.sum(axis=1) + 1.0)
    z = np.log(share / (1 - share))
    return np.asarray((z - z.mean()) / (z.std() or 1.0), dtype=np.float64)


def _start_b(xs: Array, ms: Array) -> Array:
    share = (xs.sum(axis=0) + 0.5) / (ms.sum(axis=0) + 1.0)
    return np.asarray(-np.log(share / (1 - share)), dtype=np.float64)


def _errors(
    xs: Array, ms: Array, theta: Array, c: Array, a: Array, shared_a: bool
) -> tuple[Array, Array, Array, Array, Array]:
    """Difficulty b = -c / a and the standard errors (delta method for b), infit mean squares."""
    p = _sigmoid(a[None, :] * theta[:, None] + c[None, :])
    w = ms * p * (1 - p)
    theta_info = (w * a[None, :] ** 2).sum(axis=1) + 1 / PRIOR_THETA_SD**2
    i_cc = w.sum(axis=0) + 1 / PRIOR_B_SD**2
    i_aa = (w * theta[:, None] ** 2).sum(axis=0) + 1 / PRIOR_A_SD**2
    i_ca = (w * theta[:, None]).sum(axis=0)
    if shared_a:
        i_aa = np.full_like(a, (w * theta[:, None] ** 2).sum() + 1 / PRIOR_A_SD**2)
        i_ca = np.zeros_like(a)
    det = i_cc * i_aa - i_ca**2
    var_c, var_a, cov = i_aa / det, i_cc / det, -i_ca / det
    safe_a = np.maximum(a, A_FLOOR)
    b = -c / safe_a
    g_c, g_a = -1 / safe_a, c / safe_a**2
    var_b = g_c**2 * var_c + g_a**2 * var_a + 2 * g_c * g_a * cov
    residual = (ms * (xs - p) ** 2).sum(axis=0)
    infit = residual / np.maximum(w.sum(axis=0), 1e-12)
    return b, 1 / np.sqrt(theta_info), np.sqrt(np.maximum(var_b, 0)), np.sqrt(var_a), infit


def ability_of(fit_: Fit, responses: Array) -> Array:
    """MAP ability of new respondents (rows) from their answers to the fitted items (NaN: not asked)."""
    from scipy.optimize import minimize_scalar

    out = np.zeros(responses.shape[0])
    keep = fit_.estimable
    a, b = fit_.discrimination[keep], fit_.difficulty[keep]
    for row in range(responses.shape[0]):
        x = responses[row, keep]
        seen = ~np.isnan(x)
        xa, aa, bb = x[seen], a[seen], b[seen]

        def negative(theta: float, xa: Any = xa, aa: Any = aa, bb: Any = bb) -> float:
            p = _sigmoid(aa * (theta - bb))
            ll = (xa * np.log(p + 1e-12) + (1 - xa) * np.log(1 - p + 1e-12)).sum()
            return float(-(ll - 0.5 * theta**2 / PRIOR_THETA_SD**2))

        out[row] = float(minimize_scalar(negative, bounds=(-6, 6), method="bounded").x)
    return out
