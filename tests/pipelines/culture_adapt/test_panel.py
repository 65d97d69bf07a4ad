"""culture-adapt's verification panel (``--panel``): scripted members answer each kept item in every language,
each language's item is Easy or Hard on its own, and an item the panel rejects in one language goes in all of
them; without ``--panel`` the recipe is unchanged (``tests/pipelines/test_golden.py`` guards its bytes)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
import typer

from senseforge.cli.main import app
from senseforge.pipelines.culture_adapt.config import CultureAdaptConfig
from senseforge.pipelines.culture_adapt.recipe import CULTURE_ADAPT
from senseforge.pipelines.culture_adapt.verify import AdaptVerify
from senseforge.pipelines.runner import build
from senseforge.store.db import Store

from .members import items

REPO = Path(__file__).resolve().parents[3]
SCRIPT = "scripted/tests/pipelines/culture_adapt/members.py"
MEMBERS = tuple(f"{SCRIPT}:{name}@loglik" for name in ("knows", "reads_id", "misses"))


@pytest.fixture(autouse=True)
def _at_repo(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The scripted models are named by paths relative to the repository; the senseforge home is the test's own."""
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("SENSEFORGE_HOME", str(tmp_path / "home"))


def _rows(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _config(tmp_path: Path, **settings: object) -> CultureAdaptConfig:
    source = tmp_path / "source.jsonl"
    source.write_text("".join(json.dumps(item) + "\n" for item in items()), encoding="utf-8")
    given = {"source": [str(source)], "model": f"{SCRIPT}:respond", "similarity": "chrf", "panel": list(MEMBERS)}
    return CultureAdaptConfig.model_validate({**given, "hard_when": "minority", **settings})


def test_each_language_item_is_easy_or_hard_by_its_own_panel_answers(tmp_path: Path) -> None:
    run = tmp_path / "run"
    assert build(CULTURE_ADAPT, _config(tmp_path), run, store=Store()).state == "done"
    found: dict[str, str] = {}
    for lang in ("id", "su"):
        panel = _rows(run / lang / "panel.jsonl")  # beside the language's dataset folder
        assert len(panel) == 3 * 3 and {str(row["id"]).split("_")[1] for row in panel} == {lang}
        right = Counter(str(row["id"]) for row in panel if row["correct"])
        for item in _rows(run / lang / "items" / "test.jsonl"):  # minority: fewer than half right → Hard
            assert item["difficulty"] == ("hard" if right[str(item["id"])] < 1.5 else "easy")
            found[str(item["id"])] = str(item["difficulty"])
        assert all("difficulty" not in row for row in _rows(run / lang / "dataset" / "test.jsonl"))
    assert Counter(found.values()) == {"easy": 3, "hard": 3}  # two members read Indonesian, one Sundanese
    assert {item for item, how in found.items() if how == "hard"} == {
        f"adapt_su_s-{c}" for c in ("rain", "cold", "sleep")
    }
    figures = {f["name"]: f for f in json.loads((run / "su" / "funnel.json").read_text(encoding="utf-8"))["figures"]}
    assert figures["verify"]["values"] == {"easy": 0, "hard": 3, "panel_rejected": 0, "likely_wrong_key": 0}
    assert "panel-policies" in figures
    assert "review_saved" not in json.loads((run / "cost.json").read_text(encoding="utf-8"))


def test_an_item_the_panel_rejects_in_one_language_goes_in_every_language(tmp_path: Path) -> None:
    """confident:0.9: the Sundanese items `knows` answers surely are Easy; every member surely wrong on the
    Sundanese sleep item (not all on one option: no likely wrong key) drops it in Indonesian too."""
    run = tmp_path / "run"
    assert build(CULTURE_ADAPT, _config(tmp_path, skip_review_when="confident:0.9"), run, store=Store()).state == "done"
    (reject,) = _rows(run / "rejects.jsonl")
    assert (reject["stage"], reject["reason"], reject["evidence"]) == (
        "verify",
        "panel_rejected",
        {"rejected_in": ["su"]},
    )
    for lang in ("id", "su"):
        kept = {str(item["id"]): item["difficulty"] for item in _rows(run / lang / "items" / "test.jsonl")}
        assert kept == {f"adapt_{lang}_s-rain": "easy", f"adapt_{lang}_s-cold": "easy"}
        assert len(_rows(run / lang / "panel.jsonl")) == 3 * 3  # the rejected item's answers too


def test_the_stage_a_panel_adds(tmp_path: Path) -> None:
    plain = CULTURE_ADAPT.stages(_config(tmp_path, panel=[]))
    assert [stage.name for stage in plain][-1] == "keep"
    stages = CULTURE_ADAPT.stages(_config(tmp_path))
    verify = stages[-1]
    assert isinstance(verify, AdaptVerify) and [s.name for s in stages][-2:] == ["keep", "verify"]
    assert verify.folders == ("id", "su") and verify.reference == "none" and verify.methods == ("loglik",) * 3


def test_a_run_without_a_panel_keeps_its_config_hash_and_stored_form() -> None:
    """The panel's settings are later settings: at their default they are neither hashed nor stored, so a run
    made before them resumes (the hash pinned as computed before culture-adapt had them)."""
    config = CultureAdaptConfig(source=("test=/x/t.jsonl",), adapt_check_k=2, similarity="chrf")
    assert config.hash() == "6be6fb19d760905d4feceb93518396df3ce3979c104007b79c58e76793b8f21d"
    assert not {"panel", "hard_when", "skip_review_when"} & set(config.model_dump(mode="json"))
    panelled = config.model_copy(update={"panel": MEMBERS[:1], "hard_when": "none"})
    assert panelled.model_dump(mode="json")["panel"] == [MEMBERS[0]] and panelled.hash() != config.hash()


def test_build_help_names_the_panel_settings(capsys: pytest.CaptureFixture[str]) -> None:
    root = typer.main.get_command(app)
    root.main(["build", "culture-adapt", "--help"], prog_name="senseforge", standalone_mode=False, terminal_width=100)
    page = capsys.readouterr().out
    assert all(flag in page for flag in ("--panel", "--hard-when", "--skip-review-when")), page
