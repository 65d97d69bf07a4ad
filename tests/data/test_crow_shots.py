"""CRoW's internal per-task form to binary examples, on the 18 real shot entries."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from senseforge.data.crow_shots import read_crow_shots, shot_entry_to_examples
from senseforge.errors import DataValidationError

SHOTS = Path(__file__).resolve().parent.parent / "fixtures" / "crow" / "shot_samples.json"


def _doc() -> dict[str, list[dict[str, Any]]]:
    data: dict[str, list[dict[str, Any]]] = json.loads(SHOTS.read_text(encoding="utf-8"))
    return data


def _by_id() -> dict[str, Any]:
    return {e.id: e for e in read_crow_shots(SHOTS)}


def test_eighteen_entries_make_twelve_distinct_examples() -> None:
    doc = _doc()
    assert sum(len(entries) for entries in doc.values()) == 18
    examples = read_crow_shots(SHOTS)
    assert len(examples) == 12
    assert len({e.id for e in examples}) == 12
    tasks = sorted({e.task for e in examples})
    assert tasks == [
        "dialogue",
        "intent",
        "mt-en-de",
        "mt-en-fr",
        "mt-en-ru",
        "mt-zh-en",
        "safety",
        "stance",
        "summarization",
    ]


def test_a_target_shown_for_two_prompt_types_is_merged() -> None:
    dialogue = _by_id()["dialogue/daily-dialogue-0001/3X4JMASXCWZGXNDX322S20J3WU40BO-0"]
    assert dialogue.metadata["shot_types"] == ["bcq_cot", "bcq_cot_with_kg"]
    rationales = dialogue.metadata["rationales"]
    assert set(rationales) == {"bcq_cot", "bcq_cot_with_kg"}
    assert rationales["bcq_cot"] != rationales["bcq_cot_with_kg"]
    assert rationales["bcq_cot"].endswith("<Answer>No</Answer>")
    assert dialogue.label is False
    assert dialogue.context.count("\n") == 2  # three turns
    assert dialogue.target.startswith("B: Great!")
    assert dialogue.metadata["final_turn_prefix"] == "B:"
    assert dialogue.metadata["votes"] == 1
    (triple,) = dialogue.knowledge
    assert (triple.head, triple.relation, triple.tail, triple.dimension) == (
        "gift exchange",
        "HappensIn",
        "Christmas party",
        "temporal",
    )
    assert triple.source == "daily-dialogue-0001-5"
    assert dialogue.metadata["knowledge_extra"][0]["verbalized"] == "gift exchange happens in Christmas party"


def test_translation_entries_name_their_language_pair() -> None:
    zh = _by_id()["mt-zh-en/chinese-mt-la-350/chinese-mt-la-350-0"]
    assert zh.task == "mt-zh-en"
    assert zh.lang is None
    assert zh.context == "他正在编明天晚会上要唱的歌的歌词。"
    assert zh.metadata["target_id"] == "chinese-mt-la-350-0"  # CRoW's <data_id>-<label> for id-less targets
    (triple,) = zh.knowledge  # the entry's knowledge applies to its targets
    assert triple.relation == "Not CapableOf"
    assert triple.dimension == "attributional"  # "attribution" normalised
    assert zh.metadata["knowledge_extra"] == [{"votes": 3, "verbalized": "lyrics is not capable of being woven"}]


def test_safety_labels_are_words() -> None:
    by_id = _by_id()
    safe = by_id["safety/safetext-0/safetext-0-safe-0"]
    unsafe = by_id["safety/safetext-0/3PS7W85Z89SYP3VR3KC6V5QI8D4T98-1"]
    assert (safe.label, unsafe.label) == (True, False)
    assert safe.context_id == unsafe.context_id == "safety/safetext-0"
    assert unsafe.metadata["action_id"] == "safetext-0-safe-0"
    assert safe.knowledge[0].dimension == "social"


def test_stance_uses_the_instance_belief_and_keeps_the_original() -> None:
    stance = _by_id()["stance/expgraph-dev-68/35USIKEBN16DC7O98HNI2WTOSE96NB-0"]
    assert stance.context == "Cosmetic surgery should be allowed."  # the perturbed belief
    assert stance.target == "Cosmetic surgery is not worth the risk."
    assert stance.label is False  # counter
    assert stance.metadata["stance"] == "counter"
    assert stance.metadata["perturbation"] == "belief"
    assert stance.metadata["original"] == {
        "belief": "cosmetic surgery should be banned.",
        "argument": "Cosmetic surgery is not worth the risk.",
        "stance": "support",
    }


def test_intent_and_summary_targets() -> None:
    by_id = _by_id()
    assert by_id["intent/mrf-covid-test-1129/mrf-covid-test-1129-intent-0"].label is True
    assert by_id["intent/mrf-covid-test-1129/3JC6VJ2SAL9A9KU6UU88OKVOYIUA5N-0"].label is False
    summaries = [e for e in by_id.values() if e.task == "summarization"]
    assert len(summaries) == 2
    assert {e.context_id for e in summaries} == {"summarization/dialogsum_test_77", "summarization/dialogsum_test_49"}
    assert all(e.context.startswith("#Person1#:") for e in summaries)


def test_array_and_jsonl_forms_read_the_same_entries(tmp_path: Path) -> None:
    entries = [entry for entries in _doc().values() for entry in entries]
    array = tmp_path / "shots.json"
    array.write_text(json.dumps(entries, ensure_ascii=False), encoding="utf-8")
    lines = tmp_path / "shots.jsonl"
    lines.write_text("".join(json.dumps(e, ensure_ascii=False) + "\n" for e in entries), encoding="utf-8")
    expected = sorted(e.id for e in read_crow_shots(SHOTS))
    assert sorted(e.id for e in read_crow_shots(array)) == expected
    assert sorted(e.id for e in read_crow_shots(lines)) == expected


def _write(tmp_path: Path, doc: dict[str, Any]) -> Path:
    path = tmp_path / "shots.json"
    path.write_text(json.dumps(doc, ensure_ascii=False, indent=1), encoding="utf-8")
    return path


def test_bad_label_is_located_by_task_and_index(tmp_path: Path) -> None:
    doc = _doc()
    doc["intent"][1]["intents"][0]["label"] = "perhaps"
    with pytest.raises(DataValidationError, match=r"shots.json:intent\[1\]: intents.0.label: expected 0/1"):
        read_crow_shots(_write(tmp_path, doc))


def test_missing_text_and_bad_dimension_are_located(tmp_path: Path) -> None:
    doc = _doc()
    del doc["safety"][0]["actions"][0]["text"]
    with pytest.raises(DataValidationError, match=r"safety\[0\]: actions.0.text: missing"):
        read_crow_shots(_write(tmp_path, doc))
    doc = _doc()
    doc["translation"][2]["knowledge"][0]["dimension"] = "moral"
    with pytest.raises(DataValidationError, match=r"translation\[2\]: targets.0.knowledge.0.dimension: unknown"):
        read_crow_shots(_write(tmp_path, doc))


def test_a_repeat_that_contradicts_the_first_is_an_error(tmp_path: Path) -> None:
    doc = _doc()
    doc["dialogue"][1]["final_turns"][0]["label"] = 1
    with pytest.raises(
        DataValidationError, match=r"dialogue\[1\]: 3X4JMASXCWZGXNDX322S20J3WU40BO-0: differs .* dialogue\[0\]"
    ):
        read_crow_shots(_write(tmp_path, doc))


def test_an_entry_filed_under_the_wrong_task(tmp_path: Path) -> None:
    doc = {"stance": [copy.deepcopy(_doc()["safety"][0])]}
    with pytest.raises(
        DataValidationError, match=r"stance\[0\]: actions: a safety entry filed under the task 'stance'"
    ):
        read_crow_shots(_write(tmp_path, doc))


def test_an_entry_without_a_target_list() -> None:
    entry = {k: v for k, v in _doc()["dialogue"][0].items() if k != "final_turns"}
    with pytest.raises(ValueError, match="targets: expected exactly one target list"):
        shot_entry_to_examples(entry)
