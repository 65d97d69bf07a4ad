"""A tolerant JSON extractor for model output.

Models wrap JSON in code fences, put prose around it, or leave a trailing comma. The
extractor tries, in order: the whole text; the body of the first fenced block; the first
complete JSON object or array found anywhere in the text; the same with trailing commas
removed. It never guesses beyond that: truncated JSON is an error.
"""

from __future__ import annotations

import json
import re
from typing import Any

_FENCE = re.compile(r"```[a-zA-Z0-9_-]*\s*\n?(.*?)```", re.DOTALL)
_TRAILING_COMMA = re.compile(r",(\s*[}\]])")


class JSONExtractionError(ValueError):
    """The text holds no complete JSON value."""


def _first_value(text: str) -> Any:
    decoder = json.JSONDecoder()
    for match in re.finditer(r"[\[{]", text):
        try:
            value, _ = decoder.raw_decode(text, match.start())
        except json.JSONDecodeError:
            continue
        return value
    raise JSONExtractionError("no complete JSON object or array found")


def extract_json(text: str) -> Any:
    """Return the JSON value in ``text``.

    >>> extract_json('Sure! ```json\\n{"a": 1,}\\n``` Hope that helps.')
    {'a': 1}

    Raises:
        JSONExtractionError: when no complete JSON value can be found.
    """
    stripped = text.strip()
    if not stripped:
        raise JSONExtractionError("empty text")
    candidates = [stripped]
    fence = _FENCE.search(stripped)
    if fence:
        candidates.insert(0, fence.group(1).strip())
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except json.JSONDecodeError:
            pass
    for candidate in candidates:
        for variant in (candidate, _TRAILING_COMMA.sub(r"\1", candidate)):
            try:
                return _first_value(variant)
            except JSONExtractionError:
                continue
    raise JSONExtractionError(f"no complete JSON value in {stripped[:80]!r}")
