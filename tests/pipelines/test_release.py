"""The engine writes what a recipe's release declares: the tiny recipe gets its dataset, items, funnel (the one
typed form, with its figures and groups) and costs from the engine alone."""

from __future__ import annotations

import ast
import json
from pathlib import Path

from senseforge.data.schema import MCItem
from senseforge.pipelines.crow.config import CrowConfig
from senseforge.pipelines.culture_adapt.config import CultureAdaptConfig
from senseforge.pipelines.culture_gen.recipe import CultureGenConfig
from senseforge.pipelines.human_gen.config import HumanGenConfig
from senseforge.pipelines.mcsqa import McsqaConfig
from senseforge.pipelines.recipes import recipes
from senseforge.pipelines.release import OwnFiles, Release, Splitting
from senseforge.pipelines.runner import build
from senseforge.pipelines.runstore import StageResult
from senseforge.pipelines.split import Ratios
from senseforge.runfolder.folder import RunFolder
from senseforge.runfolder.funnel import Funnel, Group
from senseforge.store.db import Store

from .engine.tiny import Piece, Tiny, config


def _lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_an_ungrouped_release_is_written_by_the_engine(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    summary = build(Tiny(), config(words=("sun", "rain", "broken")), run_dir, store=Store())
    assert summary.state == "done"
    assert sorted(p.name for p in (run_dir / "dataset").iterdir()) == ["test.jsonl"]
    assert _lines(run_dir / "dataset" / "test.jsonl")[0] == {"id": "w0/0", "text": "sun-0"}  # the declared row
    items = [MCItem.model_validate(row) for row in _lines(run_dir / "items" / "test.jsonl")]
    assert [(i.id, i.choices[0].text) for i in items] == [
        ("w0/0", "sun-0"),
        ("w0/2", "sun-2"),
        ("w1/0", "rain-0"),
        ("w1/2", "rain-2"),
    ]

    document = json.loads((run_dir / "funnel.json").read_text(encoding="utf-8"))
    assert document["format"] == 2 and document["recipe"] == "tiny"
    funnel = Funnel.model_validate(document)
    assert funnel == summary.funnel
    assert funnel.kept == 4 and funnel.kept_unit == "part" and funnel.splits == {"test": 4}
    assert funnel.datasets == ["dataset"] and funnel.groups == [] and funnel.group_by is None
    parts = funnel.figure("parts")
    assert parts is not None and parts.kind == "counts" and parts.values == {"sun": 2, "rain": 2}
    assert funnel.summary_lines() == ["kept 4 parts", "Parts kept per word: sun 2 · rain 2"]
    cost = json.loads((run_dir / "cost.json").read_text(encoding="utf-8"))
    assert cost["kept"] == 4 and "cost_per_kept_part_usd" in cost  # named after the declared unit
    opened = RunFolder.open(run_dir)
    assert opened.funnel == funnel and opened.cost is not None and opened.cost.kept == 4


def test_a_grouped_release_has_a_folder_funnel_and_cost_per_group(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    summary = build(Tiny(), config(words=("sun", "rain", "broken"), grouped=True), run_dir, store=Store())
    funnel = summary.funnel
    assert funnel is not None and funnel.group_by == "task"
    assert [g.name for g in funnel.groups] == ["sun", "rain", "broken"]
    assert funnel.datasets == ["sun/dataset", "rain/dataset", "broken/dataset"]
    sun = funnel.group("sun")
    assert sun is not None and sun.folder == "sun" and sun.kept == 2 and sun.splits == {"test": 2}
    assert [(row.stage, row.in_, row.out) for row in sun.stages] == [
        ("words", 1, 1),
        ("expand", 3, 3),
        ("flank", 3, 3),
        ("middle", 3, 2),
        ("judge", 2, 2),
    ]
    broken = funnel.group("broken")  # its reply was malformed: a group of nothing kept, its files empty
    assert broken is not None and broken.kept == 0 and broken.stages[1].rejected == {"malformed_output": 1}
    assert (run_dir / "broken" / "dataset" / "test.jsonl").read_text(encoding="utf-8") == ""
    assert [row["id"] for row in _lines(run_dir / "rain" / "dataset" / "test.jsonl")] == ["w1/0", "w1/2"]
    assert Group.model_validate_json((run_dir / "sun" / "funnel.json").read_text(encoding="utf-8")) == sun
    figure = sun.figure("kept")
    assert figure is not None and figure.kind == "counts" and figure.values == {"parts": 2}
    costs = {w: json.loads((run_dir / w / "cost.json").read_text(encoding="utf-8")) for w in ("sun", "broken")}
    assert costs["sun"]["kept"] == 2 and costs["sun"]["stages"]["flank"]["calls"] == 6  # its own parts' calls
    assert costs["broken"]["kept"] == 0 and "flank" not in costs["broken"]["stages"]
    assert not (run_dir / "dataset").exists() and funnel.splits == {"test": 4}  # the groups' splits summed


def test_a_release_split_by_ratios_is_seeded_and_every_split_written(tmp_path: Path) -> None:
    words = tuple(f"w{i}" for i in range(6))
    first = build(Tiny(), config(words=words, split="50/25/25"), tmp_path / "a", store=Store())
    again = build(Tiny(), config(words=words, split="50/25/25"), tmp_path / "b", store=Store())
    assert first.funnel is not None and sum(first.funnel.splits.values()) == first.funnel.kept > 0
    assert set(first.funnel.splits) == {"train", "validation", "test"}
    for name in ("train", "validation", "test"):
        a = (tmp_path / "a" / "dataset" / f"{name}.jsonl").read_bytes()
        assert a == (tmp_path / "b" / "dataset" / f"{name}.jsonl").read_bytes()
        assert len(a.splitlines()) == first.funnel.splits[name]
    assert again.funnel == first.funnel


def test_a_record_that_names_its_split_keeps_it() -> None:
    records = [StageResult(f"r{i}", "ok", Piece(word=w)) for i, w in enumerate(("validation", "test", "validation"))]
    items = [
        MCItem(
            id=r.record_id, lang="en", question="q", choices=[{"label": "A", "text": "a"}, {"label": "B", "text": "b"}]
        )
        for r in records
    ]
    pairs = list(zip(records, items, strict=True))
    own = Splitting(of=lambda r: r.data.word).cut(pairs)
    assert {k: [i.id for i in v] for k, v in own.items()} == {"validation": ["r0", "r2"], "test": ["r1"]}
    every = Splitting(of=lambda r: r.data.word, every=True).cut(pairs)
    assert list(every) == ["train", "validation", "test"] and every["train"] == []
    assert list(Splitting().cut(pairs)) == ["test"]
    assert sum(map(len, Splitting(Ratios.of("80/10/10"), seed=3).cut(pairs).values())) == 3


PIPELINES = Path(__file__).resolve().parents[2] / "src" / "senseforge" / "pipelines"


def test_no_recipe_writes_its_outputs_or_renders_them() -> None:
    """The engine writes every recipe's outputs (no ``finish``, no funnel subclass), and the CLI renders them:
    nothing in ``pipelines/`` imports ``rich``."""
    for path in sorted(PIPELINES.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
                assert not any(n == "rich" or n.startswith("rich.") for n in names), f"{path}: imports {names}"
            if isinstance(node, ast.FunctionDef):
                assert node.name != "finish", f"{path}:{node.lineno}: a recipe's finish (declare a release)"
            if isinstance(node, ast.ClassDef):
                bases = {ast.unparse(base) for base in node.bases}
                assert not bases & {"Funnel", "report.Funnel"}, f"{path}:{node.lineno}: a Funnel subclass"


def test_every_recipe_declares_its_release() -> None:
    configs = {
        "mcsqa": McsqaConfig(lang="ja", model="scripted/mcsqa-author", reviewers=("scripted/mcsqa-author",)),
        "culture-gen": CultureGenConfig(langs=("id", "su"), model="scripted/culture-gen-author"),
        "culture-adapt": CultureAdaptConfig(source=("items.jsonl",), model="scripted/culture-adapt-author"),
        "human-gen": HumanGenConfig(pool=("a", "b", "c", "d")),
        "crow": CrowConfig(model="scripted/crow-author"),
    }
    found = {name: recipe.release(configs[name]) for name, recipe in recipes().items()}
    assert set(found) == set(configs)
    mcsqa, gen, adapt, human, crow = (found[n] for n in ("mcsqa", "culture-gen", "culture-adapt", "human-gen", "crow"))
    assert isinstance(mcsqa, Release) and mcsqa.kept_unit == "question" and mcsqa.lang == "ja" and not mcsqa.groups
    assert isinstance(gen, Release) and gen.groups == ("id", "su") and gen.folders and gen.group_cost
    assert gen.datasets() == ["id/dataset", "su/dataset"]
    assert isinstance(adapt, Release) and adapt.folders and not adapt.group_cost and adapt.group_of is None
    assert isinstance(human, Release) and human.datasets() == ["id/dataset"] and human.split == Splitting()
    assert isinstance(crow, OwnFiles) and crow.group_by == "task" and crow.cost_file == "cost_by_task.json"
