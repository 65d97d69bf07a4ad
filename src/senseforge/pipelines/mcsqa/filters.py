"""Rule-based filters for generated questions and distractors (mCSQA steps 2–4).

Each filter is a pure function that returns the reason a text is rejected — one of the
string constants below, which the run report counts — or ``None`` when it passes. Checks
run in a fixed order and the first failure wins, so every rejected record carries exactly
one reason.

Questions (:func:`check_question`), in order:

``empty``
    nothing but whitespace.
``degenerate``
    no letter or digit at all (only punctuation); a single character repeated
    (``aaaa?``); one word repeated (``what what?``) or any word three times in a row
    (``is is is``); a unit of up to four letters repeated three times in a row in Japanese
    or Chinese (``なになにな``); shorter than :data:`MIN_WORDS` words (languages with
    spaces) or :data:`MIN_CHARS_UNSPACED` letters (Japanese, Chinese); longer than
    :data:`MAX_CHARS` characters (:data:`MAX_CHARS_UNSPACED` without spaces); only a
    ``Question:`` label (the language's or the English one); or text copied from the
    prompt's instructions, when those are given.
``copied_example``
    the question copies (exactly or nearly, :func:`senseforge.pipelines.dedup.near_duplicate`)
    a worked example of the prompt, when the examples are given.
``target_in_question``
    one of the target words appears. Case and width are ignored (NFKC). In languages with
    spaces a target matches whole words, a multi-word target its words in sequence, and
    the last word also in simple plural forms (:data:`PLURAL_SUFFIXES`: English ``-s``,
    ``-es`` and ``-y``→``-ies``; a few suffixes for German, French, Dutch and Portuguese).
    English targets that look plural (``shoes``) also match their singular. In Japanese
    and Chinese a target matches anywhere (no word boundaries to use).
``no_question_mark``
    the question does not end with ``?`` (or the language's own question mark; ``？``
    and ``?`` are both accepted in Japanese and Chinese). Closing quotes and brackets after
    the mark are allowed.
``multiple_sentences``
    more than one sentence: ``. ! ?`` followed by whitespace and more text; ``。！？``
    (in Japanese and Chinese also ``!?``) followed by more text; or a line break between
    two lines of text. Not sentence breaks: decimals (``2.5``); dotted abbreviations and
    initials (``e.g.``, ``U.S.``, ``J.``); the words in :data:`ABBREVIATIONS` (``Mr.``,
    ``etc.``, ``bzw.``, ``dll.`` …); a period followed by a lower-case word; ``!`` or
    ``?`` right before a closing quote (a quoted exclamation); ellipses (``...``, ``…``).
``inappropriate``
    the moderator (by default the shipped word lists, see
    :mod:`senseforge.pipelines.moderation`) flags the text.

Distractors (:func:`check_distractors`), in order: ``wrong_count`` (not exactly two),
``empty`` (no letter or digit), ``short_option`` (fewer than :data:`MIN_OPTION_LETTERS`
letters or digits in a language written with spaces: a one-letter "d" is a label, not a
choice), ``copied_example`` (both are distractors of the prompt's worked examples, when
those are given), ``duplicate`` (equal to an existing choice or to each other
after :func:`choice_key`: NFKC, case, whitespace and punctuation ignored), ``near_duplicate``
(one contains the other — as whole words in languages with spaces, allowing the plural
forms above; as a substring in Japanese and Chinese — or a similarity ratio of at least
:data:`NEAR_DUPLICATE_RATIO` between the keys; see :func:`similarity`), ``inappropriate``.

>>> check_question("What do people wear inside their shoes?", ["shoe", "hat", "glove"], "en")
'target_in_question'
>>> check_question("What do people wear on their feet?", ["sock", "hat", "glove"], "en") is None
True
>>> check_distractors(["Scarf", "belt"], ["sock", "hat", "glove"], "en") is None
True
>>> check_distractors(["socks", "belt"], ["sock", "hat", "glove"], "en")
'near_duplicate'
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Final

from senseforge.data.lang import primary_language
from senseforge.data.literals import lookup, lookup_text
from senseforge.data.text import fold
from senseforge.pipelines.dedup import near_duplicate
from senseforge.pipelines.moderation import INAPPROPRIATE, Moderator, default_moderator

EMPTY: Final = "empty"
DEGENERATE: Final = "degenerate"
TARGET_IN_QUESTION: Final = "target_in_question"
NO_QUESTION_MARK: Final = "no_question_mark"
MULTIPLE_SENTENCES: Final = "multiple_sentences"
WRONG_COUNT: Final = "wrong_count"
DUPLICATE: Final = "duplicate"
NEAR_DUPLICATE: Final = "near_duplicate"
SHORT_OPTION: Final = "short_option"
COPIED_EXAMPLE: Final = "copied_example"

QUESTION_REASONS: Final = (
    EMPTY,
    DEGENERATE,
    COPIED_EXAMPLE,
    TARGET_IN_QUESTION,
    NO_QUESTION_MARK,
    MULTIPLE_SENTENCES,
    INAPPROPRIATE,
)
"""Reasons :func:`check_question` returns, in the order it checks them."""

DISTRACTOR_REASONS: Final = (WRONG_COUNT, EMPTY, SHORT_OPTION, COPIED_EXAMPLE, DUPLICATE, NEAR_DUPLICATE, INAPPROPRIATE)
"""Reasons :func:`check_distractors` returns, in the order it checks them."""

MIN_WORDS: Final = 3
"""Fewest words a question may have in a language written with spaces."""

MIN_CHARS_UNSPACED: Final = 4
"""Fewest letters or digits a question may have in a language written without spaces."""

MAX_CHARS: Final = 300
"""Most characters a question may have (a single short sentence is far below this)."""

MAX_CHARS_UNSPACED: Final = 150
"""Most characters a question may have in Japanese or Chinese (denser scripts)."""

NEAR_DUPLICATE_RATIO: Final = 0.9
"""Distractors at least this similar (:func:`similarity`) to another choice are near-duplicates."""

MIN_OPTION_LETTERS: Final = 2
"""Fewest letters or digits a distractor may have in a language written with spaces (one letter is a
label such as "d", not a choice); scripts without spaces keep one-character words (木, 猫)."""

DISTRACTOR_COUNT: Final = 2
"""How many new choices the distractor step must return."""

PLURAL_SUFFIXES: Final[Mapping[str, tuple[str, ...]]] = {
    "en": ("s", "es"),
    "de": ("e", "en", "n", "s", "er"),
    "fr": ("s", "x"),
    "nl": ("s", "en"),
    "pt": ("s", "es"),
}
"""Suffixes a target's last word may carry and still count as the target (simple plurals)."""

