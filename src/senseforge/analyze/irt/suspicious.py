"""Items whose answers look wrongly keyed or ambiguous, each with its evidence.

Two signs, either enough:

* **discrimination**: the fitted a is negative, or near zero — its upper 1-SE bound below
  :data:`NEAR_ZERO` — so stronger respondents are not more likely to be right;
* **rival option** (when choices are known): among the abler half of the respondents who answered
  it, most (:data:`RIVAL_SHARE` or more) picked one same other option, and more of them picked it
  than picked the key; or the respondents who chose one other option (at least :data:`MIN_CHOOSERS`
  and a tenth of those who answered) are abler on average than those who chose the key, by
  :data:`ABILITY_GAP` standard deviations of ability or more.

An item everyone answers right or wrong is *not estimable*, never suspicious.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

import numpy as np

from senseforge.analyze.irt.fit import Fit

NEAR_ZERO = 0.3
RIVAL_SHARE = 0.5
ABILITY_GAP = 0.5
MIN_CHOOSERS = 3


def suspicious_reasons(
    fit_: Fit,
    items: Sequence[str],
    respondents: Sequence[str],
    choices: Mapping[tuple[str, str], str],
    keys: Mapping[str, str],
) -> dict[str, list[str]]:
    """Item id -> its reasons (only items with at least one)."""
    out: dict[str, list[str]] = {}
    median = float(np.median(fit_.ability))
    able = [r for r, t in zip(respondents, fit_.ability, strict=True) if t >= median]
    for j, item in enumerate(items):
        if not fit_.estimable[j]:
            continue
        reasons: list[str] = []
        a, se = float(fit_.discrimination[j]), float(fit_.discrimination_se[j])
        if a < 0:
            reasons.append(f"negative discrimination {a:.2f} (SE {se:.2f})")
        elif a + se < NEAR_ZERO:
            reasons.append(f"near-zero discrimination {a:.2f} (SE {se:.2f})")
        picks = [choices[(r, item)] for r in able if (r, item) in choices]
        key = keys.get(item)
        if len(picks) >= MIN_CHOOSERS and key is not None:
            counts = Counter(picks)
            rival, n = max(((c, n) for c, n in counts.items() if c != key), key=lambda cn: cn[1], default=(None, 0))
            if rival is not None and n >= RIVAL_SHARE * len(picks) and n > counts.get(key, 0):
                reasons.append(
                    f"{n} of the {len(picks)} abler respondents chose {rival!r} over the key {key!r} "
                    f"({counts.get(key, 0)} chose the key)"
                )
        ability_gap = _rival_by_ability(fit_, j, item, respondents, choices, key)
        if ability_gap is not None and not any("abler respondents" in r for r in reasons):
            reasons.append(ability_gap)
        if reasons:
            out[item] = reasons
    return out


def _rival_by_ability(
    fit_: Fit, j: int, item: str, respondents: Sequence[str], choices: Mapping[tuple[str, str], str], key: str | None
) -> str | None:
    """An option whose choosers are, on average, abler than the key's by :data:`ABILITY_GAP` SDs or more."""
    if key is None:
        return None
    by_option: dict[str, list[float]] = {}
    for r, theta in zip(respondents, fit_.ability, strict=True):
        choice = choices.get((r, item))
        if choice is not None:
            by_option.setdefault(choice, []).append(float(theta))
    answered = sum(len(v) for v in by_option.values())
    key_thetas = by_option.get(key, [])
    if len(key_thetas) < MIN_CHOOSERS:
        return None
    spread = float(np.std(fit_.ability)) or 1.0
    key_mean = float(np.mean(key_thetas))
    for option, thetas in sorted(by_option.items()):
        if option == key or len(thetas) < max(MIN_CHOOSERS, 0.1 * answered):
            continue
        gap = (float(np.mean(thetas)) - key_mean) / spread
        if gap >= ABILITY_GAP:
            return (
                f"the {len(thetas)} who chose {option!r} are abler than the {len(key_thetas)} who chose the key "
                f"{key!r} by {gap:.2f} SD"
            )
    return None
