"""culture-gen's verification panel (``--panel``): scripted members answer each kept item, the panel's decision
makes it Easy or sends it to review (Hard when accepted); without ``--panel`` the recipe is unchanged (the golden
runs in ``tests/pipelines/test_golden.py`` guard its bytes)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
import typer

from senseforge.cli.main import app
from senseforge.pipelines.culture_gen.recipe import CULTURE_GEN, CultureGenConfig
from senseforge.pipelines.culture_gen.stages import CultureReview
from senseforge.pipelines.culture_gen.verify import CultureVerify
from senseforge.pipelines.runner import build
from senseforge.store.db import Store

REPO = Path(__file__).resolve().parents[3]
CONCEPTS = REPO / "tests" / "fixtures" / "golden" / "sources" / "culture-gen-concepts.csv"
RESPONDER = "scripted/tests/pipelines/culture_gen/responder.py:respond"
MEMBERS = tuple(
    f"scripted/tests/pipelines/culture_gen/members.py:{name}@loglik" for name in ("knows", "guesses", "misses")
)


@pytest.fixture(autouse=True)
def _at_repo(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The scripted models are named by paths relative to the repository; the senseforge home is the test's own."""
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("SENSEFORGE_HOME", str(tmp_path / "home"))


def _rows(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _config(**settings: object) -> CultureGenConfig:
    return CultureGenConfig.model_validate(
        {"concepts": str(CONCEPTS), "langs": ["id"], "model": RESPONDER, "panel": list(MEMBERS), **settings}
    )


def test_the_panel_makes_each_item_easy_or_sends_it_to_the_lm_review(tmp_path: Path) -> None:
    config = _config(hard_when="minority", reviewers=[RESPONDER], lm_review_final=True)
    summary = build(CULTURE_GEN, config, tmp_path / "run", store=Store())
    assert summary.state == "done"
    run = tmp_path / "run"
    panel = _rows(run / "id" / "panel.jsonl")
    assert {row["member"] for row in panel} == {member for member in MEMBERS}
    assert all(set(row) == {"id", "member", "method", "prediction", "correct", "confidence"} for row in panel)
    right = Counter(str(row["id"]) for row in panel if row["correct"])
    answered = {str(row["id"]) for row in panel}
    items = _rows(run / "id" / "items" / "test.jsonl")
    assert items and {item["id"] for item in items} <= answered  # panel.jsonl's ids are the released items'
    for item in items:  # minority: fewer than half of the three members right → Hard (the LM review accepted it)
        hard = right[str(item["id"])] < 1.5
        assert item["difficulty"] == ("hard" if hard else "easy"), item["question_concept"]
        assert (item["metadata"]["review"] == "lm") is hard
    assert Counter(item["difficulty"] for item in items) == {"easy": 2, "hard": 1}
    reviewed_out = [row for row in _rows(run / "rejects.jsonl") if row["stage"] == "review"]
    assert len(reviewed_out) == 1 and len(answered) == len(items) + 1  # ok-2: Hard, then rejected by review
    released = _rows(run / "id" / "dataset" / "test.jsonl")
    assert all("difficulty" not in row and "panel" not in row for row in released)
    cost = json.loads((run / "cost.json").read_text(encoding="utf-8"))
    assert cost["review_saved"]["items"] == 2 and cost["review_saved"]["judgements"] == 4  # every item was reviewed
    figures = {f["name"]: f for f in json.loads((run / "id" / "funnel.json").read_text(encoding="utf-8"))["figures"]}
    assert figures["verify"]["values"]["easy"] == 2 and figures["verify"]["values"]["to_review"] == 2
    assert {"panel-accuracy", "panel-pairwise", "panel-agreement", "panel-policies"} <= set(figures)


def test_items_every_panel_member_can_answer_are_easy_and_save_no_review(tmp_path: Path) -> None:
    """``--hard-when none``: `knows` answers every item right, so every item is Easy and none waits for people; the
    flow without a panel (no reviewers) reviewed nothing, so the panel saved nothing."""
    summary = build(CULTURE_GEN, _config(), tmp_path / "run", store=Store())
    assert summary.state == "done"
    items = _rows(tmp_path / "run" / "id" / "items" / "test.jsonl")
    assert len(items) == 4 and {item["difficulty"] for item in items} == {"easy"}
    cost = json.loads((tmp_path / "run" / "cost.json").read_text(encoding="utf-8"))
    assert cost["review_saved"]["items"] == 0


def test_people_see_the_hard_items_alone(tmp_path: Path) -> None:
    summary = build(CULTURE_GEN, _config(hard_when="at-most:1"), tmp_path / "run", store=Store())
    assert summary.state == "awaiting_review"
    panel = _rows(tmp_path / "run" / "id" / "panel.jsonl")
    right = Counter(str(row["id"]) for row in panel if row["correct"])
    assert sorted(right.values()) == [1, 1, 2, 2]
    assert summary.awaiting == 2  # the two items only `knows` answers right; the Easy ones skip review


def test_the_stages_a_panel_adds() -> None:
    plain = [stage.name for stage in CULTURE_GEN.stages(_config(panel=[]))]
    assert "verify" not in plain and "review" not in plain
    stages = CULTURE_GEN.stages(_config())
    verify, review = (next(s for s in stages if isinstance(s, kind)) for kind in (CultureVerify, CultureReview))
    assert [s.name for s in stages][-2:] == ["verify", "review"]
    assert isinstance(verify, CultureVerify) and verify.methods == ("loglik",) * 3 and verify.reference == "none"
    assert isinstance(review, CultureReview) and review.judges == ()
    chat = CultureVerify.configured(_config(panel=[RESPONDER], reviewers=[RESPONDER]), ("id",))[0]
    assert chat.methods == ("generate",) and chat.reference == "all"  # a scripted model is a chat model


def test_build_help_names_the_panel_settings(capsys: pytest.CaptureFixture[str]) -> None:
    root = typer.main.get_command(app)
    root.main(["build", "culture-gen", "--help"], prog_name="senseforge", standalone_mode=False, terminal_width=100)
    page = capsys.readouterr().out
    assert all(flag in page for flag in ("--panel", "--hard-when", "--skip-review-when")), page
