"""How the judgements of several people become one decision, and how far they agree.

Every policy reads the judgements of **one** item, in the order the annotators submitted
them (or were assigned); "the earliest annotator" is the first in that order. Each
judgement body says how it votes (``vote_kind`` and ``vote()`` in
:mod:`senseforge.data.schema`): by a choice (an answer's label, an adaptation verdict) or
by ``"accept"``/``"reject"`` (verify, QC). Only an annotator's first judgement that carries
a vote counts; judgements with no vote are not counted (their flags still are, see
:class:`ExcludeAmbiguous`).

Policies:

- :func:`unanimous` (mCSQA's human review, ``k=2``): once ``k`` people have voted,
  the item is accepted when the first ``k`` all accept;
- :func:`at_least`: accepted when at least ``m`` of the first ``k`` accept;
- :func:`majority`: the most votes win; a tie goes to the tied choice that the earliest
  annotator picked (this reproduces every ``answer_majority`` of Putri et al.'s human_gen
  release, ties included);
- :func:`exclude_ambiguous`: excludes an item that more than ``n`` annotators flagged as
  ambiguous (Putri et al.: more than three of five), whatever the inner policy says.

As config, a policy is one of the frozen dataclasses of :data:`Policy`, written as a short
string for the CLI (:func:`parse_policy`, :attr:`Unanimous.spec` …):
``unanimous``, ``unanimous:3``, ``majority``, ``at-least:3/5``, each optionally followed by
``,exclude-ambiguous:3``.

A verification panel (several models answering each item, see
:mod:`senseforge.pipelines.verification`) is read by two more policies in the same grammar:
:data:`HardWhen` (``none``, ``minority``, ``at-most:N``: how few members may answer right for an
item to be Hard, :func:`parse_hard_when`) and :class:`SkipReview` (``never``, ``confident:P``: which
of those items the panel settles without review, :func:`parse_skip_review`).

Agreement: :func:`agreement` computes Fleiss' kappa and Krippendorff's alpha from stored
judgements; the arithmetic of both lives in :mod:`senseforge.evaluate.metrics`
(:func:`~senseforge.evaluate.metrics.fleiss_kappa`,
:func:`~senseforge.evaluate.metrics.krippendorff_alpha_nominal`), so that the harness
reports the same numbers.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal, TypeAlias

from senseforge.data.schema import ACCEPT_VOTE, REJECT_VOTE, Judgement
from senseforge.errors import ConfigError
from senseforge.evaluate.metrics import fleiss_kappa, krippendorff_alpha_nominal

__all__ = [
    "Agreement",
    "AtLeast",
    "AtMost",
    "Decision",
    "DecisionStatus",
    "ExcludeAmbiguous",
    "HardWhen",
    "Majority",
    "Minority",
    "NoneRight",
    "Policy",
    "Rule",
    "SkipReview",
    "Unanimous",
    "agreement",
    "ambiguity_flagged",
    "at_least",
    "decide",
    "exclude_ambiguous",
    "is_ambiguity_flag",
    "krippendorff_alpha_nominal",
    "majority",
    "parse_hard_when",
    "parse_policy",
    "parse_skip_review",
    "ruling",
    "split",
    "unanimous",
    "votes_of",
]

DecisionStatus: TypeAlias = Literal["pending", "accepted", "rejected", "excluded"]

ACCEPT = ACCEPT_VOTE
"""The vote of a judgement that accepts (``accept=True``, a QC ``complete``)."""
REJECT = REJECT_VOTE
"""The vote of a judgement that rejects."""


@dataclass(frozen=True)
class Decision:
    """What a policy made of one item's judgements."""

    status: DecisionStatus
    """``pending`` (not enough votes yet), ``accepted``, ``rejected`` or ``excluded``."""
    value: str | None = None
    """The winning choice, for answer tasks decided by :func:`majority`; else ``None``."""
    votes: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    """Votes per choice (or ``accept``/``reject``) among the votes the policy looked at."""
    reason: str = ""
    """One line saying why, for logs and the app."""

    @property
    def decided(self) -> bool:
        """Whether the item needs no more judgements."""
        return self.status != "pending"


# --------------------------------------------------------------------------- votes


def votes_of(judgements: Sequence[Judgement]) -> list[tuple[str, str]]:
    """``(annotator, vote)`` for each counted judgement of one item, in the given order.

    Raises:
        ValueError: judgements of several items, or some voting by choice and others only
            by accept.
    """
    return _votes(judgements)[1]


