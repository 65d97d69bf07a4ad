"""Checking items against the registry: is an item a copy of a registered benchmark's?

Four kinds of match, strongest first (each names the entry, the source item's id, and a score):

* ``exact`` — the same text as written (score 1);
* ``normal`` — the same normal form: re-cased, re-punctuated (score 1);
* ``near`` — MinHash Jaccard of the character shingles at least ``near`` (default
  :data:`NEAR_THRESHOLD`) and, where both items have a gold answer, the same answer: a word or
  two changed. Two questions on one frame with another concept ("Where would you get wood …" /
  "… jewelry …") share as many shingles as a copy with a word changed; their answers tell them
  apart. Candidates come from a banded LSH index (datasketch) and are confirmed on the whole
  signature;
* ``cross_lingual`` — in another language than the item: among the registered items in other languages
  than the item's (an item without a language is not compared), the closest by embedding
  cosine (of the text with its gold answer) among the top :data:`TOP_K`, when its cosine is at least
  ``cross`` (default :data:`CROSS_THRESHOLD`), it leads the next closest by at least ``margin``
  (default :data:`CROSS_MARGIN`), and both texts write the same numbers — the verifier: a
  translation, or a cultural adaptation (names, places and foods changed too). Short items in one
  style all sit close together in e5's space, and each language has a direction of its own: the
  cosine is taken between embeddings less their language's centre (the mean of the checked items of
  that language when there are :data:`CENTRE_MIN`, else of the registered ones, else of the whole
  registry), and the lead over the next item tells a translation from a neighbour better than the
  cosine alone.

The first three are copies (a gate rejects them: ``contaminated`` for exact and normal,
``near_duplicate`` for near); a cross-lingual match is a flag for people to look at, since an
adaptation is related to its source by design. The defaults are fitted and measured by
``benchmarks/contamination.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, Final, Literal

import numpy as np

from senseforge.registry.fingerprint import SETTINGS, exact_key, jaccard, normal_key, numbers_key, signatures
from senseforge.registry.store import Entry, Registry, Unit, embedded_text

MatchKind = Literal["exact", "normal", "near", "cross_lingual"]
KINDS: Final[tuple[MatchKind, ...]] = ("exact", "normal", "near", "cross_lingual")

NEAR_THRESHOLD: Final = 0.5
"""Estimated Jaccard of character 5-gram sets at or above which two texts are near-duplicates."""
CROSS_THRESHOLD: Final = 0.35
"""Cosine of the centred embeddings (each less its language's centre) at or above which a text in another language
may be flagged as a translation or an adaptation (until issue 44: 0.8, on raw embeddings)."""
CROSS_MARGIN: Final = 0.095
"""How far the closest registered item must lead the next one to be flagged (until issue 44: 0.02, raw)."""
CENTRE_MIN: Final = 20
"""Items of one language from which its centre (mean embedding) is taken: the checked items of a language, when
there are this many, else the registered ones, else the mean of every registered item."""
TOP_K: Final = 5
"""Registered items retrieved by embedding per checked item."""
_LSH_MARGIN: Final = 0.15  # the LSH bands are set below the threshold, so candidates near it are not missed


@dataclass(frozen=True)
class Match:
    """One registered item an item matches."""

    kind: MatchKind
    entry: str
    source_id: str
    score: float
    licence: str | None = None
    same_answer: bool | None = None
    """Whether the gold answers have one normal form (``None``: either has none)."""
    lead: float | None = None
    """Cross-lingual: the cosine's lead over the next closest registered item."""

    def to_json(self) -> dict[str, Any]:
        return {key: value for key, value in asdict(self).items() if value is not None}

    @property
    def rejects(self) -> bool:
        """A copy (exact, normal or near), not a flag."""
        return self.kind != "cross_lingual"

    @property
    def reason(self) -> str:
        """The rejection (or flag) reason: ``contaminated``, ``near_duplicate`` or ``cross_lingual``."""
        return {"exact": "contaminated", "normal": "contaminated", "near": "near_duplicate"}.get(
            self.kind, "cross_lingual"
        )


class Checker:
    """Checks items against every entry of a registry (the fingerprints read once, held in memory)."""

    def __init__(
        self,
        registry: Registry,
        *,
        near: float = NEAR_THRESHOLD,
        cross: float | None = CROSS_THRESHOLD,
        margin: float = CROSS_MARGIN,
        top_k: int = TOP_K,
    ) -> None:
        """``cross=None`` leaves the cross-lingual check out (no embedding model is loaded)."""
        from datasketch import LeanMinHash, MinHashLSH

        self.registry = registry
        self.near = near
        self.cross = cross
        self.margin = margin
        self.top_k = top_k
        self._entries: list[Entry] = list(registry.entries)
        prints = [registry.fingerprints(entry) for entry in self._entries]
        self._owner = np.concatenate(
            [np.full(len(p), i, dtype=np.int32) for i, p in enumerate(prints)] or [np.zeros(0, np.int32)]
        )
        self._ids = np.concatenate([p.ids for p in prints] or [np.array([], dtype=str)])
        self._langs = np.concatenate([p.langs for p in prints] or [np.array([], dtype=str)])
        self._answer = np.concatenate([p.answer for p in prints] or [np.array([], dtype=np.uint64)])
        self._numbers = np.concatenate([p.numbers for p in prints] or [np.array([], dtype=np.uint64)])
        self._minhash = (
            np.concatenate([p.minhash for p in prints]) if prints else np.zeros((0, SETTINGS.num_perm), dtype=np.uint64)
        )
        self._exact: dict[int, list[int]] = {}
        self._normal: dict[int, list[int]] = {}
        row = 0
        for p in prints:
            for key_e, key_n in zip(p.exact.tolist(), p.normal.tolist(), strict=True):
                self._exact.setdefault(key_e, []).append(row)
                self._normal.setdefault(key_n, []).append(row)
                row += 1
        self._lsh = MinHashLSH(threshold=max(0.05, near - _LSH_MARGIN), num_perm=SETTINGS.num_perm)
        empty = np.iinfo(np.uint64).max
        with self._lsh.insertion_session() as session:
            for index in range(len(self._minhash)):
                if not np.all(self._minhash[index] == empty):
                    session.insert(index, LeanMinHash(seed=SETTINGS.seed, hashvalues=self._minhash[index]))
        self._primary = np.array([_primary(str(lang)) for lang in self._langs.tolist()], dtype=str)
        self._vectors: np.ndarray | None = None
        """The registered embeddings, each less its language's centre, unit length."""
        self._centres: dict[str, np.ndarray] = {}
        self._centre_all: np.ndarray | None = None
        self._prints_dims = [int(p.embedding.shape[1]) for p in prints]
        if cross is not None and prints and all(p.embedding.shape[1] > 0 for p in prints):  # else: none
            vectors = np.concatenate([p.embedding for p in prints]).astype(np.float32)
            self._centre_all = vectors.mean(axis=0)
            self._centres = {
                lang: vectors[self._primary == lang].mean(axis=0)
                for lang in set(self._primary.tolist()) - {""}
                if int(np.sum(self._primary == lang)) >= CENTRE_MIN
            }
            every = self._centre_all
            centres = np.stack([self._centres.get(str(lang), every) for lang in self._primary.tolist()])
            self._vectors = _unit(vectors - centres)

    @property
    def cross_checked(self) -> bool:
        """Whether cross-lingual matches are looked for (every entry has embeddings and ``cross`` is set)."""
        return self.cross is not None and self._vectors is not None

    @property
    def cross_skipped(self) -> str | None:
        """Why no cross-lingual match can be looked for at all (``None`` when one can)."""
        if self.cross is None:
            return "not asked for"
        if self._vectors is None:
            bare = [e.name for e, p in zip(self._entries, self._prints_dims, strict=True) if p == 0]
            if bare:
                return f"no embeddings in the registry for {', '.join(bare)} (registered with --no-embeddings)"
            return "nothing registered"
        return None

    def cross_comparable(self, units: Sequence[Unit]) -> list[int]:
        """The indices of ``units`` the cross-lingual check compares: with a text, a language, and registered
        items in another language (none when the check is off)."""
        if not self.cross_checked:
            return []
        registered = set(self._primary.tolist()) - {""}
        return [i for i, u in enumerate(units) if u.text.strip() and u.lang and registered - {_primary(u.lang)}]

    def _match(self, kind: MatchKind, row: int, score: float, answer: str | None) -> Match:
        entry = self._entries[int(self._owner[row])]
        stored = int(self._answer[row])
        same = None if not answer or stored == 0 else stored == normal_key(answer)
        return Match(kind, entry.name, str(self._ids[row]), round(float(score), 4), entry.licence, same)

    def check(self, units: Sequence[Unit], *, centres_from_units: bool = True) -> list[list[Match]]:
        """Each unit's matches, strongest kind first, then by score; at most one per registered item.

        ``centres_from_units=False`` takes each language's centre from the registry alone, so a unit's verdict
        does not depend on which other units are checked with it (a build's gate checks batch by batch, and a
        resume may batch differently); ``analyze contamination`` checks a whole file at once and keeps the default.
        """
        from datasketch import LeanMinHash

        results: list[list[Match]] = [[] for _ in units]
        if not units or not len(self._ids):
            return results
        sigs = signatures([u.text for u in units])
        for index, unit in enumerate(units):
            found: dict[int, Match] = {}
            for row in self._exact.get(exact_key(unit.text), []):
                found[row] = self._match("exact", row, 1.0, unit.answer)
            for row in self._normal.get(normal_key(unit.text), []):
                found.setdefault(row, self._match("normal", row, 1.0, unit.answer))
            if unit.text.strip():
                candidates = [int(r) for r in self._lsh.query(LeanMinHash(seed=SETTINGS.seed, hashvalues=sigs[index]))]
                candidates = [r for r in candidates if r not in found]
                if candidates:
                    scores = jaccard(sigs[index], self._minhash[candidates])
                    for row, score in zip(candidates, scores.tolist(), strict=True):
                        match = self._match("near", row, score, unit.answer)
                        if score >= self.near and match.same_answer is not False:
                            found[row] = match
            results[index] = list(found.values())
        if self.cross_checked:
            self._cross(units, results, centres_from_units=centres_from_units)
        for matches in results:
            matches.sort(key=lambda m: (KINDS.index(m.kind), -m.score, m.entry, m.source_id))
        return results

    def _cross(self, units: Sequence[Unit], results: list[list[Match]], *, centres_from_units: bool) -> None:
        from senseforge.data.embeddings import embed_passages

        assert self._vectors is not None and self.cross is not None and self._centre_all is not None
        wanted = self.cross_comparable(units)
        if not wanted:
            return
        queries = embed_passages([embedded_text(units[i]) for i in wanted])
        langs = [_primary(units[i].lang or "") for i in wanted]
        for lang in set(langs):  # each language's centre taken out: what is left is what the item says
            rows = np.array([q for q, mine in enumerate(langs) if mine == lang])
            if centres_from_units and len(rows) >= CENTRE_MIN:
                centre = queries[rows].mean(axis=0)
            else:
                centre = self._centres.get(lang, self._centre_all)
            queries[rows] = queries[rows] - centre
        cosines = _unit(queries) @ self._vectors.T
        for q, index in enumerate(wanted):  # only registered items in another language than the unit's
            cosines[q, (self._primary == _primary(units[index].lang or "")) | (self._primary == "")] = -np.inf
        k = min(self.top_k, cosines.shape[1])
        top = np.argpartition(-cosines, k - 1, axis=1)[:, :k]
        for q, index in enumerate(wanted):
            unit = units[index]
            ranked = [
                r for r in sorted(top[q].tolist(), key=lambda r: -float(cosines[q, r])) if np.isfinite(cosines[q, r])
            ]
            best = ranked[0]
            score = float(cosines[q, best])
            lead = score - float(cosines[q, ranked[1]]) if len(ranked) > 1 else 1.0
            if score < self.cross or lead < self.margin:
                continue
            if numbers_key(unit.text) != int(self._numbers[best]):  # a translation keeps the numbers
                continue
            match = replace(self._match("cross_lingual", best, score, None), lead=round(lead, 4))
            if all((m.entry, m.source_id) != (match.entry, match.source_id) for m in results[index]):
                results[index].append(match)


def _unit(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return np.asarray(vectors / np.where(norms > 0, norms, 1.0), dtype=np.float32)


def _primary(tag: str) -> str:
    """The primary language subtag, lower-cased (``""`` for none): ``zh-Hant`` and ``zh`` are one language."""
    return tag.split("-", 1)[0].strip().lower()


def checked_against(registry: Registry) -> list[dict[str, Any]]:
    """The entries a check ran against, for cards and manifests: name, source, licence, items."""
    return [
        {"name": e.name, "source": e.source, "licence": e.licence, "items": e.items, "sha256": e.sha256}
        for e in registry.entries
    ]


@dataclass(frozen=True)
class Copy:
    """An item that repeats an earlier item of the same set (in the order given)."""

    index: int
    earlier: int
    kind: MatchKind
    score: float


def copies_within(units: Sequence[Unit], *, near: float = NEAR_THRESHOLD) -> list[Copy]:
    """Items that repeat an earlier one of ``units`` (exactly, in normal form, or near), each named once with
    the first earlier item it repeats: what a dataset holds twice, or in two of its splits.

    As against the registry, a near copy needs the same gold answer where both items have one (two questions on
    one frame asking for different things are not copies)."""
    from datasketch import LeanMinHash, MinHashLSH

    sigs = signatures([u.text for u in units])
    answers = [normal_key(u.answer) if u.answer else 0 for u in units]
    lsh = MinHashLSH(threshold=max(0.05, near - _LSH_MARGIN), num_perm=SETTINGS.num_perm)
    exact: dict[int, int] = {}
    normal: dict[int, int] = {}
    found: list[Copy] = []
    for index, unit in enumerate(units):
        if not unit.text.strip():
            continue
        key_e, key_n = exact_key(unit.text), normal_key(unit.text)
        sketch = LeanMinHash(seed=SETTINGS.seed, hashvalues=sigs[index])
        copy: Copy | None = None
        if key_e in exact:
            copy = Copy(index, exact[key_e], "exact", 1.0)
        elif key_n in normal:
            copy = Copy(index, normal[key_n], "normal", 1.0)
        else:
            mine = answers[index]
            candidates = [
                r for r in sorted(int(r) for r in lsh.query(sketch)) if not mine or not answers[r] or answers[r] == mine
            ]
            if candidates:
                scores = jaccard(sigs[index], sigs[candidates])
                best = int(np.argmax(scores))
                if scores[best] >= near:
                    copy = Copy(index, candidates[best], "near", round(float(scores[best]), 4))
        if copy is not None:
            found.append(copy)
            continue
        exact[key_e] = index
        normal.setdefault(key_n, index)
        lsh.insert(index, sketch)
    return found
