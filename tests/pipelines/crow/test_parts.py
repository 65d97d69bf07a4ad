"""The parts of ``build crow``: task specs as data, the inputs and their filters, the reply parsers, the edit rule and
deduplication as stages, and the config's checks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

import pytest

from senseforge.errors import ConfigError, DataValidationError
from senseforge.llm.base import PromptStyle
from senseforge.pipelines.crow.config import CrowConfig
from senseforge.pipelines.crow.parse import parse_rewrite, parse_triples
from senseforge.pipelines.crow.records import CrowRecord, CrowTriple
from senseforge.pipelines.crow.source import read_sources, source_records
from senseforge.pipelines.crow.stages import CheckEdits, Dedup
from senseforge.pipelines.crow.tasks import builtin_tasks, read_task_specs, task_specs
from senseforge.pipelines.crow.templates import CKA_SHAPE, WSG_SHAPE, Knowledge, Rewrite, cka_request, wsg_request
from senseforge.pipelines.outcomes import Reject
from senseforge.pipelines.runstore import StageResult

FIXTURES = Path(__file__).parents[2] / "fixtures"
SPECS = builtin_tasks()


def test_the_built_in_tasks_carry_crows_stage_choices_and_filters() -> None:
    assert {name: spec.stages for name, spec in SPECS.items() if not name.startswith("mt-")} == {
        "dialogue": ("wsg", "wsv"),
        "summarization": ("cka", "ckv", "wsg", "wsv"),
        "intent": ("cka", "ckv", "wsg", "wsv"),
        "safety": ("cka", "ckv", "wsg", "wsv"),
        "stance": ("wsg", "wsv"),
    }
    assert {SPECS[f"mt-{pair}"].stages for pair in ("zh-en", "en-de", "en-fr", "en-ru")} == {("cka", "ckv")}
    assert SPECS["summarization"].filters.min_context_turns == 4
    assert SPECS["summarization"].filters.min_target_content_words == 5
    assert SPECS["intent"].filters.min_context_content_words == SPECS["intent"].filters.min_target_content_words == 5
    assert SPECS["dialogue"].filters.min_context_turns == 2
    assert (SPECS["safety"].valid, SPECS["safety"].invalid) == ("safe", "unsafe")
    assert (SPECS["stance"].valid, SPECS["stance"].invalid) == ("supports", "counters")
    assert (SPECS["mt-zh-en"].source_lang, SPECS["mt-zh-en"].target_lang) == ("zh", "en")


def test_a_user_spec_adds_a_task_and_a_bad_one_is_named(tmp_path: Path) -> None:
    good = tmp_path / "tasks.toml"
    good.write_text(
        """[tasks.recipe-step]
