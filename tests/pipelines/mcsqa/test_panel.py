"""Acceptance of mCSQA's verification panel (``--panel``, ``--hard-when``, ``--skip-review-when``).

The members are scripted (:mod:`.panel_members`): each scores a choice from its text, so what it answers follows
from the item. What a build wrote is read against ``panel.jsonl`` and the decision table, computed here again
from its rows (not with the code under test).
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from senseforge.data.splits import SPLIT_NAMES
from senseforge.pipelines.mcsqa import MCSQA, McsqaConfig
from senseforge.pipelines.runner import build
from senseforge.store.db import Store

from ..golden import GOLDEN, outputs
from . import panel_members
from .conftest import read_jsonl

AUTHOR = "scripted/mcsqa-author"
MEMBERS = Path(panel_members.__file__)
N = 20
"""Question sets per build (three items each)."""
REVIEW_K = 2
"""People per reviewed item (the recipe's default)."""


def member(function: str, method: str = "loglik") -> str:
    """A scripted member of :mod:`.panel_members`."""
    return f"scripted/{MEMBERS}:{function}@{method}"


THREE = (member("short"), member("long"), member("hashed"))
FOUR = (*THREE, member("hashed", "letter"))


@pytest.fixture(scope="module")
def shared_store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    """One cache for this module's builds: the stages before the panel are asked once."""
    return Store(f"sqlite:///{tmp_path_factory.mktemp('panel-store') / 'store.db'}")


def is_hard(policy: str, right: int, members: int) -> bool:
    """``--hard-when`` as its help says: none right, fewer than half right, or at most N right."""
    if policy == "none":
        return right == 0
    if policy == "minority":
        return right < members / 2
    name, _, n = policy.partition(":")
    assert name == "at-most"
    return right <= int(n)


def panel_of(run_dir: Path) -> dict[str, list[dict[str, object]]]:
    """``panel.jsonl`` by item id: each member's row, in the file's order."""
    rows: dict[str, list[dict[str, object]]] = {}
    for row in read_jsonl(run_dir / "panel.jsonl"):
        rows.setdefault(str(row["id"]), []).append(row)
    return rows


def items_of(run_dir: Path) -> dict[str, dict[str, object]]:
    """Every item in ``items/``, by id."""
    return {str(item["id"]): item for split in SPLIT_NAMES for item in read_jsonl(run_dir / "items" / f"{split}.jsonl")}


def softmax(scores: Sequence[float]) -> list[float]:
    top = max(scores)
    weights = [math.exp(s - top) for s in scores]
    return [w / sum(weights) for w in weights]


def check_known_answers(item: dict[str, object], short: dict[str, object], long: dict[str, object]) -> None:
    """``short`` and ``long`` answered ``item`` as their scores say: their pick and the answer's probability."""
    choices = item["choices"]
    assert isinstance(choices, list)
    labels = [str(c["label"]) for c in choices]
    lengths = [len(str(c["text"])) for c in choices]
    answer = labels.index(str(item["answer"]))
    for row, scores in (
        (short, [-panel_members.STEEP * n for n in lengths]),
        (long, [panel_members.STEEP * n - 1000.0 for n in lengths]),
    ):
        pick = labels[scores.index(max(scores))]
        assert row["prediction"] == pick and row["correct"] == (pick == item["answer"]), (item["id"], row)
        assert row["confidence"] == pytest.approx(softmax(scores)[answer], abs=1e-6), (item["id"], row)


# --------------------------------------------------------------------------- --hard-when


@pytest.mark.parametrize(
    ("hard_when", "panel"),
    [("none", THREE), ("minority", THREE), ("at-most:1", THREE), ("minority", FOUR), ("at-most:2", FOUR)],
    ids=["none-3", "minority-3", "at-most-1-of-3", "minority-4", "at-most-2-of-4"],
)
def test_each_hard_when_makes_every_item_easy_or_hard_as_the_panel_answered(
    hard_when: str, panel: tuple[str, ...], demo_kb: Path, tmp_path: Path, shared_store: Store
) -> None:
    """Easy ⇔ the policy does not make the item Hard (by ``panel.jsonl``'s right answers); Hard ⇔ a Hard candidate
    the review accepted; the review's rejections are Hard candidates; the policies table counts the same."""
    config = McsqaConfig(
        lang="en", n=N, kb=str(demo_kb), model=AUTHOR, panel=panel, hard_when=hard_when, reviewers=(AUTHOR,),
        lm_review_as_hard=True,
    )  # fmt: skip
    run_dir = tmp_path / "run"
    assert build(MCSQA, config, run_dir, store=shared_store).state == "done"

    answers = panel_of(run_dir)
    assert len(answers) == 3 * N
    for rows in answers.values():
        assert [row["member"] for row in rows] == list(panel)
        assert [row["method"] for row in rows] == [given.rpartition("@")[2] for given in panel]
    right = {item_id: sum(bool(row["correct"]) for row in rows) for item_id, rows in answers.items()}
    hard = {item_id for item_id, r in right.items() if is_hard(hard_when, r, len(panel))}

    items = items_of(run_dir)
    rejects = read_jsonl(run_dir / "rejects.jsonl")
    assert not [r for r in rejects if r["stage"] == "verify"]  # skip-review is never: the panel rejects nothing
    after = {str(r["id"]) for r in rejects if r["stage"] in ("review", "moderate", "split")}
    by_review = {str(r["id"]) for r in rejects if r["stage"] == "review"}
    assert set(items) | after == set(answers) and not set(items) & after
    for item_id, item in items.items():
        assert item["difficulty"] == ("hard" if item_id in hard else "easy"), (item_id, right[item_id])
        provenance = item["provenance"]
        assert isinstance(provenance, dict)
        assert provenance["review"] == ("lm" if item_id in hard else "none"), item_id
        check_known_answers(item, answers[item_id][0], answers[item_id][1])
    kept_hard = {item_id for item_id, item in items.items() if item["difficulty"] == "hard"}
    assert by_review <= hard and kept_hard == hard - after
    assert kept_hard and len(kept_hard) < len(items)  # both kinds occur: the check above can fail

    figures = {f["name"]: f for f in json.loads((run_dir / "funnel.json").read_text(encoding="utf-8"))["figures"]}
    policies = figures["panel-policies"]
    assert policies["rows"] == ["none", "minority", *(f"at-most:{k}" for k in range(1, len(panel)))]
    for rule, (easy, hard_count) in zip(policies["rows"], policies["values"], strict=True):
        counted = sum(is_hard(rule, r, len(panel)) for r in right.values())
        assert (easy, hard_count) == (len(right) - counted, counted), rule


# --------------------------------------------------------------------------- the verify model as the panel


def test_the_verify_model_as_the_panel_writes_the_golden_dataset(demo_kb: Path, tmp_path: Path) -> None:
    """``--panel <the verify model>`` (a chat model: it answers by generation, as the verify stage does) makes the
    very dataset and items of ``test_dry_run_with_an_lm_panel``'s English golden run."""
    config = McsqaConfig(
        lang="en", n=40, kb=str(demo_kb), model=AUTHOR, reviewers=(AUTHOR,), lm_review_as_hard=True, panel=(AUTHOR,)
    )
    run_dir = tmp_path / "run"
    assert build(MCSQA, config, run_dir, store=Store()).state == "done"
    golden = GOLDEN / "mcsqa" / "dry-en"
    names = [name for name in outputs(golden) if name.startswith(("dataset/", "items/"))]
    assert len(names) == 2 * len(SPLIT_NAMES)
    differing = [name for name in names if (run_dir / name).read_bytes() != (golden / name).read_bytes()]
    assert not differing
    rows = read_jsonl(run_dir / "panel.jsonl")
    assert {(row["member"], row["method"]) for row in rows} == {(AUTHOR, "generate")}


def test_the_verify_model_as_the_panel_verifies_as_the_flow_without_one(demo_kb: Path, tmp_path: Path) -> None:
    """By log-likelihood (``--verify-by loglik``): the panel of the verify model alone writes the dataset and items of
    the same build without a panel, byte for byte, and answers each item once."""
    common = {"lang": "en", "n": N, "kb": str(demo_kb), "model": AUTHOR, "verify_by": "loglik"}
    common |= {"reviewers": (AUTHOR,), "lm_review_as_hard": True}
    store = Store()
    without, alone = tmp_path / "without", tmp_path / "alone"
    assert build(MCSQA, McsqaConfig(**common), without, store=store).state == "done"
    assert build(MCSQA, McsqaConfig(**common, panel=(AUTHOR,)), alone, store=store).state == "done"
    names = [f"{folder}/{split}.jsonl" for folder in ("dataset", "items") for split in SPLIT_NAMES]
    for name in names:
        assert (alone / name).read_bytes() == (without / name).read_bytes(), name
    assert not (without / "panel.jsonl").exists()
    rows = read_jsonl(alone / "panel.jsonl")
    assert len(rows) == len({row["id"] for row in rows}) == 3 * N
    assert {(row["member"], row["method"]) for row in rows} == {(AUTHOR, "loglik")}
    items = items_of(alone)
    easy = {item_id for item_id, item in items.items() if item["difficulty"] == "easy"}
    assert easy and easy == {str(row["id"]) for row in rows if row["correct"]} & set(items)


# --------------------------------------------------------------------------- --skip-review-when


def predicted(rows: Sequence[dict[str, object]], hard_when: str, p: float) -> str:
    """The decision table's row for ``confident:P`` (read from the module docstring of
    :mod:`senseforge.pipelines.verification`), from ``panel.jsonl``'s rows of one item."""
    right = [row for row in rows if row["correct"]]
    if not is_hard(hard_when, len(right), len(rows)):
        return "easy"
    predictions = {row["prediction"] for row in rows}
    # a likely wrong key needs the probability each member gave its own pick, which panel.jsonl does not hold:
    # the members here never all pick one option, so that row cannot apply
    assert right or len(predictions) > 1 or None in predictions, rows
    confidences = [row["confidence"] for row in rows]
    if right and all(isinstance(c, float) and c >= p for c in (row["confidence"] for row in right)):
        return "easy"
    if not right and all(isinstance(c, float) and c <= 1 - p for c in confidences):
        return "rejected"
    return "review"


def people_accept_all(run_dir: Path, decisions: Path) -> Path:
    """Two people accept every queued item."""
    queue = read_jsonl(run_dir / "review" / "queue.jsonl")
    with decisions.open("w", encoding="utf-8") as handle:
        for row in queue:
            for annotator in ("ana", "ben"):
                line = {"item_id": row["id"], "annotator": annotator, "task": "verify", "accept": True}
                handle.write(json.dumps(line) + "\n")
    return decisions


@pytest.mark.parametrize(
    ("panel", "writer", "hard_when"),
    [(THREE, None, "minority"), ((AUTHOR, member("short"), member("long")), AUTHOR, "none")],
    ids=["writer-not-a-member", "writer-a-member"],
)
def test_skip_review_when_confident_queues_exactly_the_undecided_and_counts_the_review_it_saved(
    panel: tuple[str, ...], writer: str | None, hard_when: str, demo_kb: Path, tmp_path: Path, shared_store: Store
) -> None:
    """``confident:0.6``: the review queue is the items the decision table sends to review, the panel rejects those
    it is sure are wrong, and ``cost.json`` counts ``review_k`` judgements for each item the flow without a panel
    (the writer's wrong answers; without the writer in the panel, the Hard candidates) would have queued."""
    p = 0.6
    config = McsqaConfig(
        lang="en", n=N, kb=str(demo_kb), model=AUTHOR, verify_by="loglik", panel=panel, hard_when=hard_when,
        skip_review_when=f"confident:{p}",
    )  # fmt: skip
    run_dir = tmp_path / "run"
    assert build(MCSQA, config, run_dir, store=shared_store).state == "awaiting_review"

    answers = panel_of(run_dir)
    assert len(answers) == 3 * N
    decision = {item_id: predicted(rows, hard_when, p) for item_id, rows in answers.items()}
    hard = {i for i, rows in answers.items() if is_hard(hard_when, sum(bool(r["correct"]) for r in rows), len(rows))}
    review = {item_id for item_id, d in decision.items() if d == "review"}
    queue = read_jsonl(run_dir / "review" / "queue.jsonl")
    assert len(queue) == len(review) and {row["id"] for row in queue} == review

    def queued_without(rows: Sequence[dict[str, object]]) -> bool:
        if writer is not None:
            return not next(row["correct"] for row in rows if row["member"] == writer)
        return is_hard(hard_when, sum(bool(row["correct"]) for row in rows), len(rows))

    saved = sum(queued_without(answers[item_id]) and d != "review" for item_id, d in decision.items())
    if writer is not None:  # the writer's wrong answers are not the Hard candidates: the count tells them apart
        assert saved != sum(item_id in hard and d != "review" for item_id, d in decision.items())
    # every row of the table that can occur does: Easy by the policy, Easy by confidence (not under ``none``: no
    # Hard candidate has a right answer), rejected, and review
    rows = {"rejected", "review"} if hard_when == "none" else {"easy", "rejected", "review"}
    assert {decision[i] for i in hard} == rows and set(answers) - hard and saved

    decisions = people_accept_all(run_dir, tmp_path / "decisions.jsonl")
    done = build(MCSQA, config, run_dir, resume=True, store=shared_store, decisions=[decisions], human_rate=0.05)
    assert done.state == "done"
    cost = json.loads((run_dir / "cost.json").read_text(encoding="utf-8"))
    judgements = REVIEW_K * saved
    expected = {"items": saved, "per_item": REVIEW_K, "judgements": judgements, "rate_usd": 0.05}
    assert cost["review_saved"] == {**expected, "cost_usd": round(judgements * 0.05, 8)}
    rejects = read_jsonl(run_dir / "rejects.jsonl")
    panel_rejected = {str(r["id"]) for r in rejects if r["reason"] == "panel_rejected"}
    assert panel_rejected == {item_id for item_id, d in decision.items() if d == "rejected"}
    assert all(r["stage"] == "verify" for r in rejects if r["reason"] == "panel_rejected")
    for item_id, item in items_of(run_dir).items():
        assert item["difficulty"] == ("hard" if decision[item_id] == "review" else "easy"), item_id


# --------------------------------------------------------------------------- kill -9 mid-panel


def _misses(db: Path, where: str = "") -> list[tuple[str, str]]:
    """(model, cache key) of each call the store's ledger says went to a backend and came back."""
    with sqlite3.connect(db) as conn:
        query = f"select model, cache_key from llm_ledger where not cache_hit and failure_kind is null {where}"
        return [(str(model), str(key)) for model, key in conn.execute(query)]


BLOCK_AT = 100
"""The request of :func:`.panel_members.hashed` (the third member) at which the killed build blocks: past the
cache's first write of its answers (every 64), short of its 300."""


def test_kill_9_mid_panel_then_resume_is_byte_identical_and_asks_no_call_again(demo_kb: Path, tmp_path: Path) -> None:
    config = McsqaConfig(
        lang="en", n=N, kb=str(demo_kb), model=AUTHOR, panel=THREE, reviewers=(AUTHOR,), lm_review_as_hard=True
    )
    clean = tmp_path / "clean"
    assert build(MCSQA, config, clean, store=Store(f"sqlite:///{tmp_path / 'clean.db'}")).state == "done"

    killed, db, ready = tmp_path / "killed", tmp_path / "killed.db", tmp_path / "blocked"
    flags = ["--lang", "en", "--n", str(N), "--kb", str(demo_kb), "--model", AUTHOR, "--panel", ",".join(THREE)]
    flags += ["--reviewers", AUTHOR, "--lm-review-as-hard", "--store", f"sqlite:///{db}", "--out", str(killed)]
    env = {**os.environ, "PANEL_BLOCK_AT": str(BLOCK_AT), "PANEL_BLOCK_READY": str(ready)}
    with (tmp_path / "stderr.txt").open("wb") as stderr:
        child = subprocess.Popen(
            [sys.executable, "-m", "senseforge", "build", "mcsqa", *flags], env=env, stdout=stderr, stderr=stderr
        )
        deadline = time.monotonic() + 600  # bounds a hung build only; the member blocks however fast the machine is
        while not ready.exists() and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        child.kill()
        child.wait(timeout=60)
    said = (tmp_path / "stderr.txt").read_text(encoding="utf-8", errors="replace")[-2000:]
    assert ready.exists(), f"the build ended (exit {child.returncode}) before the panel's third member: {said}"
    assert not (killed / "funnel.json").exists()

    before = _misses(db)
    hashed = "and model like '%:hashed'"
    asked = len(_misses(db, hashed))
    assert 0 < asked < BLOCK_AT < len(_misses(tmp_path / "clean.db", hashed))  # mid-panel, part of it stored

    done = build(MCSQA, config, killed, resume=True, store=Store(f"sqlite:///{db}"))
    assert done.state == "done"
    names = outputs(clean)
    assert names == outputs(killed) and "panel.jsonl" in names
    for name in names:
        assert (killed / name).read_bytes() == (clean / name).read_bytes(), name
    after = _misses(db)
    keys = [key for _, key in after]
    assert len(keys) == len(set(keys)), "a completed call was sent again"
    assert set(before) < set(after)
    assert {key for _, key in after} == {key for _, key in _misses(tmp_path / "clean.db")}
