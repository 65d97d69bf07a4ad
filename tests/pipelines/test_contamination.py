"""The contamination gate in builds: copies of registered items rejected (or flagged) before any model judges
them, nothing changed without a registry, and a resume refused once the registry changed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from senseforge.errors import ConfigError
from senseforge.pipelines.contamination import CROSS_SPLIT, GATE, SELF_CHECK, SELF_DUPLICATE, SelfDuplicates
from senseforge.pipelines.mcsqa import MCSQA, McsqaConfig
from senseforge.pipelines.runner import build
from senseforge.pipelines.runstore import Record, StageResult
from senseforge.pipelines.stage import StageContext
from senseforge.registry.store import Registry, Unit
from senseforge.store.db import Store

from .mcsqa.test_recipe import config as mcsqa_config


def config(kb: Path, **overrides: object) -> McsqaConfig:
    return mcsqa_config(kb, **{"n": 12, **overrides})


def register_questions(folder: Path, rows: list[dict[str, object]], source: Path) -> Registry:
    """A benchmark made of some of our own questions (as if a public set held them), registered."""
    source.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    registry = Registry.open(folder)
    registry.add(source, "public-set", licence="CC BY 4.0", embed=False)
    return registry


def test_copies_of_registered_items_are_rejected_naming_their_source(demo_kb: Path, tmp_path: Path) -> None:
    plain = config(demo_kb)
    build(MCSQA, plain, tmp_path / "plain", store=Store())
    released = [json.loads(line) for line in (tmp_path / "plain" / "dataset" / "train.jsonl").read_text().splitlines()]
    assert len(released) >= 4
    copied = [dict(row, id=f"pub-{i}") for i, row in enumerate(released[:2])]
    recased = dict(released[2], id="pub-2", question=str(released[2]["question"]).upper())
    register_questions(tmp_path / "reg", [*copied, recased], tmp_path / "public.jsonl")

    gated = config(demo_kb, registry=str(tmp_path / "reg"))
    assert gated.hash() != plain.hash()
    summary = build(MCSQA, gated, tmp_path / "gated", store=Store())
    assert summary.state == "done"
    funnel = json.loads((tmp_path / "gated" / "funnel.json").read_text())
    row = next(r for r in funnel["stages"] if r["stage"] == GATE)
    assert row["rejected"] == {"contaminated": 3}
    stages = [r["stage"] for r in funnel["stages"]]
    assert stages.index(GATE) < stages.index("distractors") < stages.index("verify")  # no call spent on a copy
    rejects = [json.loads(line) for line in (tmp_path / "gated" / "rejects.jsonl").read_text().splitlines()]
    gated_out = [r for r in rejects if r["stage"] == GATE]
    assert sorted(r["evidence"]["source_id"] for r in gated_out) == ["pub-0", "pub-1", "pub-2"]
    assert {r["evidence"]["registry"] for r in gated_out} == {"public-set"}
    assert {r["evidence"]["kind"] for r in gated_out} == {"exact", "normal"}
    kept = {json.loads(line)["question"] for line in (tmp_path / "gated" / "dataset" / "train.jsonl").open()}
    assert not kept & {row["question"] for row in released[:3]}
    manifest = json.loads((tmp_path / "gated" / "manifest.json").read_text())
    assert manifest["contamination"]["mode"] == "reject"
    assert manifest["contamination"]["checked_against"][0]["name"] == "public-set"
    assert len(manifest["contamination"]["registry_hash"]) == 64

    flagged = config(demo_kb, registry=str(tmp_path / "reg"), contamination="flag")
    build(MCSQA, flagged, tmp_path / "flagged", store=Store())
    items = [json.loads(line) for line in (tmp_path / "flagged" / "items" / "train.jsonl").read_text().splitlines()]
    marked = [item for item in items if "contamination" in item["metadata"]]
    assert sorted(m["metadata"]["contamination"][0]["source_id"] for m in marked) == ["pub-0", "pub-1", "pub-2"]
    plain_items = (tmp_path / "plain" / "dataset" / "train.jsonl").read_bytes()
    assert (tmp_path / "flagged" / "dataset" / "train.jsonl").read_bytes() == plain_items  # flags keep every item

    Registry.open(tmp_path / "reg").remove("public-set")
    register_questions(tmp_path / "reg", copied, tmp_path / "public.jsonl")
    with pytest.raises(ConfigError, match=r"contamination registry .* changed"):
        build(MCSQA, gated, tmp_path / "gated", resume=True, store=Store())


def test_no_gate_without_a_registry_or_when_off(demo_kb: Path, tmp_path: Path) -> None:
    assert GATE not in [s.name for s in MCSQA.stages(config(demo_kb))]
    off = config(demo_kb, registry=str(tmp_path), contamination="off")
    assert GATE not in [s.name for s in MCSQA.stages(off)]
    assert config(demo_kb).hash() == config(demo_kb, contamination="auto").hash()  # runs from before keep their hash
    empty = config(demo_kb, registry=str(tmp_path / "empty"))
    with pytest.raises(ConfigError, match="no benchmark registered"):
        build(MCSQA, empty, tmp_path / "run", store=Store())
    assert not (tmp_path / "run").exists()


def test_a_recipe_without_a_gate_refuses_a_registry_before_it_starts(tmp_path: Path) -> None:
    from .engine.tiny import Tiny
    from .engine.tiny import config as tiny_config

    with pytest.raises(ConfigError, match=r"tiny has no contamination gate yet.*analyze contamination"):
        build(Tiny(), tiny_config(registry=str(tmp_path / "reg")), tmp_path / "run", store=Store())
    assert not (tmp_path / "run").exists()


class _Written(Record):
    text: str
    lang: str = "id"
    split: str = "test"


def _unit(record_id: str, data: _Written) -> Unit:
    return Unit(record_id, data.lang, data.text)


def _split(data: _Written) -> str:
    return data.split


def test_the_final_barrier_keeps_the_first_record_id_of_each_copy_whatever_the_order() -> None:
    written = {
        "b": _Written(text="Di mana orang menyimpan uang?"),
        "a": _Written(text="di mana orang menyimpan uang"),  # b's normal form: b is the later id
        "c": _Written(text="Di mana orang menyimpan uang?", lang="su"),  # another language: not a copy
        "d": _Written(text="Di mana orang menyimpan uang?", split="train"),  # a's copy in another split
        "e": _Written(text="Apa yang dimakan saat sarapan?"),
    }
    records = [StageResult(key, "ok", data) for key, data in written.items()]
    stage = SelfDuplicates(SELF_CHECK, _unit, "reject", _split)
    verdicts = []
    for order in (records, records[::-1]):
        outcomes = stage.run(order, StageContext.__new__(StageContext)).outcomes
        verdicts.append({o.record_id: (o.status, o.reason, o.evidence) for o in outcomes if isinstance(o, StageResult)})
    assert verdicts[0] == verdicts[1]
    assert verdicts[0]["a"][0] == verdicts[0]["c"][0] == verdicts[0]["e"][0] == "ok"
    assert verdicts[0]["b"] == ("rejected", SELF_DUPLICATE, {"copy_of": "a", "kind": "normal", "score": 1.0})
    assert verdicts[0]["d"] == (
        "rejected",
        CROSS_SPLIT,
        {"copy_of": "a", "kind": "normal", "score": 1.0, "splits": ["test", "train"]},
    )
    flagged = SelfDuplicates(SELF_CHECK, _unit, "flag", _split).run(records, StageContext.__new__(StageContext))
    marks = {o.record_id: o.data.contamination for o in flagged.outcomes if isinstance(o, StageResult)}
    assert all(o.status == "ok" for o in flagged.outcomes if isinstance(o, StageResult))
    assert marks["b"] == [{"copy_of": "a", "kind": "normal", "score": 1.0, "reason": SELF_DUPLICATE}]
    assert marks["a"] is None and marks["e"] is None
