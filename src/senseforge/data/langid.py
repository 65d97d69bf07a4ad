"""Which language a text is in: Google's CLD3 (PyPI ``cld3-py``, Apache-2.0), offline.

CLD3 covers Sundanese, Javanese, Indonesian and Malay among its 107 languages (several
popular identifiers do not know Sundanese). A text too short or too mixed to tell is
``None``, never a guess. Shared by the culture recipes (items flagged, not rejected) and
the analyses (wrong-language rate).

>>> detect("Naon anu biasana dianggo ku urang Sunda pikeun ngadamel sangu liwet?")  # doctest: +SKIP
'su'
"""

from __future__ import annotations

from functools import cache
from typing import Any

from senseforge.errors import MissingDependencyError

MIN_PROBABILITY = 0.5
"""Below this CLD3 probability the language is unknown (``None``)."""


@cache
def _identifier() -> Any:
    try:
        import gcld3
    except ImportError as exc:
        raise MissingDependencyError("language identification needs cld3-py: pip install 'senseforge[langid]'") from exc
    return gcld3.NNetLanguageIdentifier(min_num_bytes=0, max_num_bytes=4096)


def detect(text: str) -> str | None:
    """The BCP-47 primary tag CLD3 finds for ``text``, or ``None`` when it cannot tell.

    Raises:
        MissingDependencyError: ``cld3-py`` is not installed.
    """
    if not text.strip():
        return None
    result = _identifier().FindLanguage(text=text)
    if result.language in ("und", "") or result.probability < MIN_PROBABILITY:
        return None
    return str(result.language).split("-")[0]
