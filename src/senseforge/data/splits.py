"""Seeded, stratified splits and leakage checks (mCSQA recipe, steps 5 and 9).

Three functions:

* :func:`shuffle_choices` shuffles an item's options with a RNG seeded by
  ``(seed, item.id)`` and relabels them ``A``, ``B``, ``C`` … in the new order.
* :func:`split_items` cuts items into ``train`` / ``validation`` / ``test``, stratified by
  difficulty (``easy``, ``hard`` and unlabelled items are split separately).
* :func:`check_leakage` lists items that sit in more than one split, by id or by
  normalised question text.

Everything is deterministic: the same items and seed give the same result on every
machine and Python process (string seeds go through SHA-512 in :class:`random.Random`,
not through the per-process ``hash``), whatever order the items arrive in.

Rounding rule of :func:`split_items`, per stratum of ``n`` items, with the ratios
normalised to sum to one as ``(r_train, r_val, r_test)``:

1. ``round(x)`` means round half up, ``floor(x + 1/2)``, computed exactly (the ratios are
   read as the decimals they print as, so ``0.1`` is exactly one tenth).
2. When ``r_val == r_test`` (the default 80/10/10): validation and test each get
   ``k = min(round(n * r_val), n // 2)`` items, so their counts are always equal.
3. Otherwise validation gets ``min(round(n * r_val), n)`` and test gets
   ``min(round(n * r_test), n - n_val)``.
4. Train gets the rest.

With 80/10/10 a stratum of 1–4 items goes wholly to train, 5–14 items give one each to
validation and test, 15–24 give two, and so on; ``n = 10, 11, 100, 1001`` give
``8/1/1, 9/1/1, 80/10/10, 801/100/100``. Equal validation and test counts per stratum
mean validation and test have the same Easy/Hard counts, as in the paper.
"""

from __future__ import annotations

import math
import random
import re
import string
import unicodedata
from collections import defaultdict
from collections.abc import Mapping, Sequence
from fractions import Fraction

from senseforge.data.schema import Choice, MCItem
from senseforge.errors import ConfigError, DataValidationError

__all__ = ["SPLIT_NAMES", "check_leakage", "normalize_question", "shuffle_choices", "split_items"]

SPLIT_NAMES: tuple[str, str, str] = ("train", "validation", "test")
"""Names of the splits :func:`split_items` returns, in this order."""

_STRATA: tuple[str, ...] = ("easy", "hard", "none")
_SPACE = re.compile(r"\s+")


def _rng(seed: int, key: str) -> random.Random:
    # "\x1f" (unit separator) keeps ("1", "2x") and ("12", "x") apart.
    return random.Random(f"{seed}\x1f{key}")


def shuffle_choices(item: MCItem, seed: int = 0) -> MCItem:
    """Shuffle an item's choices and relabel them ``A``, ``B``, ``C`` … in the new order.

    The RNG is seeded by ``(seed, item.id)`` only, so the result does not depend on any
    other item or on call order. The answer follows its choice (by position, so duplicate
    choice texts are handled); a withheld answer (``None``) stays ``None``. The input is
    not changed; a deep copy is returned.

    Args:
        item: The item; any number of choices up to 26.
        seed: Base seed.

    Returns:
        A copy of ``item`` with shuffled, relabelled choices and the matching ``answer``.

    Raises:
        DataValidationError: The item has more than 26 choices.

    Example:
        >>> from senseforge.data.schema import Choice, MCItem
        >>> item = MCItem(id="q1", lang="en", question="Where?", answer="X",
        ...               choices=[Choice(label=x, text=x.lower()) for x in "VWXYZ"])
        >>> shuffled = shuffle_choices(item, seed=0)
        >>> [c.label for c in shuffled.choices]
        ['A', 'B', 'C', 'D', 'E']
        >>> shuffled.answer_text()
        'x'
        >>> shuffle_choices(item, seed=0) == shuffled
        True
    """
    n = len(item.choices)
    if n > len(string.ascii_uppercase):
        raise DataValidationError(f"item {item.id!r}: {n} choices cannot be labelled A-Z; keep at most 26 choices")
    order = list(range(n))
    _rng(seed, item.id).shuffle(order)
    labels = string.ascii_uppercase[:n]
    choices = [Choice(label=labels[new], text=item.choices[old].text) for new, old in enumerate(order)]
    answer: str | None = None
    if item.answer is not None:
        old_index = next(i for i, c in enumerate(item.choices) if c.label == item.answer)
        answer = labels[order.index(old_index)]
    copy = item.model_copy(deep=True)
    # Assign together through validation: choices first would make the old answer label invalid.
    return MCItem.model_validate({**copy.__dict__, "choices": choices, "answer": answer})


def _round_half_up(x: Fraction) -> int:
    return math.floor(x + Fraction(1, 2))


def _ratios(ratios: Sequence[float]) -> tuple[Fraction, Fraction, Fraction]:
    if len(ratios) != 3:
        raise ConfigError(f"ratios must be three numbers (train, validation, test), got {tuple(ratios)!r}")
    try:
        parts = [Fraction(repr(float(r))) for r in ratios]
    except (TypeError, ValueError, OverflowError) as err:
        raise ConfigError(f"ratios must be finite numbers, got {tuple(ratios)!r}") from err
    total = sum(parts, Fraction(0))
    if any(p < 0 for p in parts) or total <= 0:
        raise ConfigError(f"ratios must be non-negative with a positive sum, got {tuple(ratios)!r}")
    return parts[0] / total, parts[1] / total, parts[2] / total


