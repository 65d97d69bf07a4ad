"""Answer extraction from generated text: small named chains of filters.

``strict`` accepts only an answer that stands alone (``B``, ``(B)``, ``B.``,
``Answer: B``); ``lenient`` also takes the first standalone choice letter anywhere in
the text, or the one choice whose text the answer quotes. Anything else is *unparsed*,
which the harness reports as its own rate rather than folding into wrong answers.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_STANDALONE = re.compile(
    r"^\W*(?:answer|jawaban|答え|答案|réponse|antwort|resposta|antwoord|ответ)?\W*([A-Z])\W*$", re.I
)
_TAGGED = re.compile(r"<answer>\s*(.*?)\s*</answer>", re.I | re.S)


def strict_letter(text: str, letters: Sequence[str]) -> str | None:
    """The letter when the whole answer is just that letter (optionally with a cue word)."""
    first_line = text.strip().splitlines()[0] if text.strip() else ""
    match = _STANDALONE.match(first_line)
    if match and match.group(1).upper() in letters:
        return match.group(1).upper()
    return None


def lenient_letter(text: str, letters: Sequence[str], choices: Sequence[str]) -> str | None:
    """The first unambiguous answer among, in order: the strict form; a cue such as
    ``answer is B``; the one letter that opens a line (``B)``, ``(B)``, ``B.``); the one
    choice text quoted; the one letter that stands alone anywhere. Several candidates
    at a step (an echoed option list, say) make the answer unparsed rather than a guess.
    """
    found = strict_letter(text, letters)
    if found:
        return found
    alternatives = "|".join(map(re.escape, letters))
    cued = re.search(rf"answer\W*(?:is|:)?\W*\(?({alternatives})(?![A-Za-z])", text, re.I)
    if cued and str(cued.group(1)).upper() in letters:
        return str(cued.group(1)).upper()
    openers = set(re.findall(rf"(?m)^\W*\(?({alternatives})[.):]", text))
    if len(openers) == 1:
        return str(openers.pop())
    if len(openers) > 1:
        return None
    lowered = text.casefold()
    quoted = {letter for letter, choice in zip(letters, choices, strict=True) if choice.casefold() in lowered}
    if len(quoted) == 1:
        return quoted.pop()
    if len(quoted) > 1:
        return None
    alone = set(re.findall(rf"(?<![A-Za-z])({alternatives})(?![A-Za-z'])", text))
    return str(alone.pop()) if len(alone) == 1 else None


def tagged_answer(text: str) -> str | None:
    """The content of the last ``<Answer>…</Answer>`` tag (chain-of-thought outputs)."""
    found = _TAGGED.findall(text)
    return found[-1] if found else None


def yes_no(text: str, yes: str, no: str) -> bool | None:
    """True for the language's yes, False for its no, None when neither (or both) appear first."""
    answer = tagged_answer(text) or text
    words = re.findall(r"\w+", answer.casefold())
    for word in words[:8]:
        if word == yes.casefold():
            return True
        if word == no.casefold():
            return False
    return None