def _votes(judgements: Sequence[Judgement]) -> tuple[Literal["choice", "accept"] | None, list[tuple[str, str]]]:
    items = {j.item_id for j in judgements}
    if len(items) > 1:
        raise ValueError(f"a policy decides one item at a time, got judgements of {len(items)} items")
    seen: set[str] = set()
    out: list[tuple[str, str]] = []
    by_choice = by_accept = False
    for judgement in judgements:
        if judgement.annotator in seen:
            continue
        vote = judgement.vote()
        if vote is None:
            continue
        if judgement.vote_kind == "choice":
            by_choice = True
        else:
            by_accept = True
        seen.add(judgement.annotator)
        out.append((judgement.annotator, vote))
    if by_choice and by_accept:
        item = next(iter(items))
        raise ValueError(f"item {item}: some judgements vote by choice, others only by accept; split them by task")
    return ("choice" if by_choice else "accept" if by_accept else None), out


def _accepts(judgements: Sequence[Judgement], rule: str) -> list[bool]:
    kind, votes = _votes(judgements)
    if kind == "choice":
        raise ValueError(f"{rule} needs verify judgements (accept true/false), not choices")
    return [vote == ACCEPT for _, vote in votes]


def _accept_counts(accepts: Sequence[bool]) -> Mapping[str, int]:
    yes = sum(accepts)
    return MappingProxyType({ACCEPT: yes, REJECT: len(accepts) - yes})


def _first_k(judgements: Sequence[Judgement], m: int, k: int, rule: str) -> Decision:
    accepts = _accepts(judgements, rule)
    if len(accepts) < k:
        return Decision("pending", votes=_accept_counts(accepts), reason=f"{len(accepts)} of {k} votes so far")
    first = accepts[:k]
    yes = sum(first)
    status: DecisionStatus = "accepted" if yes >= m else "rejected"
    return Decision(status, votes=_accept_counts(first), reason=f"{yes} of the first {k} accept ({rule})")


# --------------------------------------------------------------------------- rules


def unanimous(judgements: Sequence[Judgement], k: int = 2) -> Decision:
    """Accept when the first ``k`` votes all accept; pending while fewer than ``k`` voted.

    Judgements beyond the first ``k`` votes are not looked at.

    >>> from senseforge.data.schema import judgement
    >>> js = [judgement(item_id="q1", annotator=a, task="verify", accept=v) for a, v in [("ana", True), ("budi", True)]]
    >>> unanimous(js[:1]).status, unanimous(js).status
    ('pending', 'accepted')

    Raises:
        ValueError: ``k`` below 1, or a judgement that votes by choice.
    """
    if k < 1:
        raise ValueError(f"unanimous needs k >= 1, got {k}")
    return _first_k(judgements, k, k, f"unanimous:{k}")


def majority(judgements: Sequence[Judgement]) -> Decision:
    """The choice (or accept/reject) with the most votes; a tie goes to the earliest annotator.

    Among the tied choices, the winner is the one picked by the first judgement, in the
    given order, whose vote is one of them. For answer tasks the decision is ``accepted``
    with :attr:`Decision.value` the winning choice; for verify tasks it is ``accepted`` or
    ``rejected``. Pending while nobody has voted.

    >>> from senseforge.data.schema import AnswerJudgement
    >>> picks = [("W1", "A"), ("W2", "D"), ("W3", "D"), ("W4", "A"), ("W5", "C")]
    >>> majority([AnswerJudgement(item_id="q", annotator=a, choice=c) for a, c in picks]).value
    'A'
    """
    kind, votes = _votes(judgements)
    if not votes:
        return Decision("pending", reason="no votes yet")
    counts = Counter(vote for _, vote in votes)
    top = max(counts.values())
    tied = {vote for vote, count in counts.items() if count == top}
    winner = next(vote for _, vote in votes if vote in tied)
    how = f"tie of {len(tied)} broken by the earliest annotator" if len(tied) > 1 else "most votes"
    reason = f"{winner!r} with {top} of {len(votes)} votes ({how})"
    frozen = MappingProxyType(dict(counts))
    if kind == "accept":
        return Decision("accepted" if winner == ACCEPT else "rejected", votes=frozen, reason=reason)
    return Decision("accepted", value=winner, votes=frozen, reason=reason)


