#!/usr/bin/env python3
"""Benchmark the ConceptNet knowledge layer against the cost of merely reading the dump.

The script builds a synthetic ConceptNet 5.7 assertion dump (same five-column, tab-separated,
gzip-compressed format as ``conceptnet-assertions-5.7.0.csv.gz``, with a ConceptNet-like skew of
languages, relations and concept popularity), then measures in one run:

(a) the floor: ``gzip -dc DUMP | wc -l``, i.e. decompressing and scanning every line once;
(b) senseforge: ``senseforge kb import`` for a set of languages into a fresh store, followed by
    one ``senseforge kb question-sets --lang en,ja,…`` for all of those languages (one process, one
    scan of the store), as child processes, with their wall time and peak resident memory.

It prints the ratio (b)/(a) and peak RSS against the goals (ratio <= 1.25, peak RSS <= 2 GB).
Generating the dump is timed separately and is not part of the ratio; a dump of the same size
and seed is reused when it is already in the work directory.

Examples::

    python benchmarks/kb_import.py --rows 500000 --workdir /tmp/sf-bench --keep
    python benchmarks/kb_import.py --dump conceptnet-assertions-5.7.0.csv.gz --json out.json
    python benchmarks/kb_import.py --rows 1000000 --generate-only --keep

Run it on a machine that is otherwise idle: both measurements are wall-clock times.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import queue
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

# Bump when the generator's output changes, so that stale cached dumps are not reused.
GENERATOR_VERSION = 1
DEFAULT_ROWS = 34_000_000
DEFAULT_LANGS = ("en", "ja", "zh", "de", "fr", "pt", "ru", "nl")
GOAL_RATIO = 1.25
GOAL_PEAK_RSS_GB = 2.0
CHUNK_ROWS = 100_000
NODES_PER_ROW = 0.22  # ConceptNet 5.7: ~34M assertions over ~8M concept nodes (URLs not counted)

IntArray = npt.NDArray[np.int64]
ObjArray = npt.NDArray[np.object_]

# --------------------------------------------------------------------------------------------
# Languages
# --------------------------------------------------------------------------------------------

# The head of ConceptNet's language distribution with rough shares of assertion starts; every
# other language gets a Zipf-like share of what is left.
HEAD_LANGS: dict[str, float] = {
    "en": 0.125, "fr": 0.07, "de": 0.04, "it": 0.035, "ja": 0.035, "es": 0.03, "ru": 0.03,
    "fi": 0.025, "zh": 0.025, "pt": 0.018, "nl": 0.018, "la": 0.018, "pl": 0.01, "sv": 0.01,
    "ms": 0.01, "cs": 0.007, "ca": 0.007, "hu": 0.005, "ar": 0.005, "tr": 0.004, "ko": 0.004,
    "el": 0.004, "eo": 0.004, "is": 0.003, "nb": 0.003, "da": 0.003, "ga": 0.003, "mul": 0.003,
    "hy": 0.003, "ro": 0.003, "bg": 0.003, "uk": 0.003, "fa": 0.003, "he": 0.003, "hi": 0.003,
}  # fmt: skip
# Further real language codes found in ConceptNet; the remainder up to --languages is synthetic.
TAIL_LANGS = (
    "th", "vi", "gl", "lt", "sk", "sl", "hr", "sr", "et", "lv", "mk", "sq", "eu", "cy", "br", "gd", "gv", "kw",
    "fo", "nn", "non", "ang", "enm", "fro", "frm", "grc", "got", "oc", "ast", "an", "io", "ia", "ie", "vo", "nov",
    "jbo", "sh", "bs", "be", "kk", "ky", "uz", "tg", "tt", "ba", "cv", "ka", "az", "tk", "mn", "ur", "bn", "pa",
    "gu", "mr", "ne", "sa", "ta", "te", "kn", "ml", "si", "my", "km", "lo", "bo", "ug", "ps", "ku", "sd", "dv",
    "am", "ti", "so", "sw", "zu", "xh", "yo", "ig", "ha", "mg", "af", "lb", "fy", "li", "wa", "rm", "sc", "co",
    "nap", "scn", "vec", "lmo", "pms", "lij", "fur", "egl", "rup", "haw", "yi", "lad", "arc", "syc", "cop", "egy",
    "akk", "sux", "hit", "txb", "xto", "pi", "pra", "hbo", "ota", "chu", "orv", "osx", "odt", "ofs", "gmh", "goh",
    "dum", "nds", "stq", "frr", "vls", "zea", "ltz", "hsb", "dsb", "csb", "szl", "rue", "sga", "mga", "pgl", "wlm",
    "xcb", "ain", "mi", "sm", "to", "fj"
)  # fmt: skip

SCRIPT_OF: dict[str, str] = {
    "ja": "ja", "zh": "zh", "ko": "hangul", "ar": "arabic", "fa": "arabic", "ur": "arabic",
    "ps": "arabic", "sd": "arabic", "ug": "arabic", "ota": "arabic", "he": "hebrew", "yi": "hebrew",
    "hbo": "hebrew", "arc": "hebrew", "el": "greek", "grc": "greek", "cop": "greek",
    "hi": "devanagari", "mr": "devanagari", "ne": "devanagari", "sa": "devanagari", "pi": "devanagari",
    "pra": "devanagari", "th": "thai", "lo": "thai", "hy": "armenian", "ka": "georgian",
    "bn": "bengali", "ta": "tamil", "ru": "cyrillic", "uk": "cyrillic", "bg": "cyrillic",
    "be": "cyrillic", "mk": "cyrillic", "sr": "cyrillic", "kk": "cyrillic", "ky": "cyrillic",
    "tg": "cyrillic", "tt": "cyrillic", "ba": "cyrillic", "cv": "cyrillic", "mn": "cyrillic",
    "chu": "cyrillic", "orv": "cyrillic", "rue": "cyrillic",
}  # fmt: skip
LATIN_PLAIN = {"en", "la", "ms", "eo", "io", "ia", "vo", "sw", "zu", "xh", "so", "mg", "af", "nl", "id"}
LETTERS = "abcdefghijklmnopqrstuvwxyz"


def _language_codes(count: int, rng: np.random.Generator) -> list[str]:
    codes = list(HEAD_LANGS) + [c for c in TAIL_LANGS if c not in HEAD_LANGS]
    taken = set(codes)
    while len(codes) < count:  # synthetic three-letter codes for the long tail
        code = "".join(rng.choice(list(LETTERS), size=3))
        if code not in taken:
            taken.add(code)
            codes.append(code)
    return codes[:count]


def _language_weights(codes: Sequence[str]) -> npt.NDArray[np.float64]:
    head = np.array([HEAD_LANGS.get(c, 0.0) for c in codes])
    tail_idx = np.flatnonzero(head == 0.0)
    # the tail continues the head's Zipf-like decay from its last rank on
    last = min(HEAD_LANGS.values())
    ranks = len(HEAD_LANGS) + np.arange(1, len(tail_idx) + 1)
    head[tail_idx] = last * (len(HEAD_LANGS) / ranks) ** 1.1
    return np.asarray(head / head.sum(), dtype=np.float64)


# --------------------------------------------------------------------------------------------
# Word pools per script
# --------------------------------------------------------------------------------------------


def _chars(lo: int, hi: int) -> list[str]:
    return [chr(c) for c in range(lo, hi + 1)]


SCRIPT_LETTERS: dict[str, list[str]] = {
    "cyrillic": _chars(0x430, 0x44F),
    "greek": _chars(0x3B1, 0x3C9),
    "arabic": _chars(0x627, 0x64A),
    "hebrew": _chars(0x5D0, 0x5EA),
    "devanagari": _chars(0x915, 0x939) + _chars(0x93E, 0x94C),
    "thai": _chars(0xE01, 0xE2E),
    "armenian": _chars(0x561, 0x586),
    "georgian": _chars(0x10D0, 0x10F0),
    "bengali": _chars(0x995, 0x9B9),
    "tamil": _chars(0xB95, 0xBB9),
}
CONSONANTS = ["b", "c", "d", "f", "g", "h", "j", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "z",
              "ch", "sh", "th", "st", "tr", "br", "pl", "gr"]  # fmt: skip
VOWELS = ["a", "e", "i", "o", "u", "a", "e", "o", "y", "ea", "ou", "ie"]
ACCENTED = ["é", "è", "ä", "ö", "ü", "ø", "å", "ñ", "ç", "ą", "ş", "ő", "ì", "ú", "ß", "æ"]


def _word_pool(script: str, size: int, rng: np.random.Generator) -> ObjArray:
    """``size`` distinct-ish words in ``script`` (one word: no spaces or underscores)."""
    if script in ("latin", "latin_ext"):
        syll = [c + v for c in CONSONANTS for v in VOWELS] + [v + c for v in VOWELS[:6] for c in ("n", "r", "s", "l")]
        if script == "latin_ext":
            syll += [c + a for c in CONSONANTS[:5] for a in ACCENTED]
        parts = np.array(syll, dtype=object)
        n_syll = rng.choice([1, 2, 3, 4], size=size, p=[0.2, 0.48, 0.25, 0.07])
        words: list[str] = []
        for k in (1, 2, 3, 4):
            m = int((n_syll == k).sum())
            if m:
                grid = parts[rng.integers(0, len(parts), size=(m, k))]
                words += ["".join(row) for row in grid.tolist()]
        return np.array(words, dtype=object)
    if script == "zh":
        letters = _chars(0x4E00, 0x4E00 + 3500)
        lengths = [1, 2, 2, 2, 3]
    elif script == "ja":
        kanji = _chars(0x4E00, 0x4E00 + 2500)
        hira = _chars(0x3042, 0x3093)
        kata = _chars(0x30A2, 0x30F3)
        out = []
        kinds = rng.choice(3, size=size, p=[0.45, 0.25, 0.3])
        for kind in kinds.tolist():
            if kind == 0:
                out.append("".join(rng.choice(kanji, size=int(rng.integers(1, 3)))))
            elif kind == 1:
                out.append("".join(rng.choice(kanji, size=1)) + "".join(rng.choice(hira, size=int(rng.integers(1, 4)))))
            else:
                out.append("".join(rng.choice(kata, size=int(rng.integers(2, 6)))))
        return np.array(out, dtype=object)
    elif script == "hangul":
        letters = _chars(0xAC00, 0xAC00 + 2350)
        lengths = [1, 2, 2, 3, 3, 4]
    else:
        letters = SCRIPT_LETTERS[script]
        lengths = [3, 4, 5, 5, 6, 6, 7, 8, 9]
    arr = np.array(letters, dtype=object)
    lens = rng.choice(lengths, size=size)
    words = []
    for k in sorted(set(lens.tolist())):
        m = int((lens == k).sum())
        grid = arr[rng.integers(0, len(arr), size=(m, k))]
        words += ["".join(row) for row in grid.tolist()]
    return np.array(words, dtype=object)


def _script(code: str) -> str:
    if code in SCRIPT_OF:
        return SCRIPT_OF[code]
    return "latin" if code in LATIN_PLAIN else "latin_ext"


# Number of words in a concept text (1-6), and the node-URI suffixes after the text.
WORD_COUNTS = np.array([1, 2, 3, 4, 5, 6])
WORD_COUNT_P = np.array([0.6, 0.25, 0.09, 0.035, 0.015, 0.01])
WN_SENSES = (
    "act", "artifact", "person", "communication", "cognition", "object", "food", "plant", "animal", "location",
    "state", "attribute", "event", "motion", "body", "feeling", "possession", "process", "quantity", "relation",
    "shape", "substance", "time", "group", "phenomenon", "change", "contact", "creation", "competition",
    "consumption", "emotion", "perception", "social", "stative", "weather"
)  # fmt: skip
POS = ("n", "v", "a", "r", "s")
POS_P = np.array([0.62, 0.2, 0.12, 0.04, 0.02])


def _suffixes(code: str) -> tuple[list[str], npt.NDArray[np.float64]]:
    """Sense suffixes of node URIs and how often each is used: mostly a bare part of speech."""
    groups = [
        ([f"/{p}" for p in POS], 0.55),
        (["/n/wn", "/v/wn", "/a/wn"], 0.1),
        ([f"/n/wn/{s}" for s in WN_SENSES] + [f"/v/wn/{s}" for s in WN_SENSES[::3]], 0.2),
        (
            [f"/n/wikt/{lg}_{i}" for lg in ("en", "fr", "de") for i in (1, 2, 3)] + ["/v/wikt/en_1", "/a/wikt/en_1"],
            0.15,
        ),
    ]
    if code == "ja":
        groups.append(([f"/n/jmdict/{i}" for i in range(1, 6)], 0.15))
    out: list[str] = []
    probs: list[float] = []
    for items, share in groups:
        out += items
        probs += [share / len(items)] * len(items)
    p = np.array(probs)
    return out, p / p.sum()


@dataclass
class Vocabulary:
    """All concept nodes, sorted like the dump (by language code, then URI)."""

    codes: list[str]
    uris: ObjArray  # global node id -> URI
    offsets: IntArray  # language index -> first global id (len = n_langs + 1)
    popular: IntArray  # offsets[L] + rank -> global id of the rank-th most popular node of L

    def lang_of(self, gids: IntArray) -> IntArray:
        return np.searchsorted(self.offsets, gids, side="right").astype(np.int64) - 1

    def sample(self, langs: IntArray, rng: np.random.Generator, core: float = 1.0) -> IntArray:
        """Nodes of the given languages, by a Zipf-Mandelbrot law p(r) ~ 1/(r + q) over popularity rank r.

        ``core`` < 1 draws from that fraction of each language's most popular nodes only (everyday
        concepts, for the commonsense relations).
        """
        full = (self.offsets[1:] - self.offsets[:-1])[langs]
        if core < 1.0:
            full = np.minimum(full, np.maximum(50, (full * core).astype(np.int64)))
        size = full.astype(np.float64)
        q = np.maximum(1.0, size / 3000.0)
        u = rng.random(len(langs))
        rank = np.floor(q * np.power((size + q) / q, u) - q).astype(np.int64)
        np.clip(rank, 0, size.astype(np.int64) - 1, out=rank)
        gids: IntArray = self.popular[self.offsets[langs] + rank]
        return gids


def _texts(pool: ObjArray, n: int, joiner: str, rng: np.random.Generator) -> list[str]:
    counts = rng.choice(WORD_COUNTS, size=n, p=WORD_COUNT_P)
    if not joiner:  # CJK: fewer, shorter compounds
        counts = np.minimum(counts, 3)
    out: list[str] = []
    for k in range(1, 7):
        m = int((counts == k).sum())
        if not m:
            continue
        grid = pool[rng.integers(0, len(pool), size=(m, k))]
        out += grid[:, 0].tolist() if k == 1 else [joiner.join(row) for row in grid.tolist()]
    return out


def languages(n_langs: int, rng: np.random.Generator) -> tuple[list[str], npt.NDArray[np.float64]]:
    """Language codes sorted as in the dump, with their shares of assertion starts."""
    codes = _language_codes(n_langs, rng)
    weights = _language_weights(codes)
    order = sorted(range(len(codes)), key=codes.__getitem__)
    return [codes[i] for i in order], weights[order]


def build_vocabulary(
    rows: int, codes: list[str], weights: npt.NDArray[np.float64], rng: np.random.Generator
) -> Vocabulary:
    total = max(1000, int(rows * NODES_PER_ROW))
    pools: dict[str, ObjArray] = {}
    uris_parts: list[ObjArray] = []
    popular_parts: list[IntArray] = []
    offsets = [0]
    for code, w in zip(codes, weights.tolist(), strict=True):
        script = _script(code)
        if script not in pools:
            pool_size = int(min(60_000, max(2_000, total * 0.02)))
            pools[script] = _word_pool(script, pool_size, rng)
        joiner = "" if script in ("zh", "ja") else "_"
        n_nodes = max(40, int(total * w))
        n_bare = max(30, int(n_nodes * 0.8))
        bare: dict[str, None] = {}
        while len(bare) < n_bare:
            bare.update(dict.fromkeys(_texts(pools[script], int((n_bare - len(bare)) * 1.15) + 8, joiner, rng)))
        bare_list = list(bare)[:n_bare]
        suffix_list, suffix_p = _suffixes(code)
        suffixes = np.array(suffix_list, dtype=object)[rng.choice(len(suffix_list), size=n_nodes - n_bare, p=suffix_p)]
        bases = np.array(bare_list, dtype=object)[rng.integers(0, n_bare, size=n_nodes - n_bare)]
        variants = [b + s for b, s in zip(bases.tolist(), suffixes.tolist(), strict=True)]
        prefix = f"/c/{code}/"
        uris = sorted({prefix + t for t in bare_list} | {prefix + t for t in variants})
        uris_parts.append(np.array(uris, dtype=object))
        popular_parts.append(offsets[-1] + rng.permutation(len(uris)).astype(np.int64))
        offsets.append(offsets[-1] + len(uris))
    return Vocabulary(
        codes=codes,
        uris=np.concatenate(uris_parts),
        offsets=np.array(offsets, dtype=np.int64),
        popular=np.concatenate(popular_parts),
    )


# --------------------------------------------------------------------------------------------
# Relations, sources and the JSON info column
# --------------------------------------------------------------------------------------------

COMMONSENSE: dict[str, float] = {
    "AtLocation": 0.2, "UsedFor": 0.16, "CapableOf": 0.14, "HasProperty": 0.1, "HasSubevent": 0.09,
    "HasPrerequisite": 0.08, "Causes": 0.06, "PartOf": 0.04, "HasA": 0.03, "MotivatedByGoal": 0.03,
    "ReceivesAction": 0.02, "Desires": 0.02, "CausesDesire": 0.015, "HasFirstSubevent": 0.012,
    "HasLastSubevent": 0.01, "MadeOf": 0.01, "NotDesires": 0.01, "LocatedNear": 0.01,
    "NotCapableOf": 0.005, "NotHasProperty": 0.005, "ObstructedBy": 0.004, "CreatedBy": 0.002,
}  # fmt: skip
COMMONSENSE_SHARE = 0.03
COMMONSENSE_CORE = 0.05  # commonsense edges link the 5% most popular concepts of a language
# Other relations: share of all rows, probability that the end is in another language.
LEXICAL: dict[str, tuple[float, float]] = {
    "ExternalURL": (0.245, 0.0), "RelatedTo": (0.255, 0.35), "Synonym": (0.14, 0.65),
    "FormOf": (0.11, 0.0), "IsA": (0.045, 0.02), "DerivedFrom": (0.035, 0.05),
    "EtymologicallyRelatedTo": (0.016, 0.6), "Antonym": (0.012, 0.05), "HasContext": (0.007, 1.0),
    "EtymologicallyDerivedFrom": (0.002, 0.7), "SimilarTo": (0.001, 0.0), "DistinctFrom": (0.0004, 0.0),
    "MannerOf": (0.0004, 0.0), "SymbolOf": (0.0001, 1.0), "InstanceOf": (0.00004, 0.0),
    "Entails": (0.00001, 0.0), "dbpedia/genre": (0.0002, 0.0), "dbpedia/occupation": (0.0001, 0.0),
    "dbpedia/language": (0.00005, 0.0), "dbpedia/field": (0.00005, 0.0), "dbpedia/knownFor": (0.00005, 0.0),
    "dbpedia/capital": (0.00002, 0.0), "dbpedia/product": (0.00002, 0.0), "dbpedia/influencedBy": (0.00002, 0.0),
    "dbpedia/genus": (0.00003, 0.0), "dbpedia/leader": (0.00001, 0.0),
}  # fmt: skip
# Where commonsense assertions start: mostly English, then the OMCS sister projects.
COMMONSENSE_LANGS = {"en": 0.52, "zh": 0.12, "ja": 0.08, "pt": 0.07, "fr": 0.05, "de": 0.05, "nl": 0.04,
                     "it": 0.015, "es": 0.015, "ru": 0.01, "ko": 0.01}  # fmt: skip
# Where cross-language edges end.
CROSS_LANGS = {"en": 0.5, "fr": 0.07, "de": 0.05, "it": 0.03, "es": 0.03, "ja": 0.03, "ru": 0.03,
               "nl": 0.02, "pt": 0.02, "zh": 0.02, "fi": 0.02, "la": 0.02, "pl": 0.01, "sv": 0.01}  # fmt: skip

SURFACE: dict[str, str] = {
    "AtLocation": "You are likely to find [[{s}]] in [[{e}]]", "UsedFor": "[[{s}]] is used for [[{e}]]",
    "CapableOf": "[[{s}]] can [[{e}]]", "HasProperty": "[[{s}]] is [[{e}]]", "IsA": "[[{s}]] is a type of [[{e}]]",
    "PartOf": "[[{s}]] is part of [[{e}]]", "HasA": "[[{s}]] has [[{e}]]", "Causes": "The effect of [[{s}]] is [[{e}]]",
    "Desires": "[[{s}]] wants [[{e}]]", "HasSubevent": "Something that might happen while [[{s}]] is [[{e}]]",
    "HasPrerequisite": "If you want to [[{s}]] then you should [[{e}]]", "MadeOf": "[[{s}]] is made of [[{e}]]",
    "MotivatedByGoal": "You would [[{s}]] because you want [[{e}]]", "RelatedTo": "[[{s}]] is related to [[{e}]]",
    "Synonym": "[[{s}]] is a translation of [[{e}]]", "Antonym": "[[{s}]] is the opposite of [[{e}]]",
    "CausesDesire": "[[{s}]] would make you want to [[{e}]]", "ReceivesAction": "[[{s}]] can be [[{e}]]",
}  # fmt: skip
OMCS_ACTIVITIES = ("omcs1_possibly_free_text", "template", "omcs1_possibly_free_text", "commons2_template",
                   "csamoa4_self_rating", "nadya.jp", "ptt/petgame")  # fmt: skip


def _info(dataset: str, license_: str, sources: str, weight: str, surface: str = "") -> str:
    return f'{{"dataset": "{dataset}", "license": "{license_}", "sources": [{sources}]{surface}, "weight": {weight}}}'


def _src(contributor: str, process: str = "", activity: str = "") -> str:
    parts = []
    if activity:
        parts.append(f'"activity": "{activity}"')
    if contributor:
        parts.append(f'"contributor": "{contributor}"')
    if process:
        parts.append(f'"process": "{process}"')
    return "{" + ", ".join(parts) + "}"


def _wikt(lang: str) -> str:
    return _src(f"/s/resource/wiktionary/{lang}", "/s/process/wikiparsec/2")


def _text(uri: str) -> str:
    return uri.split("/", 4)[3].replace("_", " ")


@dataclass
class Source:
    """One dataset that contributes rows to a relation: a fixed info string or a per-row renderer."""

    prob: float
    fixed: tuple[str, ...] = ()  # candidate info strings, chosen uniformly per row
    render: Callable[[list[str], list[str], np.random.Generator], list[str]] | None = None


def _fixed_wikt(weight: str = "1.0") -> list[Source]:
    return [
        Source(0.55, (_info("/d/wiktionary/en", "cc:by-sa/4.0", _wikt("en"), weight),)),
        Source(0.3, (_info("/d/wiktionary/fr", "cc:by-sa/4.0", _wikt("fr"), weight),)),
        Source(
            0.15,
            (
                _info("/d/wiktionary/de", "cc:by-sa/4.0", _wikt("de"), weight),
                _info("/d/wiktionary/de", "cc:by-sa/4.0", _wikt("de") + ", " + _wikt("de"), weight),
            ),
        ),
    ]


WORDNET_SRC = _src("/s/resource/wordnet/rdf/3.1")
VERBOSITY_SRC = _src("/s/resource/verbosity", "/s/process/split_words") + ", " + _src("/s/resource/verbosity")
FLOAT_WEIGHTS = np.array([f"{w:.3f}" for w in np.linspace(0.1, 3.0, 2901)], dtype=object)


def _surface_renderer(
    rel: str, dataset: str, license_: str, sources: str, weight: str | None
) -> Callable[[list[str], list[str], np.random.Generator], list[str]]:
    frame = SURFACE.get(rel, "[[{s}]] " + rel.lower() + " [[{e}]]")

    def render(starts: list[str], ends: list[str], rng: np.random.Generator) -> list[str]:
        weights = [weight] * len(starts) if weight else FLOAT_WEIGHTS[rng.integers(0, 2901, len(starts))].tolist()
        out = []
        for s, e, w in zip(starts, ends, weights, strict=True):
            st, et = _text(s), _text(e)
            surface = f', "surfaceEnd": "{et}", "surfaceStart": "{st}", "surfaceText": "{frame.format(s=st, e=et)}"'
            out.append(_info(dataset, license_, sources, w, surface))
        return out

    return render


def _omcs_renderer(rel: str) -> Callable[[list[str], list[str], np.random.Generator], list[str]]:
    frame = SURFACE.get(rel, "[[{s}]] " + rel.lower() + " [[{e}]]")

    def render(starts: list[str], ends: list[str], rng: np.random.Generator) -> list[str]:
        n = len(starts)
        votes = rng.choice([0, 1, 2, 3], size=n, p=[0.55, 0.3, 0.1, 0.05]).tolist()
        users = rng.integers(1, 40_000, size=(n, 4)).tolist()
        acts = rng.integers(0, len(OMCS_ACTIVITIES), size=n).tolist()
        out = []
        for s, e, v, u, a in zip(starts, ends, votes, users, acts, strict=True):
            lang = s.split("/", 3)[2]
            srcs = [_src(f"/s/contributor/omcs/user{u[0]}", activity=f"/s/activity/omcs/{OMCS_ACTIVITIES[a]}")]
            srcs += [_src(f"/s/contributor/omcs/user{u[i + 1]}", activity="/s/activity/omcs/vote") for i in range(v)]
            st, et = _text(s), _text(e)
            surface = f', "surfaceEnd": "{et}", "surfaceStart": "{st}", "surfaceText": "{frame.format(s=st, e=et)}"'
            out.append(_info(f"/d/conceptnet/4/{lang}", "cc:by/4.0", ", ".join(srcs), f"{1.0 + v:.1f}", surface))
        return out

    return render


def _sources_for(rel: str) -> list[Source]:
    if rel in COMMONSENSE:
        return [
            Source(0.9, render=_omcs_renderer(rel)),
            Source(0.1, render=_surface_renderer(rel, "/d/verbosity", "cc:by/4.0", VERBOSITY_SRC, None)),
        ]
    if rel == "RelatedTo":
        return [
            *_fixed_wikt(),
            Source(0.08, render=_surface_renderer(rel, "/d/verbosity", "cc:by/4.0", VERBOSITY_SRC, None)),
        ]
    if rel in ("Synonym", "IsA", "Antonym", "SimilarTo", "MannerOf", "InstanceOf", "Entails"):
        return [
            *_fixed_wikt(),
            Source(0.18, render=_surface_renderer(rel, "/d/wordnet/3.1", "cc:by/4.0", WORDNET_SRC, "2.0")),
            Source(0.1, (_info("/d/jmdict", "cc:by-sa/4.0", _src("/s/resource/jmdict/1.07"), "1.0"),)),
            Source(0.05, (_info("/d/cc_cedict", "cc:by-sa/4.0", _src("/s/resource/cc_cedict/2017-10"), "1.0"),)),
            Source(0.05, (_info("/d/dbpedia/en", "cc:by-sa/4.0", _src("/s/resource/dbpedia/2015/en"), "0.5"),)),
        ]
    if rel.startswith("Etymologically"):
        return _fixed_wikt("0.25")
    if rel.startswith("dbpedia/"):
        return [Source(1.0, (_info("/d/dbpedia/en", "cc:by-sa/4.0", _src("/s/resource/dbpedia/2015/en"), "0.5"),))]
    if rel == "SymbolOf":
        return [Source(1.0, (_info("/d/emoji", "cc:by/4.0", _src("/s/resource/unicode/cldr/32.0.1"), "1.0"),))]
    return _fixed_wikt()


URL_INFOS = (
    _info("/d/dbpedia/en", "cc:by-sa/4.0", _src("/s/resource/dbpedia/2015/en"), "1.0"),
    _info("/d/wordnet/3.1", "cc:by-sa/4.0", WORDNET_SRC, "1.0"),
    _info("/d/opencyc", "cc:by/4.0", _src("/s/resource/opencyc/2012"), "1.0"),
)


def _external_urls(starts: list[str], rng: np.random.Generator) -> tuple[list[str], list[str]]:
    kind = rng.choice(3, size=len(starts), p=[0.8, 0.14, 0.06]).tolist()
    nums = rng.integers(100_000_000, 115_000_000, size=len(starts)).tolist()
    ends, infos = [], []
    for s, k, num in zip(starts, kind, nums, strict=True):
        _, _, lang, text = s.split("/", 4)[:4]
        if k == 0 or lang != "en":  # WordNet and OpenCyc links exist for English only
            ends.append(f"http://{lang}.dbpedia.org/resource/{text[:1].upper()}{text[1:]}")
            k = 0
        elif k == 1:
            ends.append(f"http://wordnet-rdf.princeton.edu/wn31/{num}-n")
        else:
            ends.append(f"http://sw.opencyc.org/2012/05/10/concept/en/{text.title()}")
        infos.append(URL_INFOS[k])
    return ends, infos


# --------------------------------------------------------------------------------------------
# The generator
# --------------------------------------------------------------------------------------------


def _lang_profile(
    codes: Sequence[str], weights: npt.NDArray[np.float64], head: dict[str, float]
) -> npt.NDArray[np.float64]:
    p = np.array([head.get(c, 0.0) for c in codes])
    p = 0.95 * p / p.sum() + 0.05 * weights
    return np.asarray(p / p.sum(), dtype=np.float64)


@dataclass
class GenStats:
    rows: int
    bytes_uncompressed: int
    bytes_compressed: int
    seconds: float
    vocabulary_seconds: float
    nodes: int
    languages: int
    compressor: str
    en_en_rows: int = 0
    commonsense_rows: int = 0
    relation_rows: dict[str, int] = field(default_factory=dict)

    @property
    def rows_per_second(self) -> float:
        return self.rows / self.seconds if self.seconds else 0.0


def _compressor(threads: int) -> list[str]:
    pigz = shutil.which("pigz")
    if pigz:
        return [pigz, "-1", "-c", "-p", str(max(1, threads))]
    gzip = shutil.which("gzip")
    if gzip:
        return [gzip, "-1", "-c"]
    raise SystemExit("error: neither pigz nor gzip is on PATH; one is needed to compress the synthetic dump")


def _enlarge_pipe(fd: int) -> None:
    try:
        import fcntl

        fcntl.fcntl(fd, 1031, 1 << 20)  # F_SETPIPE_SZ (Linux only)
    except (ImportError, OSError):
        pass


def generate_dump(path: Path, rows: int, seed: int, n_langs: int, threads: int, progress: bool = True) -> GenStats:
    """Write ``rows`` synthetic ConceptNet assertions to ``path`` (gzip), sorted like the real dump."""
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    codes, weights = languages(n_langs, rng)
    vocab = build_vocabulary(rows, codes, weights, rng)
    t_vocab = time.perf_counter() - t0
    code_idx = {c: i for i, c in enumerate(codes)}
    cs_profile = _lang_profile(codes, weights, COMMONSENSE_LANGS)
    cross_profile = _lang_profile(codes, weights, CROSS_LANGS)
    en = code_idx["en"]

    relations: dict[str, tuple[float, float]] = dict(LEXICAL)
    for rel, w in COMMONSENSE.items():
        relations[rel] = (COMMONSENSE_SHARE * w, 0.0)
    names = sorted(relations, key=lambda r: "/r/" + r)
    shares = np.array([relations[r][0] for r in names])
    counts = rng.multinomial(rows, shares / shares.sum())

    cmd = _compressor(threads)
    tmp = path.with_name(path.name + ".partial")
    stats = GenStats(rows, 0, 0, 0.0, t_vocab, len(vocab.uris), len(codes), Path(cmd[0]).name + " -1")
    chunks: queue.Queue[bytes | None] = queue.Queue(maxsize=6)
    with open(tmp, "wb") as out:
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=out)
        assert proc.stdin is not None
        _enlarge_pipe(proc.stdin.fileno())
        failure: list[BaseException] = []

        def writer() -> None:
            assert proc.stdin is not None
            try:
                while (chunk := chunks.get()) is not None:
                    proc.stdin.write(chunk)
            except BaseException as exc:  # keep draining so the producer never blocks forever
                failure.append(exc)
                while chunks.get() is not None:
                    pass

        thread = threading.Thread(target=writer, daemon=True)
        thread.start()
        done = 0
        last_report = time.perf_counter()
        try:
            for rel, n_rel in zip(names, counts.tolist(), strict=True):
                stats.relation_rows[rel] = n_rel
                if failure:
                    break
                if n_rel == 0:
                    continue
                p_cross = relations[rel][1]
                commonsense = rel in COMMONSENSE
                profile = cs_profile if commonsense else weights
                start_langs = rng.choice(len(codes), size=n_rel, p=profile)
                core = COMMONSENSE_CORE if commonsense else 1.0
                gids = np.sort(vocab.sample(start_langs, rng, core))
                r = "/r/" + rel
                sources = _sources_for(rel) if rel != "ExternalURL" else []
                src_p = np.array([s.prob for s in sources]) / sum(s.prob for s in sources) if sources else None
                for a in range(0, n_rel, CHUNK_ROWS):
                    g = gids[a : a + CHUNK_ROWS]
                    n = len(g)
                    starts = vocab.uris[g].tolist()
                    if rel == "ExternalURL":
                        ends, infos = _external_urls(starts, rng)
                    else:
                        slang = vocab.lang_of(g)
                        if rel == "HasContext":
                            elang = np.where(rng.random(n) < 0.8, en, rng.choice(len(codes), size=n, p=cross_profile))
                        elif p_cross > 0:
                            cross = rng.random(n) < p_cross
                            elang = np.where(cross, rng.choice(len(codes), size=n, p=cross_profile), slang)
                        else:
                            elang = slang
                        egid = vocab.sample(elang, rng, core)
                        ends = vocab.uris[egid].tolist()
                        if commonsense:
                            stats.commonsense_rows += n
                        stats.en_en_rows += int(((slang == en) & (elang == en)).sum())
                        assert sources and src_p is not None
                        which = rng.choice(len(sources), size=n, p=src_p)
                        info_arr = np.empty(n, dtype=object)
                        for k in np.unique(which).tolist():
                            idx = np.flatnonzero(which == k)
                            src = sources[k]
                            if src.render is not None:
                                info_arr[idx] = src.render([starts[i] for i in idx], [ends[i] for i in idx], rng)
                            else:
                                fixed = np.array(src.fixed, dtype=object)
                                info_arr[idx] = fixed[rng.integers(0, len(fixed), size=len(idx))]
                        infos = info_arr.tolist()
                    # an external URL appears in the assertion URI as "/http://..."
                    head = f"/a/[{r}/,"
                    sep = "/," if rel != "ExternalURL" else "/,/"
                    text = "".join(
                        [
                            f"{head}{s}{sep}{e}/]\t{r}\t{s}\t{e}\t{i}\n"
                            for s, e, i in zip(starts, ends, infos, strict=True)
                        ]
                    )
                    data = text.encode("utf-8")
                    stats.bytes_uncompressed += len(data)
                    if failure:
                        break
                    chunks.put(data)
                    done += n
                    now = time.perf_counter()
                    if progress and now - last_report > 5:
                        last_report = now
                        rate = done / (now - t0)
                        print(f"  generated {done:,}/{rows:,} rows ({rate:,.0f} rows/s)", file=sys.stderr, flush=True)
        except BaseException:
            proc.kill()
            tmp.unlink(missing_ok=True)
            raise
        finally:
            chunks.put(None)
            thread.join()
            with contextlib.suppress(BrokenPipeError):
                proc.stdin.close()
            rc = proc.wait()
    if failure or rc != 0:
        tmp.unlink(missing_ok=True)
        why = f"stopped accepting data: {failure[0]}" if failure else f"exited with status {rc}"
        raise RuntimeError(f"the compressor ({shlex.join(cmd)}) {why}")
    os.replace(tmp, path)
    stats.seconds = time.perf_counter() - t0
    stats.bytes_compressed = path.stat().st_size
    return stats


# --------------------------------------------------------------------------------------------
# Measurements
# --------------------------------------------------------------------------------------------


@dataclass
class Step:
    name: str
    argv: list[str]
    seconds: float
    peak_rss_bytes: int
    returncode: int
    log: str


def run_child(name: str, argv: list[str], log: Path) -> Step:
    """Run ``argv`` with its output in ``log``; wall time and the child's own peak RSS (via wait4)."""
    with open(log, "wb") as fh:
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    # ru_maxrss is in KiB on Linux, bytes on macOS
    scale = 1 if sys.platform == "darwin" else 1024
    return Step(name, argv, seconds, usage.ru_maxrss * scale, proc.returncode, str(log))


