"""Simulated 2PL answers with known parameters, some keys flipped (the issue's acceptance set-up).

A respondent who "knows" an item (with probability sigmoid(a (theta - b))) picks its true answer;
one who does not picks one of the other options at random. A flipped item's recorded key is one
of the wrong options, so those who know it are scored wrong.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Simulation:
    """The rows ``{respondent, item, correct, choice}`` and the truth behind them."""

    rows: list[dict[str, Any]]
    theta: np.ndarray
    difficulty: np.ndarray
    discrimination: np.ndarray
    flipped: list[str]
    items: list[str]


def simulate(
    seed: int, n_items: int = 200, n_respondents: int = 30, n_flipped: int = 10, n_options: int = 4
) -> Simulation:
    """theta, b ~ N(0, 1), a ~ lognormal(0, 0.3); ``n_flipped`` items keyed to a wrong option."""
    rng = np.random.default_rng(seed)
    theta = rng.normal(0, 1, n_respondents)
    b = rng.normal(0, 1, n_items)
    a = rng.lognormal(0, 0.3, n_items)
    items = [f"q{i:03d}" for i in range(n_items)]
    flipped_idx = set(rng.choice(n_items, n_flipped, replace=False).tolist())
    letters = "ABCDEFGH"[:n_options]
    rows: list[dict[str, Any]] = []
    for r in range(n_respondents):
        p = 1 / (1 + np.exp(-a * (theta[r] - b)))
        knows = rng.random(n_items) < p
        for i in range(n_items):
            true_key = 0
            key = 1 if i in flipped_idx else 0
            choice = true_key if knows[i] else int(rng.integers(1, n_options))
            rows.append(
                {
                    "respondent": f"r{r:02d}",
                    "item": items[i],
                    "correct": choice == key,
                    "choice": letters[choice],
                    "key": letters[key],
                }
            )
    return Simulation(rows, theta, b, a, sorted(items[i] for i in flipped_idx), items)
