"""Exports: golden lm-eval YAML and Parquet content, HF round trips, located errors, and a real lm-eval run.

Golden files live in ``tests/fixtures/export/``; after an intended change, regenerate them with
``SENSEFORGE_UPDATE_GOLDEN=1 pytest tests/data/test_export.py`` and review the diff.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from senseforge import __version__
from senseforge.data.export import (
    COLUMNS,
    PROMPT_TEMPLATE,
    choice_continuations,
    choice_prefix,
    dataset_card,
    export_hf,
    export_lm_eval,
    export_parquet,
    format_prompt,
    hf_features,
    item_to_row,
    lm_eval_row,
    read_splits,
)
from senseforge.data.io import write_jsonl
from senseforge.data.schema import Choice, MCItem, Provenance
from senseforge.errors import ConfigError, DataValidationError

FIXTURES = Path(__file__).parent.parent / "fixtures"
GOLDEN = FIXTURES / "export"
ITEMS = GOLDEN / "items"
UPDATE = os.environ.get("SENSEFORGE_UPDATE_GOLDEN") == "1"
yaml = pytest.importorskip("yaml")


def _golden(name: str, actual: str) -> None:
    path = GOLDEN / name
    if UPDATE:
        path.write_text(actual, encoding="utf-8", newline="\n")
    assert path.read_text(encoding="utf-8") == actual, f"{path} differs (SENSEFORGE_UPDATE_GOLDEN=1 rewrites it)"


def _normalise(text: str, out: Path) -> str:
    return text.replace(str(out.absolute()), "<OUT_DIR>").replace(__version__, "<VERSION>")


@pytest.fixture()
def splits() -> dict[str, list[MCItem]]:
    return read_splits(ITEMS)


def _item(item_id: str, lang: str = "en", answer: str | None = "A") -> MCItem:
    return MCItem(
        id=item_id,
        lang=lang,
        question="Where is the milk?",
        choices=[Choice(label="A", text="fridge"), Choice(label="B", text="roof")],
        answer=answer,
    )


# --------------------------------------------------------------------------- reading


def test_read_splits_reads_mcitem_jsonl(splits: dict[str, list[MCItem]]) -> None:
    assert {name: len(items) for name, items in splits.items()} == {"train": 4, "validation": 4, "test": 4}
    assert {item.lang for items in splits.values() for item in items} == {"en", "ja"}
    assert [item.answer for item in splits["test"] if item.lang == "ja"] == [None, None]


def test_read_splits_flat_schema_needs_lang(tmp_path: Path) -> None:
    shutil.copy(FIXTURES / "mcsqa" / "test_sample.jsonl", tmp_path / "test.jsonl")
    with pytest.raises(ConfigError, match=r"test\.jsonl: .*--lang"):
        read_splits(tmp_path)
    splits = read_splits(tmp_path, lang="fr")
    assert list(splits) == ["test"] and all(item.lang == "fr" for item in splits["test"])
    assert splits["test"][1].answer is None and splits["test"][1].difficulty == "hard"


def test_dev_is_read_as_validation_and_both_is_an_error(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "dev.jsonl", [_item("a")])
    assert list(read_splits(tmp_path)) == ["validation"]
    write_jsonl(tmp_path / "validation.jsonl", [_item("b")])
    with pytest.raises(ConfigError, match=r"both validation\.jsonl and dev\.jsonl"):
        read_splits(tmp_path)


def test_folder_without_split_files_is_one_clear_error(tmp_path: Path) -> None:
    (tmp_path / "items.jsonl").write_text("{}\n", encoding="utf-8")
    with pytest.raises(DataValidationError, match=r"no split files \(expected train.jsonl.*found items.jsonl"):
        read_splits(tmp_path)
    with pytest.raises(DataValidationError, match="not a folder"):
        read_splits(tmp_path / "missing")


def test_malformed_row_is_located(tmp_path: Path) -> None:
    good = _item("a").model_dump_json()
    bad = json.loads(_item("b").model_dump_json())
    bad["answer"] = "Z"
    (tmp_path / "train.jsonl").write_text(f"{good}\n{json.dumps(bad)}\n", encoding="utf-8")
    with pytest.raises(DataValidationError, match=r"train\.jsonl:2: .*answer 'Z' is not one of the choice labels"):
        read_splits(tmp_path)
    (tmp_path / "train.jsonl").write_text(f"{good}\n{{not json\n", encoding="utf-8")
    with pytest.raises(DataValidationError, match=r"train\.jsonl:2: invalid JSON"):
        read_splits(tmp_path)


def test_malformed_flat_row_is_located(tmp_path: Path) -> None:
    row = {"id": "x", "question": "q?", "choices": {"label": ["A", "B"], "text": ["a"]}, "answerKey": "A"}
    (tmp_path / "test.jsonl").write_text(json.dumps(row) + "\n", encoding="utf-8")
    with pytest.raises(DataValidationError, match=r"test\.jsonl:1: choices: 2 labels but 1 texts"):
        read_splits(tmp_path, lang="en")


def test_empty_split_file_and_duplicate_ids_are_errors(tmp_path: Path) -> None:
    (tmp_path / "test.jsonl").write_text("\n", encoding="utf-8")
    with pytest.raises(DataValidationError, match=r"test\.jsonl: no items"):
        read_splits(tmp_path)
    write_jsonl(tmp_path / "test.jsonl", [_item("a")])
    write_jsonl(tmp_path / "train.jsonl", [_item("a")])
    with pytest.raises(DataValidationError, match="item id 'a' appears in both 'train' and split 'test'"):
        read_splits(tmp_path)


# --------------------------------------------------------------------------- prompt


def test_prompt_and_continuations_follow_the_language(splits: dict[str, list[MCItem]]) -> None:
    en, ja = splits["train"][0], splits["train"][2]
    assert format_prompt(en) == "Question: Where do people usually keep milk so that it stays cold?\nAnswer:"
    assert choice_continuations(en)[0] == " refrigerator"
    assert choice_continuations(ja)[0] == "冷蔵庫"
    assert (choice_prefix("zh-Hant-TW"), choice_prefix("id"), choice_prefix("th")) == ("", " ", "")
    assert choice_prefix("eu") == " "  # no literals row: written with spaces
    assert PROMPT_TEMPLATE == "Question: {question}\nAnswer:"


# --------------------------------------------------------------------------- lm-eval


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_lm_eval_yaml_and_rows_match_golden(splits: dict[str, list[MCItem]], tmp_path: Path, lang: str) -> None:
    out = tmp_path / f"task-{lang}"
    task = export_lm_eval(splits, out, task_name=f"sf_demo_{lang}", lang=lang)
    text = task.yaml_path.read_text(encoding="utf-8")
    _golden(f"lm_eval/sf_demo_{lang}.yaml", _normalise(text, out))
    config = yaml.safe_load(text)
    files = config["dataset_kwargs"]["data_files"]
    assert all(Path(path).is_absolute() and Path(path).is_file() for path in files.values())
    assert config["metadata"]["senseforge"]["prompt"] == PROMPT_TEMPLATE
    assert config["target_delimiter"] == choice_prefix(lang)
    rows = {
        name: [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines()]
        for name, path in files.items()
    }
    _golden(
        f"lm_eval/rows_{lang}.jsonl",
        "".join(f"{name}\t{json.dumps(row, ensure_ascii=False)}\n" for name, split in rows.items() for row in split),
    )
    assert all(value is not None for split in rows.values() for row in split for value in row.values())


def test_lm_eval_withheld_test_falls_back_to_validation(splits: dict[str, list[MCItem]], tmp_path: Path) -> None:
    task = export_lm_eval(splits, tmp_path / "ja", task_name="sf_ja", lang="ja")
    assert (task.test_split, task.validation_split, task.fewshot_split) == ("validation", "validation", "train")
    assert task.counts == {"train": 2, "validation": 2, "test": 2}
    only_withheld = {"test": [_item("a", answer=None)], "train": [_item("b")]}
    with pytest.raises(DataValidationError, match=r"every item has an answer \(test withholds 1 of 1 answers\)"):
        export_lm_eval(only_withheld, tmp_path / "x", task_name="x")
    assert not (tmp_path / "x").exists()


def test_lm_eval_partly_withheld_train_gives_no_fewshot(tmp_path: Path) -> None:
    splits = {"train": [_item("a"), _item("b", answer=None)], "test": [_item("c")]}
    task = export_lm_eval(splits, tmp_path / "t", task_name="t")
    assert (task.test_split, task.validation_split, task.fewshot_split) == ("test", None, None)
    config = yaml.safe_load(task.yaml_path.read_text(encoding="utf-8"))
    assert "fewshot_split" not in config and "training_split" not in config and "validation_split" not in config
    assert "hard" not in json.loads((tmp_path / "t" / "test.jsonl").read_text(encoding="utf-8"))


def test_lm_eval_language_and_name_errors(splits: dict[str, list[MCItem]], tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"2 languages \(en, ja\).*--lang"):
        export_lm_eval(splits, tmp_path / "a", task_name="t")
    with pytest.raises(DataValidationError, match="no items in language 'fr'"):
        export_lm_eval(splits, tmp_path / "a", task_name="t", lang="fr")
    with pytest.raises(ConfigError, match="--lang: 'english' is not a BCP-47"):
        export_lm_eval(splits, tmp_path / "a", task_name="t", lang="english")
    with pytest.raises(ConfigError, match=r"task name '\.\./evil'"):
        export_lm_eval(splits, tmp_path / "a", task_name="../evil", lang="en")
    assert not (tmp_path / "a").exists()


def test_exports_take_a_folder(tmp_path: Path) -> None:
    task = export_lm_eval(ITEMS, tmp_path / "en", task_name="t", lang="en")
    assert task.counts == {"train": 2, "validation": 2, "test": 2}


# --------------------------------------------------------------------------- Parquet and HF


def _type_name(arrow_type: Any) -> str:
    """An Arrow type without the list's child name (``item`` or ``element`` by pyarrow version)."""
    pa = pytest.importorskip("pyarrow")
    if pa.types.is_list(arrow_type):
        return f"list<{_type_name(arrow_type.value_type)}>"
    if pa.types.is_struct(arrow_type):
        return "struct<" + ", ".join(f"{f.name}: {_type_name(f.type)}" for f in arrow_type) + ">"
    return str(arrow_type)