def ruling(judgements: Sequence[Judgement]) -> Decision | None:
    """The decision of the latest adjudication among an item's judgements, or ``None`` when nobody ruled.

    An adjudication (``adjudication=True``, an admin's judgement on an item people split
    on) overrides the policy: its vote is the decision, ``accepted`` or ``rejected`` for
    accept votes, ``accepted`` with :attr:`Decision.value` for a choice.
    """
    ruled = [j for j in judgements if j.adjudication and j.vote() is not None]
    if not ruled:
        return None
    last = ruled[-1]
    vote = str(last.vote())
    reason = f"adjudicated by {last.annotator}"
    if last.vote_kind == "accept":
        return Decision("accepted" if vote == ACCEPT else "rejected", votes=MappingProxyType({vote: 1}), reason=reason)
    return Decision("accepted", value=vote, votes=MappingProxyType({vote: 1}), reason=reason)


def split(judgements: Sequence[Judgement]) -> bool:
    """Whether the people who voted on an item (adjudications aside) did not all vote the same."""
    return len({vote for _, vote in votes_of([j for j in judgements if not j.adjudication])}) > 1


def is_ambiguity_flag(flag: str) -> bool:
    """Whether a flag says the question or an option is ambiguous (``ambiguous…``)."""
    return flag.startswith("ambiguous")


def ambiguity_flagged(judgements: Sequence[Judgement]) -> int:
    """How many distinct annotators raised an ambiguity flag in any of their judgements."""
    return len({j.annotator for j in judgements if j.ambiguous()})


# --------------------------------------------------------------------------- policies as config


@dataclass(frozen=True)
class Unanimous:
    """:func:`unanimous` with its ``k`` (mCSQA: 2)."""

    k: int = 2

    def __post_init__(self) -> None:
        if self.k < 1:
            raise ConfigError(f"unanimous needs k >= 1, got {self.k}")

    @property
    def spec(self) -> str:
        """The policy as :func:`parse_policy` reads it."""
        return "unanimous" if self.k == 2 else f"unanimous:{self.k}"

    def __call__(self, judgements: Sequence[Judgement]) -> Decision:
        return unanimous(judgements, self.k)


@dataclass(frozen=True)
class Majority:
    """:func:`majority`."""

    @property
    def spec(self) -> str:
        """The policy as :func:`parse_policy` reads it."""
        return "majority"

    def __call__(self, judgements: Sequence[Judgement]) -> Decision:
        return majority(judgements)


@dataclass(frozen=True)
class AtLeast:
    """Accepted when at least ``m`` of the first ``k`` votes accept; see :func:`at_least`."""

    m: int
    k: int

    def __post_init__(self) -> None:
        if not 1 <= self.m <= self.k:
            raise ConfigError(f"at-least needs 1 <= m <= k, got m={self.m}, k={self.k}")

    @property
    def spec(self) -> str:
        """The policy as :func:`parse_policy` reads it."""
        return f"at-least:{self.m}/{self.k}"

    def __call__(self, judgements: Sequence[Judgement]) -> Decision:
        return _first_k(judgements, self.m, self.k, self.spec)


Rule: TypeAlias = Unanimous | Majority | AtLeast
"""A policy that decides from votes alone."""


@dataclass(frozen=True)
class ExcludeAmbiguous:
    """Exclude an item more than ``n`` annotators flagged as ambiguous; else ask ``inner``."""

    n: int
    inner: Rule

    def __post_init__(self) -> None:
        if self.n < 0:
            raise ConfigError(f"exclude-ambiguous needs n >= 0, got {self.n}")

    @property
    def spec(self) -> str:
        """The policy as :func:`parse_policy` reads it."""
        return f"{self.inner.spec},exclude-ambiguous:{self.n}"

    def __call__(self, judgements: Sequence[Judgement]) -> Decision:
        flagged = ambiguity_flagged(judgements)
        decision = self.inner(judgements)
        if flagged > self.n:
            reason = f"{flagged} annotators flagged ambiguity (more than {self.n})"
            return Decision("excluded", votes=decision.votes, reason=reason)
        return decision


Policy: TypeAlias = Rule | ExcludeAmbiguous
"""Any policy: a :data:`Rule`, possibly wrapped in :class:`ExcludeAmbiguous`."""


def at_least(m: int, k: int) -> AtLeast:
    """The policy "accepted when at least ``m`` of the first ``k`` accept".

    Pending while fewer than ``k`` have voted. ``at_least(k, k)`` decides as
    ``unanimous(…, k)``.

    >>> at_least(3, 5).spec
    'at-least:3/5'

    Raises:
        ConfigError: unless ``1 <= m <= k``.
    """
    return AtLeast(m, k)