ABBREVIATIONS: Final = frozenset(
    {
        # en
        "mr",
        "mrs",
        "ms",
        "dr",
        "st",
        "jr",
        "sr",
        "vs",
        "etc",
        "approx",
        # de
        "bzw",
        "ca",
        "usw",
        "nr",
        "str",
        # fr, pt, nl
        "mme",
        "env",
        "sra",
        "bijv",
        "mevr",
        # id, su
        "dll",
        "dsb",
        "dst",
        "tsb",
        "yth",
        # ru (single letters such as "г." count as initials)
        "др",
        "см",
    }
)
"""Words that end in a period without ending a sentence (case-folded, without the period)."""

_QUESTION_LABELS: Final = ("Question",)
_CLOSERS: Final = "\"'”’»」』)）]】"
_TERMINATOR = re.compile(r"(?<![.…])([.!?。！？])(?![.…])")
_WORD = re.compile(r"\w+")
_DOTTED = re.compile(r"(?:\w\.)+\w?$")  # e.g, u.s, z.b (the final period already cut off)
_UNIT_RUN = re.compile(r"([^\W\d_]{1,4}?)\1{2,}")


def _space_separated(lang: str) -> bool:
    return bool(lookup(lang, "space_separated"))


def _letters(text: str) -> str:
    return "".join(ch for ch in text if ch.isalnum())


def choice_key(text: str) -> str:
    """The form choices are compared in: NFKC, case-folded, without whitespace or punctuation.

    >>> choice_key(" Ｉce-Cream! "), choice_key("ice cream")
    ('icecream', 'icecream')
    """
    return _choice_key(text)


@functools.lru_cache(maxsize=1 << 16)
def _choice_key(text: str) -> str:
    return "".join(ch for ch in fold(text) if not (ch.isspace() or unicodedata.category(ch)[0] in "PS"))


def similarity(a: str, b: str) -> float:
    """How alike two strings are: ``2 · LCS / (len a + len b)``, i.e. one minus the normalised
    insertion/deletion edit distance (the ``ratio`` of python-Levenshtein and rapidfuzz).

    >>> round(similarity("colour", "color"), 3), similarity("", "")
    (0.909, 1.0)
    """
    if not a and not b:
        return 1.0
    previous = [0] * (len(b) + 1)
    for ch_a in a:
        current = [0]
        for j, ch_b in enumerate(b):
            current.append(previous[j] + 1 if ch_a == ch_b else max(previous[j + 1], current[j]))
        previous = current
    return 2 * previous[-1] / (len(a) + len(b))