def _parquet_content(out: Path) -> str:
    """Each Parquet file as a header line (split, schema) and one compact JSON line per row."""
    pq = pytest.importorskip("pyarrow.parquet")
    lines = []
    for path in sorted(out.glob("*.parquet")):
        table = pq.read_table(path)
        schema = {field.name: _type_name(field.type) for field in table.schema}
        lines.append(json.dumps({"split": path.stem, "schema": schema}))
        lines += [json.dumps(row, ensure_ascii=False) for row in table.to_pylist()]
    return "\n".join(lines) + "\n"


def test_parquet_content_and_card_match_golden(splits: dict[str, list[MCItem]], tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    out = export_parquet(splits, tmp_path / "demo-export")
    assert sorted(p.name for p in out.iterdir()) == ["README.md", "test.parquet", "train.parquet", "validation.parquet"]
    content = _parquet_content(out)
    _golden("parquet.jsonl", content)
    rows = [json.loads(line) for line in content.splitlines() if "split" not in json.loads(line)]
    assert len(rows) == 12 and all(list(row) == list(COLUMNS) for row in rows)
    _golden("card.md", _normalise((out / "README.md").read_text(encoding="utf-8"), out))


def test_hf_round_trip(splits: dict[str, list[MCItem]], tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    pq = pytest.importorskip("pyarrow.parquet")
    out = export_hf(splits, tmp_path / "hf")
    loaded = datasets.load_from_disk(str(out))
    assert list(loaded) == ["train", "validation", "test"]
    for name, items in splits.items():
        assert loaded[name].features == hf_features()
        assert loaded[name].to_list() == [item_to_row(item) for item in items]
    assert loaded["train"].features["answerKey"] == datasets.Value("string")  # a string label, not a ClassLabel
    assert loaded["test"][3]["answerKey"] == "" and loaded["train"][0]["hard"] is None
    card = (out / "README.md").read_text(encoding="utf-8")
    assert "load_from_disk" in card and "| test | 4 | 2 | 2 | 0 | 2 |" in card
    parquet = export_parquet(splits, tmp_path / "pq")
    assert pq.read_schema(parquet / "train.parquet").remove_metadata() == hf_features().arrow_schema.remove_metadata()


def test_hf_without_card(splits: dict[str, list[MCItem]], tmp_path: Path) -> None:
    pytest.importorskip("datasets")
    out = export_hf(splits, tmp_path / "hf", card=False)
    assert not (out / "README.md").exists() and (out / "dataset_dict.json").is_file()


def test_card_counts_provenance(splits: dict[str, list[MCItem]]) -> None:
    card = dataset_card(splits, title="demo")
    assert "- review: `(unrecorded)` (1), `human` (3), `lm` (1), `none` (7)" in card
    assert "- recipe: `commonsenseqa` (1), `mcsqa` (11)" in card
    assert "- model: `scripted/panel` (1), `scripted/writer` (11)" in card
    assert "| ja | 2 | 2 | 2 |" in card and "language:\n- en\n- ja\n" in card


# --------------------------------------------------------------------------- atomic folders


def test_existing_folder_needs_overwrite_and_failures_leave_no_trace(
    splits: dict[str, list[MCItem]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(ConfigError, match="not empty; choose another --out or pass --overwrite"):
        export_parquet(splits, out)

    def broken(*args: Any, **kwargs: Any) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(pq, "write_table", broken)
    with pytest.raises(OSError, match="disk full"):
        export_parquet(splits, out, overwrite=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"] and (out / "keep.txt").is_file()
    monkeypatch.undo()
    export_parquet(splits, out, overwrite=True)
    assert not (out / "keep.txt").exists() and (out / "train.parquet").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_mapping_input_is_checked(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="split name 'my split'"):
        export_lm_eval({"my split": [_item("a")]}, tmp_path / "a", task_name="t")
    with pytest.raises(DataValidationError, match="split 'test': no items"):
        export_lm_eval({"test": []}, tmp_path / "a", task_name="t")
    with pytest.raises(DataValidationError, match="'a' appears twice in split 'test'"):
        export_lm_eval({"test": [_item("a"), _item("a")]}, tmp_path / "a", task_name="t")


def test_lm_eval_row_has_no_nulls() -> None:
    row = lm_eval_row(_item("a"), with_hard=False)
    assert row["question_concept"] == "" and row["difficulty"] == "" and "hard" not in row


# --------------------------------------------------------------------------- a real lm-eval run


@pytest.mark.slow
def test_lm_eval_runs_the_exported_task_unmodified(
    splits: dict[str, list[MCItem]],
    tmp_path: Path,
    tiny_gpt2: Callable[[Path, list[str]], None],
    lm_eval_runner: Callable[..., None],
) -> None:
    pytest.importorskip("lm_eval")
    pytest.importorskip("transformers")
    tasks = tmp_path / "tasks"
    for lang in ("en", "ja"):
        export_lm_eval(splits, tasks / lang, task_name=f"sf_test_{lang}", lang=lang)
    texts = [item.question + " " + c.text for items in splits.values() for item in items for c in item.choices]
    tiny_gpt2(tmp_path / "model", texts)
    lm_eval_runner(tmp_path / "model", "sf_test_en,sf_test_ja", tasks, tmp_path / "results", "--limit", "50")
    (result_file,) = (tmp_path / "results").rglob("results_*.json")
    results = json.loads(result_file.read_text(encoding="utf-8"))
    # en scores test (2 items with answers); ja's test withholds answers, so ja scores validation (2 items)
    assert results["n-samples"] == {
        "sf_test_en": {"original": 2, "effective": 2},
        "sf_test_ja": {"original": 2, "effective": 2},
    }
    for task in ("sf_test_en", "sf_test_ja"):
        assert 0.0 <= results["results"][task]["acc,none"] <= 1.0
        assert 0.0 <= results["results"][task]["acc_norm,none"] <= 1.0
    assert results["configs"]["sf_test_ja"]["metadata"]["senseforge"]["choice_prefix"] == ""


def test_exports_are_deterministic(splits: dict[str, list[MCItem]], tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")

    def snapshot(folder: Path) -> dict[str, bytes]:
        return {path.name: path.read_bytes() for path in sorted(folder.iterdir())}

    out = tmp_path / "out"
    first = snapshot(export_parquet(splits, out))
    assert snapshot(export_parquet(splits, out, overwrite=True)) == first
    task = export_lm_eval(splits, out, task_name="t", lang="ja", overwrite=True)
    first = snapshot(task.yaml_path.parent)
    assert snapshot(export_lm_eval(splits, out, task_name="t", lang="ja", overwrite=True).yaml_path.parent) == first


def test_the_card_of_a_run_says_how_it_was_built_what_it_cost_and_its_licences(tmp_path: Path) -> None:
    pytest.importorskip("datasets")
    run = tmp_path / "mcsqa-en"
    (run / "items").mkdir(parents=True)
    reviewed = _item("q1").model_copy(update={"provenance": Provenance(recipe="mcsqa", review="human")})
    plain = _item("q2").model_copy(update={"provenance": Provenance(recipe="mcsqa", review="lm")})
    (run / "items" / "test.jsonl").write_text(reviewed.model_dump_json() + "\n" + plain.model_dump_json() + "\n")
    manifest = {"recipe": "mcsqa", "models": {"openai/gpt-4o-mini": {}}, "templates": {"generate/en": "ab" * 32}}
    manifest |= {"seeds": {"split": 0}, "senseforge_version": "0.1", "git_sha": None}
    (run / "manifest.json").write_text(json.dumps(manifest))
    funnel = {"stages": [{"stage": "question_sets", "in": 3, "out": 3, "rejected": {}}], "kept": 2}
    (run / "funnel.json").write_text(json.dumps(funnel))
    (run / "cost.json").write_text(json.dumps({"total_usd": 0.004, "cost_per_kept_question_usd": 0.002}))
    card = (export_hf(run / "items", tmp_path / "hf") / "README.md").read_text(encoding="utf-8")
    for needle in (
        "## How it was built",
        "- recipe: `mcsqa`",
        "`openai/gpt-4o-mini`",
        "`generate/en` abababababab",
        "reviewed by people: 50.0% of the items",
        "| question_sets | 3 | 3 |  |",
        "Cost: $0.004000, $0.002000 per kept item.",
        "ConceptNet 5 assertions (CC BY-SA 4.0",
        "## Intended use and known limits",
        "- checked against: no contamination registry",
    ):
        assert needle in card, needle
    gate = {"mode": "reject", "checked_against": [{"name": "csqa-dev", "items": 1221, "licence": "MIT"}]}
    (run / "manifest.json").write_text(json.dumps(manifest | {"contamination": gate}))
    gated = (export_hf(run / "items", tmp_path / "hf-gated") / "README.md").read_text(encoding="utf-8")
    assert "- checked against: `csqa-dev` (1221 items, licence MIT); copies rejected" in gated
    alone = (export_hf({"test": [plain]}, tmp_path / "alone") / "README.md").read_text(encoding="utf-8")
    assert "## How it was built" not in alone  # items given in memory: no run to describe
    assert "item response fit" not in gated
    (run / "analysis" / "irt").mkdir(parents=True)
    (run / "analysis" / "irt" / "irt.json").write_text(json.dumps({"summary": "2PL fit of 2 items; 0 suspicious."}))
    fitted = (export_hf(run / "items", tmp_path / "hf-irt") / "README.md").read_text(encoding="utf-8")
    assert "- item response fit (`analysis/irt/irt.json`): 2PL fit of 2 items; 0 suspicious." in fitted