def exclude_ambiguous(n: int, inner: Rule) -> ExcludeAmbiguous:
    """Wrap ``inner`` so that an item flagged ambiguous by more than ``n`` annotators is excluded.

    A flag counts when it starts with ``ambiguous`` (``ambiguous-question``,
    ``ambiguous-option:B``); each annotator counts once.

    Raises:
        ConfigError: ``n`` below 0.
    """
    return ExcludeAmbiguous(n, inner)


def decide(policy: Policy, judgements_by_item: Mapping[str, Sequence[Judgement]]) -> dict[str, Decision]:
    """Apply a policy to every item's judgements."""
    return {item: policy(judgements) for item, judgements in judgements_by_item.items()}


def parse_policy(text: str) -> Policy:
    """A policy from its short form.

    >>> parse_policy("at-least:3/5,exclude-ambiguous:3")
    ExcludeAmbiguous(n=3, inner=AtLeast(m=3, k=5))
    >>> parse_policy("unanimous")
    Unanimous(k=2)

    Raises:
        ConfigError: the text is not one of the forms above.
    """
    parts = [p.strip() for p in text.strip().lower().split(",")]
    if len(parts) > 2 or not parts[0]:
        raise ConfigError(_bad_policy(text))
    rule = _parse_rule(parts[0], text)
    if len(parts) == 1:
        return rule
    name, _, arg = parts[1].partition(":")
    if name != "exclude-ambiguous":
        raise ConfigError(_bad_policy(text))
    return ExcludeAmbiguous(_int(arg, text), rule)


def _parse_rule(part: str, text: str) -> Rule:
    name, colon, arg = part.partition(":")
    if name == "majority" and not colon:
        return Majority()
    if name == "unanimous":
        return Unanimous(_int(arg, text)) if colon else Unanimous()
    if name == "at-least" and arg.count("/") == 1:
        m, k = arg.split("/")
        return AtLeast(_int(m, text), _int(k, text))
    raise ConfigError(_bad_policy(text))


def _int(value: str, text: str) -> int:
    value = value.strip()
    if not value.isdigit():
        raise ConfigError(_bad_policy(text))
    return int(value)


def _bad_policy(text: str) -> str:
    return (
        f"unknown review policy {text!r}: write unanimous, unanimous:K, majority or at-least:M/K, "
        "optionally followed by ,exclude-ambiguous:N"
    )


# --------------------------------------------------------------------------- verification panels


@dataclass(frozen=True)
class NoneRight:
    """Hard when no member of the panel answers right (with one member: mCSQA's rule)."""

    @property
    def spec(self) -> str:
        """The policy as :func:`parse_hard_when` reads it."""
        return "none"

    def hard(self, right: int, members: int) -> bool:
        """Whether an item ``right`` of ``members`` answered right is Hard."""
        return right == 0


@dataclass(frozen=True)
class Minority:
    """Hard when fewer than half the members answer right."""

    @property
    def spec(self) -> str:
        """The policy as :func:`parse_hard_when` reads it."""
        return "minority"

    def hard(self, right: int, members: int) -> bool:
        """Whether an item ``right`` of ``members`` answered right is Hard."""
        return 2 * right < members


@dataclass(frozen=True)
class AtMost:
    """Hard when at most ``n`` members answer right (``at-most:0`` is ``none``)."""

    n: int

    def __post_init__(self) -> None:
        if self.n < 0:
            raise ConfigError(f"at-most needs n >= 0, got {self.n}")

    @property
    def spec(self) -> str:
        """The policy as :func:`parse_hard_when` reads it."""
        return f"at-most:{self.n}"

    def hard(self, right: int, members: int) -> bool:
        """Whether an item ``right`` of ``members`` answered right is Hard."""
        return right <= self.n


HardWhen: TypeAlias = NoneRight | Minority | AtMost
"""How few members of a verification panel may answer an item right for it to be Hard (the rest are Easy)."""


