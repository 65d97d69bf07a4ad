"""Re-checks of a finished run's items: queued once as verify tasks, unknown ids refused, and from ``analyze irt``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from senseforge.cli.main import app
from senseforge.data.schema import judgement
from senseforge.errors import ConfigError
from senseforge.kb.conceptnet import import_dump
from senseforge.pipelines.crow.config import CrowConfig
from senseforge.pipelines.crow.recipe import CROW
from senseforge.pipelines.mcsqa import MCSQA, McsqaConfig
from senseforge.pipelines.recheck import queue_rechecks, released_items
from senseforge.pipelines.rundir import store_url_of
from senseforge.pipelines.runner import build
from senseforge.pipelines.runstore import RunStore
from senseforge.pipelines.tables import tasks
from senseforge.store.db import Store

AUTHOR = "scripted/mcsqa-author"


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A dry-run mCSQA build an LM panel decided (no people), finished."""
    root = tmp_path_factory.mktemp("recheck")
    kb = root / "kb"
    import_dump("demo", kb)
    config = McsqaConfig(lang="en", n=15, kb=str(kb), model=AUTHOR, reviewers=(AUTHOR,), lm_review_as_hard=True)
    run = root / "run"
    assert build(MCSQA, config, run, store=Store()).state == "done"
    return run


def _queued(run: Path) -> list[tuple[str, str, str, int, str]]:
    store = RunStore(store_url_of(run))
    try:
        with store.engine.connect() as conn:
            rows = conn.execute(sa.select(tasks.c.type, tasks.c.item_id, tasks.c.item, tasks.c.k, tasks.c.grp))
            return [(str(t), str(i), str(item), int(k), str(g)) for t, i, item, k, g in rows]
    finally:
        store.close()


def test_a_recheck_is_a_verify_task_of_the_item_queued_once(finished_run: Path) -> None:
    items = released_items(finished_run)
    chosen = sorted(items)[0]
    before = _queued(finished_run)
    assert queue_rechecks(finished_run, [chosen, chosen]) == 1
    assert queue_rechecks(finished_run, [chosen]) == 0  # already queued: left as it is
    new = [row for row in _queued(finished_run) if row not in before]
    assert len(new) == 1
    kind, task_id, shown, k, group = new[0]
    assert (kind, task_id, k, group) == ("verify", f"{chosen}@recheck", 1, "recheck")
    assert json.loads(shown) == {**json.loads(items[chosen].model_dump_json()), "id": f"{chosen}@recheck"}


def test_ids_not_of_the_run_are_refused_in_one_line(finished_run: Path) -> None:
    before = _queued(finished_run)
    known = sorted(released_items(finished_run))[1]
    with pytest.raises(ConfigError) as raised:
        queue_rechecks(finished_run, [known, "q-nope", "a-nope"])
    message = str(raised.value)
    assert "\n" not in message and "a-nope, q-nope" in message and known not in message
    assert _queued(finished_run) == before  # nothing queued


def test_a_folder_without_released_items_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no released items"):
        queue_rechecks(tmp_path, ["x"])


def _rows(items: list[str], flipped: str, respondents: int = 30) -> list[dict[str, object]]:
    """Respondents of rising ability: respondent r gets item j right when r > 2 j; on ``flipped`` the able ones all
    pick the same wrong option."""
    rows: list[dict[str, object]] = []
    for r in range(respondents):
        for j, item in enumerate(items):
            right = (r * len(items)) > (j * respondents) // 2 + (r * 7 + j * 3) % 5
            if item == flipped:
                right = r < respondents // 3
            rows.append({"respondent": f"m{r}", "item": item, "correct": right, "choice": "A" if right else "B"})
    return rows


