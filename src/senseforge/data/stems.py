"""Word stems for the languages that have a stemmer here: Sastrawi for Indonesian, Porter (NLTK) for English.

Shared by the lenient concept matchers of the culture recipes. Stems are cached per word.

>>> stemmer_name("id"), stemmer_name("en-GB"), stemmer_name("su")
('sastrawi', 'porter', None)
>>> stem("menari", "id")
'tari'
"""

from __future__ import annotations

from functools import cache, lru_cache
from typing import Any, Final

from senseforge.data.lang import primary_language
from senseforge.errors import MissingDependencyError

_STEMMERS: Final = {"id": "sastrawi", "en": "porter"}
_INSTALL_HINT: Final = "pip install 'senseforge[langid]'"


def stemmer_name(lang: str) -> str | None:
    """The stemmer of ``lang`` (its primary subtag), for provenance: ``"sastrawi"``, ``"porter"`` or ``None``."""
    return _STEMMERS.get(primary_language(lang))


@cache
def _engine(name: str) -> Any:
    if name == "sastrawi":
        try:
            from Sastrawi.Stemmer.StemmerFactory import StemmerFactory
        except ImportError as exc:
            raise MissingDependencyError(f"Indonesian stems need Sastrawi: {_INSTALL_HINT}") from exc
        return StemmerFactory().create_stemmer()
    try:
        from nltk.stem import PorterStemmer
    except ImportError as exc:
        raise MissingDependencyError(f"English stems need NLTK's Porter stemmer: {_INSTALL_HINT}") from exc
    return PorterStemmer()


@lru_cache(maxsize=65536)
def _stem(word: str, name: str) -> str:
    return str(_engine(name).stem(word)) or word


def stem(word: str, lang: str) -> str | None:
    """The stem of a (folded) word of ``lang``, or ``None`` when the language has no stemmer here.

    Raises:
        MissingDependencyError: the language's stemmer is not installed.
    """
    name = stemmer_name(lang)
    return None if name is None else _stem(word, name)
