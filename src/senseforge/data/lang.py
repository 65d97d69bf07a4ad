"""Language tags: BCP-47 inside senseforge, other code systems only at the edges."""

from __future__ import annotations

import functools
import re

# Well-formed tags per RFC 5646 (language, optional extlang, script, region, variants,
# extensions, private use). Grandfathered irregular tags are not accepted, and neither
# are 4-8 letter primary subtags: RFC 5646 reserves them and the IANA registry holds
# none, so accepting them would only let names such as "english" pass as tags.
_LANGTAG = re.compile(
    r"""^
    (?P<language>[a-z]{2,3}(?:-[a-z]{3}){0,3})
    (?:-(?P<script>[a-z]{4}))?
    (?:-(?P<region>[a-z]{2}|[0-9]{3}))?
    (?P<variants>(?:-(?:[a-z0-9]{5,8}|[0-9][a-z0-9]{3}))*)
    (?P<extensions>(?:-[0-9a-wy-z](?:-[a-z0-9]{2,8})+)*)
    (?P<private>-x(?:-[a-z0-9]{1,8})+)?
    $""",
    re.VERBOSE | re.IGNORECASE,
)


def normalize_tag(tag: str) -> str:
    """Return the canonical casing of a well-formed BCP-47 tag.

    Raises:
        ValueError: when ``tag`` is not a well-formed BCP-47 tag.

    >>> normalize_tag("ZH-hant-tw")
    'zh-Hant-TW'
    >>> normalize_tag("ja")
    'ja'
    """
    if not isinstance(tag, str):
        raise ValueError(f"{tag!r} is not a BCP-47 language tag (examples: en, ja, zh-Hant, pt-BR)")
    return _normalized(tag)


@functools.lru_cache(maxsize=1024)
def _normalized(tag: str) -> str:
    """:func:`normalize_tag` of a string, remembered (a build asks it of the same few tags for every record)."""
    match = _LANGTAG.match(tag.strip())
    if match is None:
        raise ValueError(f"{tag!r} is not a BCP-47 language tag (examples: en, ja, zh-Hant, pt-BR)")
    out = match["language"].lower()
    if match["script"]:
        out += "-" + match["script"].title()
    if match["region"]:
        out += "-" + match["region"].upper()
    for part in ("variants", "extensions", "private"):
        if match[part]:
            out += match[part].lower()
    return out


def primary_language(tag: str) -> str:
    """The primary language subtag: ``pt-BR`` → ``pt``."""
    return normalize_tag(tag).split("-", 1)[0]


LANGUAGE_NAMES: dict[str, str] = {
    "id": "Indonesian",
    "su": "Sundanese",
    "jv": "Javanese",
    "ms": "Malay",
    "en": "English",
    "ja": "Japanese",
    "zh": "Chinese",
    "fr": "French",
    "de": "German",
    "es": "Spanish",
    "pt": "Portuguese",
    "nl": "Dutch",
    "ru": "Russian",
}
"""English names of the languages a run may ask for."""


def language_name(lang: str) -> str:
    """The English name of a language (the tag itself when we have no name)."""
    return LANGUAGE_NAMES.get(lang, lang)
