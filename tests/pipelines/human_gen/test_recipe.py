"""human-gen in process: assignment, config checks, exclusion, unresolved QC, checkers, the awaiting/resume loop."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from senseforge.annotate.store import AnnotationStore
from senseforge.annotate.tasktypes import task_type
from senseforge.data.concepts import Concept
from senseforge.pipelines.human_gen.config import HumanGenConfig
from senseforge.pipelines.human_gen.recipe import HUMAN_GEN
from senseforge.pipelines.human_gen.records import HumanGenRecord
from senseforge.pipelines.human_gen.stages import QC_UNRESOLVED, assign
from senseforge.pipelines.review import EXCLUDED
from senseforge.pipelines.runner import build
from senseforge.pipelines.runstore import RunStore, sqlite_url

Fields = Callable[[str, str, Any], dict[str, Any] | None]


def test_pairs_share_a_concept_list_per_category() -> None:
    concepts = [Concept(cat, f"{cat}{i}") for cat in ("culinary", "place") for i in range(4)]
    pairs = assign(concepts, ["a", "b", "c", "d"], "pairs")
    of = {who: [c.concept for w, c in pairs if w == who] for who in "abcd"}
    assert of["a"] == of["b"] == ["culinary0", "culinary1", "place0", "place1"]
    assert of["c"] == of["d"] == ["culinary2", "culinary3", "place2", "place3"]
    assert len(assign(concepts, ["a", "b", "c"], "each")) == 24
    uneven = assign([Concept("culinary", "x"), Concept("place", "y")], ["a", "b", "c", "d"], "pairs")
    assert [(w, c.concept) for w, c in uneven] == [("a", "x"), ("b", "x"), ("c", "y"), ("d", "y")]
    one = assign(concepts, ["a", "b", "c"], "one")
    assert sorted(c.concept for _, c in one) == sorted(c.concept for c in concepts)
    assert [w for w, _ in one] == ["a"] * 3 + ["b"] * 3 + ["c"] * 2


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"pool": ("a", "b", "c")}, "even pool, got 3 annotators .a, b, c.: .*--assignment one .*--assignment each"),
        ({"pool": ("a", "b"), "answers": 2}, "at most pool − 1 .* lower --answers or add people to --pool"),
        ({"pool": ("a", "a")}, "given twice"),
        ({"pool": ("a",), "assignment": "each"}, "at least two"),
        ({"pool": ("a", "b"), "checkers": ("a",)}, "lone checker.*add another to --checkers, or leave --checkers out"),
    ],
)
def test_config_refuses_what_cannot_work(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        HumanGenConfig(**settings)


def _table(tmp_path: Path) -> Path:
    table = tmp_path / "concepts.csv"
    table.write_text("category,concept\nculinary,rendang\nplace,pasar\n", encoding="utf-8")
    return table


def _drive(config: HumanGenConfig, run_dir: Path, fields: Fields, rounds: int = 10) -> Any:
    """Build, let every pool member (and checker) do all they are offered, resume; until done."""
    summary = build(HUMAN_GEN, config, run_dir)
    people = list(dict.fromkeys([*config.pool, *config.checkers]))
    for _ in range(rounds):
        if summary.state == "done":
            return summary
        store = AnnotationStore(sqlite_url(run_dir / "run.db"))
        for who in people:
            for task in ("create", "qc", "revise", "answer"):
                while (lease := store.next_assignment(who, task)) is not None:
                    body = fields(who, task, lease.input)
                    assert body is not None, (who, task, lease.input)
                    assert store.submit(lease.id, who, task_type(task).parse(lease.input, body))
        store.close()
        summary = build(HUMAN_GEN, config, run_dir, resume=True)
    raise AssertionError("never finished")


def _write(slot: Any) -> dict[str, Any]:
    return {
        "question": f"Di mana orang biasanya makan {slot.concept}?",
        "options": ["rumah", "kantor", "pasar malam", "sekolah", "sawah"],
        "answer": "A",
        "distractor": "C",
    }


def test_an_item_more_than_three_answerers_flag_is_excluded(tmp_path: Path) -> None:
    config = HumanGenConfig(concepts=str(_table(tmp_path)), assignment="one", pool=("a", "b", "c", "d", "e", "f"))

    def fields(who: str, task: str, given: Any) -> dict[str, Any] | None:
        if task == "create":
            return _write(given)
        if task == "qc":
            return {"verdict": "complete"}
        if task == "answer":
            flagged = given.question_concept == "rendang" and who in ("b", "c", "d", "e")  # four of five flag it
            return {"choice": "B" if who == "b" else "A", "certain": "yes", "flags": ["ambiguous-option:C"] * flagged}
        return None

    summary = _drive(config, tmp_path / "run", fields)
    run = RunStore(sqlite_url(tmp_path / "run" / "run.db"))
    (excluded,) = run.results("answer", "rejected", HumanGenRecord)
    assert excluded.reason == EXCLUDED and excluded.data.concept == "rendang"
    (kept,) = run.results("answer", "ok", HumanGenRecord)
    assert kept.data.answer_majority == "A" and len(kept.data.answers or ()) == 5
    run.close()
    funnel = summary.funnel
    answers = funnel.figure("answers")
    assert answers is not None and answers.kind == "agreement" and funnel.kept == 1
    assert answers.groups[0].extra == {"excluded": 1, "majority is the creator's": 1}
    assert answers.groups[0].items == 2 and answers.groups[0].raters == config.k


def test_qc_gives_up_after_max_rounds_and_dedicated_checkers_do_qc(tmp_path: Path) -> None:
    config = HumanGenConfig(
        concepts=str(_table(tmp_path)), assignment="one", pool=("a", "b"), checkers=("qc1", "qc2"), max_qc_rounds=2
    )
    seen_checkers: set[str] = set()

    def fields(who: str, task: str, given: Any) -> dict[str, Any] | None:
        if task == "create":
            return _write(given)
        if task == "qc":
            seen_checkers.add(who)
            never = given.concept == "rendang"
            return {"verdict": "needs_revision", "comment": "masih kurang"} if never else {"verdict": "complete"}
        if task == "revise":
            assert given.history[-1].status == "needs_revision" and given.history[-1].comment == "masih kurang"
            return {**_write(given), "question": f"Di mana orang biasa membeli {given.concept}?"}
        return {"choice": "A", "certain": "no", "reason": "ragu"}

    _drive(config, tmp_path / "run", fields)
    assert seen_checkers <= {"qc1", "qc2"} and seen_checkers
    run = RunStore(sqlite_url(tmp_path / "run" / "run.db"))
    (gave_up,) = run.results("qc", "rejected", HumanGenRecord)
    assert gave_up.reason == QC_UNRESOLVED
    statuses = [e.status for e in gave_up.data.qc_history or ()]
    assert statuses == ["submitted", "needs_revision", "revised", "needs_revision"]
    (passed,) = run.results("answer", "ok", HumanGenRecord)
    assert passed.data.concept == "pasar" and passed.data.answer_majority == "A"
    run.close()


def test_the_creators_comment_reaches_the_checker(tmp_path: Path) -> None:
    """What the creator says with an item is the comment of round 0's event: on the QC task and in the history."""
    config = HumanGenConfig(concepts=str(_table(tmp_path)), assignment="one", pool=("a", "b"))
    shown: dict[str, Any] = {}

    def fields(who: str, task: str, given: Any) -> dict[str, Any] | None:
        if task == "create":
            said = {"comment": "sumber: resep nenek"} if given.concept == "rendang" else {}
            return {**_write(given), **said}
        if task == "qc":
            shown[given.concept] = task_type("qc").view(given)["creator_comment"]
            assert given.history[0].status == "submitted"
            return {"verdict": "complete"}
        return {"choice": "A", "certain": "yes"}

    _drive(config, tmp_path / "run", fields)
    assert shown == {"rendang": "sumber: resep nenek", "pasar": None}
    run = RunStore(sqlite_url(tmp_path / "run" / "run.db"))
    history = {r.data.concept: r.data.qc_history or [] for r in run.results("qc", "ok", HumanGenRecord)}
    assert history["rendang"][0].comment == "sumber: resep nenek"
    assert history["pasar"][0].comment is None
    (slot,) = [r for r in run.results("create", "ok", HumanGenRecord) if r.data.concept == "pasar"]
    assert "create_comment" not in slot.payload  # no comment: the record is stored as before
    run.close()