def test_analyze_irt_queues_its_suspicious_items_and_refuses_strangers(finished_run: Path, tmp_path: Path) -> None:
    items = sorted(released_items(finished_run))
    flipped = items[2]
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in _rows(items, flipped)), encoding="utf-8")
    result = CliRunner().invoke(
        app, ["analyze", "irt", str(data), "--out", str(tmp_path / "irt"), "--queue", str(finished_run)]
    )
    assert result.exit_code == 0, result.output
    flagged = [
        row["id"] for row in json.loads((tmp_path / "irt" / "irt.json").read_text())["items"] if row["suspicious"]
    ]
    assert flipped in flagged
    queued = {task_id for _, task_id, *_ in _queued(finished_run)}
    assert {f"{item}@recheck" for item in flagged} <= queued

    strangers = tmp_path / "strangers.jsonl"
    renamed = [{**row, "item": f"other-{row['item']}"} for row in _rows(items, flipped)]
    strangers.write_text("".join(json.dumps(row) + "\n" for row in renamed), encoding="utf-8")
    refused = CliRunner().invoke(
        app, ["analyze", "irt", str(strangers), "--out", str(tmp_path / "irt2"), "--queue", str(finished_run)]
    )
    assert isinstance(refused.exception, ConfigError)
    assert f"other-{flipped}" in str(refused.exception) and "not items of this run" in str(refused.exception)


def _files(run: Path) -> dict[str, bytes]:
    """Every file a run writes but its store and logs, by path."""
    return {
        str(p.relative_to(run)): p.read_bytes()
        for p in sorted(run.rglob("*"))
        if p.is_file() and not p.name.startswith("run.db") and "logs" not in p.relative_to(run).parts
    }


def _judge(run: Path, item: str, accept: bool, who: str = "ana") -> None:
    said = {} if accept else {"flags": ["ambiguous-question"], "comment": "two fit"}
    store = RunStore(store_url_of(run))
    try:
        store.add_judgements(
            [judgement(item_id=f"{item}@recheck", annotator=who, task="verify", accept=accept, **said)], "human"
        )
    finally:
        store.close()


def _resumed(tmp_path: Path, accept: bool | None) -> tuple[str, dict[str, bytes], dict[str, bytes]]:
    kb = tmp_path / "kb"
    import_dump("demo", kb)
    config = McsqaConfig(lang="en", n=15, kb=str(kb), model=AUTHOR, reviewers=(AUTHOR,), lm_review_as_hard=True)
    run = tmp_path / "run"
    assert build(MCSQA, config, run, store=Store()).state == "done"
    before = _files(run)
    chosen = sorted(released_items(run))[3]
    assert queue_rechecks(run, [chosen]) == 1
    if accept is not None:
        _judge(run, chosen, accept)
    assert build(MCSQA, config, run, store=Store(), resume=True).state == "done"
    return chosen, before, _files(run)


def test_an_item_rejected_on_recheck_leaves_the_release_and_nothing_else_moves(tmp_path: Path) -> None:
    chosen, before, after = _resumed(tmp_path, accept=False)
    assert set(after) == set(before)
    for name in before:
        if name.startswith(("items/", "dataset/")):
            lines = before[name].decode().splitlines(keepends=True)
            kept = [line for line in lines if json.loads(line)["id"] != chosen]
            assert after[name].decode() == "".join(kept), name  # the others keep their split, in order
    funnel_before, funnel_after = _one_rejected_on_recheck(before, after)
    assert funnel_after["kept"] == funnel_before["kept"] - 1
    assert json.loads(before["manifest.json"]) == json.loads(after["manifest.json"])  # the config hash too
    cost_before, cost_after = json.loads(before["cost.json"]), json.loads(after["cost.json"])
    assert cost_after.pop("kept") == cost_before.pop("kept") - 1
    cost_before.pop("cost_per_kept_question_usd"), cost_after.pop("cost_per_kept_question_usd")
    assert cost_after == cost_before  # the re-check's judgement is not the build's cost
    rejects_before = before["rejects.jsonl"].decode().splitlines(keepends=True)
    rejects_after = after["rejects.jsonl"].decode().splitlines(keepends=True)
    assert rejects_after[:-1] == rejects_before  # the build's own rejects as they were, then the re-check's
    row = json.loads(rejects_after[-1])
    assert (row["stage"], row["id"], row["reason"]) == ("recheck", chosen, "rejected_on_recheck")
    assert row["question"] and row["response"] is None
    assert row["evidence"] == {
        "item": chosen,
        "task": f"{chosen}@recheck",
        "votes": [{"annotator": "ana", "vote": "reject", "flags": ["ambiguous-question"], "comment": "two fit"}],
    }
    assert {n for n in before if before[n] != after[n]} <= {"cost.json", "funnel.json", "rejects.jsonl"} | {
        n for n in before if n.startswith(("items/", "dataset/"))
    }


