"""``analyze concepts``: counts and skew by hand, spellings merged, categories, Putri's LLM_Adapt files, the command."""

from __future__ import annotations

import csv
import json
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from senseforge.analyze.concepts import ALL_LANGS, concept_key, concepts, concepts_of_sides
from senseforge.analyze.inputs import read_side
from senseforge.cli.main import app, main
from senseforge.data.io import write_jsonl
from senseforge.data.schema import MCItem
from senseforge.errors import ConfigError


def _shared_data() -> Path:
    here = Path(__file__).resolve().parents[3] / "shared" / "data"
    return here if here.is_dir() else Path("/work/shared/data")


LLM_ADAPT = _shared_data() / "id-csqa" / "llm_adapt"
needs_release = pytest.mark.skipif(
    not (LLM_ADAPT / "ind" / "filtered_test.json").is_file(),
    reason=f"Putri et al.'s released LLM_Adapt files are not in {LLM_ADAPT}",
)
runner = CliRunner()


def item(n: int, concept: str | None, *, lang: str = "id", category: str | None = None) -> MCItem:
    return MCItem(
        id=f"q{n}",
        lang=lang,
        question=f"question {n}?",
        question_concept=concept,
        category=category,
        choices=[{"label": "A", "text": "a"}, {"label": "B", "text": "b"}],
    )


def hand_made() -> list[MCItem]:
    # id: komodo ×3 (one spelled Komodo), kadal ×2, ular ×1, one without a concept; su: oray ×2
    concepts_id = ["komodo", "Komodo", "kadal", "komodo", "ular", "kadal", None]
    cats = ["place", "place", "culture", "place", None, "culture", "place"]
    items = [item(i, c, category=k) for i, (c, k) in enumerate(zip(concepts_id, cats, strict=True))]
    return [*items, item(10, "oray", lang="su"), item(11, " Oray ", lang="su")]


def test_concept_key_merges_case_width_and_spaces() -> None:
    assert concept_key("  Komodo   Island ") == concept_key("ＫＯＭＯＤＯ island") == "komodo island"


def test_counts_and_skew_by_hand() -> None:
    result = concepts([("toy", hand_made())], top=2)
    ind, sun, pooled = result.groups
    assert [(g.dataset, g.lang) for g in result.groups] == [("toy", "id"), ("toy", "su"), ("toy", ALL_LANGS)]
    assert (ind.items, ind.with_concept, ind.distinct, ind.singletons) == (7, 6, 3, 1)
    assert [(c.name, c.count) for c in ind.top] == [("komodo", 3), ("kadal", 2)]  # cut at --top 2
    assert ind.top[0].share == pytest.approx(3 / 6) and ind.top[0].forms == ["Komodo", "komodo"]
    assert ind.top1_share == pytest.approx(3 / 6)
    assert ind.top10_share == pytest.approx(1.0)  # three concepts: the top ten cover all
    assert ind.distinct_per_item == pytest.approx(3 / 6)
    assert [(c.name, c.count) for c in sun.top] == [("oray", 2)]  # " Oray " is the same concept
    assert (pooled.items, pooled.distinct, pooled.top[0].name) == (9, 4, "komodo")


def test_the_top_ten_share_counts_ten_concepts() -> None:
    # 12 concepts: c0 ×3, the others once; the top ten cover 3 + 9 of 14 items
    items = [item(i, "c0") for i in range(3)] + [item(10 + i, f"c{i}") for i in range(1, 12)]
    (group,) = concepts([("twelve", items)], top=20).groups
    assert group.distinct == 12 and len(group.top) == 12
    assert group.top10_share == pytest.approx(12 / 14)
    assert group.top1_share == pytest.approx(3 / 14)
    assert [c.name for c in group.top[1:4]] == ["c1", "c10", "c11"]  # ties in name order


def test_category_mix() -> None:
    ind = concepts([("toy", hand_made())]).groups[0]
    assert [(c.name, c.count) for c in ind.categories] == [("place", 4), ("culture", 2)]
    assert ind.categories[0].share == pytest.approx(4 / 7)  # of all items
    assert ind.with_category == 6
    assert concepts([("toy", hand_made())]).groups[1].categories == []


def test_items_without_concepts_and_bad_arguments() -> None:
    (group,) = concepts([("bare", [item(1, None), item(2, "")])]).groups
    assert (group.with_concept, group.distinct, group.top, group.top10_share) == (0, 0, [], None)
    with pytest.raises(ConfigError, match="--top"):
        concepts([("toy", hand_made())], top=0)
    with pytest.raises(ConfigError, match="empty: no multiple-choice items"):
        concepts([("empty", [])])


def test_rows_and_json() -> None:
    result = concepts([("toy", hand_made())], top=2)
    rows = result.rows()
    assert rows[0] == {
        "dataset": "toy",
        "lang": "id",
        "kind": "concept",
        "rank": 1,
        "name": "komodo",
        "count": 3,
        "share": 0.5,
    }
    assert Counter(row["kind"] for row in rows) == {"concept": 5, "category": 4}
    doc = json.loads(json.dumps(result.to_json()))
    assert doc["groups"][0]["top1"] == "komodo" and doc["groups"][0]["top"][0]["forms"] == ["Komodo", "komodo"]


@needs_release
def test_putris_adapted_concepts_lean_towards_komodo() -> None:
    result = concepts_of_sides([read_side(str(LLM_ADAPT))], top=10)
    by_lang = {g.lang: g for g in result.groups}
    assert set(by_lang) == {"id", "su", ALL_LANGS}
    assert by_lang["id"].items == by_lang["su"].items == 349
    for group in by_lang.values():
        assert group.top[0].name == "komodo"
        assert group.top1_share is not None and group.top1_share > 2 * group.top[1].share
    assert (by_lang["id"].top[0].count, by_lang[ALL_LANGS].top[0].count) == (12, 24)
    assert by_lang["id"].top10_share == pytest.approx(47 / 349)
    assert result.groups[0].dataset == "llm_adapt"


def test_the_command_prints_and_writes_json_csv_svg(tmp_path: Path) -> None:
    data = tmp_path / "toy.jsonl"
    write_jsonl(data, hand_made())
    out = tmp_path / "out"
    result = runner.invoke(app, ["analyze", "concepts", str(data), "--top", "2", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "komodo" in result.stdout and "50.00%" in result.stdout and "culture" in result.stdout
    assert {p.name for p in out.iterdir()} == {"concepts.json", "concepts.csv", "concepts.svg", "concepts.pdf"}
    with (out / "concepts.csv").open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert rows[0]["name"] == "komodo" and rows[0]["count"] == "3"
    doc = json.loads((out / "concepts.json").read_text(encoding="utf-8"))
    assert [g["lang"] for g in doc["groups"]] == ["id", "su", "all"]
    assert "<svg" in (out / "concepts.svg").read_text(encoding="utf-8")


def test_bad_input_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["analyze", "concepts", str(tmp_path / "missing"), "--out", str(tmp_path / "o")])
    assert exit_info.value.code == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "missing" in err and len(err.splitlines()) == 1
