"""The judge of the ``open`` formulation: does a free answer mean the gold option?

Following the open-ended setting of Putri et al. (§7.1), the evaluated model sees the question
without its options; a second model, the judge, then reads the question, the gold option, the
other options (so it knows what the answer had to be told apart from) and the free answer, and
replies with a verdict and a reason. :func:`parse_verdict` reads that reply tolerantly: a JSON
object ``{"verdict": "correct" | "incorrect", "reason": "..."}`` (fenced or inside prose), or a
reply that starts with *correct* / *incorrect* / *yes* / *no*. Anything else is an unread
verdict: kept as it came, counted as wrong and flagged, never an exception.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from senseforge.llm.jsonx import JSONExtractionError, extract_json

JUDGE_SYSTEM = (
    "You grade answers to commonsense questions. The answer was given without seeing any options. "
    "Decide whether it means the same as the reference answer: a synonym, a paraphrase, a more specific or "
    "a translated form of it counts as correct; an answer that names something else, names several things, "
    "or matches one of the other options better counts as incorrect. Reply with JSON only: "
    '{"verdict": "correct" or "incorrect", "reason": "one short sentence"}.'
)
"""The judge's instruction (our wording)."""


def judge_prompt(question: str, gold: str, others: Sequence[str], answer: str) -> str:
    """What the judge reads for one item."""
    listed = "; ".join(others) if others else "(none)"
    return (
        f"Question: {question}\n"
        f"Reference answer: {gold}\n"
        f"Other options (wrong): {listed}\n"
        f"Answer to grade: {answer.strip() or '(empty)'}\n"
        "Is the answer to grade correct?"
    )


@dataclass(frozen=True)
class Verdict:
    """The judge's reply, as read."""

    correct: bool | None
    """``None`` when the reply could not be read."""
    reason: str | None
    raw: str

    @property
    def label(self) -> str | None:
        """``correct``, ``incorrect``, or ``None`` (unread)."""
        return None if self.correct is None else ("correct" if self.correct else "incorrect")


_WORDS: dict[str, bool] = {
    "correct": True,
    "incorrect": False,
    "yes": True,
    "no": False,
    "true": True,
    "false": False,
    "right": True,
    "wrong": False,
}
_LEADING = re.compile(r"^[\s*_`#>\"'(\[]*(?:verdict\s*[:=-]\s*)?([A-Za-z]+)\b[\s*_`\"')\].:;,!-]*(.*)$", re.DOTALL)


def _from_word(value: object) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        return _WORDS.get(value.strip().strip(".!").lower())
    return None


def parse_verdict(text: str) -> Verdict:
    """The verdict in a judge's reply (see the module docstring); never raises."""
    try:
        data = extract_json(text)
    except JSONExtractionError:
        data = None
    if isinstance(data, dict):
        lowered = {str(k).lower(): v for k, v in data.items()}
        verdict = _from_word(lowered.get("verdict", lowered.get("correct")))
        reason = lowered.get("reason")
        if verdict is not None:
            return Verdict(correct=verdict, reason=str(reason) if reason is not None else None, raw=text)
    match = _LEADING.match(text)
    if match:
        verdict = _from_word(match.group(1))
        if verdict is not None:
            rest = match.group(2).strip()
            return Verdict(correct=verdict, reason=rest or None, raw=text)
    return Verdict(correct=None, reason=None, raw=text)
