"""The minimal-edit check of CRoW's Winograd-style rewrites.

CRoW (Ismayilzada et al., 2023) builds a counterpart of a commonsense example by rewriting its
target so that the answer flips, and asks that the rewrite stay *minimal*: it may differ from the
original by **at most five words**, counted as the word-level edit distance (Levenshtein over
tokens: inserting, deleting or substituting one word each cost 1). It also discourages a rewrite
that does nothing but add or remove a negation ("eat it" → "do not eat it"), since a model can
learn to key on the negation instead of reasoning.

How the words are found (:func:`words`):

* the text is tokenized first — Japanese by fugashi/unidic-lite, Chinese by jieba (the project's
  tokenizers, :mod:`senseforge.kb.words`; without the ``kb`` extra they raise
  :class:`~senseforge.errors.MissingDependencyError`), every other language by whitespace;
* each token is case-folded (:meth:`str.casefold`, which keeps accents: ``jamás`` stays ``jamás``)
  and loses every character whose Unicode category starts with ``P`` (punctuation, full-width
  ``，。！？「」`` included); tokens left empty are dropped. Symbols (category ``S``: ``$``, ``%``,
  ``+``, emoji) are kept, since swapping ``5%`` for ``5$`` is a real edit;
* so apostrophes and hyphens inside a word vanish: English "don't" → ``dont``, "well-known" →
  ``wellknown``. In the elision languages (French, Italian, Catalan) an apostrophe separates
  words instead: "n'aime" → ``n``, ``aime``.

The negation-only test (:func:`is_negation_only`) strips the negation markers of the language from
both word lists and asks whether what is left is the same and the number of negations stripped
differs (so "isn't" → "is not" is a paraphrase, not a negation flip). The marker tables below are
ours and partial — a handful of common markers per language, not a grammar:

====== ==================================================================================
en     not, no, never; contractions ``dont doesnt didnt`` (do-support: dropped whole),
       ``isnt arent wasnt werent cant cannot wont shouldnt wouldnt couldnt hasnt havent
       hadnt mustnt neednt`` → their positive base (``cant``/``cannot`` → ``can``, ``wont`` →
       ``will``); a ``do``/``does``/``did`` directly before a dropped ``not`` goes too
id, ms tidak, tak, bukan, belum, jangan, tiada
su     henteu, teu, lain, can, ulah
fr     ne, n, pas, jamais, non (and the elided ``j c d l m s t qu`` read as ``je ce de le me se
       te que``, so "je ne mange pas" matches "je mange" and "c'est" matches "ce n'est pas")
de     nicht, nie, niemals, kein/keine/keinen/keinem/keiner/keines (dropped, or read as the
       ``ein…`` article: "keine Katze" matches "eine Katze")
es     no, nunca, jamás
ru     не, нет, ни
zh     不 没 沒 别 別 未 无 無 非 勿 as words; 没有 不要 不是 (dropped, or read without their first
       character: 没有 → 有); any other word starting with 不 没 沒 未 别 別 may also be read
       without it (不喜欢 → 喜欢), jieba keeping some negated words whole
ja     ない なかっ ず ぬ ん じゃ では; the polite ``ませ ん`` reads as ``ます`` and ``ませ ん でし た``
       as ``まし た`` (食べません ↔ 食べます). Plain negatives change the verb's own form
       (食べる ↔ 食べ ない), which surface words cannot see: those are not caught
====== ==================================================================================

Any other language has no markers, so no rewrite of it is ever negation-only. In Chinese and
Japanese the words left are compared joined together, so a tokenizer splitting 有钱 one way and
没有 / 钱 the other does not matter.

>>> check_rewrite("Do not eat it.", "Eat it quickly!", "en")
EditCheck(edits=3, limit=5, within=True, unchanged=False, negation_only=False)
>>> check_rewrite("He can swim.", "He can't swim.", "en").negation_only
True
"""

from __future__ import annotations

import itertools
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from senseforge.kb.words import SEGMENTED_BY_TOKENIZER, chinese_words, japanese_words

__all__ = [
    "EditCheck",
    "EditOp",
    "check_rewrite",
    "edit_ops",
    "is_negation_only",
    "word_edits",
    "words",
]

EditOp = tuple[Literal["insert", "delete", "substitute"], str | None, str | None]
"""One edit: its kind, the old token (None for an insert), the new token (None for a delete)."""

DEFAULT_LIMIT = 5
"""CRoW's bound on the word-level edits between an original target and its rewrite."""

_ELISION_LANGS = frozenset({"fr", "it", "ca"})
_APOSTROPHES = re.compile("['\u2019\u02bc]")


def _strip_punctuation(token: str) -> str:
    return "".join(ch for ch in token if not unicodedata.category(ch).startswith("P"))