def test_a_confirmed_recheck_and_one_still_waiting_change_no_byte(tmp_path: Path) -> None:
    _, before, after = _resumed(tmp_path / "confirmed", accept=True)
    assert after == before
    _, before, after = _resumed(tmp_path / "waiting", accept=None)
    assert after == before


CROW_SHOTS = Path(__file__).parents[1] / "fixtures" / "crow" / "shot_samples.json"


def _crow_resumed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, accept: bool | None
) -> tuple[dict[str, Any], dict[str, bytes], dict[str, bytes]]:
    """A dry-run CRoW build, one example of a context with others re-checked, judged (or not) and the run resumed."""
    monkeypatch.setenv("SENSEFORGE_HOME", str(tmp_path / "home"))
    config = CrowConfig(model="scripted/crow-author", source=(str(CROW_SHOTS),))
    run = tmp_path / "run"
    assert build(CROW, config, run, store=Store()).state == "done"
    before = _files(run)
    rows = [json.loads(line) for line in before["release/private.jsonl"].decode().splitlines()]
    shared = [row for row in rows if sum(other["context_id"] == row["context_id"] for other in rows) > 1]
    chosen = shared[-1]
    assert queue_rechecks(run, [chosen["example_id"]]) == 1
    if accept is not None:
        _judge(run, chosen["example_id"], accept)
    assert build(CROW, config, run, store=Store(), resume=True).state == "done"
    return chosen, before, _files(run)


def test_a_crow_example_rejected_on_recheck_leaves_its_release_and_nothing_else_moves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chosen, before, after = _crow_resumed(tmp_path, monkeypatch, accept=False)
    gone = chosen["example_id"]
    assert set(after) == set(before)
    for name in ("release/private.jsonl", "release/public.jsonl", f"dataset/{chosen['task']}.jsonl"):
        lines = before[name].decode().splitlines(keepends=True)
        assert after[name].decode() == "".join(line for line in lines if json.loads(line)["example_id"] != gone)
    funnel_before, funnel_after = _one_rejected_on_recheck(before, after)
    task_after = next(group for group in funnel_after["groups"] if group["name"] == chosen["task"])
    task_before = next(group for group in funnel_before["groups"] if group["name"] == chosen["task"])
    assert task_after["stages"][:-1] == task_before["stages"] and task_after["kept"] == task_before["kept"] - 1
    assert task_after["stages"][-1]["rejected"] == {"rejected_on_recheck": 1}
    assert json.loads(before["manifest.json"]) == json.loads(after["manifest.json"])  # the config hash too
    row = json.loads(after["rejects.jsonl"].decode().splitlines()[-1])
    assert (row["stage"], row["id"], row["reason"], row["checked"]) == ("recheck", gone, "rejected_on_recheck", chosen)
    assert [vote["vote"] for vote in row["evidence"]["votes"]] == ["reject"]
    assert after["rejects.jsonl"].decode().splitlines()[:-1] == before["rejects.jsonl"].decode().splitlines()
    changed = {name for name in before if before[name] != after[name]}
    allowed = {"funnel.json", "cost.json", "cost_by_task.json", "rejects.jsonl", "release/baseline_submission.jsonl"}
    assert changed <= allowed | {f"dataset/{chosen['task']}.jsonl", "release/private.jsonl", "release/public.jsonl"}


def test_a_confirmed_crow_recheck_changes_no_byte_and_ids_not_examples_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chosen, before, after = _crow_resumed(tmp_path, monkeypatch, accept=True)
    assert after == before
    with pytest.raises(ConfigError) as raised:
        queue_rechecks(tmp_path / "run", [chosen["context_id"]])
    message = str(raised.value)
    assert "example_id" in message and chosen["context_id"] in message and "\n" not in message


def _one_rejected_on_recheck(before: dict[str, bytes], after: dict[str, bytes]) -> tuple[Any, Any]:
    """The funnels before and after a resume: the same stages, and a last ``recheck`` row that removed one item."""
    funnel_before, funnel_after = json.loads(before["funnel.json"]), json.loads(after["funnel.json"])
    assert funnel_after["stages"][:-1] == funnel_before["stages"]
    assert funnel_after["stages"][-1] == {
        "stage": "recheck", "in": funnel_before["kept"], "out": funnel_before["kept"] - 1,
        "rejected": {"rejected_on_recheck": 1},
    }  # fmt: skip
    return funnel_before, funnel_after