def _word_variants(word: str, lang: str) -> set[str]:
    variants = {word}
    suffixes = PLURAL_SUFFIXES.get(primary_language(lang), ())
    variants.update(word + suffix for suffix in suffixes)
    if primary_language(lang) == "en":
        if len(word) > 2 and word.endswith("y") and word[-2] not in "aeiou":
            variants.add(word[:-1] + "ies")
        if len(word) > 4 and word.endswith("ies"):
            variants.add(word[:-3] + "y")
        if len(word) > 4 and word.endswith("es"):
            variants.add(word[:-2])
        if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
            variants.add(word[:-1])
    return variants


@functools.lru_cache(maxsize=1 << 14)
def _target_pattern(target: str, lang: str) -> re.Pattern[str] | None:
    """The pattern that finds ``target`` (or a plural or singular of its last word) as whole words, remembered (the
    checks look for the same targets and choices in many texts; :mod:`re`'s own cache holds 512 patterns)."""
    words = fold(target).replace("_", " ").split()
    if not words:
        return None
    head = [re.escape(word) for word in words[:-1]]
    last = "|".join(re.escape(v) for v in sorted(_word_variants(words[-1], lang), key=len, reverse=True))
    return re.compile(r"(?<!\w)" + r"\s+".join([*head, f"(?:{last})"]) + r"(?!\w)")


def _contains_target(text: str, target: str, lang: str) -> bool:
    if _space_separated(lang):
        pattern = _target_pattern(target, lang)
        return pattern is not None and pattern.search(fold(text)) is not None
    needle = "".join(fold(target).replace("_", " ").split())
    return bool(needle) and needle in "".join(fold(text).split())


def _strip_closers(text: str) -> str:
    return text.rstrip().rstrip(_CLOSERS).rstrip()


def _is_label_only(text: str, lang: str) -> bool:
    labels = {fold(label) for label in (*_QUESTION_LABELS, lookup_text(lang, "question"))}
    return fold(_letters(text)) in {fold(_letters(label)) for label in labels}


def _degenerate(question: str, lang: str, instructions: str | None) -> bool:
    letters = _letters(question)
    if not letters:
        return True
    folded_letters = fold(letters)
    if len(set(folded_letters)) == 1 and len(folded_letters) > 1:
        return True
    if _is_label_only(question, lang):
        return True
    if instructions is not None:
        body = fold(question)
        if body in fold(instructions):
            return True
    if _space_separated(lang):
        words = _WORD.findall(fold(question))
        if len(words) < MIN_WORDS or len(question) > MAX_CHARS:
            return True
        if len(set(words)) == 1:
            return True
        return any(words[i] == words[i + 1] == words[i + 2] for i in range(len(words) - 2))
    if len(letters) < MIN_CHARS_UNSPACED or len(question) > MAX_CHARS_UNSPACED:
        return True
    return _UNIT_RUN.search(folded_letters) is not None


def _ends_with_question_mark(question: str, lang: str) -> bool:
    marks = {"?", lookup_text(lang, "question_mark")}
    if not _space_separated(lang):
        marks.add("？")
    body = _strip_closers(question)
    return any(body.endswith(mark) for mark in marks)


def _is_abbreviation(before: str) -> bool:
    token = before.split()[-1] if before.split() else ""
    token = token.lstrip(_CLOSERS + "(（[「『“‘\"'")
    if not token:
        return False
    if _DOTTED.search(token):  # e.g, u.s, z.b, т.е
        return True
    if len(token) == 1 and token.isalpha():  # an initial: J. K. Rowling
        return True
    return token.casefold() in ABBREVIATIONS


def _has_multiple_sentences(question: str, lang: str) -> bool:
    lines = [line for line in question.splitlines() if _letters(line)]
    if len(lines) > 1:
        return True
    # the final terminator (and any closing quotes) ends the one sentence allowed
    body = _strip_closers(question).rstrip(".!?。！？…").rstrip()
    for match in _TERMINATOR.finditer(body):
        mark = match.group(1)
        rest = body[match.end() :]
        if not _letters(rest):
            continue
        if mark in "。！？" or (mark in "!?" and not _space_separated(lang)):
            return True
        if not rest[:1].isspace():  # 2.5, example.com, e.g.x, or a closing quote: not a break
            continue
        following = rest.lstrip()
        if mark == "." and (following[:1].islower() or _is_abbreviation(body[: match.start()])):
            continue
        return True
    return False


