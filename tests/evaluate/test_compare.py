"""``evaluate.compare``: paired B − A with bootstrap intervals, McNemar's exact test, honest warnings."""

from __future__ import annotations

import json
import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from senseforge.evaluate import crow_metrics
from senseforge.evaluate.bootstrap import percentile_interval, resampled_means, resampled_statistics, units_of
from senseforge.evaluate.compare import compare_paths, compare_runs, load_run
from senseforge.evaluate.compare_records import Comparison, Row
from senseforge.evaluate.compare_stats import mcnemar_exact
from senseforge.evaluate.records import (
    BinarySample,
    DataInfo,
    EvalResults,
    MCSample,
    Metrics,
    ModelInfo,
    write_samples_lines,
)
from senseforge.evaluate.report import binary_report, mc_metrics
from senseforge.evaluate.run import EvalConfig
from senseforge.evaluate.significance import binomial_cdf_half, mcnemar_p_value

SEED, RESAMPLES = 7, 400


# --------------------------------------------------------------------------- building runs


def _mc_sample(item: str, right: bool) -> MCSample:
    return MCSample(
        id=item,
        lang="en",
        difficulty=None,
        category=None,
        recipe=None,
        review=None,
        prompt=f"question {item}",
        choices=["yes", "no"],
        labels=["A", "B"],
        continuations=[" A", " B"],
        gold="A",
        prediction="A" if right else "B",
        correct=right,
    )


def _binary_sample(item: str, context: str, task: str, gold: bool, prediction: bool) -> BinarySample:
    return BinarySample(
        id=item,
        context_id=context,
        task=task,
        lang="en",
        dimensions=["other"],
        prompt=f"context {context}",
        target=f"target {item}",
        gold=gold,
        prediction=prediction,
        parsed=True,
        correct=gold == prediction,
    )


def _write(
    folder: Path,
    results: dict[str, Metrics],
    samples: list[MCSample] | list[BinarySample],
    config: EvalConfig,
    *,
    kind: str,
    data_name: str = "toy",
    data_path: str = "/data/toy.jsonl",
    sha: str | None = None,
    model: str = "scripted/echo",
) -> Path:
    payload = EvalResults(
        results=results,
        breakdowns={},
        config=config.model_dump(),
        data=DataInfo(path=data_path, name=data_name, format="jsonl", kind=kind),
        model=ModelInfo(name=model, identity={}),
        seeds={"seed": config.seed},
        prompt_hashes={},
        versions={},
        timing={},
        identity={"data_sha256": sha} if sha else None,
    )
    folder.mkdir(parents=True)
    (folder / "results.json").write_text(json.dumps(payload.to_json()), encoding="utf-8")
    (folder / "samples.jsonl").write_text("".join(write_samples_lines(samples)), encoding="utf-8")
    return folder


def _mc_run(folder: Path, right: dict[str, bool], *, formulation: str = "letter", **data: str | None) -> Path:
    config = EvalConfig(formulation=formulation, seed=SEED, n_bootstrap=RESAMPLES)  # type: ignore[arg-type]
    samples = [_mc_sample(item, ok) for item, ok in right.items()]
    name = str(data.get("data_name") or "toy")
    return _write(folder, {name: mc_metrics(samples, config)}, samples, config, kind="mc", **data)  # type: ignore[arg-type]


def _binary_run(folder: Path, samples: list[BinarySample], **data: str | None) -> Path:
    config = EvalConfig(seed=SEED, n_bootstrap=RESAMPLES)
    per_task, summary = binary_report(samples, config)
    return _write(folder, {**per_task, "crow": summary}, samples, config, kind="binary", **data)  # type: ignore[arg-type]


def _row(comparison: Comparison, task: str, metric: str) -> Row:
    return next(r for r in comparison.rows if r.task == task and r.metric == metric)


