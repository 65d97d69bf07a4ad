"""A scripted model for the tiny test recipe (``scripted/<this file>:respond``).

It knows each stage by the request's tag. Splitting: ``sun`` → ``sun-0|sun-1|sun-2``.
Flanking: ``[0]`` and ``[1]`` (the request's seed; its prompt is only the part). Judging:
three judges (seeds 0, 1, 2) say yes to part 0; part 1 gets one yes (rejected at "2 of 3",
if it got that far); part 2 gets two (accepted).
With ``TINY_SLOW`` set, every call takes that many seconds (for kill -9 tests).
"""

from __future__ import annotations

import os
import re
import time

from senseforge.llm.base import GenerateRequest, LoglikelihoodRequest

NO_VOTES = {0: set(), 1: {"1"}, 2: {"1", "2"}}
"""Per judge seed, the part numbers it says no to."""


def respond(request: GenerateRequest | LoglikelihoodRequest) -> str | float:
    if isinstance(request, LoglikelihoodRequest):
        return -1.0
    time.sleep(float(os.environ.get("TINY_SLOW", "0")))
    text = request.as_messages()[-1].content
    if request.tag == "expand":
        word = text.split()[1]
        return "|".join(f"{word}-{i}" for i in range(3)) if word != "broken" else "no parts"
    if request.tag == "flank":
        return f"[{request.seed}]"
    part = re.search(r"Is \w+-(\d) fine", text)
    if request.tag == "judge" and part:
        return "no" if part.group(1) in NO_VOTES[int(request.seed or 0)] else "yes"
    return ""
