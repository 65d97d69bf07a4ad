#!/usr/bin/env python3
"""Why `analyze irt` fits on scipy: the maintained IRT packages against it on the issue's simulation.

The simulation is `analyze irt`'s own (:func:`senseforge.analyze.irt.simulate.simulate`): 200 items x 30
respondents, theta and b ~ N(0, 1), a ~ lognormal(0, 0.3), 10 keys flipped. Each seed is fitted by a 2PL of
``girth`` (marginal ML, ``twopl_mml``) and of ``mirt`` (EM marginal ML, ``fit_mirt(..., "2PL")``) where they are
installed (``pip install girth mirt``; neither is a dependency of senseforge), and by senseforge's fit. It prints,
per seed and fitter: the correlation of the fitted difficulties with the truth over the unflipped items (the
issue's bar: 0.85 on average), the smallest discrimination the fitter can return (a wrong key shows as a negative
one), how many flipped keys get a discrimination below 0.3, and the seconds per fit.

Example::

    .venv/bin/python benchmarks/irt_libraries.py --seeds 5
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from collections.abc import Callable

import numpy as np
from machine import cpu_name

from senseforge.analyze.irt.fit import fit
from senseforge.analyze.irt.simulate import simulate

Fitter = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]


def _girth(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    from girth import twopl_mml

    out = twopl_mml(matrix.T.astype(int))  # girth wants items x respondents
    return np.asarray(out["Discrimination"], float), np.asarray(out["Difficulty"], float)


def _mirt(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    import mirt

    coef = mirt.fit_mirt(matrix.astype(int), "2PL").coef()
    return np.asarray(coef["discrimination"], float), np.asarray(coef["difficulty"], float)


def _ours(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    result = fit(matrix.astype(float))
    return result.discrimination, result.difficulty


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=5, help="simulations (seeds 0..N-1)")
    args = parser.parse_args(argv)
    fitters: dict[str, Fitter] = {"senseforge": _ours}
    for name, fitter in (("girth", _girth), ("mirt", _mirt)):
        if importlib.util.find_spec(name) is not None:
            fitters[name] = fitter
        else:
            print(f"{name}: not installed (pip install {name}); left out")
    print(f"CPU: {cpu_name()}")
    print(f"{'seed':>4} {'fitter':<11}{'corr(b)':>9}{'min a':>8}{'flipped a<0.3':>15}{'s/fit':>8}")
    summary: dict[str, list[float]] = {name: [] for name in fitters}
    for seed in range(args.seeds):
        sim = simulate(seed)
        col = {item: i for i, item in enumerate(sim.items)}
        people = sorted({row["respondent"] for row in sim.rows})
        row_of = {person: i for i, person in enumerate(people)}
        matrix = np.zeros((len(people), len(sim.items)))
        for row in sim.rows:
            matrix[row_of[row["respondent"]], col[row["item"]]] = 1.0 if row["correct"] else 0.0
        flipped = np.isin(np.array(sim.items), sim.flipped)
        varied = (matrix.mean(0) > 0) & (matrix.mean(0) < 1)
        for name, fitter in fitters.items():
            started = time.perf_counter()
            a, b = fitter(matrix)
            seconds = time.perf_counter() - started
            fair = ~flipped & varied & np.isfinite(b)
            corr = float(np.corrcoef(b[fair], sim.difficulty[fair])[0, 1])
            summary[name].append(corr)
            low = int((a[flipped & np.isfinite(a)] < 0.3).sum())
            print(f"{seed:>4} {name:<11}{corr:>9.3f}{np.nanmin(a):>8.2f}{low:>12}/10{seconds:>8.2f}")
    for name, values in summary.items():
        print(f"{name}: mean corr(b) {np.mean(values):.3f} over {len(values)} seeds (the bar: 0.85)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