def check_question(
    question: str,
    targets: Sequence[str],
    lang: str,
    *,
    instructions: str | None = None,
    moderator: Moderator | None = None,
    examples: Sequence[str] = (),
) -> str | None:
    """Why a generated question is rejected, or ``None`` when it passes every rule.

    Args:
        question: the question as parsed from the model's output (labels already stripped).
        targets: the question set's target concepts; none may appear in the question.
        lang: the question's language (BCP-47; must have a row in :mod:`senseforge.data.literals`).
        instructions: the prompt's instruction text; a question copied from it is degenerate.
        moderator: what decides ``inappropriate``; the shipped word lists by default.
        examples: the questions of the prompt's worked examples; a copy of one is ``copied_example``.

    Returns:
        One of :data:`QUESTION_REASONS`, or ``None``.

    Raises:
        MissingLiteralError: ``lang`` has no row in the literals table.

    >>> check_question("犬は何を食べる？", ["骨", "魚", "草"], "ja") is None
    True
    >>> check_question("What barks? It is loud.", ["dog", "cat", "cow"], "en")
    'no_question_mark'
    """
    text = question.strip()
    if not text:
        return EMPTY
    if _degenerate(text, lang, instructions):
        return DEGENERATE
    if copied_example(text, examples) is not None:
        return COPIED_EXAMPLE
    if any(_contains_target(text, target, lang) for target in targets):
        return TARGET_IN_QUESTION
    if not _ends_with_question_mark(text, lang):
        return NO_QUESTION_MARK
    if _has_multiple_sentences(text, lang):
        return MULTIPLE_SENTENCES
    if (moderator or default_moderator()).check(text, lang) is not None:
        return INAPPROPRIATE
    return None


def target_found(question: str, targets: Sequence[str], lang: str) -> str | None:
    """The first target word ``question`` holds (see ``target_in_question``), or ``None``."""
    return next((target for target in targets if _contains_target(question.strip(), target, lang)), None)


def copied_example(question: str, examples: Sequence[str]) -> str | None:
    """The worked example ``question`` copies (exactly or nearly), or ``None``."""
    return next((example for example in examples if near_duplicate(example, question)), None)


def short_options(options: Sequence[str], lang: str) -> list[str]:
    """The options too short to be choices (fewer than :data:`MIN_OPTION_LETTERS`, languages with spaces)."""
    if not _space_separated(lang):
        return []
    return [option for option in options if len(_letters(option)) < MIN_OPTION_LETTERS]


def _copies_example(new: Sequence[str], examples: Sequence[Sequence[str]]) -> bool:
    shown = {choice_key(text) for pair in examples for text in pair}
    return bool(shown) and all(choice_key(choice) in shown for choice in new)


def _near(a: str, b: str, lang: str) -> bool:
    if _contains_target(a, b, lang) or _contains_target(b, a, lang):
        return True
    key_a, key_b = choice_key(a), choice_key(b)
    if key_a and key_b and _shared_letters(key_a, key_b) * 2 < NEAR_DUPLICATE_RATIO * (len(key_a) + len(key_b)):
        return False  # the common subsequence is no longer than the letters the keys share: it cannot reach the ratio
    return similarity(key_a, key_b) >= NEAR_DUPLICATE_RATIO


def _shared_letters(a: str, b: str) -> int:
    """How many characters two strings have in common, counted with repeats: a bound on their longest common
    subsequence, found in a fraction of :func:`similarity`'s time."""
    return (Counter(a) & Counter(b)).total()


def check_distractors(
    new: Sequence[str],
    existing: Sequence[str],
    lang: str,
    *,
    moderator: Moderator | None = None,
    examples: Sequence[Sequence[str]] = (),
) -> str | None:
    """Why the two distractors a model added are rejected, or ``None`` when they pass.

    Args:
        new: the distractors the model returned (exactly :data:`DISTRACTOR_COUNT` expected).
        existing: the choices already in the item (the three targets).
        lang: the choices' language (BCP-47; must have a row in :mod:`senseforge.data.literals`).
        moderator: what decides ``inappropriate``; the shipped word lists by default.
        examples: the distractors of the prompt's worked examples (a pair each).

    Returns:
        One of :data:`DISTRACTOR_REASONS`, or ``None``.

    >>> check_distractors(["ｓｏｃｋ!", "belt"], ["Sock", "hat", "glove"], "en")
    'duplicate'
    >>> check_distractors(["belt"], ["sock", "hat", "glove"], "en")
    'wrong_count'
    """
    if len(new) != DISTRACTOR_COUNT:
        return WRONG_COUNT
    if any(not _letters(choice) for choice in new):
        return EMPTY
    if short_options(new, lang):
        return SHORT_OPTION
    if _copies_example(new, examples):
        return COPIED_EXAMPLE
    keys = [choice_key(choice) for choice in existing]
    for choice in new:
        key = choice_key(choice)
        if key in keys:
            return DUPLICATE
        keys.append(key)
    others = list(existing)
    for choice in new:
        if any(_near(choice, other, lang) for other in others):
            return NEAR_DUPLICATE
        others.append(choice)
    check = (moderator or default_moderator()).check
    if any(check(choice, lang) is not None for choice in new):
        return INAPPROPRIATE
    return None
