"""Scripted members of a verification panel for the culture-gen tests (``scripted/<this file>:<function>@loglik``).

Each scores a choice (a :class:`~senseforge.llm.base.LoglikelihoodRequest`: the question as context, the choice's
text as continuation). The test responder marks ``B`` right, ``<category> option b``: :func:`knows` prefers it,
:func:`guesses` only for the concept ``ok-1``, else option c, and :func:`misses` always prefers option c.
"""

from __future__ import annotations

from senseforge.llm.base import LoglikelihoodRequest


def _prefers(request: LoglikelihoodRequest, suffix: str) -> float:
    return 0.0 if request.continuation.strip().endswith(suffix) else -8.0


def knows(request: LoglikelihoodRequest) -> float:
    return _prefers(request, "option b")


def guesses(request: LoglikelihoodRequest) -> float:
    return _prefers(request, "option b" if "ok-1 " in request.context else "option c")


def misses(request: LoglikelihoodRequest) -> float:
    return _prefers(request, "option c")
