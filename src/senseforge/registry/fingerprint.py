"""What the registry keeps of a text instead of the text: hashes of two forms, a MinHash signature of its
character shingles, and (separately, :mod:`senseforge.data.embeddings`) a sentence embedding.

* the **exact key** hashes the text as written (Unicode NFC, outer whitespace dropped);
* the **normal key** hashes its normal form (:func:`normal`: NFKC, case-folded, punctuation and
  symbols dropped, whitespace collapsed), so a re-cased or re-punctuated copy has the same key;
* the **signature** is a MinHash (datasketch) over the normal form's character n-grams —
  :data:`SHINGLE` characters, spaces included, or :data:`SHINGLE_UNSPACED` for a text written
  without spaces (Chinese, Japanese, Thai), whose characters carry more each; the share of equal
  slots of two signatures estimates the Jaccard similarity of their shingle sets.

Signatures are only comparable when made with the same settings (:class:`MinHashSettings`): an
index records its settings and refuses to load under others.

>>> normal("  What is a FOX's den, usually? ")
'what is a foxs den usually'
>>> exact_key("Where?") == exact_key(" Where? "), normal_key("Where?") == normal_key("where")
(True, True)
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from dataclasses import asdict, dataclass
from typing import Any, Final

import numpy as np

SHINGLE: Final = 5
"""Characters per shingle of a normal form with spaces."""
SHINGLE_UNSPACED: Final = 3
"""Characters per shingle of a normal form without spaces."""

_DROP: Final = frozenset("PS")  # Unicode categories removed by the normal form: punctuation, symbols


@dataclass(frozen=True)
class MinHashSettings:
    """What decides a signature: the slots, the permutation seed, the shingle and the normal form."""

    num_perm: int = 128
    seed: int = 1
    shingle: int = SHINGLE
    shingle_unspaced: int = SHINGLE_UNSPACED
    normal: str = "nfkc-casefold-nopunct-v1"
    hash: str = "datasketch-sha1_hash32"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


SETTINGS: Final = MinHashSettings()
"""The settings every signature of this version is made with."""


def normal(text: str) -> str:
    """NFKC, case-folded, punctuation and symbols dropped (apostrophes too), whitespace collapsed."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    kept = "".join(ch if unicodedata.category(ch)[0] not in _DROP else (" " if ch in "-/" else "") for ch in folded)
    return " ".join(kept.split())


def _key(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "little")


def exact_key(text: str) -> int:
    """A 64-bit hash of the text as written (NFC, outer whitespace dropped)."""
    return _key(unicodedata.normalize("NFC", text).strip())


def normal_key(text: str) -> int:
    """A 64-bit hash of :func:`normal`."""
    return _key(normal(text))


_DIGITS: Final = re.compile(r"\d+")


def numbers_key(text: str) -> int:
    """A 64-bit hash of the set of numbers written in the text (in any script's digits); 0 when it has none.

    >>> numbers_key("Route 66, 3 times") == numbers_key("３ kali di jalur 66"), numbers_key("no digits")
    (True, 0)
    """
    found = sorted({str(int(n)) for n in _DIGITS.findall(unicodedata.normalize("NFKC", text))})
    return _key(" ".join(found)) if found else 0


def shingles(text: str, settings: MinHashSettings | None = None) -> set[bytes]:
    """The character n-grams of the normal form (the whole form when shorter; none when empty)."""
    settings = settings or SETTINGS
    form = normal(text)
    if not form:
        return set()
    size = settings.shingle if " " in form else settings.shingle_unspaced
    if len(form) <= size:
        return {form.encode("utf-8")}
    return {form[i : i + size].encode("utf-8") for i in range(len(form) - size + 1)}


_PERMUTATIONS: dict[MinHashSettings, Any] = {}


def signatures(texts: list[str], settings: MinHashSettings = SETTINGS) -> np.ndarray:
    """One MinHash signature per text (``uint64[len(texts), num_perm]``); an empty text gets all slots at
    the maximum, which matches nothing."""
    from datasketch import MinHash

    if settings not in _PERMUTATIONS:  # the permutations are drawn once per settings, as datasketch would
        _PERMUTATIONS[settings] = MinHash(num_perm=settings.num_perm, seed=settings.seed).permutations
    permutations = _PERMUTATIONS[settings]
    out = np.empty((len(texts), settings.num_perm), dtype=np.uint64)
    for row, text in enumerate(texts):
        sketch = MinHash(num_perm=settings.num_perm, seed=settings.seed, permutations=permutations)
        sketch.update_batch(sorted(shingles(text, settings)))
        out[row] = sketch.hashvalues
    return out


def jaccard(signature: np.ndarray, others: np.ndarray) -> np.ndarray:
    """The estimated Jaccard similarity of one signature with each row of ``others``: the share of equal slots."""
    if others.size == 0:
        return np.zeros(0, dtype=np.float64)
    return np.asarray(np.mean(others == signature[None, :], axis=1), dtype=np.float64)
