"""Reading culture-adapt's replies in the shapes models really return them."""

from __future__ import annotations

import json

import pytest

from senseforge.pipelines.culture_adapt.item import Fields
from senseforge.pipelines.culture_adapt.parse import (
    parse_adapted,
    parse_rename,
    parse_spans,
    parse_translation,
    relevance_vote,
)
from senseforge.pipelines.culture_adapt.templates import ADAPT_PREFIX, EXTRACT_PREFIX, RENAME_PREFIX

SOURCE = Fields(
    question="James was looking for a good place to buy farmland.  Where might he look?",
    concept="farmland",
    choices=tuple(zip("ABCDE", ("midwest", "countryside", "estate", "farming areas", "illinois"), strict=True)),
    answer="A",
)
OPTIONS = {"A": "Lampung", "B": "pedesaan", "C": "perumahan", "D": "daerah pertanian", "E": "Jakarta"}
ADAPTED = {
    "question": "Budi mencari tempat yang bagus untuk membeli lahan pertanian di Indonesia. Di mana ia mencari?",
    "concept": "lahan pertanian",
    "options": OPTIONS,
    "answer": "A",
}


# --- spans -----------------------------------------------------------------------------------


def test_spans_keep_only_what_the_text_holds() -> None:
    text = SOURCE.display()
    reply = json.dumps({"names": ["James", "Bob", "james"], "places": ["Illinois", "Texas", "midwest"]})
    assert parse_spans(reply, text) == (["James"], ["Illinois", "midwest"])


@pytest.mark.parametrize(
    ("reply", "prefix", "expected"),
    [
        ('Here they are:\n```json\n{"nama": ["James"], "lokasi": ["illinois"]}\n```', "", (["James"], ["illinois"])),
        ('{"persons": ["James"], "locations": []}', "", (["James"], [])),
        ('{"people": "James", "tempat": "illinois, midwest"}', "", (["James"], ["illinois", "midwest"])),
        ('["James"]', "", (["James"], [])),
        ('"James"], "places": ["illinois"]}', EXTRACT_PREFIX, (["James"], ["illinois"])),
        ('], "places": []}', EXTRACT_PREFIX, ([], [])),
        ("{}", "", ([], [])),
    ],
)
def test_spans_in_the_shapes_models_return(reply: str, prefix: str, expected: tuple[list[str], list[str]]) -> None:
    assert parse_spans(reply, SOURCE.display(), prefix) == expected


def test_spans_without_json_are_malformed() -> None:
    assert parse_spans("James and Illinois.", SOURCE.display()) is None
    assert parse_spans("", SOURCE.display()) is None


# --- adapted items ---------------------------------------------------------------------------


def test_adapted_plain_reply() -> None:
    got = parse_adapted(json.dumps(ADAPTED), SOURCE)
    assert got == Fields(ADAPTED["question"], "lahan pertanian", tuple(OPTIONS.items()), "A")  # type: ignore[arg-type]


def test_adapted_indonesian_keys_list_options_and_answer_as_text() -> None:
    reply = json.dumps(
        {
            "pertanyaan": ADAPTED["question"],
            "konsep": "lahan pertanian",
            "pilihan": [f"{label}. {text}" for label, text in OPTIONS.items()],
            "jawaban": "Lampung",
        }
    )
    got = parse_adapted(reply, SOURCE)
    assert got is not None
    assert got.choices == tuple(OPTIONS.items())
    assert got.answer == "A"
    assert got.question.endswith("di Indonesia. Di mana ia mencari?")  # case kept: "Indonesia", "Budi"
    assert got.question.startswith("Budi")


def test_adapted_sundanese_keys_and_label_shapes() -> None:
    for answer in ("C", "C.", "(C)", "c", "C. perumahan"):
        reply = json.dumps(
            {
                "patarosan": "Budi milarian tempat pikeun meuli lahan tatanén. Di mana manéhna milarian?",
                "konsép": "lahan tatanén",
                "pilihan": {"label": list(OPTIONS), "text": list(OPTIONS.values())},
                "waleran": answer,
            }
        )
        got = parse_adapted(reply, SOURCE)
        assert got is not None and got.answer == "C" and got.concept == "lahan tatanén", answer


def test_adapted_missing_answer_is_the_source_label() -> None:
    body = {k: v for k, v in ADAPTED.items() if k != "answer"}
    got = parse_adapted(json.dumps(body), Fields(SOURCE.question, SOURCE.concept, SOURCE.choices, "D"))
    assert got is not None and got.answer == "D"


def test_adapted_options_are_read_not_judged() -> None:
    seven = {**ADAPTED, "options": [f"pilihan {i}" for i in range(7)]}
    got = parse_adapted(json.dumps(seven), SOURCE)
    assert got is not None and len(got.choices) == 7
    assert got.labels == tuple("ABCDEFG")
    four = {**ADAPTED, "choices": [{"label": lab, "text": txt} for lab, txt in list(OPTIONS.items())[:4]]}
    del four["options"]
    got = parse_adapted(json.dumps(four), SOURCE)
    assert got is not None and got.labels == ("A", "B", "C", "D")