def words(text: str, lang: str) -> list[str]:
    """The tokens of ``text`` that the edit count compares: case-folded, punctuation dropped.

    Raises:
        MissingDependencyError: ``lang`` is ``ja`` or ``zh`` and the ``kb`` extra is missing.

    >>> words("Don't close your eyes, please!", "en")
    ['dont', 'close', 'your', 'eyes', 'please']
    >>> words("Je n'aime pas ça.", "fr")
    ['je', 'n', 'aime', 'pas', 'ça']
    """
    if lang in SEGMENTED_BY_TOKENIZER:
        raw = japanese_words()(text) if lang == "ja" else chinese_words()(text)
    else:
        if lang in _ELISION_LANGS:
            text = _APOSTROPHES.sub(" ", text)
        raw = text.split()
    tokens = (_strip_punctuation(token.casefold()) for token in raw)
    return [token for token in tokens if token]


def _distances(a: Sequence[str], b: Sequence[str]) -> list[list[int]]:
    table = [[j for j in range(len(b) + 1)]]
    for i, old in enumerate(a, start=1):
        row = [i]
        for j, new in enumerate(b, start=1):
            row.append(min(table[i - 1][j] + 1, row[j - 1] + 1, table[i - 1][j - 1] + (old != new)))
        table.append(row)
    return table


def word_edits(a: Sequence[str], b: Sequence[str]) -> int:
    """The Levenshtein distance between two token lists (insert, delete, substitute: 1 each).

    >>> word_edits(["eat", "it"], ["do", "not", "eat", "it"])
    2
    """
    return _distances(a, b)[-1][-1]


def edit_ops(a: Sequence[str], b: Sequence[str]) -> list[EditOp]:
    """One optimal alignment's edits turning ``a`` into ``b``, in order, matches left out.

    The alignment is traced back from the end of both lists, preferring at each step a match,
    then a substitution, then a deletion, then an insertion; so the result is deterministic and
    ``len(edit_ops(a, b)) == word_edits(a, b)``.

    >>> edit_ops(["eat", "it"], ["do", "not", "eat", "that"])
    [('insert', None, 'do'), ('insert', None, 'not'), ('substitute', 'it', 'that')]
    """
    table = _distances(a, b)
    ops: list[EditOp] = []
    i, j = len(a), len(b)
    while i > 0 or j > 0:
        here = table[i][j]
        if i > 0 and j > 0 and a[i - 1] == b[j - 1] and here == table[i - 1][j - 1]:
            i, j = i - 1, j - 1
        elif i > 0 and j > 0 and here == table[i - 1][j - 1] + 1:
            ops.append(("substitute", a[i - 1], b[j - 1]))
            i, j = i - 1, j - 1
        elif i > 0 and here == table[i - 1][j] + 1:
            ops.append(("delete", a[i - 1], None))
            i -= 1
        else:
            ops.append(("insert", None, b[j - 1]))
            j -= 1
    ops.reverse()
    return ops


# --- negation ------------------------------------------------------------------------------------

_Option = tuple[tuple[str, ...], int]
"""One reading of a token: the tokens it stands for once negation is stripped, negations stripped."""

_DROP: _Option = ((), 1)

_EN_BASES = {
    "isnt": "is",
    "arent": "are",
    "wasnt": "was",
    "werent": "were",
    "cant": "can",
    "cannot": "can",
    "wont": "will",
    "shouldnt": "should",
    "wouldnt": "would",
    "couldnt": "could",
    "hasnt": "has",
    "havent": "have",
    "hadnt": "had",
    "mustnt": "must",
    "neednt": "need",
}
_EN_DO = frozenset({"do", "does", "did"})
_DE_KEIN = ("kein", "keine", "keinen", "keinem", "keiner", "keines")
_FR_ELIDED = {"j": "je", "c": "ce", "d": "de", "l": "le", "m": "me", "s": "se", "t": "te", "qu": "que"}

_MARKERS: dict[str, frozenset[str]] = {
    "en": frozenset({"not", "no", "never", "dont", "doesnt", "didnt"}),
    "id": frozenset({"tidak", "tak", "bukan", "belum", "jangan", "tiada"}),
    "ms": frozenset({"tidak", "tak", "bukan", "belum", "jangan", "tiada"}),
    "su": frozenset({"henteu", "teu", "lain", "can", "ulah"}),
    "fr": frozenset({"ne", "n", "pas", "jamais", "non"}),
    "de": frozenset({"nicht", "nie", "niemals"}),
    "es": frozenset({"no", "nunca", "jamás"}),
    "ru": frozenset({"не", "нет", "ни"}),
    "zh": frozenset({"不", "没", "沒", "别", "別", "未", "无", "無", "非", "勿"}),
    "ja": frozenset({"ない", "なかっ", "ず", "ぬ", "ん", "じゃ", "では"}),
}
"""Tokens that are a negation and nothing else, per language (ours, partial)."""

