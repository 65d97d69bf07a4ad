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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from senseforge.evaluate.records import MCSample
from senseforge.llm.base import ReplyShape
from senseforge.llm.jsonx import JSONExtractionError, extract_json

JUDGE_SYSTEM = (
    "You grade answers to commonsense questions. The answer was given without seeing any options. "
    "Decide whether it means the same as the reference answer: a synonym, a paraphrase, a more specific or "
    "a translated form of it counts as correct; an answer that names something else, names several things, "
    "or matches one of the other options better counts as incorrect. Reply with JSON only: "
    '{"verdict": "correct" or "incorrect", "reason": "one short sentence"}.'
)
"""The judge's instruction (our wording)."""


class JudgeReply(BaseModel):
    """The reply :data:`JUDGE_SYSTEM` asks a chat judge for."""

    model_config = ConfigDict(extra="forbid")

    verdict: Literal["correct", "incorrect"]
    reason: str


JUDGE_SHAPE = ReplyShape.of_model(JudgeReply, name="open_judge")
"""The shape of a chat judge's reply (:class:`JudgeReply`)."""
VERDICT_SHAPE = ReplyShape.one_of("open_verdict", ("correct", "incorrect"))
"""The shape of a base-model judge's reply after its cue (``Verdict (correct or incorrect):``): the word alone."""


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
    try:
        asked = JudgeReply.model_validate(data)
    except ValidationError:
        asked = None
    if asked is not None:  # the reply as asked for; other objects are read below
        return Verdict(correct=asked.verdict == "correct", reason=asked.reason, raw=text)
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


def majority_verdict(verdicts: Sequence[str]) -> str | None:
    """The verdict most people gave; on a tie, the tied verdict given first; ``None`` for no verdicts.

    >>> majority_verdict(["incorrect", "correct"]), majority_verdict(["incorrect", "correct", "correct"])
    ('incorrect', 'correct')
    """
    counts: dict[str, int] = {}
    for verdict in verdicts:
        counts[verdict] = counts.get(verdict, 0) + 1
    if not counts:
        return None
    best = max(counts.values())
    return next(v for v in verdicts if counts[v] == best)


def _cohen_kappa(first: Sequence[bool], second: Sequence[bool]) -> float | None:
    """Cohen's kappa of two binary raters; ``None`` where chance agreement is total (kappa undefined)."""
    n = len(first)
    if n == 0:
        return None
    observed = sum(a == b for a, b in zip(first, second, strict=True)) / n
    yes_a, yes_b = sum(first) / n, sum(second) / n
    chance = yes_a * yes_b + (1 - yes_a) * (1 - yes_b)
    if chance >= 1.0:
        return None
    return (observed - chance) / (1 - chance)


def judge_agreement(samples: Sequence[MCSample], human_verdicts: Mapping[str, Sequence[str]]) -> dict[str, Any]:
    """How the LM judge of one model's ``open`` samples agrees with people.

    ``human_verdicts`` maps a sample's id to the people's verdicts on it (``correct`` /
    ``incorrect``, in the order given); their decision is :func:`majority_verdict`. Only the
    samples the judge graded and people decided count. An unread judge reply counts as
    ``incorrect``, as it does in the run's accuracy. Returns ``items`` (how many counted),
    ``human_acc`` and ``judge_acc`` over those items, ``agreement`` (the share on which the
    judge's verdict is the people's decision), ``kappa`` (Cohen's; ``None`` when undefined),
    ``judge_unread`` (unread replies among them) and ``undecided`` (graded samples people have
    not judged yet); the rates are ``None`` without items.
    """
    human: list[bool] = []
    judged: list[bool] = []
    unread = undecided = 0
    for sample in samples:
        if sample.judge is None or sample.error is not None or sample.response is None:
            continue
        decision = majority_verdict(list(human_verdicts.get(sample.id, ())))
        if decision is None:
            undecided += 1
            continue
        unread += sample.judge_verdict is None
        human.append(decision == "correct")
        judged.append(sample.judge_verdict == "correct")
    n = len(human)
    return {
        "items": n,
        "human_acc": sum(human) / n if n else None,
        "judge_acc": sum(judged) / n if n else None,
        "agreement": sum(a == b for a, b in zip(human, judged, strict=True)) / n if n else None,
        "kappa": _cohen_kappa(human, judged),
        "judge_unread": unread,
        "undecided": undecided,
    }