def _pattern(n: int, wrong_every: int, offset: int = 0) -> dict[str, bool]:
    return {f"q{i:03d}": (i + offset) % wrong_every != 0 for i in range(n)}


# --------------------------------------------------------------------------- the exact binomial tail


def test_binomial_tail_is_exact_for_small_n() -> None:
    for n in range(0, 60):
        total = Fraction(0)
        for k in range(n + 1):
            total += Fraction(math.comb(n, k), 2**n)
            assert binomial_cdf_half(k, n) == pytest.approx(float(total), rel=1e-13, abs=1e-300)
    assert binomial_cdf_half(-1, 5) == 0.0


def _cases() -> list[tuple[int, int]]:
    cases = [(k, n) for n in range(1, 41) for k in range(n + 1)]
    for n in (100, 257, 1_000, 1_024, 1_025, 4_097, 10_000, 99_999, 1_000_000, 5_000_001):
        spread = math.isqrt(n)
        for k in (0, 1, 2, n // 10, n // 3, n // 2 - 4 * spread, n // 2 - spread, n // 2 - 1, n // 2, n // 2 + 1):
            cases.append((k, n))
            cases.append((n - k, n))
    return sorted({(k, n) for k, n in cases if 0 <= k <= n})


def test_mcnemar_p_value_is_scipys_binomtest_over_many_k_and_n() -> None:
    stats = pytest.importorskip("scipy.stats")
    for k, n in _cases():
        ours = mcnemar_p_value(k, n - k)
        reference = float(stats.binomtest(k, n, 0.5).pvalue)
        assert ours == pytest.approx(reference, rel=1e-9, abs=1e-300), (k, n)


def test_mcnemar_with_no_discordant_pair_is_one() -> None:
    assert mcnemar_p_value(0, 0) == 1.0
    test = mcnemar_exact([True, False, True], [True, False, True])
    assert (test.a_only, test.b_only, test.p_value) == (0, 0, 1.0)


def test_mcnemar_counts_the_discordant_pairs_each_way() -> None:
    test = mcnemar_exact([True, True, True, False, False], [False, True, True, True, True])
    assert (test.a_only, test.b_only) == (1, 2)
    assert test.p_value == 1.0  # 2 * P(X <= 1), X ~ Bin(3, 1/2) = 2 * 0.5
    assert mcnemar_p_value(0, 7) == pytest.approx(2 / 2**7)


# --------------------------------------------------------------------------- multiple choice


def test_paired_difference_and_its_bootstrap_interval(tmp_path: Path) -> None:
    a = _mc_run(tmp_path / "a", _pattern(60, wrong_every=3))  # 40/60
    b = _mc_run(tmp_path / "b", _pattern(60, wrong_every=5))  # 48/60
    comparison = compare_paths(a, b)
    assert (comparison.shared, comparison.only_a, comparison.only_b) == (60, 0, 0)
    assert comparison.warnings == []
    assert (comparison.seed, comparison.n_resamples) == (SEED, RESAMPLES)  # A's settings
    row = _row(comparison, "toy", "acc")
    assert row.paired is not None and row.mcnemar is not None and row.a is not None and row.b is not None
    assert row.paired.a == pytest.approx(40 / 60) and row.paired.b == pytest.approx(48 / 60)
    assert row.paired.diff == pytest.approx(8 / 60)
    assert (row.paired.ci_unit, row.paired.units) == ("item", 60)
    # the paired bootstrap is the resampling engine's, over items, with A's seed
    a_right = np.asarray(list(_pattern(60, 3).values()), dtype=np.float64)
    b_right = np.asarray(list(_pattern(60, 5).values()), dtype=np.float64)
    stats = resampled_means(b_right - a_right, [[i] for i in range(60)], n_resamples=RESAMPLES, seed=SEED)
    assert row.paired.ci95 == list(percentile_interval(stats, 0.95))
    low, high = row.paired.ci95
    assert low <= row.paired.diff <= high
    # each side's own numbers and intervals come from its results.json
    assert row.a.value == pytest.approx(40 / 60) and row.a.ci95 is not None and row.a.wilson95 is not None
    # McNemar on the discordant pairs: A right & B wrong, A wrong & B right
    a_only = int(np.sum((a_right == 1) & (b_right == 0)))
    b_only = int(np.sum((a_right == 0) & (b_right == 1)))
    assert (row.mcnemar.a_only, row.mcnemar.b_only) == (a_only, b_only)
    assert row.mcnemar.p_value == mcnemar_p_value(a_only, b_only)


def test_labels_say_formulation_and_n_and_differing_item_sets_are_named(tmp_path: Path) -> None:
    a = _mc_run(tmp_path / "a", _pattern(30, wrong_every=2), formulation="loglik")
    b = _mc_run(tmp_path / "b", {k: True for k in list(_pattern(30, 2))[5:15]}, formulation="letter")
    comparison = compare_paths(a, b)
    assert comparison.a.label == "scripted/echo · loglik · n=30"
    assert comparison.b.label == "scripted/echo · letter · n=10"
    assert (comparison.shared, comparison.only_a, comparison.only_b) == (10, 20, 0)
    assert any("20 only in A, 0 only in B" in w and "10 shared items" in w for w in comparison.warnings)
    row = _row(comparison, "toy", "acc")
    assert row.paired is not None and row.paired.units == 10
    assert row.paired.a == pytest.approx(0.5) and row.paired.b == 1.0  # on the 10 shared items only
    assert row.a is not None and row.a.value == pytest.approx(0.5) and row.a.units == 30
    # acc_norm is A's alone (letters are not length-normalised): shown, not subtracted
    norm = _row(comparison, "toy", "acc_norm")
    assert norm.b is None and norm.paired is None


def test_items_pair_by_id_and_variant(tmp_path: Path) -> None:
    config = EvalConfig(formulation="generate", variant="putri-all", seed=SEED, n_bootstrap=RESAMPLES)

    def run(folder: Path, wrong: set[tuple[str, str]]) -> Path:
        samples = [
            _mc_sample(f"q{i}", (f"q{i}", v) not in wrong).model_copy(update={"variant": v})
            for i in range(6)
            for v in ("putri1", "putri2")
        ]
        results: dict[str, Metrics] = {
            f"toy/{v}": mc_metrics([s for s in samples if s.variant == v], config) for v in ("putri1", "putri2")
        }
        mean = mc_metrics(samples, config).model_copy(update={"variants": 2})
        results["toy/putri-mean"] = mean
        return _write(folder, results, samples, config, kind="mc")

    comparison = compare_paths(run(tmp_path / "a", {("q0", "putri1")}), run(tmp_path / "b", {("q0", "putri2")}))
    assert comparison.shared == 12
    first, second = _row(comparison, "toy/putri1", "acc"), _row(comparison, "toy/putri2", "acc")
    assert first.paired is not None and first.paired.diff == pytest.approx(1 / 6)
    assert second.paired is not None and second.paired.diff == pytest.approx(-1 / 6)
    mean = _row(comparison, "toy/putri-mean", "acc")
    assert mean.paired is not None and mean.paired.diff == 0.0
    assert (mean.paired.ci_unit, mean.paired.units) == ("item", 6)  # an item's variants resample together
    assert mean.mcnemar is not None and (mean.mcnemar.a_only, mean.mcnemar.b_only) == (1, 1)


def test_different_data_is_said(tmp_path: Path) -> None:
    right = _pattern(10, 2)
    same_hash = compare_paths(
        _mc_run(tmp_path / "a", right, data_path="/x/toy.jsonl", sha="ab" * 32),
        _mc_run(tmp_path / "b", right, data_path="/y/toy.jsonl", sha="ab" * 32),
    )
    assert same_hash.warnings == []  # the same bytes under another path
    other_hash = compare_paths(
        _mc_run(tmp_path / "c", right, sha="ab" * 32), _mc_run(tmp_path / "d", right, sha="cd" * 32)
    )
    assert any("the evaluated items differ" in w for w in other_hash.warnings)  # same file, other items
    other_file = compare_paths(
        _mc_run(tmp_path / "g", right, sha="ab" * 32), _mc_run(tmp_path / "h", right, data_name="x", sha="cd" * 32)
    )
    assert any(w.startswith("the data differ") and "x (/data/toy.jsonl)" in w for w in other_file.warnings)
    no_hash = compare_paths(_mc_run(tmp_path / "e", right), _mc_run(tmp_path / "f", right, data_name="other"))
    assert any("the data may differ" in w and "other" in w for w in no_hash.warnings)
    assert _row(no_hash, "toy vs other", "acc").paired is not None


def test_without_samples_there_is_no_paired_difference(tmp_path: Path) -> None:
    a = _mc_run(tmp_path / "a", _pattern(10, 2))
    b = _mc_run(tmp_path / "b", _pattern(10, 3))
    (b / "samples.jsonl").unlink()
    comparison = compare_runs(load_run(a), load_run(b / "results.json"))
    assert any("B has no samples.jsonl" in w for w in comparison.warnings)
    row = _row(comparison, "toy", "acc")
    assert row.a is not None and row.b is not None and row.paired is None and row.mcnemar is None


def test_one_item_has_no_interval_but_a_wilson_one(tmp_path: Path) -> None:
    comparison = compare_paths(_mc_run(tmp_path / "a", {"q": False}), _mc_run(tmp_path / "b", {"q": True}))
    row = _row(comparison, "toy", "acc")
    assert row.a is not None and row.a.ci95 is None and row.a.units == 1 and row.a.ci_unit == "item"
    assert row.a.wilson95 is not None and row.a.wilson95[0] == 0.0 and row.a.wilson95[1] > 0.7
    assert row.paired is not None and row.paired.diff == 1.0 and row.paired.ci95 is None


# --------------------------------------------------------------------------- binary


def _crow(task: str, contexts: int, wrong: set[int], prefix: str = "") -> list[BinarySample]:
    """Two targets per context (one valid, one not); the contexts in ``wrong`` get their valid target wrong."""
    out = []
    for c in range(contexts):
        context = f"{prefix}{task}-c{c}"
        out.append(_binary_sample(f"{context}-t0", context, task, True, c not in wrong))
        out.append(_binary_sample(f"{context}-t1", context, task, False, False))
    return out


def test_binary_resamples_contexts_and_tests_examples(tmp_path: Path) -> None:
    a_samples = _crow("stance", 12, wrong={0, 1, 2, 3}) + _crow("safety", 8, wrong={0})
    b_samples = _crow("stance", 12, wrong={0}) + _crow("safety", 8, wrong={0, 1})
    comparison = compare_paths(_binary_run(tmp_path / "a", a_samples), _binary_run(tmp_path / "b", b_samples))
    assert comparison.kind == "binary" and comparison.unit == "example" and comparison.shared == 40
    f1 = _row(comparison, "stance", "macro_f1")
    assert f1.paired is not None and f1.mcnemar is None
    assert (f1.paired.ci_unit, f1.paired.units) == ("context", 12)
    a_stance = [s for s in a_samples if s.task == "stance"]
    b_stance = [s for s in b_samples if s.task == "stance"]
    gold = [s.gold for s in a_stance]
    assert f1.paired.a == crow_metrics.macro_f1(gold, [bool(s.prediction) for s in a_stance])
    assert f1.paired.diff == pytest.approx(f1.paired.b - f1.paired.a)

    # the interval is the generic engine's over whole contexts (a context's two targets together)
    def diff(pairs: list[tuple[BinarySample, BinarySample]]) -> float:
        golds = [x.gold for x, _ in pairs]
        return crow_metrics.macro_f1(golds, [bool(y.prediction) for _, y in pairs]) - crow_metrics.macro_f1(
            golds, [bool(x.prediction) for x, _ in pairs]
        )

    pairs = list(zip(a_stance, b_stance, strict=True))
    units = units_of(pairs, lambda p: p[0].context_id)
    assert [len(u) for u in units] == [2] * 12
    stats = resampled_statistics(pairs, diff, units, n_resamples=RESAMPLES, seed=SEED)
    assert f1.paired.ci95 == pytest.approx(list(percentile_interval(stats, 0.95)), abs=1e-12)

    acc = _row(comparison, "stance", "acc")
    assert acc.mcnemar is not None and (acc.mcnemar.a_only, acc.mcnemar.b_only) == (0, 3)
    assert acc.mcnemar.unit == "example" and acc.mcnemar.p_value == mcnemar_p_value(0, 3)
    assert acc.paired is not None and acc.paired.ci_unit == "context"
    situational = _row(comparison, "stance", "situational_acc")
    assert situational.mcnemar is not None and situational.mcnemar.unit == "context"
    assert situational.paired is not None and situational.paired.diff == pytest.approx(3 / 12)

    # over all tasks: the CRoW score (mean over tasks) and the pooled accuracy
    score = _row(comparison, "crow", "crow_score_macro_f1")
    safety = _row(comparison, "safety", "macro_f1")
    assert score.paired is not None and safety.paired is not None and score.paired.ci95 is not None
    assert score.paired.diff == pytest.approx((f1.paired.diff + safety.paired.diff) / 2)
    assert score.a is not None and score.a.value == pytest.approx(score.paired.a)
    pooled = _row(comparison, "crow", "acc")
    assert pooled.mcnemar is not None and (pooled.mcnemar.a_only, pooled.mcnemar.b_only) == (1, 3)
    assert pooled.paired is not None and pooled.paired.units == 20


def test_binary_pairs_by_id_and_counts_what_one_side_lacks(tmp_path: Path) -> None:
    a_samples = _crow("stance", 6, wrong={0})
    b_samples = _crow("stance", 6, wrong={1})[:8] + _crow("stance", 1, wrong=set(), prefix="new-")
    comparison = compare_paths(_binary_run(tmp_path / "a", a_samples), _binary_run(tmp_path / "b", b_samples))
    assert (comparison.shared, comparison.only_a, comparison.only_b) == (8, 4, 2)
    assert any("4 only in A, 2 only in B" in w for w in comparison.warnings)
    assert _row(comparison, "stance", "macro_f1").paired.units == 4  # type: ignore[union-attr]


def test_one_context_shows_no_bootstrap_interval(tmp_path: Path) -> None:
    a = _binary_run(tmp_path / "a", _crow("stance", 1, wrong={0}))
    b = _binary_run(tmp_path / "b", _crow("stance", 1, wrong=set()))
    comparison = compare_paths(a, b)
    f1 = _row(comparison, "stance", "macro_f1")
    assert f1.a is not None and f1.a.ci95 is None and (f1.a.units, f1.a.ci_unit) == (1, "context")
    assert f1.paired is not None and f1.paired.ci95 is None and f1.paired.units == 1
    situational = _row(comparison, "stance", "situational_acc")
    assert situational.a is not None and situational.a.wilson95 is not None  # over 1 context: wide, not a point
    assert situational.a.wilson95[1] - situational.a.wilson95[0] > 0.5


def test_multiple_choice_and_binary_do_not_pair(tmp_path: Path) -> None:
    from senseforge.errors import ConfigError

    a = _mc_run(tmp_path / "a", _pattern(4, 2))
    b = _binary_run(tmp_path / "b", _crow("stance", 2, wrong=set()))
    with pytest.raises(ConfigError, match="nothing to pair"):
        compare_paths(a, b)
