"""The dry-run author answers every culture-adapt request, and its replies read back through the parsers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from senseforge.llm.base import GenerateRequest, LoglikelihoodRequest, PromptStyle
from senseforge.pipelines.culture_adapt import templates as t
from senseforge.pipelines.culture_adapt.dryrun import author_loglikelihood, author_reply
from senseforge.pipelines.culture_adapt.item import Fields
from senseforge.pipelines.culture_adapt.parse import (
    parse_adapted,
    parse_rename,
    parse_spans,
    parse_translation,
    relevance_vote,
)

CSQA = Path(__file__).parents[2] / "fixtures" / "csqa" / "dev_sample.jsonl"
STYLES: tuple[PromptStyle, ...] = ("chat", "completion")


def _items() -> dict[str, Fields]:
    out = {}
    for line in CSQA.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        choices = tuple(zip(row["choices"]["label"], row["choices"]["text"], strict=True))
        out[row["id"]] = Fields(row["question"], row["question_concept"], choices, row["answerKey"])
    return out


ITEMS = _items()
JAMES = ITEMS["2435de612dd69f2012b9e40d6af4ce38"]  # "James was looking … farmland", option E "illinois"
HAMBURGER = ITEMS["e68fb2448fd74e402aae9982aa76e527"]
MAGAZINES = ITEMS["b8c0a4703079cf661d7261a60a1bcbff"]


def _prefix(style: PromptStyle, prefix: str) -> str:
    return prefix if style == "completion" else ""


@pytest.mark.parametrize("style", STYLES)
def test_extract_finds_western_names_and_places(style: PromptStyle) -> None:
    reply = author_reply(t.extract_request(JAMES, style))
    assert parse_spans(reply, JAMES.display(), _prefix(style, t.EXTRACT_PREFIX)) == (["James"], ["illinois"])
    none = author_reply(t.extract_request(MAGAZINES, style))
    assert parse_spans(none, MAGAZINES.display(), _prefix(style, t.EXTRACT_PREFIX)) == ([], [])


def _votes(element: str, value: str, item: Fields, culture: str) -> list[bool | None]:
    votes = []
    for text, yes_means_relevant in t.relevance_prompts(element, value, item, culture):
        reply = author_reply(GenerateRequest.chat(text, max_tokens=8, temperature=0.0))
        assert reply in ("yes", "no")
        votes.append(relevance_vote(reply, yes_means_relevant))
    return votes


def _ll_votes(element: str, value: str, item: Fields, culture: str) -> list[bool]:
    votes = []
    for text, yes_means_relevant in t.relevance_prompts(element, value, item, culture):
        yes, no = (
            author_loglikelihood(LoglikelihoodRequest(context=f"{text}\nAnswer:", continuation=c))
            for c in (" yes", " no")
        )
        votes.append((not yes_means_relevant) == (yes > no))
    return votes


def test_relevance_follows_each_prompts_polarity() -> None:
    for judge in (_votes, _ll_votes):
        assert judge("names", "James", JAMES, "Indonesia") == [True] * 5
        assert judge("places", "illinois", JAMES, "Indonesia") == [True] * 5
        assert judge("concept", "hamburger", HAMBURGER, "Sunda (West Java, Indonesia)") == [True] * 5
        assert judge("concept", "farmland", JAMES, "Indonesia") == [False] * 5
        assert judge("names", "James", JAMES, "the United States") == [False] * 5


@pytest.mark.parametrize("style", STYLES)
def test_adapt_round_trips_with_the_same_answer_label(style: PromptStyle) -> None:
    request = t.adapt_request(JAMES, "en", "id", "Indonesia", style)
    adapted = parse_adapted(author_reply(request), JAMES, _prefix(style, t.ADAPT_PREFIX))
    assert adapted is not None
    assert adapted.answer == JAMES.answer and adapted.labels == JAMES.labels
    assert adapted.concept == "farmland" and adapted.concept in adapted.question
    assert "James" not in adapted.question and adapted.question.startswith("Siti")
    assert adapted.choices[-1] == ("E", "Surabaya")  # a place swapped, capitalised


@pytest.mark.parametrize("style", STYLES)
def test_rename_replaces_names_only(style: PromptStyle) -> None:
    source = Fields("Sally asked Bob for help. Who did Sally ask?", "help", (("A", "Bob"), ("B", "London")), "A")
    reply = author_reply(t.rename_request(source, "en", "Indonesia", style))
    renamed = parse_rename(reply, source, _prefix(style, t.RENAME_PREFIX))
    assert renamed == Fields(
        "Dewi asked Agus for help. Who did Dewi ask?", "help", (("A", "Agus"), ("B", "London")), "A"
    )


@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize("field", ["question", "concept", "option:E"])
def test_translation_returns_the_text_unchanged(style: PromptStyle, field: str) -> None:
    text = JAMES.texts()[field]
    reply = author_reply(t.translate_request(text, field, "id", "su", style))
    assert parse_translation(reply) == " ".join(text.split())


def test_unknown_requests_get_an_empty_reply() -> None:
    assert author_reply(GenerateRequest.chat("Hello there")) == ""
