#!/usr/bin/env python3
"""How well ``analyze irt`` recovers a simulated 2PL with flipped keys, over several seeds (issue 51's acceptance).

Per seed: 200 items x 30 respondents, theta and b ~ N(0, 1), a ~ lognormal(0, 0.3), 10 keys flipped
(see :mod:`senseforge.analyze.irt.simulate`). Prints per seed and on average: the correlation of the
fitted b with the truth over unflipped items, flipped keys flagged (of 10), other items flagged (share),
and with ``--select`` the chosen subset's leave-one-out accuracy error beside the median random subset's
(plain accuracy and the same estimator), and whether it beats it.

    PYTHONPATH=src .venv/bin/python benchmarks/irt_recovery.py --seeds 10 --select 50
"""

from __future__ import annotations

import argparse
import statistics

import numpy as np

from senseforge.analyze.irt.fit import fit
from senseforge.analyze.irt.inputs import Responses
from senseforge.analyze.irt.simulate import simulate
from senseforge.analyze.irt.subset import loo_check
from senseforge.analyze.irt.suspicious import suspicious_reasons


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--select", type=int, default=50, help="0: skip the subset check")
    args = parser.parse_args()
    corrs, hits, false_shares, beats = [], [], [], []
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        sim = simulate(seed)
        responses = Responses()
        for row in sim.rows:
            responses.add(row["respondent"], row["item"], row["correct"], row["choice"], None)
        x = responses.matrix()
        fitted = fit(x)
        index = {item: j for j, item in enumerate(responses.items)}
        truth = {item: sim.difficulty[k] for k, item in enumerate(sim.items)}
        unflipped = [index[i] for i in sim.items if i not in sim.flipped and fitted.estimable[index[i]]]
        corr = float(np.corrcoef(fitted.difficulty[unflipped], [truth[responses.items[j]] for j in unflipped])[0, 1])
        flagged = suspicious_reasons(fitted, responses.items, responses.respondents, responses.choices, responses.keys)
        hit = len(set(flagged) & set(sim.flipped))
        others = len(set(flagged) - set(sim.flipped)) / (len(sim.items) - len(sim.flipped))
        corrs.append(corr)
        hits.append(hit)
        false_shares.append(others)
        line = f"seed {seed}: corr(b) {corr:.3f}  flipped flagged {hit}/10  others flagged {100 * others:.1f}%"
        if args.select:
            allowed = np.array([bool(fitted.estimable[j]) and i not in flagged for j, i in enumerate(responses.items)])
            check = loo_check(x, responses.items, args.select, allowed, seed=seed)
            random_best = min(check.random_loo_error, check.random_loo_error_estimator)
            beats.append(check.loo_error < check.random_loo_error)
            line += (
                f"  subset LOO error {check.loo_error:.4f} (rho {check.loo_rank_correlation:.3f}) vs random "
                f"{check.random_loo_error:.4f} (rho {check.random_rank_correlation:.3f}) by accuracy, "
                f"{check.random_loo_error_estimator:.4f} by the estimator; best random {random_best:.4f}"
            )
        print(line, flush=True)
    print(
        f"mean corr(b) {statistics.mean(corrs):.3f} (>= 0.85)  mean flipped flagged {statistics.mean(hits):.1f}/10 "
        f"(>= 8)  mean others flagged {100 * statistics.mean(false_shares):.1f}% (<= 10%)"
    )
    if beats:
        print(f"subset beats the median random subset (plain accuracy) on {sum(beats)}/{len(beats)} seeds (>= 80%)")


if __name__ == "__main__":
    main()