def test_with_adjudicate_a_tied_majority_waits_for_a_ruling(tmp_path: Path) -> None:
    table = tmp_path / "concepts.csv"
    table.write_text("category,concept\nculinary,rendang\n", encoding="utf-8")
    config = HumanGenConfig(concepts=str(table), assignment="one", pool=("a", "b", "c", "d", "e"), adjudicate=True)

    def fields(who: str, task: str, given: Any) -> dict[str, Any] | None:
        if task == "create":
            return _write(given)
        if task == "qc":
            return {"verdict": "complete"}
        return {"choice": "A" if who in ("b", "c") else "B", "certain": "yes"}  # b, c: A; d, e: B — a tie

    with pytest.raises(AssertionError, match="never finished"):
        _drive(config, tmp_path / "run", fields, rounds=3)
    store = AnnotationStore(sqlite_url(tmp_path / "run" / "run.db"))
    (split,) = store.splits("answer")
    assert [vote for _, vote in split["votes"]] == ["A", "A", "B", "B"]
    store.adjudicate("boss", "answer", split["item_id"], {"choice": "B", "certain": "yes"})
    store.close()
    done = build(HUMAN_GEN, config, tmp_path / "run", resume=True)
    assert done.state == "done"
    row = next(iter((tmp_path / "run" / "id" / "dataset" / "test.jsonl").read_text().splitlines()))
    assert '"answer_majority": "B"' in row and "adjudicator" not in row  # the ruling decides; answers are the four