def measure_floor(dump: Path) -> tuple[float, int]:
    """Wall time of ``gzip -dc DUMP | wc -l`` and the number of lines it counted."""
    cmd = f"set -o pipefail; gzip -dc {shlex.quote(str(dump))} | wc -l"
    t0 = time.perf_counter()
    res = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - t0
    if res.returncode != 0:
        raise SystemExit(f"error: the floor measurement failed: {cmd}\n{res.stderr.strip()}")
    return seconds, int(res.stdout.split()[0])


def senseforge_kb_available() -> tuple[bool, str, float]:
    """Whether ``senseforge kb`` runs here, its output, and the wall time of that call (CLI start-up)."""
    t0 = time.perf_counter()
    res = subprocess.run(
        [sys.executable, "-m", "senseforge", "kb", "--help"], capture_output=True, text=True, check=False
    )
    seconds = time.perf_counter() - t0
    out = (res.stdout + res.stderr).strip()
    ok = res.returncode == 0 and "import" in res.stdout and "question-sets" in res.stdout
    return ok, out, seconds


def _tail(path: str, lines: int = 25) -> str:
    try:
        return "\n".join(Path(path).read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def _count_lines(path: Path) -> int:
    try:
        with open(path, "rb") as fh:
            return sum(1 for line in fh if line.strip())
    except OSError:
        return -1


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------


def _gb(n: float) -> str:
    return f"{n / 1e9:.2f} GB"


def _mb(n: float) -> str:
    return f"{n / 1e6:,.1f} MB"


def print_table(rows: list[tuple[str, str]]) -> None:
    width = max(len(k) for k, _ in rows)
    print()
    for k, v in rows:
        print(f"  {k.ljust(width)}  {v}")
    print()


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="kb_import.py",
        description=(
            "Measure 'senseforge kb import' plus 'kb question-sets' on a ConceptNet-sized dump against the "
            "floor of decompressing and counting its lines (gzip -dc | wc -l). Goals: ratio <= "
            f"{GOAL_RATIO}, peak RSS <= {GOAL_PEAK_RSS_GB:g} GB."
        ),
        epilog="Generation of the synthetic dump is timed separately and is not part of the ratio.",
    )
    ap.add_argument(
        "--rows", type=int, default=DEFAULT_ROWS, help="assertions in the synthetic dump (default: %(default)s)"
    )
    ap.add_argument("--seed", type=int, default=0, help="seed for the synthetic dump (default: %(default)s)")
    ap.add_argument(
        "--workdir",
        type=Path,
        default=Path(tempfile.gettempdir()) / "senseforge-kb-bench",
        help="where the dump is written and looked for, and where the store goes (default: %(default)s)",
    )
    ap.add_argument(
        "--keep",
        action="store_true",
        help="keep the generated dump (for reuse), the store and the logs (a dump found in --workdir is never deleted)",
    )
    ap.add_argument("--dump", type=Path, help="measure this existing dump (.csv or .csv.gz) instead of generating one")
    ap.add_argument("--languages", type=int, default=300, help="languages in the synthetic dump (default: %(default)s)")
    ap.add_argument(
        "--langs",
        nargs="+",
        metavar="LANG",
        default=list(DEFAULT_LANGS),
        help=f"ConceptNet codes to import and extract question sets for (default: {' '.join(DEFAULT_LANGS)})",
    )
    ap.add_argument("--n", type=int, default=6000, help="question sets requested per language (default: %(default)s)")
    ap.add_argument("--qs-seed", type=int, default=0, help="seed passed to 'kb question-sets' (default: %(default)s)")
    ap.add_argument(
        "--threads",
        type=int,
        default=os.cpu_count() or 1,
        help="pigz threads, when pigz is used (default: %(default)s)",
    )
    ap.add_argument("--generate-only", action="store_true", help="write the dump, measure the floor and stop")
    ap.add_argument("--json", type=Path, metavar="FILE", help="also write the figures to FILE as JSON")
    return ap.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    args.workdir.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {"rows_requested": args.rows, "seed": args.seed, "langs": args.langs}
    generated = False

    # 1. the dump
    if args.dump is not None:
        dump = args.dump
        if not dump.is_file():
            raise SystemExit(f"error: no such dump: {dump}")
        print(f"dump: {dump} (given)")
    else:
        dump = args.workdir / f"conceptnet-synthetic-{args.rows}-seed{args.seed}-g{GENERATOR_VERSION}.csv.gz"
        if dump.is_file():
            print(f"dump: {dump} (reused)")
        else:
            print(f"generating {args.rows:,} synthetic assertions into {dump} ...", flush=True)
            gen = generate_dump(dump, args.rows, args.seed, args.languages, args.threads)
            generated = True
            print(
                f"generated in {gen.seconds:.1f} s ({gen.rows_per_second:,.0f} rows/s; vocabulary of "
                f"{gen.nodes:,} nodes in {gen.languages} languages took {gen.vocabulary_seconds:.1f} s), "
                f"{_mb(gen.bytes_uncompressed)} raw ({gen.bytes_uncompressed / max(1, gen.rows):.0f} B/row), "
                f"{_mb(gen.bytes_compressed)} compressed with {gen.compressor}; "
                f"en-en rows {gen.en_en_rows / max(1, gen.rows):.1%}, commonsense rows "
                f"{gen.commonsense_rows / max(1, gen.rows):.1%}"
            )
            report["generation"] = {**asdict(gen), "rows_per_second": gen.rows_per_second}
    dump_bytes = dump.stat().st_size
    report["dump"] = str(dump)
    report["dump_bytes"] = dump_bytes

    # 2a. the floor
    if dump.name.endswith(".gz"):
        floor_s, lines = measure_floor(dump)
        floor_cmd = "gzip -dc DUMP | wc -l"
    else:
        t0 = time.perf_counter()
        res = subprocess.run(["wc", "-l", str(dump)], capture_output=True, text=True, check=True)
        floor_s, lines = time.perf_counter() - t0, int(res.stdout.split()[0])
        floor_cmd = "wc -l DUMP"
    report.update(rows=lines, floor_seconds=floor_s, floor_command=floor_cmd)
    print(f"floor: {floor_cmd}: {lines:,} lines in {floor_s:.2f} s", flush=True)
    if args.dump is None and lines != args.rows:
        print(f"warning: the dump has {lines:,} lines, expected {args.rows:,}", file=sys.stderr)

    table: list[tuple[str, str]] = [
        ("rows", f"{lines:,}"),
        ("dump size", _mb(dump_bytes)),
        ("floor (gzip -dc | wc -l)", f"{floor_s:.2f} s"),
    ]
    run_dir: Path | None = None
    exit_code = 0
    try:
        if args.generate_only:
            print_table(table)
        else:
            # 2b. senseforge
            ok, help_text, startup_s = senseforge_kb_available()
            report["cli_startup_seconds"] = startup_s
            if not ok:
                print_table(table)
                detail = help_text.splitlines()[-1] if help_text else "no output"
                print(
                    "error: 'senseforge kb' is not available in this environment "
                    f"({sys.executable} -m senseforge kb --help: {detail}); cannot measure step (b). "
                    "The dump and the floor above are still valid.",
                    file=sys.stderr,
                )
                report["error"] = "senseforge kb not available"
                exit_code = 2
            else:
                exit_code = _measure_senseforge(args, dump, floor_s, startup_s, table, report)
                run_dir = Path(report["run_dir"])
    finally:
        if args.json:
            args.json.write_text(json.dumps(report, indent=2) + "\n")
            print(f"figures written to {args.json}")
        if not args.keep:
            if run_dir is not None:
                shutil.rmtree(run_dir, ignore_errors=True)
            if generated:  # a dump found in the work directory was kept by an earlier run: leave it
                dump.unlink(missing_ok=True)
        elif run_dir is not None:
            print(f"kept: {dump} and {run_dir}")
    return exit_code


