"""Scripted members of a verification panel, of known behaviour (``scripted/<this file>:<function>@loglik``).

Each scores a choice (a log-likelihood request's continuation) from its text alone, so which option it picks for an
item, and how sure it is, follow from the item's choices:

* :func:`short` prefers the shortest choice, :func:`long` the longest (ties: the first, as the harness's argmax);
* :func:`hashed` scores each choice by a hash of the question and the choice: an arbitrary but fixed pick.

The scores are steep (several nats a character), so a member is often sure of its pick: the skip-review rule has
confident answers to settle, right and wrong.

:func:`hashed` blocks when ``PANEL_BLOCK_AT`` is set: at that many requests in this process it writes the file
``PANEL_BLOCK_READY`` names and sleeps, so a test can kill the build mid-panel however fast the machine is.
"""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

from senseforge.llm.base import GenerateRequest, LoglikelihoodRequest

STEEP = 3.0
"""Nats per character of difference between two choices."""

_asked = [0]


def _choice(request: GenerateRequest | LoglikelihoodRequest) -> str:
    if not isinstance(request, LoglikelihoodRequest):
        raise TypeError("panel members answer by log-likelihood (give them @loglik)")
    return request.continuation.strip()


def short(request: GenerateRequest | LoglikelihoodRequest) -> float:
    """Shorter choices score higher."""
    return -STEEP * len(_choice(request))


def long(request: GenerateRequest | LoglikelihoodRequest) -> float:
    """Longer choices score higher."""
    return STEEP * len(_choice(request)) - 1000.0


def hashed(request: GenerateRequest | LoglikelihoodRequest) -> float:
    """A fixed pseudo-random score of (question, choice), in [-12, 0]; blocks as the module says."""
    choice = _choice(request)
    assert isinstance(request, LoglikelihoodRequest)
    _asked[0] += 1
    block_at = os.environ.get("PANEL_BLOCK_AT")
    if block_at and _asked[0] >= int(block_at):
        Path(os.environ["PANEL_BLOCK_READY"]).write_text(str(_asked[0]), encoding="utf-8")
        time.sleep(3600)
    digest = hashlib.sha256(f"{request.context}\x00{choice}".encode()).digest()
    return -12.0 * digest[0] / 255.0
