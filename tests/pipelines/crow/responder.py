"""A slow ``scripted/crow-author`` for the kill test: the same replies, each after a short pause, so a build can be
killed part-way (a scripted build otherwise finishes before the test can stop it)."""

from __future__ import annotations

import time

from senseforge.llm.base import GenerateRequest, LoglikelihoodRequest
from senseforge.pipelines.crow.dryrun import crow_author


def slow_author(request: GenerateRequest | LoglikelihoodRequest) -> str | float:
    time.sleep(0.04)
    return crow_author(request)
