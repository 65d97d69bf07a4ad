"""Exact tests on paired right/wrong outcomes: the fair-coin binomial tail and McNemar's test.

Plain :mod:`math`, no SciPy (which only the ``report`` extra installs). Up to 1024 trials
a tail is summed exactly in integers; beyond, the binomial probabilities use the
saddle-point form of Loader (2000), as R's ``dbinom`` does, so a tail stays accurate to
about 1e-12 relative even for millions of discordant pairs. The tests check both against
``scipy.stats.binomtest``.
"""

from __future__ import annotations

import math

__all__ = ["binomial_cdf_half", "mcnemar_p_value"]


EXACT_UP_TO = 1024
"""Up to this many trials a tail is summed exactly, in integers."""

_LN_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
_STIRLING = (1.0 / 12, 1.0 / 360, 1.0 / 1260, 1.0 / 1680, 1.0 / 1188)


def _stirling_error(n: float) -> float:
    """``log(n!) - log(sqrt(2 pi n) (n/e)^n)``, the error of Stirling's formula (``n >= 1``)."""
    if n <= 15:
        return math.lgamma(n + 1.0) - (n + 0.5) * math.log(n) + n - _LN_SQRT_2PI
    s0, s1, s2, s3, s4 = _STIRLING
    nn = n * n
    if n > 500:
        return (s0 - s1 / nn) / n
    if n > 80:
        return (s0 - (s1 - s2 / nn) / nn) / n
    if n > 35:
        return (s0 - (s1 - (s2 - s3 / nn) / nn) / nn) / n
    return (s0 - (s1 - (s2 - (s3 - s4 / nn) / nn) / nn) / nn) / n


def _deviance(x: float, mean: float) -> float:
    """``x log(x / mean) + mean - x``, summed as a series when ``x`` is close to ``mean``."""
    if abs(x - mean) < 0.1 * (x + mean):
        v = (x - mean) / (x + mean)
        total = (x - mean) * v
        term = 2.0 * x * v
        j = 1
        while True:
            term *= v * v
            updated = total + term / (2 * j + 1)
            if updated == total:
                return updated
            total = updated
            j += 1
    return x * math.log(x / mean) + mean - x


def _pmf_half(k: int, n: int) -> float:
    """``P(X = k)`` for ``X ~ Binomial(n, 1/2)``, accurate to a few ulps for any ``n``.

    The saddle-point form (Loader, 2000) avoids the cancellation of ``log C(n, k)`` from
    log-gamma values when ``n`` is large.
    """
    if k == 0 or k == n:
        return math.ldexp(1.0, -n)
    half = n / 2.0
    exponent = (
        _stirling_error(n) - _stirling_error(k) - _stirling_error(n - k) - _deviance(k, half) - _deviance(n - k, half)
    )
    log_width = 2.0 * _LN_SQRT_2PI + math.log(k) + math.log1p(-k / n)
    return math.exp(exponent - 0.5 * log_width)


def binomial_cdf_half(k: int, n: int) -> float:
    """``P(X <= k)`` for ``X ~ Binomial(n, 1/2)``, the tail of a fair coin.

    Up to :data:`EXACT_UP_TO` trials the sum is done in integers, so the result is the
    correctly rounded float. Beyond, it sums the terms from ``k`` down, each from the one
    above it, until they no longer change the sum (above ``n / 2`` it uses the symmetry of
    the fair coin).

    >>> binomial_cdf_half(0, 3), binomial_cdf_half(1, 3), binomial_cdf_half(3, 3)
    (0.125, 0.5, 1.0)
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"n must be a non-negative integer, got {n!r}")
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    if n <= EXACT_UP_TO:
        return sum(math.comb(n, i) for i in range(k + 1)) / (1 << n)
    if 2 * k > n:
        return 1.0 - binomial_cdf_half(n - k - 1, n)
    term, total = 1.0, 1.0
    for i in range(k, 0, -1):
        term *= i / (n - i + 1)
        total += term
        if term < total * 1e-17:
            break
    return min(1.0, _pmf_half(k, n) * total)


def mcnemar_p_value(a_only: int, b_only: int) -> float:
    """McNemar's exact test: the two-sided binomial p-value of the discordant pairs.

    ``a_only`` pairs were right under A only, ``b_only`` under B only. Under "A and B are
    equally good" each discordant pair is a fair coin, so the p-value is
    ``min(1, 2 P(X <= min(a_only, b_only)))`` with ``X ~ Binomial(a_only + b_only, 1/2)``;
    1 when no pair is discordant.

    >>> mcnemar_p_value(0, 5)
    0.0625
    >>> mcnemar_p_value(0, 0)
    1.0
    """
    if a_only < 0 or b_only < 0:
        raise ValueError(f"discordant counts must be non-negative, got {a_only} and {b_only}")
    n = a_only + b_only
    if n == 0:
        return 1.0
    return min(1.0, 2.0 * binomial_cdf_half(min(a_only, b_only), n))
