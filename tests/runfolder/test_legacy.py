"""Funnels written before the typed form open as the typed :class:`Funnel`: every recipe's old shape (the checked-in
copies under ``fixtures/runfolder/legacy``), recognised by its shape where there is no manifest, each figure holding
the old file's numbers; the golden run folders open as those old files read through the adapter (whether the
goldens hold the old shape or the typed one)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from senseforge.errors import ConfigError
from senseforge.runfolder.figures import Agreement, Counts, Share, Table
from senseforge.runfolder.folder import RunFolder
from senseforge.runfolder.funnel import Funnel
from senseforge.runfolder.legacy import funnel_from_legacy, recognise
from senseforge.runfolder.manifest import Manifest

FIXTURES = Path(__file__).parents[1] / "fixtures"
LEGACY = FIXTURES / "runfolder" / "legacy"
GOLDEN = FIXTURES / "golden"
COPIED = {
    # the demo's mcsqa-en as it was when the old copy was taken (the demo's goldens were recorded again for reply
    # shapes, #49): the run folder the copy belongs with, kept whole under fixtures/runfolder/before-shapes
    "mcsqa-en": FIXTURES / "runfolder" / "before-shapes" / "mcsqa-en",
    "crow": GOLDEN / "demo" / "crow",
    "human-gen": GOLDEN / "human-gen-people",
    "culture-adapt": GOLDEN / "culture-adapt-people",
    "culture-gen": GOLDEN / "culture-gen-lm-review",
}
"""Each old copy and the golden run folder it was copied from."""


def old(name: str, sub: str = "") -> dict[str, Any]:
    document: dict[str, Any] = json.loads((LEGACY / name / sub / "funnel.json").read_text(encoding="utf-8"))
    return document


def opened(name: str) -> Funnel:
    """The old copy read through the adapter, in its golden run's folder (where an old funnel left a count out, the
    adapter reads the run's files: human-gen's splits from its dataset)."""
    document = json.loads((LEGACY / name / "funnel.json").read_text(encoding="utf-8"))
    folder = LEGACY / name if (LEGACY / name / "id").is_dir() else COPIED[name]
    return funnel_from_legacy(document, None, folder)


def rows(funnel_rows: Any) -> list[dict[str, Any]]:
    return [row.model_dump(mode="json", by_alias=True) for row in funnel_rows]


def test_mcsqa_keeps_its_rows_and_every_figure_holds_the_old_numbers() -> None:
    document, funnel = old("mcsqa-en"), opened("mcsqa-en")
    assert (funnel.recipe, funnel.lang, funnel.kept, funnel.kept_unit) == ("mcsqa", "en", 9, "question")
    assert rows(funnel.stages) == document["stages"]
    assert funnel.stage("filter") is not None and funnel.stage("filter").rejected == {  # type: ignore[union-attr]
        "copied_example": 6,
        "target_in_question": 3,
    }
    assert funnel.title.startswith("mCSQA's construction funnel (its Figure 3)")
    assert funnel.cost_title == "Cost per step (mCSQA's Figure 4)"
    assert [f.name for f in funnel.figures] == ["question-sets", "refined", "verify", "review", "splits"]
    sets = funnel.figure("question-sets")
    assert isinstance(sets, Counts) and not sets.draw
    assert sets.values == {"sampled": 12, **document["question_sets"]["extraction"]}
    refined = funnel.figure("refined")
    assert isinstance(refined, Share) and (refined.part, refined.whole) == (0, 27) and refined.summary
    assert refined.caption == "Refinement: 0 of 27 questions changed by the refine step (0.0%)."
    verify = funnel.figure("verify")
    assert isinstance(verify, Counts) and verify.values == document["verify"] and verify.unit == "questions"
    review = funnel.figure("review")
    assert isinstance(review, Counts) and review.values == {"humans": 0, "lm_panel": 7} and not review.draw
    splits = funnel.figure("splits")
    assert isinstance(splits, Table) and splits.stacked and splits.columns == ["Easy", "Hard"]
    assert splits.rows == ["train", "validation", "test"]
    assert splits.values == [[s["easy"], s["hard"]] for s in document["splits"].values()] == [[2, 5], [0, 1], [0, 1]]
    assert funnel.splits == {"train": 7, "validation": 1, "test": 1}
    assert funnel.summary_lines()[0] == "kept 9 questions"
    assert "Refinement: 0 of 27 questions changed (0.0%)" in funnel.summary_lines()


def test_crow_groups_per_task_with_their_rows_and_the_tables_hold_the_old_numbers() -> None:
    document, funnel = old("crow"), opened("crow")
    by_task = document["by_task"]
    assert (funnel.recipe, funnel.kept, funnel.kept_unit, funnel.group_by) == ("crow", 5, "example", "task")
    assert funnel.judges_in_figures and funnel.groups_title is None
    assert [g.name for g in funnel.groups] == list(by_task) == document["tasks"]
    for group in funnel.groups:
        task = by_task[group.name]
        assert group.folder is None and rows(group.stages) == task["stages"]
        assert group.kept == task["examples"]["total"]
        contexts = group.figure("contexts")
        assert isinstance(contexts, Counts) and contexts.values["kept"] == task["contexts"]["kept"]
        for reason, n in task["contexts"]["left_out"].items():
            assert contexts.values[f"left out: {reason}"] == n
        examples, source = group.figure("examples"), group.figure("source")
        assert isinstance(examples, Counts) and examples.values == task["examples"]
        assert isinstance(source, Counts) and source.values == task["source"]
    tasks = funnel.figure("tasks")
    assert isinstance(tasks, Table) and tasks.rows == list(by_task)
    assert tasks.values == [
        [t["contexts"]["kept"], t["examples"]["total"], t["examples"]["valid"]] for t in by_task.values()
    ]
    dims = funnel.figure("dimensions")
    assert isinstance(dims, Table) and dims.rows == ["physical/spatial", "temporal"] and dims.columns == list(by_task)
    assert (
        dims.column("dialogue") == [2, 2]
        and dims.column("mt-zh-en") == [2, None]
        and dims.column("safety") == [None, None]
    )
    validators = funnel.figure("validators")
    assert isinstance(validators, Agreement)
    assert [g.label for g in validators.groups] == ["safety · ckv", "intent · ckv", "dialogue · wsv", "mt-zh-en · ckv"]
    first = validators.groups[0]
    assert (first.items, first.raters, first.extra["accept_rate"]) == (6, 3, 1.0)


def test_human_gen_figures_hold_its_qc_and_answer_agreement() -> None:
    document, funnel = old("human-gen"), opened("human-gen")
    assert (funnel.recipe, funnel.lang, funnel.kept) == ("human-gen", "id", 7)
    assert funnel.datasets == ["id/dataset"] and rows(funnel.stages) == document["stages"]
    assert [f.name for f in funnel.figures] == ["qc", "qc-totals", "answers"]
    qc = funnel.figure("qc")
    assert isinstance(qc, Counts) and qc.values == {"1 round": 7, "2 rounds": 1}
    assert (
        qc.caption == "Quality control: items by the rounds they took to pass (1 sent back, 1 revisions, 0 unresolved)."
    )
    totals = funnel.figure("qc-totals")
    assert isinstance(totals, Counts) and totals.values == {"items": 8, "sent_back": 1, "revisions": 1, "unresolved": 0}
    answers = funnel.figure("answers")
    assert isinstance(answers, Agreement) and answers.caption == "Answer agreement: 5 answers per item over 8 items."
    (rated,) = answers.groups
    old_answers = document["answers"]
    assert (rated.items, rated.raters, rated.ratings) == (8, 5, 40)
    assert (rated.fleiss_kappa, rated.krippendorff_alpha) == (
        old_answers["fleiss_kappa"],
        old_answers["krippendorff_alpha"],
    )
    assert rated.extra == {"excluded": 1, "majority is the creator's": 7}


def test_culture_adapt_reads_each_language_from_its_own_file() -> None:
    document, funnel = old("culture-adapt"), opened("culture-adapt")
    assert (funnel.recipe, funnel.kept, funnel.group_by) == ("culture-adapt", 4, "lang")
    assert funnel.datasets == ["id/dataset", "su/dataset"] and funnel.groups_title
    for group in funnel.groups:
        own = old("culture-adapt", group.name)
        assert group.folder == group.name and rows(group.stages) == own["stages"]
        assert (group.kept, group.splits) == (own["kept"], own["splits"])
        language = group.figure("language")
        assert isinstance(language, Counts) and not language.draw
        assert language.values == {"kept": 4, "other_language": document["by_lang"][group.name]["other_language"]}
    assert funnel.splits == {"train": 4, "validation": 4}
    adapted = funnel.figure("adapted")
    assert isinstance(adapted, Counts) and adapted.values == {"full": 1, "names": 1, "none": 2} and adapted.summary


def test_culture_gen_per_category_out_of_the_first_and_the_last_stage() -> None:
    funnel, own = opened("culture-gen"), old("culture-gen", "id")
    (group,) = funnel.groups
    assert (group.name, group.kept, group.splits) == ("id", 3, {"test": 3})
    categories = group.figure("categories")
    assert isinstance(categories, Table) and categories.rows == sorted(own["by_category"])
    first, last = categories.columns
    assert first == "generate" and last.startswith("after ")
    for name, (n_first, n_last) in zip(categories.rows, categories.values, strict=True):
        assert n_first == own["by_category"][name]["generate"]["out"]
        assert n_last == (own["by_category"][name].get(last.removeprefix("after ")) or {"out": 0})["out"]
    language = group.figure("language")
    assert isinstance(language, Counts) and language.values == {"slots": 12, "kept": 3, "other_language": 0}
    kept = funnel.figure("kept-of-slots")
    assert isinstance(kept, Table) and kept.rows == ["id"] and kept.values == [[3, 12]] and kept.summary


def test_a_language_file_opened_on_its_own_is_that_language() -> None:
    funnel = RunFolder.open(LEGACY / "culture-gen" / "id").funnel
    assert funnel is not None and (funnel.recipe, funnel.lang, funnel.kept) == ("culture-gen", "id", 3)
    assert [f.name for f in funnel.figures] == ["categories", "language"]
    adapt = RunFolder.open(LEGACY / "culture-adapt" / "su").funnel
    assert adapt is not None and (adapt.recipe, adapt.lang, adapt.splits) == (
        "culture-adapt",
        "su",
        {"train": 2, "validation": 2},
    )


@pytest.mark.parametrize(
    ("name", "recipe"),
    [
        ("mcsqa-en", "mcsqa"),
        ("crow", "crow"),
        ("human-gen", "human-gen"),
        ("culture-adapt", "culture-adapt"),
        ("culture-gen", "culture-gen"),
    ],
)
def test_each_old_shape_is_told_by_its_keys(name: str, recipe: str) -> None:
    assert recognise(old(name)) == recipe


def test_the_manifest_names_the_recipe_before_the_shape(tmp_path: Path) -> None:
    stages = [{"stage": "contamination", "in": 30, "out": 27, "rejected": {"contaminated": 3}}]
    manifest = Manifest(recipe="mcsqa", config={"lang": "en"})
    funnel = funnel_from_legacy({"stages": stages, "kept": 20}, manifest, tmp_path)
    assert (funnel.recipe, funnel.lang, funnel.kept, funnel.figures) == ("mcsqa", "en", 20, [])
    plain = funnel_from_legacy({"stages": stages, "kept": 20}, None, tmp_path)
    assert (plain.recipe, rows(plain.stages)) == ("unknown", stages)


@pytest.mark.parametrize("name", sorted(COPIED))
def test_the_golden_folder_opens_as_its_old_funnel_read_through_the_adapter(name: str) -> None:
    golden = RunFolder.open(COPIED[name])
    assert golden.funnel is not None
    assert golden.funnel == opened(name)


@pytest.mark.parametrize(
    "folder", sorted(p.parent.relative_to(GOLDEN).as_posix() for p in GOLDEN.rglob("funnel.json")), ids=str
)
def test_every_golden_funnel_opens_with_its_rows_and_kept(folder: str) -> None:
    path = GOLDEN / folder
    document = json.loads((path / "funnel.json").read_text(encoding="utf-8"))
    if (path.parent / "funnel.json").is_file():  # a group's own funnel: read through its run, as its group
        run = RunFolder.open(path.parent)
        group = run.funnel.group(path.name) if run.funnel is not None else None
        assert group is not None and group.folder == path.name
        assert group.kept == document["kept"] and rows(group.stages) == document["stages"]
        return
    found = RunFolder.open(path)
    assert found.funnel is not None and found.recipe in ("mcsqa", "crow", "human-gen", "culture-gen", "culture-adapt")
    assert found.funnel.kept == document["kept"] and rows(found.funnel.stages) == document["stages"]
    assert found.cost is None or found.cost.kept == document["kept"]


def test_the_paused_run_opens_with_its_manifest_and_no_funnel_yet() -> None:
    paused = RunFolder.open(GOLDEN / "paused" / "mcsqa-en-awaiting")
    assert paused.manifest is not None and paused.recipe == "mcsqa" and paused.manifest.config["lang"] == "en"
    assert paused.funnel is None and paused.cost is None and not paused.finished


def _copy(name: str, tmp_path: Path) -> Path:
    folder = tmp_path / name
    shutil.copytree(LEGACY / name, folder)
    return folder


def test_an_old_file_of_the_wrong_shape_names_the_file_and_the_place(tmp_path: Path) -> None:
    folder = _copy("crow", tmp_path)
    document = old("crow")
    document["by_task"]["dialogue"]["contexts"]["kept"] = "one"
    (folder / "funnel.json").write_text(json.dumps(document), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"crow/funnel\.json: by_task\.dialogue\.contexts\.kept: "):
        RunFolder.open(folder)
    (folder / "funnel.json").write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"funnel\.json: a funnel is a JSON object"):
        RunFolder.open(folder)
    (folder / "funnel.json").write_text('{"stages": [', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"funnel\.json: not JSON"):
        RunFolder.open(folder)


def test_a_language_file_of_the_wrong_shape_names_that_file(tmp_path: Path) -> None:
    folder = _copy("culture-adapt", tmp_path)
    own = old("culture-adapt", "su")
    own["stages"][0]["in"] = None
    (folder / "su" / "funnel.json").write_text(json.dumps(own), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"culture-adapt/su/funnel\.json: stages\.0\.in: ") as raised:
        RunFolder.open(folder)
    assert str(raised.value).count("funnel.json") == 1
