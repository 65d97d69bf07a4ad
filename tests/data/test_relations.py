"""The CRoW relation table: counts, parsing, verbalisation, the prompt block and validation."""

from __future__ import annotations

import copy
import tomllib
from collections import Counter
from importlib import resources

import pytest

from senseforge.data.relations import (
    DIMENSIONS,
    OTHER_DIMENSION,
    RELATIONS,
    ParsedRelation,
    check_table,
    parse_relation,
    relation_dimension,
    relations,
    relations_prompt_block,
    verbalize,
)
from senseforge.errors import ConfigError


def _doc() -> dict[str, object]:
    resource = resources.files("senseforge.data") / "lexicon" / "relations.toml"
    return tomllib.loads(resource.read_text(encoding="utf-8"))


def test_counts_per_dimension() -> None:
    assert DIMENSIONS == ("attributional", "physical/spatial", "temporal", "causal", "social", "comparative")
    counts = Counter(r.dimension for r in RELATIONS)
    assert [counts[d] for d in DIMENSIONS] == [8, 5, 5, 3, 9, 6]
    assert len(RELATIONS) == 36
    assert relations() is relations()
    assert relations() is RELATIONS


def test_every_relation_parses_to_itself() -> None:
    for relation in RELATIONS:
        parsed = parse_relation(relation.name)
        assert parsed == ParsedRelation(relation.name, relation.name, False, relation.dimension, None)
        assert parsed.label == relation.name
        assert relation_dimension(relation.name) == relation.dimension
        assert "\n" not in relation.description and relation.description


@pytest.mark.parametrize(
    "text",
    [
        "Not CapableOf",
        "not_capable_of",
        "NotCapableOf",
        "NOT-CapableOf",
        "not capable of",
        "notcapableof",
        "/r/NotCapableOf",
    ],
)
def test_negation_keeps_the_base_dimension(text: str) -> None:
    parsed = parse_relation(text)
    assert parsed.negated and parsed.base == "CapableOf"
    assert parsed.dimension == "attributional"
    assert parsed.name == parsed.label == "Not CapableOf"


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("is a", "IsA"),
        ("is_a", "IsA"),
        ("isa", "IsA"),
        ("  IsA ", "IsA"),
        ("/r/IsA", "IsA"),
        ("HasSubevent", "HasSubEvent"),
        ("has subevent", "HasSubEvent"),
        ("isAfter", "IsAfter"),
        ("Is After", "IsAfter"),
        ("xAttr", "HasProperty"),
        ("ObjectUse", "UsedFor"),
        ("xReason", "MotivatedByGoal"),
        ("MotivatedBy", "MotivatedByGoal"),
        ("x_intent", "xIntent"),
    ],
)
def test_aliases_and_spellings(text: str, name: str) -> None:
    parsed = parse_relation(text)
    assert parsed.base == parsed.name == name
    assert not parsed.negated


@pytest.mark.parametrize(
    ("text", "other_text", "label"),
    [
        ("Other", None, "Other"),
        ("other", None, "Other"),
        ("Other:", None, "Other"),
        ("Other: grows next to", "grows next to", "Other: grows next to"),
        ("Other - grows next to", "grows next to", "Other: grows next to"),
        ("other(grows next to)", "grows next to", "Other: grows next to"),
    ],
)
def test_other(text: str, other_text: str | None, label: str) -> None:
    parsed = parse_relation(text)
    assert parsed.is_other and parsed.base is None and not parsed.negated
    assert parsed.dimension == OTHER_DIMENSION
    assert parsed.other_text == other_text
    assert parsed.label == label


def test_negated_other() -> None:
    parsed = parse_relation("Not Other: x")
    assert parsed.negated and parsed.is_other
    assert parsed.label == "Not Other: x"
    assert parsed.dimension == OTHER_DIMENSION


def test_unknown_strict_suggests_close_matches() -> None:
    with pytest.raises(ValueError, match=r"unknown relation 'CapabelOf'.*CapableOf"):
        parse_relation("CapabelOf")
    with pytest.raises(ValueError, match="unknown relation"):
        parse_relation("Desires")
    with pytest.raises(ValueError, match="empty relation"):
        parse_relation("  ", strict=False)


def test_unknown_lenient_is_other() -> None:
    parsed = parse_relation(" Desires ", strict=False)
    assert parsed == ParsedRelation("Desires", None, False, OTHER_DIMENSION, None)
    assert not parsed.is_other and parsed.label == "Desires"
    negated = parse_relation("NotDesires", strict=False)
    assert negated.negated and negated.dimension == OTHER_DIMENSION and negated.label == "NotDesires"
    assert parse_relation("/r/ReceivesAction", strict=False).name == "ReceivesAction"
    assert relation_dimension("ReceivesAction") == OTHER_DIMENSION
    assert relation_dimension("Not Causes") == "causal"


def test_verbalize() -> None:
    assert verbalize("dog", "IsA", "animal") == "dog is a kind of animal"
    assert verbalize("dog", "Not IsA", "plant") == "dog is not a kind of plant"
    assert verbalize("moss", "Other: grows on", "rocks") == "moss grows on rocks"
    assert verbalize("moss", "Not Other: grows on", "glass") == "it is not the case that moss grows on glass"
    assert verbalize("moss", "Other", "rocks") == "moss is linked to rocks"
    assert verbalize("cat", "Desires", "milk") == "cat Desires milk"
    assert verbalize("{x}", "IsA", "{y}") == "{x} is a kind of {y}"
    for relation in RELATIONS:
        assert verbalize("H", relation.name, "T") != verbalize("H", f"Not {relation.name}", "T")


def test_prompt_block_lists_every_relation() -> None:
    block = relations_prompt_block()
    lines = block.splitlines()
    for relation in RELATIONS:
        assert f"- {relation.name}: {relation.description}" in lines
    assert sum(line.startswith("- ") for line in lines) == 36
    assert "Physical/spatial:" in lines
    assert lines.index("Attributional:") < lines.index("Comparative:")
    assert "Not " in lines[-1] and "Other: <your words>" in lines[-1]


def test_check_table_accepts_the_shipped_file() -> None:
    assert check_table(_doc()) == RELATIONS


def _broken(change: str) -> dict[str, object]:
    doc = copy.deepcopy(_doc())
    entries = doc["relation"]
    assert isinstance(entries, list)
    if change == "count":
        entries.pop()
    elif change == "dimension":
        entries[0]["dimension"] = "spatial"
    elif change == "moved":
        entries[0]["dimension"] = "social"
    elif change == "duplicate":
        entries[1]["aliases"] = ["has_property"]
    elif change == "reserved":
        entries[1]["aliases"] = ["other"]
    elif change == "template":
        entries[0]["says"] = "{head} is {object}"
    elif change == "field":
        entries[0]["comment"] = "x"
    elif change == "order":
        doc["dimensions"] = list(reversed(DIMENSIONS))
    elif change == "description":
        entries[0]["description"] = "two\nlines"
    return doc


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("count", "35 relations, expected 36"),
        ("dimension", "HasProperty: dimension 'spatial' is not one of"),
        ("moved", "dimension 'attributional' has 7 relations, expected 8"),
        ("duplicate", "CapableOf: 'has_property' clashes with 'HasProperty' of HasProperty"),
        ("reserved", "clashes with the reserved Other"),
        ("template", r"HasProperty.says: template .* must use exactly \{head\} and \{tail\}"),
        ("field", "HasProperty: unknown field"),
        ("order", "dimensions must be"),
        ("description", "HasProperty: description must be one non-empty line"),
    ],
)
def test_broken_table_raises_config_error(change: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        check_table(_broken(change))
