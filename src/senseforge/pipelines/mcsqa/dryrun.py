"""A stand-in author for dry runs, tests and benchmarks of the mCSQA recipe: no model, no network.

:func:`author_reply` answers each chat request of the recipe the way a well-behaved chat
model would, deterministically from the request text (the stage that asks is the request's
tag, or, for an untagged request such as the loopback server's, what its text shows): a question that avoids the
answer words (generate), the same question or a light rewrite (refine), two new choices
as JSON (distractors), a letter (verification), yes or no (LM review). Some answers are
wrong on purpose (a share of letters, a share of "no"), so Easy, Hard and rejected items
all occur. It is the ``scripted/mcsqa-author`` model, and the responder the loopback
server uses in ``benchmarks/pipeline_throughput.py``.

>>> from senseforge.llm.base import Message
>>> author_reply([Message(role="system", content=GENERATE_INSTRUCTION), Message(role="user", content="…")]) in "ABCDE"
True
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from functools import cache
from typing import Any

from senseforge.evaluate.run import GENERATE_INSTRUCTION
from senseforge.llm.base import Message
from senseforge.pipelines.mcsqa.judging import REVIEW_QUESTION
from senseforge.pipelines.mcsqa.templates import STAGES, SUPPORTED_LANGUAGES, templates

_QUESTION = {
    "en": "Which option matches puzzle number {n}?",
    "ja": "パズル{n}番に合う選択肢はどれですか？",
}
_REWRITE = {
    "en": "Which option fits puzzle number {n}?",
    "ja": "パズル{n}番にふさわしい選択肢はどれですか？",
}
_DECOYS = {"en": ("decoy {n}", "lure {n}"), "ja": ("おとり{n}", "ダミー{n}")}


def _number(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:6], "big")


@cache
def _systems() -> dict[str, tuple[str, str]]:
    """System prompt → (stage, language) for every template set."""
    out: dict[str, tuple[str, str]] = {}
    for lang in SUPPORTED_LANGUAGES:
        t = templates(lang)
        for stage in STAGES:
            out.setdefault(t.stage(stage).system, (stage, lang))
    return out


def _question_in(user: str, lang: str) -> str:
    """The stand-in author's own question (either wording) quoted in a refine request."""
    for wording in (_QUESTION[lang], _REWRITE[lang]):
        pattern = re.escape(wording).replace(re.escape("{n}"), r"\d+")
        found = re.search(pattern, user)
        if found:
            return found.group(0)
    return ""


def _stage(system: str, user: str) -> str:
    """The stage an untagged request comes from (the loopback server's requests carry no tag), by its text."""
    if system == GENERATE_INSTRUCTION:
        return "verify"
    if REVIEW_QUESTION in user:
        return "review"
    return _systems().get(system, ("", "en"))[0]


def author_reply(messages: Sequence[Message], stage: str | None = None) -> str:
    """The reply of the stand-in author to one chat request of the recipe, from ``stage`` (a request's tag: the
    stage that asks), or, when it is not given, the stage the request's text shows."""
    system = next((m.content for m in messages if m.role == "system"), "")
    user = messages[-1].content
    n = _number(user)
    stage = stage or _stage(system, user)
    if stage == "verify":
        return "ABCDE"[n % 5]
    if stage == "review":
        return "no" if n % 5 == 0 else "yes"
    lang = _systems().get(system, ("", "en"))[1]
    lang = lang if lang in _QUESTION else "en"
    if stage == "generate":
        return _QUESTION[lang].format(n=n % 100000)
    if stage == "refine":
        question = _question_in(user, lang)
        if question and n % 4 == 0:
            digits = "".join(ch for ch in question if ch.isdigit())
            return _REWRITE[lang].format(n=digits or n % 100000)
        return question
    if stage == "distractors":
        first, second = _DECOYS[lang]
        return json.dumps({"distractors": [first.format(n=n % 1000), second.format(n=n // 1000 % 1000)]})
    return ""


def body_reply(body: dict[str, Any]) -> str:
    """:func:`author_reply` for an OpenAI chat request body (the loopback server's responder)."""
    messages = [Message(role=m["role"], content=str(m["content"])) for m in body.get("messages", [])]
    return author_reply(messages) if messages else ""