description = "cooking: the next step of a recipe"
context_field = "steps"
target_field = "next"
context_name = "steps so far"
target_name = "next step"
valid = "sensible"
invalid = "senseless"
question = "Is this a sensible next step?"
stages = ["wsv", "cka", "wsg", "ckv"]
""",
        encoding="utf-8",
    )
    specs = task_specs(good)
    assert specs["recipe-step"].stages == ("cka", "ckv", "wsg", "wsv") and "safety" in specs
    misspelt = tmp_path / "misspelt.toml"
    misspelt.write_text(good.read_text().replace("context_field", "contex_field"), encoding="utf-8")
    with pytest.raises(
        ConfigError,
        match=r"misspelt.toml: tasks\.recipe-step\.contex_field: not a task-spec field \(did you mean context_field",
    ):
        read_task_specs(misspelt)
    bad = tmp_path / "bad.toml"
    bad.write_text('[tasks.x]\ndescription = "x"\nstages = ["ckv"]\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"bad.toml: tasks\.x\."):
        read_task_specs(bad)


def _write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def test_the_shot_samples_become_contexts_with_their_targets_and_knowledge() -> None:
    contexts = read_sources([FIXTURES / "crow" / "shot_samples.json"], SPECS)
    by_task = {c.task: c for c in contexts}
    safety = by_task["safety"]
    assert safety.context_id == "safetext-0"
    assert [(t.text, t.label) for t in safety.targets] == [("do not eat it.", True), ("eat it up.", False)]
    assert safety.targets[0].knowledge[0].dimension == "social"  # xIntent
    assert (
        by_task["dialogue"].context_id == "daily-dialogue-0001/prefix-3" and len(by_task["dialogue"].turns or []) == 3
    )
    zh = by_task["mt-zh-en"].targets[0].knowledge[0]
    assert (zh.relation, zh.dimension) == ("Not CapableOf", "attributional")


def test_user_rows_are_mapped_by_the_task_spec_and_filtered(tmp_path: Path) -> None:
    rows = [
        {
            "task": "dialogue",
            "id": "d1",
            "dialogue": ["A: hi", "B: hello", "A: rain today?"],
            "knowledge": [{"head": "rain", "relation": "Causes", "tail": "wet"}],
        },
        {
            "task": "dialogue",
            "id": "d2",
            "dialogue": ["A: hi", "B: bye"],
            "knowledge": [{"head": "a", "relation": "IsA", "tail": "b"}],
        },
        {"task": "dialogue", "id": "d3", "dialogue": ["A: one", "B: two", "A: three"]},
        {"task": "intent", "id": "i1", "headline": "Storm", "intent": "storms are dangerous for people on roads"},
        {"task": "summarization", "id": "s1", "dialogue": ["A: a", "B: b", "A: c", "B: d"], "summary": "A and B talk"},
        {"task": "safety", "id": "x1", "scenario": "a fire", "action": "run", "label": "unsafe"},
    ]
    source = _write(tmp_path / "rows.jsonl", rows)
    contexts = read_sources([source], SPECS)
    d1 = contexts[0]
    assert d1.turns == ["A: hi", "B: hello"] and d1.targets[0].text == "A: rain today?"  # the final turn is the target
    records, facts = source_records(contexts, SPECS, ["dialogue", "intent", "summarization", "safety"], n=None, seed=0)
    reasons = {r.record_id: r.reason for r in records}
    assert reasons == {
        "dialogue/d1/prefix-2/0": None,
        "dialogue/d2/prefix-1/0": "few_turns",
        "dialogue/d3/prefix-2/0": "no_knowledge",  # dialogue skips CKA: its knowledge must come with it
        "intent/i1/0": "short_context",
        "summarization/s1/0": "short_target",
        "safety/x1/0": None,
    }
    assert records[-1].data.label is False
    assert facts["tasks"]["dialogue"] == {"contexts": 3, "passed_filters": 1, "sampled": 1}


def test_a_malformed_row_is_located_and_a_missing_task_is_named(tmp_path: Path) -> None:
    bad = _write(
        tmp_path / "bad.jsonl", [{"task": "safety", "scenario": "x", "action": "y"}, {"task": "safety", "id": 2}]
    )
    with pytest.raises(DataValidationError, match=r"bad.jsonl:2: scenario: missing"):
        read_sources([bad], SPECS)
    untasked = _write(tmp_path / "untasked.jsonl", [{"scenario": "x", "action": "y"}])
    with pytest.raises(DataValidationError, match="task: missing"):
        read_sources([untasked], SPECS)
    assert read_sources([untasked], SPECS, default_task="safety")[0].task == "safety"
    with pytest.raises(DataValidationError, match="task: unknown CRoW task 'nope'"):
        read_sources([_write(tmp_path / "nope.jsonl", [{"task": "nope"}])], SPECS)


def test_commonmt_rows_are_one_context_with_both_targets_and_n_samples_with_the_seed() -> None:
    contexts = read_sources([FIXTURES / "commonmt" / "head100"], SPECS)
    assert len(contexts) == 100 and all(len(c.targets) == 2 for c in contexts)
    first, _ = source_records(contexts, SPECS, ["mt-zh-en"], n=10, seed=0)
    again, _ = source_records(contexts, SPECS, ["mt-zh-en"], n=10, seed=0)
    other, _ = source_records(contexts, SPECS, ["mt-zh-en"], n=10, seed=1)
    assert [r.record_id for r in first] == [r.record_id for r in again] != [r.record_id for r in other]
    kept = [r for r in first if r.status == "ok"]
    assert len(kept) == 10 and kept[0].data.label is True and kept[0].data.others[0].label is False
    # the two real rows whose correct and wrong translations are the same text are recorded as rejected
    assert sorted(r.reason for r in first if r.status == "rejected") == ["conflicting_labels"] * 2


def test_cka_replies_parse_as_json_or_lines_and_every_bad_triple_is_named() -> None:
    reply = json.dumps(
        [
            {"head": "lid", "relation": "used for", "tail": "smothering fire"},
            {"head": "lid", "relation": "UsedFor", "tail": "smothering fire"},
            {"head": "fire", "relation": "CausedBy", "tail": "oil"},
            {"head": "", "relation": "IsA", "tail": "x"},
            {"head": "oil", "relation": "not capable of", "tail": "cooling"},
            {"head": "pan", "relation": "Other: sits on", "tail": "stove"},
            {"head": "a", "relation": "IsA", "tail": "b"},
            {"head": "c", "relation": "IsA", "tail": "d"},
            {"head": "e", "relation": "IsA", "tail": "f"},
        ]
    )
    parsed = parse_triples(reply, limit=5)
    assert isinstance(parsed, list)
    shown = [p.reason if isinstance(p, Reject) else p.relation for p in parsed]
    assert shown == [
        "UsedFor",
        "duplicate_triple",
        "unknown_relation",
        "malformed_triple",
        "Not CapableOf",
        "Other: sits on",
        "IsA",
        "IsA",
        "too_many_triples",
    ]
    lines = parse_triples("- lid | UsedFor | fire\n- heat | Causes | burn", limit=5)
    assert isinstance(lines, list) and [t.tail for t in lines if isinstance(t, CrowTriple)] == ["fire", "burn"]
    for empty in ("[]", "none", "No knowledge."):
        assert parse_triples(empty, limit=5) == Reject("no_knowledge")
    assert parse_triples("I cannot help with that.", limit=5) == Reject("malformed_output")


def test_wsg_replies_give_a_rewrite_or_a_named_reason() -> None:
    assert parse_rewrite('{"rewrite": "eat it up."}') == "eat it up."
    assert parse_rewrite('```json\n{"rewrite": "eat it"}\n```') == "eat it"
    assert parse_rewrite('{"rewrite": null}') == Reject("no_alternative")
    assert parse_rewrite("No alternative.") == Reject("no_alternative")
    assert parse_rewrite(' "leave it be"\nmore text') == "leave it be"
    assert parse_rewrite('{"text": "x"}') == Reject("malformed_output")
    assert parse_rewrite("") == Reject("malformed_output")


def _rewrite(record_id: str, target: str, rewrite: str, triple: str, task: str = "safety") -> StageResult[CrowRecord]:
    broken = CrowTriple(head=triple, relation="IsA", tail="x")
    data = CrowRecord(
        task=task,
        context_id=record_id.split("/")[1],
        context="a scenario",
        turns=None,
        target=target,
        label=True,
        target_id="0",
        others=[],
        knowledge=[],
        source={"file": "test.jsonl"},
        triple=broken,
        rewrite=rewrite,
        violates=[broken],
    )
    return StageResult(record_id, "ok", data)


class _NoContext:
    def llm(self, spec: str) -> Any:
        raise AssertionError("no model")

    judgements: ClassVar[dict[str, Any]] = {}


def test_the_edit_rule_as_a_stage_rejects_six_words_and_flags_a_bare_negation() -> None:
    records = [
        _rewrite("safety/c/0/0", "find a building and close your eyes", "find a tent and shut your ears", "a"),
        _rewrite("safety/c/0/1", "find a building and close your eyes", "seek a tent or shut my ears", "b"),
        _rewrite("safety/c/0/2", "do not eat it.", "eat it.", "c"),
        _rewrite("safety/c/0/3", "do not eat it.", "Do not eat it", "d"),
    ]
    output = CheckEdits("edits", tasks=SPECS).run(records, _NoContext())
    outcomes = [o for o in output.outcomes if isinstance(o, StageResult)]
    assert [(o.status, o.reason, o.data.edits) for o in outcomes] == [
        ("ok", None, 3),
        ("rejected", "too_many_edits", 6),
        ("ok", None, 2),
        ("rejected", "unchanged", 0),
    ]
    assert outcomes[2].data.flags == ["negation_only"]
    strict = CheckEdits("edits", tasks=SPECS, negation_only="reject").run(records[2:3], _NoContext())
    assert [o.reason for o in strict.outcomes if isinstance(o, StageResult)] == ["negation_only"]


def test_identical_rewrites_of_a_context_merge_their_triples_and_a_repeat_of_an_original_goes() -> None:
    records = [
        _rewrite("safety/c/0/0", "run away", "walk away", "a"),
        _rewrite("safety/c/0/1", "run away", "walk  away", "b"),
        _rewrite("safety/c/1/0", "stay still", "run away", "c"),  # the context's other original
        _rewrite("safety/d/0/0", "run away", "walk away", "e"),  # another context: kept
    ]
    output = Dedup("dedup", tasks=SPECS).run(records, _NoContext())
    outcomes = [o for o in output.outcomes if isinstance(o, StageResult)]
    assert [(o.status, o.reason) for o in outcomes] == [
        ("ok", None),
        ("rejected", "duplicate"),
        ("rejected", "duplicate"),
        ("ok", None),
    ]
    assert [t.head for t in outcomes[0].data.violates or []] == ["a", "b"]


def test_the_config_checks_votes_and_names_tasks() -> None:
    config = CrowConfig(task=("mt_zh_en", "dialog"), validators=("scripted/a", "scripted/b"))
    assert config.task == ("mt-zh-en", "dialogue")
    assert config.panel == ("scripted/a", "scripted/b", "scripted/a")
    assert CrowConfig(model="scripted/x").panel == ("scripted/x",) * 3
    with pytest.raises(ValueError, match="ckv_min 4 is more than the k = 3"):
        CrowConfig(ckv_min=4)
    with pytest.raises(ValueError, match="unknown CRoW task 'nope'"):
        CrowConfig(task=("nope",))


@pytest.mark.parametrize("style", ["chat", "completion"])
def test_a_chat_cka_or_wsg_request_carries_its_reply_shape_and_a_completion_page_none(style: PromptStyle) -> None:
    contexts = read_sources([FIXTURES / "commonmt" / "head100"], SPECS)
    record = next(r for r in source_records(contexts, SPECS, ["mt-zh-en"], n=3, seed=0)[0] if r.status == "ok")
    spec = SPECS["mt-zh-en"]
    cka = cka_request(record.data, spec, style, temperature=0.0, max_tokens=64, seed=0)
    triple = CrowTriple(head="tea", relation="IsA", tail="drink")
    wsg = wsg_request(record.data.with_(triple=triple), spec, style, temperature=0.0, max_tokens=64, seed=0)
    chat = style == "chat"
    assert (cka.reply_shape, wsg.reply_shape) == ((CKA_SHAPE, WSG_SHAPE) if chat else (None, None))


def test_a_reply_in_the_cka_and_wsg_shapes_parses() -> None:
    triples = Knowledge.model_validate([{"head": "tea", "relation": "IsA", "tail": "drink"}]).model_dump_json()
    (read,) = parse_triples(triples, limit=3)  # type: ignore[misc]
    assert isinstance(read, CrowTriple) and (read.head, read.relation, read.tail) == ("tea", "IsA", "drink")
    assert parse_triples(Knowledge.model_validate([]).model_dump_json(), limit=3) == Reject("no_knowledge")
    assert parse_rewrite(Rewrite(rewrite="coffee is a drink").model_dump_json()) == "coffee is a drink"
    assert parse_rewrite(Rewrite(rewrite=None).model_dump_json()) == Reject("no_alternative")
