"""``analyze lexical``: overlaps worked out by hand, the paper's figures only for Putri's subsets, the released
files against the paper's §5.2, and the command."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from senseforge.analyze.inputs import read_side
from senseforge.analyze.lexical import PUTRI_HUMAN_GEN, PUTRI_LLM_GEN, lexical, lexical_sides, putri_order
from senseforge.cli.main import app, main
from senseforge.data.io import write_jsonl
from senseforge.data.schema import MCItem
from senseforge.errors import ConfigError


def _shared_data() -> Path:
    here = Path(__file__).resolve().parents[3] / "shared" / "data"
    return here if here.is_dir() else Path("/work/shared/data")


ID_CSQA = _shared_data() / "id-csqa"
HUMAN_GEN = [ID_CSQA / "human_gen" / lang / "filtered_test.json" for lang in ("ind", "sun")]
LLM_GEN = [ID_CSQA / "llm_gen" / lang / "filtered_test.json" for lang in ("ind", "sun")]
LLM_GEN_CLEAN = [ID_CSQA / "llm_gen" / lang / "filtered_test_clean.json" for lang in ("ind", "sun")]
needs_release = pytest.mark.skipif(
    not all(path.is_file() for path in [*HUMAN_GEN, *LLM_GEN, *LLM_GEN_CLEAN]),
    reason=f"Putri et al.'s released Human_Gen and LLM_Gen test files are not in {ID_CSQA}",
)
runner = CliRunner()


def item(item_id: str, question: str, *choices: str, lang: str = "en") -> MCItem:
    return MCItem(
        id=item_id,
        lang=lang,
        question=question,
        choices=[{"label": chr(65 + i), "text": text} for i, text in enumerate(choices)],
    )


# A: where is the big red ball | the box | under the bed
# B: where is the ball         | box     | a bed
A = [item("a1", "Where is the big red ball?", "The box", "under the bed")]
B = [item("b1", "where is the ball", "box", "a bed.")]


def test_overlaps_by_hand() -> None:
    result = lexical(A, B)
    # unigrams A {where is the big red ball box under bed} = 9, B {where is the ball box a bed} = 7, shared 6
    assert (result.unigram.unique_a, result.unigram.unique_b, result.unigram.shared) == (9, 7, 6)
    assert result.unigram.share_a == pytest.approx(6 / 9)
    assert result.unigram.share_b == pytest.approx(6 / 7)
    # bigrams A: where-is is-the the-big big-red red-ball | the-box | under-the the-bed = 8;
    # B: where-is is-the the-ball | - | a-bed = 4; shared where-is, is-the (no ball-box across texts)
    assert (result.bigram.unique_a, result.bigram.unique_b, result.bigram.shared) == (8, 4, 2)
    assert result.bigram.share_a == pytest.approx(2 / 8)
    assert result.bigram.share_b == pytest.approx(2 / 4)
    assert result.only_a == [("big", 1), ("red", 1), ("under", 1)]
    assert result.only_b == [("a", 1)]
    assert (result.a.tokens, result.b.tokens) == (11, 7)


def test_the_fields_option_changes_what_counts() -> None:
    result = lexical(A, B, fields="question")
    assert (result.unigram.unique_a, result.unigram.unique_b, result.unigram.shared) == (6, 4, 4)
    assert result.unigram.share_b == 1.0
    assert result.fields == ("question",)
    with pytest.raises(ConfigError, match="--fields"):
        lexical(A, B, fields="question,options")


def test_an_empty_side_is_refused() -> None:
    with pytest.raises(ConfigError, match="B: no multiple-choice items"):
        lexical(A, [])


def test_the_papers_figures_only_beside_putris_subsets() -> None:
    human = [item("orig_h_ind_1", "Apa itu?", "a", "b", lang="id")]
    llm = [item("orig_m_ind_1", "Apa ini?", "a", "c", lang="id")]
    assert putri_order(human, llm) == "forward" and putri_order(llm, human) == "swapped"
    assert putri_order(human, A) is None and putri_order([*human, *llm], llm) is None
    assert lexical(human, llm).paper == (PUTRI_HUMAN_GEN, PUTRI_LLM_GEN)
    assert lexical(llm, human).paper == (PUTRI_LLM_GEN, PUTRI_HUMAN_GEN)  # in our column order
    assert lexical(human, llm, paper="none").paper is None
    assert lexical(A, B).paper is None
    assert lexical(A, B, paper="putri").paper == (PUTRI_HUMAN_GEN, PUTRI_LLM_GEN)
    with pytest.raises(ConfigError, match="--paper"):
        lexical(A, B, paper="mcsqa")


def test_rows_and_json() -> None:
    plain = lexical(A, B)
    assert all("paper_a" not in row for row in plain.rows())
    shown = lexical(A, B, paper="putri")
    rows = {row["measure"]: row for row in shown.rows()}
    assert rows["unigram overlap"]["unit"] == "share"
    assert rows["unigram overlap"]["paper_a"] == 0.3975 and rows["unigram overlap"]["paper_b"] == 0.6548
    assert rows["unique unigrams"]["paper_a"] == 8596 and rows["unique bigrams"]["paper_a"] is None
    doc = json.loads(json.dumps(shown.to_json()))
    assert doc["unigram"]["shared"] == 6 and doc["paper"]["a"]["label"] == "Human_Gen"
    assert doc["fields"] == ["question", "choices"]


@needs_release
def test_putris_released_files_land_near_the_papers_overlaps() -> None:
    """Human_Gen vs LLM_Gen (ind and sun test files pooled): the paper reports 39.75% and 65.48%."""
    human = read_side(",".join(map(str, HUMAN_GEN)))
    llm = read_side(",".join(map(str, LLM_GEN)))
    result = lexical_sides(human, llm)
    assert (result.a.items, result.b.items) == (2997, 2246)
    assert result.paper == (PUTRI_HUMAN_GEN, PUTRI_LLM_GEN)
    share_a, share_b = result.unigram.share_a, result.unigram.share_b
    assert share_a is not None and share_b is not None
    assert abs(100 * share_a - 39.75) <= 1.5
    assert abs(100 * share_b - 65.48) <= 1.5
    # the figures the module docstring and docs/concepts/analyses.md quote
    assert (round(100 * share_a, 2), round(100 * share_b, 2)) == (38.91, 64.86)
    assert (result.a.unique_unigrams, result.b.unique_unigrams, result.unigram.shared) == (9915, 5948, 3858)
    assert result.bigram.share_a is not None and result.bigram.share_b is not None
    assert (round(100 * result.bigram.share_a, 2), round(100 * result.bigram.share_b, 2)) == (15.06, 18.33)
    # the hand-checked 300-per-language sample is not what the paper measured
    clean = lexical_sides(human, read_side(",".join(map(str, LLM_GEN_CLEAN))))
    assert clean.unigram.share_a is not None and abs(100 * clean.unigram.share_a - 39.75) > 10


def test_the_command_prints_the_table_and_writes_json_csv_svg(tmp_path: Path) -> None:
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    write_jsonl(a, A)
    write_jsonl(b, B)
    out = tmp_path / "out"
    result = runner.invoke(app, ["analyze", "lexical", str(a), str(b), "--paper", "putri", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "66.67%" in result.stdout and "85.71%" in result.stdout  # 6/9 and 6/7
    assert "39.75%" in result.stdout and "paper: Human_Gen" in result.stdout
    assert {p.name for p in out.iterdir()} == {"lexical.json", "lexical.csv", "lexical.svg", "lexical.pdf"}
    doc = json.loads((out / "lexical.json").read_text(encoding="utf-8"))
    assert doc["unigram"]["share_a"] == pytest.approx(6 / 9)
    with (out / "lexical.csv").open(encoding="utf-8") as handle:
        rows = {row["measure"]: row for row in csv.DictReader(handle)}
    assert float(rows["bigram overlap"]["b"]) == pytest.approx(0.5)
    assert (out / "lexical.svg").read_text(encoding="utf-8").lstrip().startswith("<?xml")
    assert (out / "lexical.pdf").read_bytes().startswith(b"%PDF")  # the same figure, for a paper


def test_bad_input_is_one_located_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = tmp_path / "a.jsonl"
    write_jsonl(a, A)
    with pytest.raises(SystemExit) as exit_info:
        main(["analyze", "lexical", str(a), str(tmp_path / "nope.jsonl"), "--out", str(tmp_path / "o")])
    assert exit_info.value.code == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "nope.jsonl" in err and len(err.splitlines()) == 1
    result = runner.invoke(app, ["analyze", "lexical", str(a), str(a), "--fields", "answers"])
    assert isinstance(result.exception, ConfigError) and "--fields" in str(result.exception)
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"id": "x", "question": 3}\n', encoding="utf-8")
    with pytest.raises(SystemExit):
        main(["analyze", "lexical", str(a), str(broken), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "broken.jsonl" in err and len(err.splitlines()) == 1
