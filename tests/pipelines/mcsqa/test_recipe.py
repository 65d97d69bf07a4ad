"""The mCSQA recipe end to end with the stand-in author: counts, outputs, splits, reruns, refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from senseforge.data.splits import SPLIT_NAMES
from senseforge.errors import ConfigError
from senseforge.pipelines.mcsqa import MCSQA, McsqaConfig
from senseforge.pipelines.runner import build
from senseforge.store.db import Store

from .conftest import STAGES, read_jsonl

AUTHOR = "scripted/mcsqa-author"
OUTPUTS = (
    "funnel.json",
    "cost.json",
    "rejects.jsonl",
    *(f"{d}/{s}.jsonl" for d in ("dataset", "items") for s in SPLIT_NAMES),
)


def config(kb: Path, **overrides: object) -> McsqaConfig:
    settings: dict[str, object] = {
        "lang": "en",
        "n": 40,
        "kb": str(kb),
        "model": AUTHOR,
        "reviewers": (AUTHOR,),
        "lm_review_as_hard": True,
    }
    settings.update(overrides)
    return McsqaConfig.model_validate(settings)


def test_counts_add_up_and_outputs_follow_the_schema(demo_kb: Path, tmp_path: Path) -> None:
    summary = build(MCSQA, config(demo_kb), tmp_path / "run", store=Store())
    assert summary.state == "done"
    funnel = json.loads((tmp_path / "run" / "funnel.json").read_text())
    assert [row["stage"] for row in funnel["stages"]] == list(STAGES)
    for row in funnel["stages"]:
        assert row["in"] == row["out"] + sum(row["rejected"].values()), row
    for before, after in zip(funnel["stages"], funnel["stages"][1:], strict=False):
        assert after["in"] == before["out"]
    assert funnel["stages"][0]["in"] == 40 * 3
    figures = {figure["name"]: figure for figure in funnel["figures"]}
    assert (
        figures["refined"]["part"] > 0
        and figures["refined"]["whole"] == funnel["stages"][STAGES.index("refine")]["out"]
    )
    verify = figures["verify"]["values"]
    assert verify["easy"] + verify["to_review"] == funnel["stages"][STAGES.index("verify")]["out"]
    assert funnel["stages"][STAGES.index("review")]["rejected"].get("lm_review_rejected", 0) > 0

    rows = {name: read_jsonl(tmp_path / "run" / "dataset" / f"{name}.jsonl") for name in SPLIT_NAMES}
    kept = sum(len(r) for r in rows.values())
    assert kept == funnel["kept"] > 0
    for row in (r for split in rows.values() for r in split):
        assert set(row) == {"id", "question", "question_concept", "choices", "answerKey", "hard"}
        assert row["choices"]["label"] == list("ABCDE")
        assert len(set(row["choices"]["text"])) == 5
        assert row["answerKey"] in "ABCDE"
        assert row["question"].endswith("?")

    items = [json.loads(line) for name in SPLIT_NAMES for line in (tmp_path / "run" / "items" / f"{name}.jsonl").open()]
    hard = [item for item in items if item["difficulty"] == "hard"]
    easy = [item for item in items if item["difficulty"] == "easy"]
    assert hard and easy
    assert {item["provenance"]["review"] for item in hard} == {"lm"}
    assert {item["provenance"]["review"] for item in easy} == {"none"}
    assert all(item["provenance"]["model_ids"] == [AUTHOR] for item in items)

    cost = json.loads((tmp_path / "run" / "cost.json").read_text())
    assert cost["total_usd"] == 0.0 and cost["cost_per_kept_question_usd"] == 0.0
    assert cost["stages"]["generate"]["calls"] == 120
    # one distractor call per question set: the three questions of a set share the request
    assert cost["stages"]["distractors"]["calls"] == funnel["stages"][STAGES.index("distractors")]["in"] // 3


def test_splits_are_80_10_10_stratified_and_deterministic(demo_kb: Path, tmp_path: Path) -> None:
    build(MCSQA, config(demo_kb, n=None), tmp_path / "a", store=Store())
    funnel = json.loads((tmp_path / "a" / "funnel.json").read_text())
    table = next(figure for figure in funnel["figures"] if figure["name"] == "splits")
    assert table["rows"] == list(SPLIT_NAMES) and table["columns"] == ["Easy", "Hard"]
    splits = {
        name: dict(zip(("easy", "hard"), row, strict=True))
        for name, row in zip(SPLIT_NAMES, table["values"], strict=True)
    }
    assert funnel["splits"] == {name: sum(splits[name].values()) for name in SPLIT_NAMES}
    for stratum in ("easy", "hard"):
        total = sum(splits[name][stratum] for name in SPLIT_NAMES)
        assert splits["validation"][stratum] == splits["test"][stratum]
        assert abs(splits["test"][stratum] - total / 10) <= 1
    build(MCSQA, config(demo_kb, n=None), tmp_path / "b", store=Store(f"sqlite:///{tmp_path / 'other.db'}"))
    for name in OUTPUTS:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name


def test_a_rerun_is_answered_by_the_cache(demo_kb: Path, tmp_path: Path) -> None:
    store = Store()
    first = build(MCSQA, config(demo_kb), tmp_path / "a", store=store)
    second = build(MCSQA, config(demo_kb), tmp_path / "b", store=store)
    assert first.ledger["calls"] > 0
    assert second.ledger["calls"] == second.ledger["cache_hits"] > 0
    for name in OUTPUTS:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    # resuming a finished run changes nothing and calls nothing
    again = build(MCSQA, config(demo_kb), tmp_path / "a", store=store, resume=True)
    assert again.state == "done"
    assert again.ledger == first.ledger  # same run label, no new ledger rows


def test_resume_refuses_a_changed_config(demo_kb: Path, tmp_path: Path) -> None:
    build(MCSQA, config(demo_kb, n=5), tmp_path / "run", store=Store())
    with pytest.raises(ConfigError, match=r"config differs.*seed: 0 → 1"):
        build(MCSQA, config(demo_kb, n=5, seed=1), tmp_path / "run", store=Store(), resume=True)
    with pytest.raises(ConfigError, match="--resume"):
        build(MCSQA, config(demo_kb, n=5), tmp_path / "run", store=Store())
    with pytest.raises(ConfigError, match="no run to resume"):
        build(MCSQA, config(demo_kb, n=5), tmp_path / "nothing", store=Store(), resume=True)


def test_unpriced_model_cost_is_null_not_zero(demo_kb: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from senseforge.llm.prices import PriceTable

    build(MCSQA, config(demo_kb, n=5), tmp_path / "run", store=Store(), prices=PriceTable({}))
    cost = json.loads((tmp_path / "run" / "cost.json").read_text())
    assert cost["stages"]["generate"]["cost_usd"] is None
    assert cost["total_usd"] is None and cost["cost_per_kept_question_usd"] is None
    assert cost["unpriced_models"] == [AUTHOR]
    assert "no price for scripted/mcsqa-author" in caplog.text


def test_runs_drawn_together_start_from_the_records_each_draws_alone(
    demo_kb: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    configs = [config(demo_kb, lang=lang, n=12, seed=5) for lang in ("en", "ja")]
    alone = {c.lang: MCSQA.source(c).records(c) for c in configs}
    together = MCSQA.together(configs)
    import senseforge.pipelines.mcsqa.recipe as recipe_module

    def no_second_scan(*args: object, **kwargs: object) -> object:
        raise AssertionError("the store was scanned again for one language")

    monkeypatch.setattr(recipe_module, "extract_question_sets", no_second_scan)
    for c in configs:
        records, facts = together.source(c).records(c)
        assert records == alone[c.lang][0] and records
        assert facts == alone[c.lang][1]
    other = config(demo_kb, lang="en", n=12, seed=6)  # not drawn together: drawn alone, as before
    with pytest.raises(AssertionError, match="scanned again"):
        together.source(other).records(other)


def test_runs_drawn_together_refuse_a_language_without_edges_before_any_run(demo_kb: Path) -> None:
    with pytest.raises(ConfigError, match="xx"):
        MCSQA.together([config(demo_kb, lang="en"), config(demo_kb, lang="xx")])
