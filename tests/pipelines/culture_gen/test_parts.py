"""The parts of culture-gen: the concept table and its batches, tolerant parsing, the checks, the prompts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from senseforge.data.concepts import Concept, example_table, read_concepts
from senseforge.errors import ConfigError, DataValidationError
from senseforge.pipelines.choices import RawItem
from senseforge.pipelines.culture_gen.checks import check_item, lenient_contains
from senseforge.pipelines.culture_gen.concepts import Batch, batches
from senseforge.pipelines.culture_gen.parse import assign, parse_reply
from senseforge.pipelines.culture_gen.templates import (
    COMPLETION_PREFIX,
    GENERATE_SHAPE,
    WrittenItems,
    build_request,
    completion_page,
)

ITEM = {"question": "Di mana pasar biasanya ramai?", "choices": {"A": "a", "B": "b", "C": "c", "D": "d", "E": "e"}}


def test_batches_keep_order_category_and_size() -> None:
    rows = [Concept("place", f"p{i}") for i in range(7)] + [Concept("culinary", "c1"), Concept("place", "p9", "su")]
    cut = batches(rows, ["id", "su"], size=5)
    assert [(b.lang, b.category, b.concepts) for b in cut] == [
        ("id", "place", ("p0", "p1", "p2", "p3", "p4")),
        ("id", "place", ("p5", "p6")),
        ("id", "culinary", ("c1",)),
        ("su", "place", ("p0", "p1", "p2", "p3", "p4")),
        ("su", "place", ("p5", "p6")),
        ("su", "culinary", ("c1",)),
        ("su", "place", ("p9",)),
    ]


def test_concept_tables_in_csv_and_jsonl(tmp_path: Path) -> None:
    assert {row.lang for row in read_concepts(example_table())} == {"id", "su"}
    jsonl = tmp_path / "c.jsonl"
    jsonl.write_text('{"category": "Place", "concept": "  alun  alun "}\n{"category": "place", "concept": 3}\n')
    with pytest.raises(DataValidationError, match=r"c.jsonl:2: concept: expected text"):
        read_concepts(jsonl)
    jsonl.write_text('{"category": "Place", "concept": "  alun  alun ", "lang": "su"}\n')
    assert read_concepts(jsonl) == [Concept("place", "alun alun", "su")]
    with pytest.raises(DataValidationError, match="no such concept table"):
        read_concepts(tmp_path / "missing.csv")


@pytest.mark.parametrize(
    "reply",
    [
        json.dumps([{**ITEM, "answer": "B", "question_concept": "pasar"}]),
        "Here you go:\n```json\n"
        + json.dumps({"questions": [{**ITEM, "answerKey": "B", "concept": "pasar"}]})
        + "\n```",
        json.dumps({**ITEM, "answer_creator": "B.", "question_concepts": ["pasar"]}),
        json.dumps([{**ITEM, "choices": [{"label": c, "text": c.lower()} for c in "ABCDE"], "answer": "b"}]),
        json.dumps([{**ITEM, "choices": [f"{c}. {c.lower()}" for c in "ABCDE"], "answer": "B"}]),
        json.dumps([{**ITEM, "choices": {"label": list("ABCDE"), "text": list("abcde")}, "answer": "B"}]),
    ],
)
def test_replies_in_the_shapes_models_return(reply: str) -> None:
    items = parse_reply(reply)
    assert items is not None and len(items) == 1
    [item] = items
    assert item.answer == "B" and [label for label, _ in item.choices] == list("ABCDE")
    assert [text for _, text in item.choices] == list("abcde")
    given, stray = assign(items, ["pasar", "sawah"])
    assert given["pasar"] == [item] and not given["sawah"] and not stray


def test_no_list_is_none_and_items_go_by_concept_not_position() -> None:
    assert parse_reply("Maaf, saya tidak bisa.") is None
    assert parse_reply('{"note": "nothing here"}') is None
    first = RawItem("Apa itu sawah?", (), "A", None)
    second = RawItem("Kenapa ramai?", (), "A", "Pasar")
    third = RawItem("Tidak menyebut apa-apa", (), "A", None)
    given, stray = assign([first, second, third], ["pasar", "sawah"])
    assert given == {"pasar": [second], "sawah": [first]} and stray == [third]


def test_an_empty_list_is_a_reply_with_no_item_not_a_malformed_one() -> None:
    """The shape's list, closed at once (what a held-to-shape base model wrote after the page's ``[``): no items."""
    assert parse_reply("] ", COMPLETION_PREFIX) == [] and parse_reply("[]") == []
    assert GENERATE_SHAPE.as_schema()["minItems"] == 1  # a backend holding replies to the shape asks for one at least


def test_checks_in_order() -> None:
    five = tuple((label, label.lower()) for label in "ABCDE")
    good = RawItem("Di mana pasar biasanya ramai?", five, "B", "pasar")
    assert check_item(good, "pasar") is None
    assert check_item(RawItem(good.question, five[:4], "B", None), "pasar") == "choice_count"
    assert check_item(RawItem(good.question, (*five[:4], ("F", "f")), "B", None), "pasar") == "labels"
    assert check_item(RawItem(good.question, five, "F", None), "pasar") == "answer_not_in_choices"
    twins = (*five[:4], ("E", " A "))
    assert check_item(RawItem(good.question, twins, "B", None), "pasar") == "duplicate_choices"
    assert check_item(good, "sawah") == "concept_missing"
    # the first failing check names the reason
    assert check_item(RawItem("tanpa konsep", five[:4], "F", None), "pasar") == "choice_count"
    # an option equal to the concept is allowed
    assert check_item(RawItem(good.question, (("A", "pasar"), *five[1:]), "B", None), "pasar") is None


def test_lenient_matching_accepts_morphological_variants() -> None:
    assert lenient_contains("Kapan orang Sunda ngaliwet?", "liwet")
    assert lenient_contains("Apa saja yang dijual di pasarnya?", "pasar")
    assert lenient_contains("Siapa yang berbatik pada hari Jumat?", "batik")
    assert not lenient_contains("Apa yang dijual di toko?", "pasar")
    assert lenient_contains("Kapan orang biasanya menari di pesta?", "tari")  # the same Sastrawi stem
    five = tuple((label, label.lower()) for label in "ABCDE")
    variant = RawItem("Kapan orang biasanya menari di pesta?", five, "A", None)
    assert check_item(variant, "tari") == "concept_missing"
    assert check_item(variant, "tari", match="lenient") is None


def test_prompts() -> None:
    batch = Batch("su", "culinary", ("surabi", "peuyeum"))
    chat = build_request(batch, "chat")
    system, user = chat.as_messages()
    assert "directly in Sundanese" in system.content and "surabi" not in system.content
    assert user.content.endswith("1. surabi\n2. peuyeum") and chat.temperature == 0.1
    target = build_request(batch, "chat", prompt_language="target").as_messages()[0].content
    assert "basa Sunda" in target
    with pytest.raises(ConfigError, match="no culture-gen instruction written in 'jv'"):
        build_request(Batch("jv", "place", ("sawah",)), "chat", prompt_language="target")
    page = completion_page(batch)
    assert page.endswith('concepts: ["surabi", "peuyeum"]\n[') and "colénak" in page  # a worked example, in Sundanese
    assert build_request(batch, "completion").stop == ("\n",)


@pytest.mark.parametrize("style", ["chat", "completion"])
def test_a_generate_request_carries_its_reply_shape_and_a_reply_in_it_parses(style: str) -> None:
    batch = Batch("id", "culinary", ("rendang", "tempe"))
    assert build_request(batch, style).reply_shape == GENERATE_SHAPE  # type: ignore[arg-type]
    options = {"A": "santan", "B": "air", "C": "susu", "D": "kecap", "E": "cuka"}
    rows = [
        {"question_concept": c, "question": f"Apa bahan {c}?", "choices": options, "answer": "A"}
        for c in batch.concepts
    ]
    reply = WrittenItems.model_validate(rows).model_dump_json()
    items = parse_reply(reply, COMPLETION_PREFIX if style == "completion" else "")
    assert items is not None
    assert [(i.concept, i.question, i.answer, i.choices) for i in items] == [
        (c, f"Apa bahan {c}?", "A", tuple(options.items())) for c in batch.concepts
    ]