def parse_hard_when(text: str) -> HardWhen:
    """A Hard policy from its short form.

    >>> [parse_hard_when(text).hard(1, 3) for text in ("minority", "at-most:1", "none")]
    [True, True, False]

    Raises:
        ConfigError: the text is not ``none``, ``minority`` or ``at-most:N``.
    """
    name, colon, arg = text.strip().lower().partition(":")
    if name == "none" and not colon:
        return NoneRight()
    if name == "minority" and not colon:
        return Minority()
    if name == "at-most" and arg.strip().isdigit():
        return AtMost(int(arg))
    raise ConfigError(f"unknown hard-when policy {text!r}: write none, minority or at-most:N")


@dataclass(frozen=True)
class SkipReview:
    """Which items a verification panel settles without review: none (``never``), or those it settles with
    confidence at least :attr:`confidence` (``confident:P``; the decision table is
    :func:`senseforge.pipelines.verification.decide`'s)."""

    confidence: float | None = None
    """The least probability a member must give its answer; ``None``: the panel settles nothing (``never``)."""

    def __post_init__(self) -> None:
        if self.confidence is not None and not 0.0 < self.confidence <= 1.0:
            raise ConfigError(f"confident:P needs 0 < P <= 1, got {self.confidence}")

    @property
    def spec(self) -> str:
        """The policy as :func:`parse_skip_review` reads it."""
        return "never" if self.confidence is None else f"confident:{self.confidence:g}"


def parse_skip_review(text: str) -> SkipReview:
    """A skip-review policy from its short form.

    >>> parse_skip_review("confident:0.9").spec, parse_skip_review("never").confidence
    ('confident:0.9', None)

    Raises:
        ConfigError: the text is not ``never`` or ``confident:P`` with ``0 < P <= 1``.
    """
    name, colon, arg = text.strip().lower().partition(":")
    if name == "never" and not colon:
        return SkipReview()
    if name == "confident" and colon:
        try:
            return SkipReview(float(arg))
        except ValueError:
            pass
    raise ConfigError(f"unknown skip-review-when policy {text!r}: write never or confident:P (0 < P <= 1)")


# --------------------------------------------------------------------------- agreement


@dataclass(frozen=True)
class Agreement:
    """How far the annotators of one task type agree (see :func:`agreement`)."""

    items: int
    """Items that entered the statistics (those with at least two votes)."""
    ratings: int
    """Votes over those items."""
    fleiss_kappa: float | None
    """``None`` when undefined: no items with the number of votes kappa needs, or all votes share one label."""
    krippendorff_alpha: float | None
    """``None`` when undefined: no item with two votes, or all votes share one label."""


def agreement(judgements_by_item: Mapping[str, Sequence[Judgement]], task: str, *, panel: bool = False) -> Agreement:
    """How far the annotators of ``task`` agree beyond chance, over the items they judged alike.

    What it reads: each item's counted votes among its judgements of ``task`` (:func:`votes_of`:
    an annotator's first judgement that casts a vote; the vote is the choice picked, or
    ``accept``/``reject``), the items in the mapping's order. One vote shows no agreement, so an
    item with fewer than two is left out. What it computes: two chance-corrected coefficients
    for nominal votes, from :mod:`senseforge.evaluate.metrics`:

    - Krippendorff's alpha over every remaining item, whatever its number of votes;
    - Fleiss' kappa, which needs the same number of votes on each item it reads. For a crowd
      (each item goes to some k of many people) those are all remaining items, and kappa is
      undefined when their numbers of votes differ. For a ``panel`` (the same judges are meant
      to vote on every item: LM judges, CRoW's validators) those are the items that every
      annotator who voted on any item of the mapping voted on.

    Each is ``None`` where undefined: nothing to read, or every vote the same label.
    """
    votes = [votes_of([j for j in judgements if j.task == task]) for judgements in judgements_by_item.values()]
    units = [[vote for _, vote in cast] for cast in votes if len(cast) >= 2]
    if not units:
        return Agreement(items=0, ratings=0, fleiss_kappa=None, krippendorff_alpha=None)
    if panel:
        raters = {annotator for cast in votes for annotator, _ in cast}
        alike = [[vote for _, vote in cast] for cast in votes if len(cast) == len(raters)]
    else:
        alike = units if len({len(unit) for unit in units}) == 1 else []
    kappa = _defined(fleiss_kappa(alike)) if alike else None
    alpha = _defined(krippendorff_alpha_nominal(units))
    ratings = sum(len(unit) for unit in units)
    return Agreement(items=len(units), ratings=ratings, fleiss_kappa=kappa, krippendorff_alpha=alpha)


def _defined(value: float) -> float | None:
    return None if math.isnan(value) else value