def _counts(n: int, r_val: Fraction, r_test: Fraction) -> tuple[int, int, int]:
    """``(n_train, n_val, n_test)`` for one stratum of ``n`` items (see the module docstring)."""
    if r_val == r_test:
        n_val = n_test = min(_round_half_up(n * r_val), n // 2)
    else:
        n_val = min(_round_half_up(n * r_val), n)
        n_test = min(_round_half_up(n * r_test), n - n_val)
    return n - n_val - n_test, n_val, n_test


def split_items(
    items: Sequence[MCItem],
    *,
    ratios: Sequence[float] = (0.8, 0.1, 0.1),
    seed: int = 0,
) -> dict[str, list[MCItem]]:
    """Split items into ``train``, ``validation`` and ``test``, stratified by difficulty.

    ``easy``, ``hard`` and unlabelled (``None``) items form three strata, each split on
    its own with the counts of the module's rounding rule (validation and test get equal
    counts per stratum when their ratios are equal, the remainder goes to train). Within a
    stratum the items are sorted by id, shuffled with a RNG seeded by ``(seed, stratum)``,
    and the first ``n_test`` go to test, the next ``n_val`` to validation, the rest to train.
    Each returned list is sorted by id.

    Small inputs follow the same rule: no items give three empty lists, and a stratum of
    fewer than five items (with 80/10/10) goes wholly to train.

    Args:
        items: The items; ids must be unique.
        ratios: ``(train, validation, test)`` weights; normalised to sum to one.
        seed: Seed of the shuffle; a different seed gives a different split.

    Returns:
        ``{"train": [...], "validation": [...], "test": [...]}``; every input item is in
        exactly one list (the same objects, not copies).

    Raises:
        ConfigError: ``ratios`` is not three non-negative numbers with a positive sum.
        DataValidationError: Two items share an id (deduplicate them first).

    Example:
        >>> from senseforge.data.schema import Choice, MCItem
        >>> choices = [Choice(label="A", text="yes"), Choice(label="B", text="no")]
        >>> items = [MCItem(id=f"q{i:02d}", lang="en", question=f"Q{i}?", choices=choices,
        ...                 answer="A", difficulty="easy" if i % 2 else "hard") for i in range(20)]
        >>> splits = split_items(items, seed=0)
        >>> {name: len(part) for name, part in splits.items()}
        {'train': 16, 'validation': 2, 'test': 2}
    """
    _, r_val, r_test = _ratios(ratios)
    seen: set[str] = set()
    duplicates: set[str] = set()
    for item in items:
        (duplicates if item.id in seen else seen).add(item.id)
    if duplicates:
        shown = ", ".join(repr(x) for x in sorted(duplicates)[:5])
        raise DataValidationError(
            f"{len(duplicates)} id(s) occur more than once ({shown}); deduplicate the items before splitting"
        )

    strata: dict[str, list[MCItem]] = defaultdict(list)
    for item in items:
        strata[item.difficulty or "none"].append(item)

    out: dict[str, list[MCItem]] = {name: [] for name in SPLIT_NAMES}
    for stratum in _STRATA:
        members = sorted(strata.get(stratum, []), key=lambda it: it.id)
        _rng(seed, stratum).shuffle(members)
        _, n_val, n_test = _counts(len(members), r_val, r_test)
        out["test"].extend(members[:n_test])
        out["validation"].extend(members[n_test : n_test + n_val])
        out["train"].extend(members[n_test + n_val :])
    for part in out.values():
        part.sort(key=lambda it: it.id)
    return out


def normalize_question(text: str) -> str:
    """The form of a question that :func:`check_leakage` compares.

    NFKC, case-folded, punctuation removed, whitespace collapsed.

    Example:
        >>> normalize_question("  Where do you keep  MILK? ")
        'where do you keep milk'
    """
    folded = unicodedata.normalize("NFKC", text).casefold()
    kept = "".join(" " if unicodedata.category(ch).startswith("P") else ch for ch in folded)
    return _SPACE.sub(" ", kept).strip()


def check_leakage(splits: Mapping[str, Sequence[MCItem]]) -> list[str]:
    """List problems that let an item's content cross splits.

    Reported: an id in two or more splits, an id repeated within one split, and one
    normalised question text (see :func:`normalize_question`) in two or more splits.
    Questions that normalise to the empty string are not compared.

    Args:
        splits: Split name → items, e.g. the result of :func:`split_items`.

    Returns:
        One message per problem, in a stable order; empty when there is none.

    Example:
        >>> from senseforge.data.schema import Choice, MCItem
        >>> choices = [Choice(label="A", text="yes"), Choice(label="B", text="no")]
        >>> a = MCItem(id="a", lang="en", question="Is it?", choices=choices)
        >>> b = MCItem(id="b", lang="en", question="is  it", choices=choices)
        >>> check_leakage({"train": [a], "test": [b]})
        ["question 'is it' is in more than one split: train (a), test (b)"]
    """
    problems: list[str] = []
    id_splits: dict[str, list[str]] = defaultdict(list)
    question_splits: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for name, items in splits.items():
        counts: dict[str, int] = defaultdict(int)
        for item in items:
            counts[item.id] += 1
            key = normalize_question(item.question)
            if key:
                question_splits[key][name].append(item.id)
        for item_id, count in sorted(counts.items()):
            id_splits[item_id].append(name)
            if count > 1:
                problems.append(f"id {item_id!r} occurs {count} times in {name}")
    for item_id, names in sorted(id_splits.items()):
        if len(names) > 1:
            problems.append(f"id {item_id!r} is in more than one split: {', '.join(names)}")
    for key, by_split in sorted(question_splits.items()):
        if len(by_split) > 1:
            where = ", ".join(f"{name} ({', '.join(sorted(ids))})" for name, ids in by_split.items())
            problems.append(f"question {key!r} is in more than one split: {where}")
    return problems
