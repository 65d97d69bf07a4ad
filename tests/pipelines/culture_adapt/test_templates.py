"""The prompts of culture-adapt: well-formed requests in both styles, five relevance prompts, stable hashes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from senseforge.data.lang import LANGUAGE_NAMES, language_name
from senseforge.errors import ConfigError
from senseforge.llm.base import GenerateRequest, PromptStyle
from senseforge.pipelines.culture_adapt import parse
from senseforge.pipelines.culture_adapt import templates as t
from senseforge.pipelines.culture_adapt.item import Fields

CSQA = Path(__file__).parents[2] / "fixtures" / "csqa" / "dev_sample.jsonl"


def csqa_item(item_id: str = "2435de612dd69f2012b9e40d6af4ce38") -> Fields:
    """A real CommonsenseQA item (default: "James was looking for a good place to buy farmland…")."""
    for line in CSQA.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if row["id"] == item_id:
            choices = tuple(zip(row["choices"]["label"], row["choices"]["text"], strict=True))
            return Fields(row["question"], row["question_concept"], choices, row["answerKey"])
    raise KeyError(item_id)


ITEM = csqa_item()


def _all_requests(style: PromptStyle) -> dict[str, GenerateRequest]:
    return {
        "extract": t.extract_request(ITEM, style),
        "adapt": t.adapt_request(ITEM, "en", "id", "Indonesia", style),
        "rename": t.rename_request(ITEM, "en", "Indonesia", style),
        "translate": t.translate_request("Di mana James membeli sawah?", "question", "id", "su", style),
    }


def test_chat_requests_have_a_system_and_a_user_turn() -> None:
    for kind, request in _all_requests("chat").items():
        assert request.prompt is None and request.messages is not None
        system, user = request.messages
        assert (system.role, user.role) == ("system", "user")
        assert system.content.startswith(t.OPENINGS[kind][0])
        assert request.stop == ()
    requests = _all_requests("chat")
    assert "James was looking" in requests["extract"].as_messages()[1].content
    assert "Indonesia" in requests["adapt"].as_messages()[0].content
    assert "Indonesian" in requests["adapt"].as_messages()[0].content
    assert requests["translate"].as_messages()[1].content.endswith("Di mana James membeli sawah?")
    assert requests["translate"].temperature == 0.0


def test_completion_requests_are_pages_ending_with_the_reply_opening() -> None:
    requests = _all_requests("completion")
    for kind, request in requests.items():
        assert request.messages is None and request.prompt is not None
        assert request.prompt.startswith(t.OPENINGS[kind][1])
        assert request.stop == ("\n",)
    assert requests["extract"].prompt is not None and requests["extract"].prompt.endswith(t.EXTRACT_PREFIX)
    assert requests["adapt"].prompt is not None and requests["adapt"].prompt.endswith(t.ADAPT_PREFIX)
    assert requests["rename"].prompt is not None and requests["rename"].prompt.endswith(t.RENAME_PREFIX)
    page = requests["translate"].prompt
    assert page is not None and page.endswith("Indonesian: Di mana James membeli sawah?\nSundanese:")
    assert page.count("\nSundanese: ") == 3  # three worked pairs


def test_completion_pages_show_worked_examples_one_json_line_each() -> None:
    extract = t.extract_request(ITEM, "completion").prompt
    assert extract is not None
    found = [line.removeprefix("Found: ") for line in extract.splitlines() if line.startswith("Found: {")]
    shots = [json.loads(line) for line in found[:-1]]
    assert shots[0]["names"] and shots[0]["places"] and shots[1] == {"names": [], "places": []}
    for lang, culture in (("id", "Indonesia"), ("su", "Sunda (West Java, Indonesia)")):
        page = t.adapt_request(ITEM, "en", lang, culture, "completion").prompt
        assert page is not None
        adapted = [line.removeprefix("Adapted: ") for line in page.splitlines() if line.startswith("Adapted: ")]
        example = json.loads(adapted[0])
        assert set(example) == {"question", "concept", "options", "answer"}
        assert example["concept"] in example["question"]
        assert adapted[0].startswith(t.ADAPT_PREFIX)
    assert "minuman hangat" in (t.adapt_request(ITEM, "en", "jv", "Java (Indonesia)", "completion").prompt or "")


@pytest.mark.parametrize(("source", "target"), [("en", "id"), ("id", "su"), ("su", "id"), ("id", "en"), ("en", "xx")])
def test_translation_pages_for_each_direction(source: str, target: str) -> None:
    page = t.translate_request("sawah", "option:B", source, target, "completion").prompt
    assert page is not None
    assert page.endswith(f"{language_name(source)}: sawah\n{language_name(target)}:")
    if target != "xx":
        assert page.count(f"\n{language_name(target)}: ") == 3


def test_translation_user_turn_names_the_field_kind() -> None:
    concept = t.translate_request("rice field", "concept", "en", "id", "chat").as_messages()[1].content
    option = t.translate_request("rice field", "option:C", "en", "id", "chat").as_messages()[1].content
    assert concept.startswith("Concept") and option.startswith("Answer option")


def test_five_relevance_prompts_with_both_polarities() -> None:
    for element, value in (("concept", "farmland"), ("names", "James"), ("places", "illinois, midwest")):
        prompts = t.relevance_prompts(element, value, ITEM, "Indonesia")
        assert len(prompts) == 5
        texts = [text for text, _ in prompts]
        assert len(set(texts)) == 5
        assert len({text.split("\n", 1)[0] for text in texts}) == 5  # distinct first lines
        assert {polarity for _, polarity in prompts} == {True, False}
        for text in texts:
            assert "Indonesia" in text.split("\n", 1)[0]
            assert "James was looking for a good place to buy farmland." in text
            assert "E. illinois" in text
            assert f'"{value}"' in text
            assert text.rstrip().endswith("Answer with yes or no.")
    with pytest.raises(ConfigError, match="unknown relevance element"):
        t.relevance_prompts("food", "x", ITEM, "Indonesia")


def test_cultures_and_languages() -> None:
    assert t.default_culture("id") == "Indonesia"
    assert t.default_culture("en") == "the United States"
    assert t.ELEMENTS == ("concept", "names", "places")
    assert language_name("su") == "Sundanese" and LANGUAGE_NAMES["jv"] == "Javanese"
    with pytest.raises(ConfigError, match="--target-culture"):
        t.default_culture("xx")


def test_template_hashes_are_stable_and_distinct() -> None:
    hashes = t.template_hashes(["id", "su"], "chat")
    assert hashes == t.template_hashes(["id", "su"], "chat")
    assert set(hashes) == {
        "extract/chat",
        *(f"relevance/{i}" for i in range(5)),
        "adapt/id/chat",
        "rename/chat",
        "translate/en-id/chat",
        "translate/id-su/chat",
        "translate/su-id/chat",
    }
    assert len(set(hashes.values())) == len(hashes)
    assert all(len(value) == 64 for value in hashes.values())
    completion = t.template_hashes(["id", "su"], "completion")
    assert completion["extract/completion"] != hashes["extract/chat"]
    assert completion["relevance/0"] == hashes["relevance/0"]
    assert t.translation_pairs(["id", "su", "jv"]) == [
        ("en", "id"),
        ("id", "su"),
        ("id", "jv"),
        ("su", "id"),
        ("jv", "id"),
    ]
    assert t.translation_pairs(["en"]) == []


@pytest.mark.parametrize("style", ["chat", "completion"])
def test_the_json_asking_requests_carry_their_reply_shape_and_a_translation_none(style: PromptStyle) -> None:
    shapes = {kind: request.reply_shape for kind, request in _all_requests(style).items()}
    assert shapes == {"extract": t.EXTRACT_SHAPE, "adapt": t.ADAPT_SHAPE, "rename": t.RENAME_SHAPE, "translate": None}
    adapted = t.ADAPT_SHAPE.as_schema()
    assert adapted is not None and adapted["required"] == ["question", "concept", "options", "answer"]


@pytest.mark.parametrize("prefix", ["", t.EXTRACT_PREFIX])
def test_a_reply_in_each_shape_parses_as_the_whole_reply_or_after_the_page_s_opening(prefix: str) -> None:
    spans = t.FoundSpans(names=["James"], places=["illinois"]).model_dump_json()
    assert parse.parse_spans(spans, ITEM.display(), prefix) == (["James"], ["illinois"])
    options = {"A": "sawah", "B": "kebun", "C": "rumah", "D": "pasar", "E": "jawa barat"}
    item = t.AdaptedItem.model_validate(
        {"question": "Di mana James?", "concept": "sawah", "options": options, "answer": "A"}
    )
    adapted = parse.parse_adapted(item.model_dump_json(), ITEM, t.ADAPT_PREFIX if prefix else "")
    assert adapted is not None and (adapted.question, adapted.answer) == ("Di mana James?", "A")
    assert adapted.choices == tuple(options.items())
    renamed = t.RenamedItem(question="Budi was looking for farmland.", options={"A": "sawah"}).model_dump_json()
    again = parse.parse_rename(renamed, ITEM, t.RENAME_PREFIX if prefix else "")
    assert (
        again is not None and again.question == "Budi was looking for farmland." and again.choices[0] == ("A", "sawah")
    )