def test_adapted_other_key_spellings_and_wrappers() -> None:
    reply = (
        "Berikut hasil adaptasinya:\n```json\n"
        + json.dumps(
            {
                "data": {
                    "question": ADAPTED["question"],
                    "question_concept": "lahan pertanian",
                    "opsi": [{"A": OPTIONS["A"]}, {"B": OPTIONS["B"]}],
                    "question_answer": "B",
                }
            },
            ensure_ascii=False,
        )
        + "\n```\nSemoga membantu!"
    )
    got = parse_adapted(reply, SOURCE)
    assert got is not None
    assert got.choices == (("A", "Lampung"), ("B", "pedesaan"))
    assert got.answer == "B"
    listed = parse_adapted(json.dumps([{**ADAPTED, "answerKey": "E"}]), SOURCE)
    assert listed is not None and listed.answer == "A"  # "answer" comes before "answerKey"


def test_adapted_completion_reply_with_the_prefix_put_back() -> None:
    line = json.dumps(ADAPTED, ensure_ascii=False)
    got = parse_adapted(line.removeprefix(ADAPT_PREFIX), SOURCE, ADAPT_PREFIX)
    assert got is not None and got.concept == "lahan pertanian"
    assert parse_adapted(line, SOURCE, ADAPT_PREFIX) == got  # the model repeated the opening


def test_adapted_answer_that_names_no_option_is_kept_for_the_checks() -> None:
    got = parse_adapted(json.dumps({**ADAPTED, "answer": "Surabaya"}), SOURCE)
    assert got is not None and got.answer == "Surabaya"


@pytest.mark.parametrize(
    "reply",
    [
        "I cannot adapt this question.",
        "",
        '{"question": "Di mana?", "options": {"A": "x"}}',  # no concept
        '{"question": "Di mana?", "concept": "x"}',  # no options
        '{"concept": "x", "options": {"A": "x"}}',  # no question
        '{"question": "Di mana?", "concept": "x", "options": {"A": "x"',  # truncated
        "[1, 2, 3]",
    ],
)
def test_adapted_garbage_is_none(reply: str) -> None:
    assert parse_adapted(reply, SOURCE) is None


# --- renamed items ---------------------------------------------------------------------------


def test_rename_json_with_partial_options() -> None:
    source = Fields("Bob lent Mary a ladder. Why?", "ladder", (("A", "to paint Bob's fence"), ("B", "to swim")), "A")
    reply = json.dumps({"question": "Budi lent Siti a ladder. Why?", "options": {"A": "to paint Budi's fence"}})
    got = parse_rename(reply, source)
    assert got == Fields(
        "Budi lent Siti a ladder. Why?", "ladder", (("A", "to paint Budi's fence"), ("B", "to swim")), "A"
    )
    only_question = parse_rename('{"pertanyaan": "Budi lent Siti a ladder. Why?"}', source)
    assert only_question is not None and only_question.choices == source.choices


def test_rename_plain_text_and_completion_replies() -> None:
    assert (got := parse_rename("Changed Question: Budi was looking for farmland.", SOURCE)) is not None
    assert got.question == "Budi was looking for farmland."
    assert got.concept == SOURCE.concept and got.answer == SOURCE.answer and got.choices == SOURCE.choices
    completion = parse_rename('Budi was looking for farmland."}', SOURCE, RENAME_PREFIX)
    assert completion is not None and completion.question == "Budi was looking for farmland."
    cut = parse_rename('Budi was looking for farmland.", "options": {"A": "mid', SOURCE, RENAME_PREFIX)
    assert cut is not None and cut.question == "Budi was looking for farmland."
    assert parse_rename("   ", SOURCE) is None
    assert parse_rename('{"options": {"A": "x"}}', SOURCE) is None
    assert parse_rename('{"options": {"A": "x"}}', SOURCE, RENAME_PREFIX) is None


# --- translations ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("  lahan tatanén  ", "lahan tatanén"),
        ('"lahan tatanén"', "lahan tatanén"),
        ("Sundanese: lahan tatanén", "lahan tatanén"),
        ('Translation: "Di mana Budi meuli sawah?"', "Di mana Budi meuli sawah?"),
        ("**Terjemahan:** Di mana Budi meuli sawah?", "Di mana Budi meuli sawah?"),
        ("```\nDi mana Budi meuli sawah?\n```", "Di mana Budi meuli sawah?"),
        ("Di mana Budi meuli sawah?\n\nNote: 'sawah' means rice field.", "Di mana Budi meuli sawah?"),
        ("Di mana Budi meuli sawah?\n(literally: where does Budi buy a rice field)", "Di mana Budi meuli sawah?"),
        ("Translation:\nDi mana Budi meuli sawah?", "Di mana Budi meuli sawah?"),
        ("Di mana Budi biasana\nmeuli sawah di Bandung?", "Di mana Budi biasana meuli sawah di Bandung?"),
        ("Indonesia", "Indonesia"),
    ],
)
def test_translation_cleaned(reply: str, expected: str) -> None:
    assert parse_translation(reply) == expected


def test_empty_translation_is_none() -> None:
    assert parse_translation("") is None
    assert parse_translation('  ""  ') is None
    assert parse_translation("Translation:") is None


# --- relevance votes -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "yes_means_relevant", "irrelevant"),
    [
        ("Yes.", True, False),
        ("No, they would not.", True, True),
        ("yes", False, True),
        ("No", False, False),
        ("Ya", True, False),
        ("Tidak.", True, True),
        ("<Answer>no</Answer>", True, True),
        ("Maybe.", True, None),
        ("", False, None),
    ],
)
def test_relevance_vote_polarity(reply: str, yes_means_relevant: bool, irrelevant: bool | None) -> None:
    assert relevance_vote(reply, yes_means_relevant) is irrelevant