def test_a_copy_of_a_registered_item_or_of_another_creators_is_rejected(tmp_path: Path) -> None:
    import json

    from senseforge.pipelines.contamination import GATE, SELF_CHECK, SELF_DUPLICATE
    from senseforge.registry.store import Registry

    public = tmp_path / "public.jsonl"
    public.write_text(
        json.dumps(_row_of("pub-7", "Di mana orang biasanya makan rendang?", ["rumah", "kantor", "pasar malam"]))
        + "\n",
        encoding="utf-8",
    )
    Registry.open(tmp_path / "reg").add(public, "public-id", licence="CC BY-SA 4.0", embed=False)
    table = tmp_path / "concepts.csv"
    table.write_text("category,concept\nculinary,rendang\nplace,pasar\nculinary,sate\n", encoding="utf-8")
    config = HumanGenConfig(
        concepts=str(table), assignment="one", pool=("a", "b", "c"), answers=2, registry=str(tmp_path / "reg")
    )
    asked: list[str] = []

    def fields(who: str, task: str, given: Any) -> dict[str, Any] | None:
        if task == "create":
            written = _write(given)  # rendang: the registered question; pasar and sate: one question twice
            if given.concept in ("pasar", "sate"):
                written["question"] = "Apa yang biasanya dibeli orang di pasar bersama sate?"
            return written
        if task == "qc":
            asked.append(given.concept)
            return {"verdict": "complete"}
        return {"choice": "A", "certain": "yes"}

    summary = _drive(config, tmp_path / "run", fields)
    assert "rendang" not in asked  # no checker was asked about the copy
    funnel = summary.funnel.model_dump(mode="json", by_alias=True)
    rows = {row["stage"]: row for row in funnel["stages"]}
    assert list(rows) == ["slots", "create", GATE, "qc", "answer", SELF_CHECK]
    assert rows[GATE]["rejected"] == {"contaminated": 1} and rows[SELF_CHECK]["rejected"] == {SELF_DUPLICATE: 1}
    run = RunStore(sqlite_url(tmp_path / "run" / "run.db"))
    (copy,) = run.results(GATE, "rejected", HumanGenRecord)
    assert copy.data.concept == "rendang"
    assert copy.evidence == {"registry": "public-id", "source_id": "pub-7", "kind": "exact", "score": 1.0,
                             "licence": "CC BY-SA 4.0"}  # fmt: skip
    (twice,) = run.results(SELF_CHECK, "rejected", HumanGenRecord)
    (kept,) = run.results(SELF_CHECK, "ok", HumanGenRecord)
    assert twice.record_id > kept.record_id  # the later id goes, whichever arrived first
    assert twice.evidence == {"copy_of": kept.record_id, "kind": "exact", "score": 1.0}
    run.close()
    released = (tmp_path / "run" / "id" / "dataset" / "test.jsonl").read_text().splitlines()
    assert [json.loads(line)["id"] for line in released] == [kept.record_id]
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["contamination"]["mode"] == "reject"


def _row_of(id_: str, question: str, options: list[str]) -> dict[str, Any]:
    return {"id": id_, "question": question, "choices": {"label": list("ABC"), "text": options}, "answerKey": "A"}
