"""Copies caught (the shared near-duplicate test, each recipe's copy and form checks) and rejects that show
what was rejected (its text as checked, the check's evidence, a raw reply once per call)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any, ClassVar

import pytest

from senseforge.data.schema import QuestionSet
from senseforge.pipelines.choices import RawItem
from senseforge.pipelines.crow.parse import parse_triples
from senseforge.pipelines.culture_adapt.copies import replaced_names_left, untranslated_evidence
from senseforge.pipelines.culture_adapt.item import Fields
from senseforge.pipelines.culture_adapt.records import AdaptRecord
from senseforge.pipelines.culture_adapt.stages import Keep, Rewrite, to_replace
from senseforge.pipelines.culture_gen.checks import check_item, degenerate_question
from senseforge.pipelines.culture_gen.records import CultureItem, CultureRecord
from senseforge.pipelines.culture_gen.stages import Dedup
from senseforge.pipelines.culture_gen.templates import worked_example
from senseforge.pipelines.dedup import CopyIndex, near_duplicate, normalise, shingle_jaccard
from senseforge.pipelines.mcsqa.config import McsqaConfig
from senseforge.pipelines.mcsqa.filters import check_distractors, check_question
from senseforge.pipelines.mcsqa.records import McsqaRecord
from senseforge.pipelines.mcsqa.stages import FilterCopies, example_distractors, example_questions
from senseforge.pipelines.moderation import WordListModerator
from senseforge.pipelines.outcomes import Reject
from senseforge.pipelines.report import write_rejects
from senseforge.pipelines.runstore import Record, StageResult


class _NoContext:
    def llm(self, spec: str) -> Any:
        raise AssertionError("no model")

    judgements: ClassVar[dict[str, Any]] = {}


# --- the shared test ---------------------------------------------------------------------------


def test_normalisation_folds_case_width_punctuation_and_spacing() -> None:
    assert (
        normalise("  What is a ＨＯＵＳＥ made of ?! ")
        == normalise("what is a house made of")
        == "what is a house made of"
    )


@pytest.mark.parametrize(
    ("a", "b", "near"),
    [
        ("What is a house made of?", "what is a house made of", True),
        ("What is a house made of?", "What is the house made of?", True),
        ("Where would you keep a fork in the kitchen?", "Where would you keep the forks in the kitchen?", True),
        ("Where would you find a fork?", "Where would you find a spoon?", False),
        ("What is a house made of?", "What is a bridge made of?", False),
        ("What is not a fruit?", "What is a fruit?", False),  # a negation is never a mere function word
        ("Which option fits puzzle number 12?", "Which option fits puzzle number 13?", False),
        ("家は何でできていますか？", "家は何でできていますか", True),
        ("家は何でできていますか？", "橋は何でできていますか？", False),
    ],
)
def test_near_duplicates(a: str, b: str, near: bool) -> None:
    assert near_duplicate(a, b) is near
    assert 0.0 <= shingle_jaccard(a, b) <= 1.0


def test_the_index_names_the_kept_text_a_copy_repeats() -> None:
    seen = CopyIndex()
    seen.add("q-1", "What is a house made of?")
    assert seen.match("What is a bridge made of?") is None
    exact = seen.match("what is a HOUSE made of")
    assert exact is not None and exact.kind == "duplicate" and exact.kept_id == "q-1"
    near = seen.match("What is the house made of?")
    assert near is not None and near.kind == "near_duplicate" and near.evidence()["copy_of"] == "q-1"


# --- mCSQA ---------------------------------------------------------------------------------------


def _qs_record(record_id: str, question: str, answer: str) -> StageResult[McsqaRecord]:
    qs = QuestionSet(
        id=record_id.rsplit("-", 1)[0], lang="en", anchor="house", relation="MadeOf", direction="forward",
        targets=("door", "roof", "chimney"),
    )  # fmt: skip
    return StageResult(record_id, "ok", McsqaRecord(qs=qs, answer=answer, question=question))


def test_mcsqa_drops_a_question_its_siblings_or_the_run_already_asked() -> None:
    config = McsqaConfig(lang="en", n=1, kb="unused")
    records = [
        _qs_record("qs-a-0", "What is a house made of?", "door"),
        _qs_record("qs-a-1", "What is a house made of?", "roof"),
        _qs_record("qs-a-2", "What is the house made of?", "chimney"),
        _qs_record("qs-b-0", "Which part of a home lets smoke out?", "chimney"),
    ]
    output = FilterCopies("filter_refined", config, WordListModerator()).run(records, _NoContext())
    verdicts = [(o.status, o.reason) for o in output.outcomes if isinstance(o, StageResult)]
    assert verdicts == [
        ("ok", None),
        ("rejected", "duplicate_question"),
        ("rejected", "near_duplicate_question"),
        ("ok", None),
    ]
    copy = output.outcomes[1]
    assert isinstance(copy, StageResult) and copy.evidence is not None and copy.evidence["copy_of"] == "qs-a-0"


def test_mcsqa_rejects_a_one_letter_distractor_and_copies_of_its_worked_examples() -> None:
    assert check_distractors(["d", "window"], ["door", "roof", "chimney"], "en") == "short_option"
    assert check_distractors(["猫", "犬小屋"], ["ドア", "屋根", "煙突"], "ja") is None  # one character is a word there
    pair = example_distractors("en")[0]
    assert check_distractors(list(pair), ["door", "roof", "chimney"], "en", examples=example_distractors("en")) == (
        "copied_example"
    )
    example = example_questions("en")[0]
    assert check_question(example, ["x1", "x2", "x3"], "en", examples=example_questions("en")) == "copied_example"


# --- culture-gen ---------------------------------------------------------------------------------


def _item(question: str, *options: str, answer: str = "A") -> RawItem:
    return RawItem(question, tuple(zip("ABCDE", options, strict=True)), answer, None)


FIVE = ("kinca", "sambel", "kecap", "saos", "gula")


@pytest.mark.parametrize(
    ("question", "lang", "problem"),
    [
        ("Pajajaran", "su", "single_word"),
        ("Naon Pajajaran?", "su", "too_short"),
        ("Kain yang biasa kita lihat memiliki warna ungu adalah", "id", "no_question_form"),
        ("Siapakah pemimpin Belanda yang pertama datang", "id", None),  # a question word, no mark (released)
        ("Kerja sama antara bangsa terjadi pada masa...", "id", None),  # a cloze stem (released)
        ("Di mana biasana cai mancur kapanggih?", "su", None),
    ],
)
def test_culture_gen_names_a_degenerate_question(question: str, lang: str, problem: str | None) -> None:
    assert degenerate_question(question, lang) == problem


def test_culture_gen_rejects_short_options_degenerate_questions_and_copies_of_the_worked_example() -> None:
    ok_question = "Colénak biasana didahar sareng naon di Bandung?"
    assert check_item(_item(ok_question, *FIVE), "colénak", lang="su") is None
    assert check_item(_item(ok_question, "d", *FIVE[1:]), "colénak", lang="su") == "short_option"
    assert check_item(_item(ok_question, "7", *FIVE[1:]), "colénak", lang="su") is None  # a number is an answer
    assert check_item(_item("Pajajaran", *FIVE), "Pajajaran", lang="su") == "degenerate_question"
    example = worked_example("su")
    copied = list(example["choices"].values())
    item = _item("Naon anu sok didahar sareng colénak di Bandung?", *copied)
    assert check_item(item, "colénak", lang="su", example=example) == "copied_example"
    assert check_item(item, "colénak", lang="su") is None  # the chat prompt shows no example


def _gen(record_id: str, question: str, options: tuple[str, ...]) -> StageResult:
    item = CultureItem(question=question, choices=list(zip("ABCDE", options, strict=True)), answer="A")
    return StageResult(record_id, "ok", CultureRecord(lang="id", category="rumah", concept="rumah", item=item))


def test_culture_gen_dedup_names_the_kept_item_and_catches_near_copies() -> None:
    records = [
        _gen("b/0", "Rumah adat Sunda biasanya terbuat dari apa?", FIVE),
        _gen("b/1", "Rumah adat Sunda biasanya terbuat dari apa?", FIVE),
        _gen("b/2", "Rumah-rumah adat Sunda biasanya terbuat dari apa?", FIVE),
        _gen("b/3", "Rumah adat Sunda biasanya terbuat dari apa ?", ("a1", "b2", "c3", "d4", "e5")),
    ]
    output = Dedup("dedup").run(records, _NoContext())
    verdicts = [(o.status, o.reason, o.evidence) for o in output.outcomes if isinstance(o, StageResult)]
    assert verdicts[0] == ("ok", None, None)
    assert verdicts[1] == ("rejected", "duplicate_item", {"copy_of": "b/0"})
    assert verdicts[2][:2] == ("rejected", "near_duplicate_question") and verdicts[2][2]["copy_of"] == "b/0"
    assert verdicts[3][:2] == ("ok", None)  # the same question with other options: kept unless by question
    strict = Dedup("dedup", by="question").run(records[:1] + records[3:], _NoContext())
    assert [o.reason for o in strict.outcomes if isinstance(o, StageResult)] == [None, "duplicate_question"]


# --- culture-adapt -------------------------------------------------------------------------------


def test_culture_adapt_names_a_name_the_adaptation_kept() -> None:
    assert replaced_names_left("Where would James keep his bike?", ["James", "Sally"]) == ["James"]
    assert replaced_names_left("Where would Jameson keep his bike?", ["James"]) == []
    source = Fields("Where would James go in Mexico?", "trip", tuple(zip("ABCDE", FIVE, strict=True)), "A")
    data = AdaptRecord(split="test", source_id="t", source_lang="en", source=source, names=["James"], places=["Mexico"])
    assert to_replace(data.with_(irrelevant=["names"]), "names") == ["James"]
    assert to_replace(data.with_(irrelevant=["concept", "places"]), "full") == ["Mexico"]


def _fields(question: str, *options: str) -> Fields:
    return Fields(question, "mancur", tuple(zip("ABCDE", options, strict=True)), "A")


def test_culture_adapt_rejects_an_untranslated_translation_before_the_similarity() -> None:
    source = _fields(
        "Di mana biasanya air mancur ditemukan?", "taman kota", "di dalam ruangan", "hutan", "laut", "gunung"
    )
    options = ("taman kota", "di jero rohangan", "leuweung", "sisi laut", "luhur gunung")
    sundanese = _fields("Di mana biasana cai mancur kapanggih?", *options)
    assert untranslated_evidence(json.dumps(sundanese.to_json()), json.dumps(source.to_json()), None, "id") is None
    copy = untranslated_evidence(json.dumps(source.to_json()), json.dumps(source.to_json()), "id", "id")
    assert copy is not None and copy["similarity"] == 1.0
    keep = Keep("keep", ("id", "su"), measure="chrf", flag_language=False)
    data = AdaptRecord(split="test", source_id="x", source_lang="id", source=source, draft_lang="id")
    record = StageResult("x", "ok", data.with_(items={"id": source, "su": source}, back={"su": source}))
    outcome = keep.run([record], _NoContext()).outcomes[0]
    assert isinstance(outcome, StageResult) and outcome.reason == "untranslated"
    assert outcome.payload["evidence"]["lang"] == "su"
    flagged = Keep("keep", ("id", "su"), measure="chrf", flag_language=False, untranslated="flag")
    kept = flagged.run([record], _NoContext()).outcomes[0]
    assert isinstance(kept, StageResult) and kept.status == "ok" and kept.payload["untranslated"]["lang"] == "su"


# --- rejects that show the rejected --------------------------------------------------------------


class _Edited(Record):
    """A rewrite as a check saw it."""

    target: str | None = None
    rewrite: str | None = None

    def shown_checked(self) -> dict[str, Any]:
        return self.stored()


class _Store:
    def __init__(self, rows: dict[str, list[StageResult]]) -> None:
        self.rows = rows

    def results(self, stage: str, status: str, model: object = None) -> list[StageResult]:
        return self.rows.get(stage, [])


def test_a_reject_row_shows_the_text_the_evidence_and_a_reply_once_per_call(tmp_path: Path) -> None:
    reply = '{"triples": [["rain", "Causes", "wet"], ["rain", "Nope", "wet"], ["rain", "Causes", "wet"]]}'
    parsed = parse_triples(reply, limit=5)
    assert isinstance(parsed, list) and isinstance(parsed[1], Reject) and isinstance(parsed[2], Reject)
    assert parsed[1].evidence == {"triple": {"head": "rain", "relation": "Nope", "tail": "wet"}, "relation": "Nope"}
    edits = _Edited(target="close your eyes", rewrite="open all six of my ears now")
    rows = {
        "cka": [
            StageResult("c/1", "rejected", _Edited(), "unknown_relation", "P", reply, evidence=parsed[1].evidence),
            StageResult("c/2", "rejected", _Edited(), "duplicate_triple", "P", reply, evidence=parsed[2].evidence),
        ],
        "edits": [StageResult("c/0/0", "rejected", edits, "too_many_edits", evidence={"edits": 6})],
    }
    assert write_rejects(tmp_path, _Store(rows), ["cka", "edits"], _Edited) == 3  # type: ignore[arg-type]
    first, second, third = (json.loads(line) for line in (tmp_path / "rejects.jsonl").read_text().splitlines())
    assert first["response"] == reply and "response_of" not in first
    assert second["response"] is None and second["response_of"] == "c/1"
    assert second["evidence"]["triple"]["relation"] == "Causes"
    assert third["checked"] == {"target": "close your eyes", "rewrite": "open all six of my ears now"}
    assert third["evidence"] == {"edits": 6}


def test_a_name_only_rewrite_that_keeps_the_name_is_rejected_naming_it() -> None:
    source = Fields("Where would James keep his bike?", "bike", tuple(zip("ABCDE", FIVE, strict=True)), "A")
    data = AdaptRecord(
        split="test", source_id="t", source_lang="en", source=source, names=["James"], irrelevant=["names"]
    )
    record = StageResult("t", "ok", data)
    stage = Rewrite("adapt", "scripted/unused", kind="names")
    kept = stage.parse(record, '{"question": "Where would James keep his bike?"}')
    assert isinstance(kept, Reject) and kept.reason == "names_not_replaced"
    assert kept.evidence is not None and kept.evidence["name"] == "James"
    renamed = stage.parse(record, '{"question": "Where would Budi keep his bike?"}')
    assert isinstance(renamed, AdaptRecord) and renamed.adapted is True


def test_the_index_finds_what_comparing_every_pair_finds() -> None:
    """The index skips kept texts sharing too few shingles to be near: it names the very copies a scan of every
    kept text with :func:`near_duplicate` names, in the order kept."""
    frames = [
        "Where would you find a {}?",
        "What is a {} made of?",
        "Which {} is the biggest?",
        "A {} is used for what?",
    ]
    things = ["fork", "forks", "spoon", "house", "the house", "bridge", "cat", "cats", "puzzle 12", "puzzle 13"]
    texts = [frame.format(thing) for frame in frames for thing in things]
    texts += [
        "where WOULD you find a fork",
        "家の中で猫はどこにいますか",
        "家の中で犬はどこにいますか",
        "家の中で猫はどこにいますか？",
    ]
    kept, _ = _index_against_a_scan(texts, keep_copies=False)
    assert 0 < kept < len(texts)


def _index_against_a_scan(texts: list[str], *, keep_copies: bool) -> tuple[int, int]:
    """Each text through a :class:`CopyIndex` and through a scan of every kept text with :func:`near_duplicate`:
    the same copies, in the order kept. Kept: the texts no copy was found for (and, with ``keep_copies``, every
    third text as well). Returns how many were kept, and how many found near copies."""
    index = CopyIndex()
    kept: list[tuple[str, str]] = []
    named = 0
    for number, text in enumerate(texts):
        found = [(copy.kept_id, copy.kind) for copy in index.matches(text)]
        exact = [(rid, "duplicate") for rid, old in kept if normalise(old) == normalise(text)]
        near = [
            (rid, "near_duplicate")
            for rid, old in kept
            if normalise(old) != normalise(text) and near_duplicate(old, text)
        ]
        assert found == exact + near, text
        named += bool(near)
        if not found or (keep_copies and number % 3 == 0):
            index.add(f"t{number}", text)
            kept.append((f"t{number}", text))
    return len(kept), named


def test_the_index_probing_few_shingles_misses_no_copy_a_scan_finds() -> None:
    """Texts of a small vocabulary, many near one another (seeded): probing only each text's rarest shingles, the
    index names the same copies as comparing every kept text, at every length."""
    rng = random.Random(7)
    words = ["where", "would", "you", "find", "a", "the", "fork", "forks", "spoon", "house", "of", "made", "is"]
    texts = [" ".join(rng.choice(words) for _ in range(rng.randint(1, 9))) for _ in range(400)]
    _, named = _index_against_a_scan(texts, keep_copies=True)  # copies kept too: a text has several to find
    assert named > 20


def test_the_index_compares_texts_only_with_those_of_the_same_numbers() -> None:
    """Templated texts that differ in their numbers (seeded), some numbers repeated: the index, comparing a text with
    the kept texts of its own numbers only, names the same copies as a scan of every kept text."""
    rng = random.Random(11)
    frames = ["Which option matches puzzle number {}?", "Which options match puzzle {} now?", "Puzzle {}: which fits?"]
    texts = [rng.choice(frames).format(rng.choice(["12", "13", "012", "7 and 8", "40"])) for _ in range(150)]
    texts += [frame.format(number) for frame in frames for number in range(40)]
    _, named = _index_against_a_scan(texts, keep_copies=True)
    assert named > 20