_ZH_COMPOUNDS = frozenset({"没有", "不要", "不是"})
_ZH_PREFIXES = ("不", "没", "沒", "未", "别", "別")
_JA_POLITE = ((("ませ", "ん", "でし", "た"), ("まし", "た")), (("ませ", "ん"), ("ます",)))
_MAX_READINGS = 1024


def _options(tokens: Sequence[str], lang: str) -> list[list[_Option]]:
    """Each token's readings with negation stripped (language rules applied in order)."""
    markers = _MARKERS.get(lang, frozenset())
    out: list[list[_Option]] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        polite = next((pair for pair in _JA_POLITE if tuple(tokens[i : i + len(pair[0])]) == pair[0]), None)
        if lang == "ja" and polite is not None:
            out.append([(polite[1], 1)])
            i += len(polite[0])
            continue
        previous = tokens[i - 1] if i else None
        i += 1
        if lang == "en" and token in _EN_BASES:
            out.append([((_EN_BASES[token],), 1)])
        elif lang == "en" and token == "not" and previous in _EN_DO and out and out[-1] == [((previous,), 0)]:
            out[-1] = [((), 0)]  # do-support: "do not eat" reads as "eat"
            out.append([_DROP])
        elif token in markers:
            out.append([_DROP])
        elif lang == "de" and token in _DE_KEIN:
            out.append([_DROP, ((token[1:],), 1)])
        elif lang == "fr" and token in _FR_ELIDED:
            out.append([((_FR_ELIDED[token],), 0)])
        elif lang == "zh" and token in _ZH_COMPOUNDS:
            out.append([((token[1:],), 1), _DROP])
        elif lang == "zh" and len(token) > 1 and token.startswith(_ZH_PREFIXES):
            out.append([((token,), 0), ((token[1:],), 1)])
        else:
            out.append([((token,), 0)])
    return out


def _readings(tokens: Sequence[str], lang: str) -> dict[tuple[str, ...], set[int]]:
    """Every reading of ``tokens`` with negation stripped → the negation counts that reach it."""
    readings: dict[tuple[str, ...], set[int]] = {}
    choices = _options(tokens, lang)
    # past the cap, an ambiguous token keeps only its first reading
    total = 1
    for k, options in enumerate(choices):
        if total * len(options) > _MAX_READINGS:
            choices[k] = options[:1]
        total *= len(choices[k])
    joined = lang in SEGMENTED_BY_TOKENIZER
    for combo in itertools.product(*choices):
        kept = tuple(t for part, _ in combo for t in part)
        key = ("".join(kept),) if joined else kept
        readings.setdefault(key, set()).add(sum(n for _, n in combo))
    return readings


def is_negation_only(original_words: Sequence[str], rewrite_words: Sequence[str], lang: str) -> bool:
    """Whether the rewrite differs from the original by adding or removing negation alone.

    True when the lists differ, and stripping ``lang``'s negation markers (the module's table)
    leaves both the same with a different number of negations stripped. A language without a
    table never gives True.

    >>> is_negation_only(["do", "not", "eat", "it"], ["eat", "it"], "en")
    True
    >>> is_negation_only(["do", "not", "eat", "it"], ["eat", "it", "up"], "en")
    False
    """
    if list(original_words) == list(rewrite_words) or lang not in _MARKERS:
        return False
    before = _readings(original_words, lang)
    after = _readings(rewrite_words, lang)
    return any(counts - after[key] or after[key] - counts for key, counts in before.items() if key in after)


@dataclass(frozen=True)
class EditCheck:
    """The minimal-edit verdict on one rewrite."""

    edits: int
    """Word-level edit distance between original and rewrite (after :func:`words`)."""
    limit: int
    """The largest number of edits allowed."""
    within: bool
    """``edits <= limit``."""
    unchanged: bool
    """``edits == 0``: the rewrite is the original up to case and punctuation."""
    negation_only: bool
    """The rewrite only adds or removes a negation (:func:`is_negation_only`)."""


def check_rewrite(original: str, rewrite: str, lang: str, *, limit: int = DEFAULT_LIMIT) -> EditCheck:
    """Check a rewritten target against its original under CRoW's minimal-edit rule.

    Raises:
        ValueError: ``limit`` is negative.
        MissingDependencyError: ``lang`` is ``ja`` or ``zh`` and the ``kb`` extra is missing.

    >>> check_rewrite("Eat it.", "eat it", "en")
    EditCheck(edits=0, limit=5, within=True, unchanged=True, negation_only=False)
    """
    if limit < 0:
        raise ValueError(f"limit must be at least 0, got {limit}")
    old, new = words(original, lang), words(rewrite, lang)
    edits = word_edits(old, new)
    return EditCheck(
        edits=edits,
        limit=limit,
        within=edits <= limit,
        unchanged=edits == 0,
        negation_only=is_negation_only(old, new, lang),
    )