def _measure_senseforge(
    args: argparse.Namespace,
    dump: Path,
    floor_s: float,
    startup_s: float,
    table: list[tuple[str, str]],
    report: dict[str, Any],
) -> int:
    run_dir = Path(tempfile.mkdtemp(prefix="run-", dir=args.workdir))
    report["run_dir"] = str(run_dir)
    store = run_dir / "store"
    sf = [sys.executable, "-m", "senseforge", "kb"]
    steps: list[Step] = []
    print(f"senseforge kb import -> {store} (langs: {' '.join(args.langs)}) ...", flush=True)
    step = run_child(
        # the CLI takes either repeated --langs options or one comma-separated value
        "import",
        [*sf, "import", str(dump), "--store", str(store), "--langs", ",".join(args.langs)],
        run_dir / "import.log",
    )
    steps.append(step)
    print(f"  import: {step.seconds:.2f} s, peak RSS {_gb(step.peak_rss_bytes)}, exit {step.returncode}", flush=True)
    counts: dict[str, int] = {}
    if step.returncode == 0:
        # every language in one process and one scan of the store (kb question-sets --lang en,ja,…)
        out = run_dir / "question-sets-{lang}.jsonl"
        argv = [*sf, "question-sets", "--store", str(store), "--lang", ",".join(args.langs), "--n", str(args.n)]
        argv += ["--seed", str(args.qs_seed), "--out", str(out)]
        step = run_child("question-sets", argv, run_dir / "question-sets.log")
        steps.append(step)
        for lang in args.langs:
            written = Path(str(out).replace("{lang}", lang))
            counts[lang] = _count_lines(written) if step.returncode == 0 else -1
        print(
            f"  question-sets ({len(args.langs)} languages): {step.seconds:.2f} s, peak RSS "
            f"{_gb(step.peak_rss_bytes)}, {sum(counts.values()):,} sets, exit {step.returncode}",
            flush=True,
        )
    failed = [s for s in steps if s.returncode != 0]
    import_s = steps[0].seconds
    extract_s = sum(s.seconds for s in steps[1:])
    total_s = import_s + extract_s
    peak = max(s.peak_rss_bytes for s in steps)
    ratio = total_s / floor_s if floor_s > 0 else math.inf
    store_bytes = sum(p.stat().st_size for p in store.rglob("*") if p.is_file()) if store.exists() else 0
    report.update(
        import_seconds=import_s,
        extract_seconds=extract_s,
        senseforge_seconds=total_s,
        ratio=ratio,
        peak_rss_bytes=peak,
        store_bytes=store_bytes,
        question_sets=counts,
        steps=[asdict(s) for s in steps],
        goal_ratio=GOAL_RATIO,
        goal_peak_rss_gb=GOAL_PEAK_RSS_GB,
        ratio_met=ratio <= GOAL_RATIO and not failed,
        rss_met=peak / 1e9 <= GOAL_PEAK_RSS_GB and not failed,
    )
    table += [
        ("senseforge kb import", f"{import_s:.2f} s"),
        (f"senseforge kb question-sets ({len(args.langs)} languages, one pass)", f"{extract_s:.2f} s"),
        ("senseforge total", f"{total_s:.2f} s"),
        ("  of which CLI start-up", f"~{startup_s * len(steps):.2f} s ({len(steps)} calls x {startup_s:.2f} s)"),
        ("store size", _mb(store_bytes)),
        ("question sets", ", ".join(f"{k} {v:,}" for k, v in counts.items()) or "-"),
        (
            "ratio senseforge / floor",
            f"{ratio:.2f}  (goal <= {GOAL_RATIO}: {'met' if report['ratio_met'] else 'NOT met'})",
        ),
        (
            "peak RSS (largest child)",
            f"{_gb(peak)}  (goal <= {GOAL_PEAK_RSS_GB:g} GB: {'met' if report['rss_met'] else 'NOT met'})",
        ),
    ]
    print_table(table)
    if failed:
        s = failed[0]
        print(f"error: '{s.name}' exited with status {s.returncode}: {shlex.join(s.argv)}", file=sys.stderr)
        print(_tail(s.log), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
