"""Label Studio and Argilla 2.x interop: every task type out, checked with the tools' own packages, and back in.

The tools' packages stand in for the tools: label-studio-sdk parses the labeling config and
validates the tasks and the simulated annotations against it; argilla builds its Settings
and Records from what we wrote (with a client whose only server is an in-process stub
that answers the login check) and writes the exports we read back with its own code.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest
from pydantic import BaseModel

from senseforge.annotate import interop
from senseforge.annotate.store import AnnotationStore
from senseforge.annotate.tasktypes import TASK_TYPES
from senseforge.data.crow_items import AnnotationItem, CrowPair, KnowledgeCheckItem, RewriteCheckItem, RewriteItem
from senseforge.data.schema import (
    ConceptSlot,
    Draft,
    DraftItem,
    Judgement,
    KnowledgeTriple,
    MCItem,
    OpenAnswer,
    QCEvent,
)
from senseforge.errors import ConfigError, DataValidationError
from senseforge.evaluate.policies import Majority, Policy, decide, exclude_ambiguous, parse_policy
from senseforge.pipelines.runstore import sqlite_url

HOSTILE = '<script>alert("x")</script> & "quoted" ]]> done'
"""Item text no tool may run or mangle."""
ODD_LABEL = '<b>"&]]>'
"""A choice label that ends up inside the labeling config's XML."""


def tool(module: str) -> Any:
    """A tool's package: CI installs them (the interop extra), elsewhere the test skips without one."""
    try:
        return importlib.import_module(module)
    except ImportError:
        if os.environ.get("CI") == "true":
            raise
        pytest.skip(f"{module} is not installed (pip install 'senseforge[interop]')")


# --- inputs of every task type ------------------------------------------------------------


def mc(n: int, *, labels: Sequence[str] = "ABCDE", question: str | None = None, text: str | None = None) -> MCItem:
    return MCItem(
        id=f"q{n}",
        lang="en",
        question=question or f"Where would you keep thing number {n}?",
        choices=[{"label": label, "text": text if i == 0 and text else f"place {i}"} for i, label in enumerate(labels)],
        answer=labels[1],
    )


def adapted(n: int) -> MCItem:
    """An item as culture-adapt queues it: the adapted text, and its source in the metadata."""
    base = mc(n, question=f"Di mana Anda menyimpan hujan abu vulkanik nomor {n}? {HOSTILE if n == 1 else ''}")
    source = {"lang": "en", "question": "Where do you keep snow in winter?", "concept": "snow", "answer": "B",
              "choices": [[label, f"spot {label.lower()}"] for label in "ABCDE"]}  # fmt: skip
    return base.model_copy(update={"question_concept": "hujan abu vulkanik", "metadata": {"source": source}})


def slot(n: int, options: int = 5) -> ConceptSlot:
    return ConceptSlot(id=f"h{n}", lang="en", category="objects", concept="umbrella", creator="cy", options=options)


DRAFTED = ("by the door", "in bed", "in a shoe")


def draft_item(n: int, *, sent_back: bool) -> DraftItem:
    draft = Draft(
        question=f"Where would you leave a wet umbrella, case {n}?",
        choices=[{"label": label, "text": text} for label, text in zip("ABC", DRAFTED, strict=True)],
        answer="A",
        distractor="B",
    )
    history = [QCEvent(status="submitted", by="cy", round=0)]
    if sent_back:
        history.append(QCEvent(status="needs_revision", by="ana", round=1, comment=f"say which door {HOSTILE}"))
    return DraftItem(
        id=f"h{n}@1", item_id=f"h{n}", lang="en", category="objects", concept="umbrella", creator="cy",
        draft=draft, history=history,
    )  # fmt: skip


def open_answer(n: int, text: str) -> OpenAnswer:
    return OpenAnswer(
        id=f"q{n}::scripted/answerer", item_id=f"q{n}", model="scripted/answerer", lang="en",
        question=f"What carries water to the sea, number {n}? {HOSTILE if n == 1 else ''}", gold="river", answer=text,
    )  # fmt: skip


P = TypeVar("P", bound=CrowPair)
LID = KnowledgeTriple(head="lid", relation="UsedFor", tail="keeping heat in", dimension="physical/spatial")
HEAT = KnowledgeTriple(head="heat", relation="Causes", tail="boiling over", dimension="causal")


def pair(model: type[P], n: int, **extra: Any) -> P:
    """A CRoW safety pair of ``model``: the context, the target, and what the task type adds."""
    return model(
        id=f"s{n}", task="safety", lang="en", context_name="scenario",
        context=f"A pot of soup boils over, case {n}. {HOSTILE if n == 1 else ''}", target_name="action",
        target="turn down the heat", label="safe", **extra,
    )  # fmt: skip


EXPORTED = list(TASK_TYPES)
"""Every task type travels to Label Studio and Argilla."""

INPUTS: dict[str, list[BaseModel]] = {
    "verify": [mc(1, question=HOSTILE, text=HOSTILE), mc(2), mc(3)],
    "answer": [mc(1, labels=("A", "B", "C", "D", ODD_LABEL), question=HOSTILE), mc(2, labels="ABC"), mc(3)],
    "create": [slot(1), slot(2, options=3)],
    "qc": [draft_item(1, sent_back=False), draft_item(2, sent_back=False)],
    "revise": [draft_item(1, sent_back=True), draft_item(2, sent_back=True)],
    "adapt-check": [adapted(1), adapted(2)],
    "label-errors": [mc(1, question=HOSTILE), mc(2)],
    "open-judge": [open_answer(1, f"a river {HOSTILE}"), open_answer(2, "the wind")],
    "cka": [pair(AnnotationItem, 1), pair(AnnotationItem, 2, max_triples=2)],
    "ckv": [pair(KnowledgeCheckItem, 1, triple=LID), pair(KnowledgeCheckItem, 2, triple=HEAT)],
    "wsg": [
        pair(RewriteItem, 1, flipped="unsafe", triples=[LID, HEAT]),
        pair(RewriteItem, 2, flipped="unsafe", triples=[HEAT], max_edits=3),
    ],
    "wsv": [
        pair(RewriteCheckItem, 1, rewrite="turn up the heat", flipped="unsafe", violates=[HEAT], edits=1),
        pair(RewriteCheckItem, 2, rewrite="leave the heat", flipped="unsafe", violates=[HEAT, LID]),
    ],
}


# --- who annotates, and what they answer ----------------------------------------------------

USERS: dict[str, dict[str, Any]] = {
    # Label Studio's export gives completed_by as a user id or as a user object
    "ana": {"ls": {"id": 1, "email": "ana@example.org", "first_name": "Ana", "last_name": ""},
            "argilla": uuid.UUID("00000000-0000-4000-8000-00000000000a")},
    "ben": {"ls": 2, "argilla": uuid.UUID("00000000-0000-4000-8000-00000000000b")},
    "cy": {"ls": {"id": 3, "email": "cy@example.org"}, "argilla": uuid.UUID("00000000-0000-4000-8000-00000000000c")},
}  # fmt: skip


def ls_name(who: str) -> str:
    raw = USERS[who]["ls"]
    return "ls:" + (raw["email"] if isinstance(raw, dict) else str(raw))


def argilla_name(who: str) -> str:
    return f"argilla:{USERS[who]['argilla']}"


@dataclass(frozen=True)
class Answer:
    """One person's answers to one task, in the form's own field names."""

    item: int
    who: str
    fields: dict[str, Any] = field(default_factory=dict)
    skipped: bool = False
    valid: bool = True


def options(*texts: str) -> dict[str, str]:
    return {f"option_{label}": text for label, text in zip("ABCDE", texts, strict=False)}


FIVE = ("by the door", "in the bathtub", "under the bed", "in the fridge", "on the roof")
ANSWERS: dict[str, list[Answer]] = {
    "verify": [
        Answer(0, "ana", {"accept": "yes", "comment": HOSTILE}),
        Answer(0, "ben", {"accept": "no", "flags": ["several-right", "offensive"], "comment": "two fit"}),
        Answer(1, "ana", {"accept": "yes"}),
        Answer(1, "ben", {"accept": "yes"}),
        Answer(1, "cy", {"accept": "no"}, skipped=True),
        Answer(2, "cy", {"accept": "yes", "comment": "x" * 2001}, valid=False),  # too long a comment
        Answer(2, "ana", {"accept": "yes", "flags": ["ambiguous-question"]}),
    ],
    "answer": [
        Answer(
            0,
            "ana",
            {"choice": ODD_LABEL, "certain": "yes", "flags": [f"ambiguous-option:{ODD_LABEL}"], "reason": HOSTILE},
        ),
        Answer(0, "ben", {"choice": "A", "certain": "no", "flags": ["ambiguous-question"], "reason": "unsure"}),
        Answer(0, "cy", {"choice": ODD_LABEL, "certain": "yes"}),
        Answer(1, "ana", {"choice": "E", "certain": "yes"}, valid=False),  # q2 has A–C only
        Answer(1, "ben", {"choice": "C", "certain": "yes"}),
        Answer(1, "cy", {"choice": "A", "certain": "no"}, skipped=True),
        Answer(2, "ana", {"choice": "B", "certain": "no"}),
    ],
    "create": [
        Answer(
            0,
            "cy",
            {
                "question": f"Where do you leave a wet umbrella? {HOSTILE}",
                **options(*FIVE),
                "answer": "A",
                "distractor": "B",
                "comment": "first try",
            },
        ),
        Answer(
            1,
            "cy",
            {
                "question": "Your umbrella drips: where does it go?",
                **options(*FIVE[:3]),
                "answer": "C",
                "distractor": "A",
                "concept_form": "umbrella",
            },
        ),
        Answer(
            0,
            "ana",
            {"question": "Where do you leave wet boots?", **options(*FIVE), "answer": "A", "distractor": "B"},
            valid=False,
        ),  # the concept is not in the question
        Answer(1, "ben", {"question": "Umbrella?"}, skipped=True),
    ],
    "qc": [
        Answer(0, "ana", {"verdict": "complete"}),
        Answer(0, "ben", {"verdict": "needs_revision", "comment": HOSTILE}),
        Answer(1, "ana", {"verdict": "needs_revision"}, valid=False),  # sent back without saying why
        Answer(1, "ben", {"verdict": "complete"}, skipped=True),
        Answer(1, "cy", {"verdict": "complete", "comment": "fine"}),
    ],
    "revise": [
        Answer(
            0,
            "cy",
            {
                "question": f"Where would you leave a wet umbrella by the front door? {HOSTILE}",
                **options("on the mat", "in bed", "in a shoe"),
                "answer": "A",
                "distractor": "C",
                "comment": "which door",
            },
        ),
        Answer(
            1,
            "cy",
            {
                "question": "Where does a wet umbrella go?",
                **options("by the door", "in bed", "shoe"),
                "answer": "A",
                "distractor": "A",
            },
            valid=False,
        ),  # the answer is its own distractor
        Answer(1, "ana", {"question": "x"}, skipped=True),
    ],
    "adapt-check": [
        Answer(0, "ana", {"verdict": "correct-major"}),
        Answer(0, "ben", {"verdict": "wrong", "error": "translation", "comment": HOSTILE}),
        Answer(0, "cy", {"verdict": "correct-major"}),
        Answer(1, "ana", {"verdict": "wrong"}, valid=False),  # a wrong one names its error
        Answer(1, "ben", {"verdict": "correct-minor"}),
        Answer(1, "cy", {"verdict": "wrong", "error": "typo-mechanics"}, skipped=True),
    ],
    "label-errors": [
        Answer(0, "ana", {"question": "none", "options": "none"}),
        Answer(0, "ben", {"question": "translation", "options": "invalid-options", "comment": HOSTILE}),
        Answer(0, "cy", {"question": "fluency"}, valid=False),  # no error label for the options
        Answer(1, "ana", {"question": "none", "options": "none"}, skipped=True),
        Answer(1, "ben", {"question": "context", "options": "none"}),
    ],
    "open-judge": [
        Answer(0, "ana", {"verdict": "correct", "comment": HOSTILE}),
        Answer(0, "ben", {"verdict": "incorrect"}),
        Answer(0, "cy", {"verdict": "correct"}),
        Answer(1, "ana", {"comment": "no idea"}, valid=False),  # no verdict
        Answer(1, "ben", {"verdict": "correct"}, skipped=True),
        Answer(1, "cy", {"verdict": "incorrect"}),
    ],
    "cka": [
        Answer(
            0,
            "ana",
            {
                "head_1": "soup",
                "relation_1": "HasProperty",
                "tail_1": "hot",
                "head_2": "lid",
                "relation_2": "UsedFor",
                "tail_2": "keeping heat in",
                "negated": ["2"],
                "comment": HOSTILE,
            },
        ),
        Answer(0, "ben", {"no_knowledge": "yes"}),
        Answer(0, "cy", {"no_knowledge": "yes"}, skipped=True),
        Answer(
            1,
            "cy",
            {
                "head_1": "a",
                "relation_1": "IsA",
                "tail_1": "b",
                "head_2": "c",
                "relation_2": "IsA",
                "tail_2": "d",
                "head_3": "e",
                "relation_3": "IsA",
                "tail_3": "f",
            },
            valid=False,
        ),  # this pair takes two triples at most
        Answer(1, "ana", {"head_1": "soup", "relation_1": "HasProperty"}, valid=False),  # no tail
        Answer(1, "ben", {"head_4": "pot", "relation_4": "AtLocation", "tail_4": "stove", "negated": ["4"]}),
    ],
    "ckv": [
        Answer(0, "ana", {"accept": "yes"}),
        Answer(0, "ben", {"accept": "no", "comment": HOSTILE}),
        Answer(0, "cy", {"accept": "yes"}),
        Answer(1, "ana", {"comment": "unsure"}, valid=False),  # neither yes nor no
        Answer(1, "ben", {"accept": "yes"}, skipped=True),
        Answer(1, "cy", {"accept": "no"}),
    ],
    "wsg": [
        Answer(0, "ana", {"rewrite": "turn up the heat", "violates": ["1"], "comment": HOSTILE}),
        Answer(0, "ben", {"no_alternative": "yes"}),
        Answer(1, "ana", {"rewrite": "run from the kitchen and call everyone you know"}, valid=False),  # > 3 edits
        Answer(1, "cy", {"rewrite": "turn up the heat"}),
        Answer(1, "ben", {"rewrite": "turn the heat"}, skipped=True),
    ],
    "wsv": [
        Answer(0, "ana", {"conditions": ["minimal", "violates", "flips", "on_topic"]}),
        Answer(0, "ben", {"conditions": ["minimal"], "comment": HOSTILE}),
        Answer(0, "cy", {"conditions": ["minimal", "violates", "flips", "on_topic"]}),
        Answer(1, "ana", {"conditions": ["flips"], "comment": "x" * 2001}, valid=False),  # too long a comment
        Answer(1, "ben", {"conditions": ["flips"]}, skipped=True),
        Answer(1, "cy", {"conditions": ["on_topic", "minimal"]}),
    ],
}


def blind(task_type: str, given: BaseModel) -> BaseModel:
    """What a task carries of its input: all of it, but an answer task's item without its answer and metadata."""
    if task_type != "answer":
        return given
    assert isinstance(given, MCItem)
    return MCItem(id=given.id, lang=given.lang, question=given.question, choices=given.choices)


TRIPLE_PART = re.compile(r"^(head|relation|tail)_([0-9]+)$")


def app_fields(values: dict[str, Any]) -> dict[str, Any]:
    """The same answers as the app's form posts them.

    Create and revise post ``option`` once per option; cka posts ``head``, ``relation`` and
    ``tail`` once per row of its table (empty in the rows left empty) and the 0-based numbers
    of the negated rows.
    """
    fields = {
        name: value
        for name, value in values.items()
        if not name.startswith("option_") and not TRIPLE_PART.match(name) and name != "negated"
    }
    texts = [value for name, value in sorted(values.items()) if name.startswith("option_")]
    if texts:
        fields["option"] = texts
    rows = [TRIPLE_PART.match(name) for name in values]
    numbers = [int(found.group(2)) for found in rows if found]
    if numbers:
        for part in ("head", "relation", "tail"):
            fields[part] = [str(values.get(f"{part}_{n}", "")) for n in range(1, max(numbers) + 1)]
        fields["negated"] = [str(int(n) - 1) for n in values.get("negated", [])]
    return fields


def expected(task_type: str, namer: Any) -> list[Judgement]:
    """What our app's parse makes of the valid, submitted answers, stamped with each annotator's name."""
    kind = TASK_TYPES[task_type]
    made = []
    for answer in ANSWERS[task_type]:
        if answer.valid and not answer.skipped:
            body = kind.parse(INPUTS[task_type][answer.item], app_fields(answer.fields))
            made.append(body.model_copy(update={"annotator": namer(answer.who)}))
    return made


def by_item(judgements: Sequence[Judgement]) -> dict[str, list[Judgement]]:
    out: dict[str, list[Judgement]] = {}
    for made in judgements:
        out.setdefault(made.item_id, []).append(made)
    return out


POLICIES: dict[str, Policy] = {
    "verify": parse_policy("unanimous"),
    "answer": exclude_ambiguous(3, Majority()),
    "adapt-check": Majority(),
    "label-errors": Majority(),
    "open-judge": Majority(),
    "ckv": parse_policy("at-least:2/3"),
    "wsv": parse_policy("at-least:2/3"),
}
"""The policies the recipes decide these task types' items by (their configs' defaults)."""


def assert_same(task_type: str, got: interop.Imported, want: list[Judgement]) -> None:
    invalid = sum(not a.valid and not a.skipped for a in ANSWERS[task_type])
    skipped = sum(a.skipped for a in ANSWERS[task_type])
    assert [j.model_dump() for j in got.judgements] == [j.model_dump() for j in want]
    assert len(got.rejected) == invalid and got.skipped == skipped
    for rejection in got.rejected:
        assert rejection.problems and rejection.annotator and rejection.item_id and rejection.location
    policy = POLICIES.get(task_type)
    if policy is not None:  # the same decisions, whichever way the judgements came in
        assert decide(policy, by_item(got.judgements)) == decide(policy, by_item(want))
    if task_type == "verify":
        unanimous = parse_policy("unanimous")
        decisions = decide(unanimous, by_item(got.judgements))
        assert decisions == decide(unanimous, by_item(want))
        assert decisions["q2"].decided


# --- Label Studio -------------------------------------------------------------------------


def ls_annotations(task_type: str, tasks: list[dict[str, Any]], interface: Any) -> list[dict[str, Any]]:
    """Label Studio's JSON export of our tasks once people annotated them (each annotation validated by the SDK)."""
    exported = [
        {"id": 100 + i, "data": task["data"], "meta": task["meta"], "annotations": [], "predictions": [],
         "created_at": "2026-01-02T10:00:00.000000Z", "project": 7}
        for i, task in enumerate(tasks)
    ]  # fmt: skip
    for number, answer in enumerate(ANSWERS[task_type]):
        result = []
        for name, value in answer.fields.items():
            control = interface.get_control(name)
            region: dict[str, Any] = {"id": f"r{number}{name}", "from_name": name, "to_name": control.to_name[0]}
            if control.tag.lower() == "choices":
                region |= {"type": "choices", "value": {"choices": value if isinstance(value, list) else [value]}}
            else:
                region |= {"type": "textarea", "value": {"text": [value]}}
            result.append(region)
        annotation = {
            "id": 1000 + number, "completed_by": USERS[answer.who]["ls"], "result": result,
            "was_cancelled": answer.skipped, "ground_truth": False, "lead_time": 4.2, "task": 100 + answer.item,
            "created_at": "2026-01-02T10:05:00.000000Z", "updated_at": "2026-01-02T10:05:00.000000Z",
        }  # fmt: skip
        assert interface.validate_prediction(annotation, return_errors=True) == []  # Label Studio would take it
        exported[answer.item]["annotations"].append(annotation)
    return json.loads(json.dumps(exported))  # through a file, as the export is


@pytest.mark.parametrize("task_type", EXPORTED)
def test_label_studio_takes_the_tasks_and_gives_back_the_same_judgements(task_type: str, tmp_path: Path) -> None:
    sdk = tool("label_studio_sdk.label_interface")
    tasks_path, config_path = interop.write_label_studio(tmp_path, task_type, INPUTS[task_type])
    config = config_path.read_text(encoding="utf-8")
    tasks = json.loads(tasks_path.read_text(encoding="utf-8"))
    interface = sdk.LabelInterface(config)
    interface.validate()  # its schema, unique names, every toName pointing at a tag that exists
    form = interop.form_of(task_type, INPUTS[task_type])
    for item in form.fields:
        control = interface.get_control(item.name)
        assert interface.get_object(control.to_name[0]) is not None
        if item.kind == "text":
            assert control.tag == "TextArea"
        else:
            assert (control.tag, control.attr["choice"], list(control.labels)) == (
                "Choices",
                item.kind,
                list(item.options),
            )
    assert {s.key for s in form.shown} == {o.name for o in interface.objects}
    assert len(tasks) == len(INPUTS[task_type])
    for task, given in zip(tasks, INPUTS[task_type], strict=True):
        assert interface.validate_task({"data": task["data"]})  # every text the config shows is in the data
        for prediction in task.get("predictions", []):
            assert interface.validate_prediction(prediction, return_errors=True) == []
        carried = task["data"]["senseforge"]
        assert (carried["task_type"], carried["input_id"]) == (task_type, given.id)  # type: ignore[attr-defined]
        assert type(given).model_validate(carried["input"]) == blind(task_type, given)  # the input, unchanged
    assert interop.check_label_studio(tasks, config) == []

    exported = ls_annotations(task_type, tasks, interface)
    got = interop.label_studio_import(task_type, exported)
    assert_same(task_type, got, expected(task_type, ls_name))


def test_the_labeling_config_escapes_what_comes_from_items() -> None:
    sdk = tool("label_studio_sdk.label_interface")
    tasks, config = interop.label_studio_export("answer", INPUTS["answer"])
    assert "<script>" not in config and "<b>" not in config and '"&]]>' not in config
    assert "&lt;b&gt;&quot;&amp;]]&gt;" in config
    parsed = {c.get("value") for c in ET.fromstring(config).iter("Choice")}
    assert ODD_LABEL in parsed and f"ambiguous-option:{ODD_LABEL}" in parsed
    assert ODD_LABEL in sdk.LabelInterface(config).get_control("choice").labels
    assert tasks[0]["data"]["item_question"] == HOSTILE  # item text travels in the JSON, unchanged
    assert ODD_LABEL in tasks[0]["data"]["item_choices"]
    with pytest.raises(DataValidationError, match="XML"):
        interop.label_studio_export("answer", [mc(1, labels=("A", "B\x01"))])


def test_blind_answering_stays_blind_in_the_tools() -> None:
    secret = mc(7).model_copy(update={"metadata": {"creator": "zq-creator"}, "question_concept": "zq-concept"})
    tasks, config = interop.label_studio_export("answer", [secret])
    settings, records = interop.argilla_export("answer", [secret])
    for carried in (tasks[0]["data"]["senseforge"]["input"], json.loads(records[0]["metadata"]["senseforge_input"])):
        assert carried["answer"] is None and carried["metadata"] == {} and carried["question_concept"] is None
    for text in (json.dumps(tasks), config, json.dumps(settings), json.dumps(records)):
        assert "zq-" not in text
    verify_tasks, _ = interop.label_studio_export("verify", [secret])
    assert verify_tasks[0]["data"]["senseforge"]["input"]["answer"] == "B"  # verify shows it anyway


def test_revise_starts_from_the_current_draft() -> None:
    tasks, _ = interop.label_studio_export("revise", INPUTS["revise"])
    prefilled = {r["from_name"]: r["value"] for r in tasks[0]["predictions"][0]["result"]}
    assert prefilled["question"] == {"text": ["Where would you leave a wet umbrella, case 1?"]}
    assert prefilled["option_B"] == {"text": ["in bed"]} and prefilled["distractor"] == {"choices": ["B"]}
    assert tasks[0]["data"]["feedback"] == f"say which door {HOSTILE}"
    _, records = interop.argilla_export("revise", INPUTS["revise"])
    assert records[0]["suggestions"]["option_b"]["value"] == "in bed"


def test_label_studio_import_rejects_what_does_not_fit_and_keeps_a_persons_last_word() -> None:
    tasks, _ = interop.label_studio_export("verify", INPUTS["verify"][:1])

    def annotation(number: int, who: Any, result: Any) -> dict[str, Any]:
        return {"id": number, "completed_by": who, "result": result, "was_cancelled": False}

    accept = [{"from_name": "accept", "to_name": "item_question", "type": "choices", "value": {"choices": ["yes"]}}]
    reject = [{"from_name": "accept", "to_name": "item_question", "type": "choices", "value": {"choices": ["no"]}}]
    stray = [{"from_name": "mood", "to_name": "item_question", "type": "choices", "value": {"choices": ["ok"]}}]
    exported: list[Any] = [
        {"id": 1, "data": tasks[0]["data"], "annotations": [
            annotation(11, 5, accept), annotation(12, None, accept), annotation(13, 6, stray),
            annotation(14, {"id": 7, "email": ""}, "nonsense"), annotation(15, 5, reject),
        ]},
        {"id": 2, "data": {"text": "not ours"}, "annotations": [annotation(21, 5, accept)]},
        {"id": 3, "data": tasks[0]["data"], "annotations": []},  # nobody annotated it: nothing to say
        "not a task",
    ]  # fmt: skip
    got = interop.label_studio_import("verify", exported, prefix="team:")
    assert [(j.annotator, j.accept) for j in got.judgements] == [("team:5", False)]  # type: ignore[union-attr]
    problems = {r.location: " ".join(r.problems) for r in got.rejected}
    assert (
        "replaced by the same annotator's task 1 (Label Studio id 1), annotation 5"
        in problems["task 1 (Label Studio id 1), annotation 1 (id 11)"]
    )
    assert "completed_by" in problems["task 1 (Label Studio id 1), annotation 2 (id 12)"]
    assert "mood: not a field" in problems["task 1 (Label Studio id 1), annotation 3 (id 13)"]
    assert "result: not a list" in problems["task 1 (Label Studio id 1), annotation 4 (id 14)"]
    assert "no senseforge input id" in problems["task 2 (Label Studio id 2)"]
    assert "not a task object" in problems["task 4"]
    assert interop.label_studio_import("verify", {"tasks": []}).rejected[0].location == "file"
    named = interop.label_studio_import("verify", exported[:1], names={"5": "ana"})
    assert [j.annotator for j in named.judgements] == ["ana"]


def test_with_the_store_the_inputs_are_the_stores(tmp_path: Path) -> None:
    store = AnnotationStore(sqlite_url(tmp_path / "run.db"))
    try:
        store.add_tasks("verify", [mc(1), mc(2)], k=2, group="g")
        tasks, _ = interop.label_studio_export("verify", [mc(1), mc(3)])
        result = [{"from_name": "accept", "to_name": "item_question", "type": "choices", "value": {"choices": ["no"]}}]
        exported = [
            {"id": n, "data": task["data"], "annotations": [{"id": n, "completed_by": 1, "result": result}]}
            for n, task in enumerate(tasks, 1)
        ]
        got = interop.label_studio_import("verify", exported, store)
    finally:
        store.close()
    assert [j.item_id for j in got.judgements] == ["q1"]
    assert [r.item_id for r in got.rejected] == ["q3"] and "no verify task 'q3' in the run store" in got.rejected[
        0
    ].problems


# --- Argilla ------------------------------------------------------------------------------


@pytest.fixture
def rg() -> Iterator[Any]:
    """The argilla package, with a default client whose server is a stub that only answers the login check.

    Argilla's fields and questions insist on a client even to be constructed; nothing
    else may reach the stub, so what passes here passed offline.
    """
    argilla = tool("argilla")
    httpx = tool("httpx")
    reached: list[str] = []

    def server(request: Any) -> Any:
        if request.method == "GET" and request.url.path == "/api/v1/me":
            return httpx.Response(200, json={"id": str(uuid.uuid4()), "username": "offline", "role": "owner"})
        reached.append(f"{request.method} {request.url.path}")
        return httpx.Response(599, json={"detail": "offline"})

    previous = argilla.Argilla._default_client
    argilla.Argilla(
        api_url="http://argilla.invalid",
        api_key="offline",
        mounts={"http://argilla.invalid": httpx.MockTransport(server)},
    )  # becomes the default client
    try:
        yield argilla
    finally:
        argilla.Argilla._default_client = previous
    assert reached == []


def argilla_export_of(rg: Any, task_type: str, records: list[dict[str, Any]], *, flatten: bool) -> list[Any]:
    """Argilla's own export of our records once people answered them (the skipped ones as drafts or discarded)."""
    from argilla.records._io import GenericIO  # what dataset.records.to_list and .to_json run

    built = [rg.Record.from_dict(record) for record in records]
    for number, answer in enumerate(ANSWERS[task_type]):
        status = ("draft" if number % 2 else "discarded") if answer.skipped else "submitted"
        for name, value in answer.fields.items():
            built[answer.item].responses.add(
                rg.Response(name.lower(), value, user_id=USERS[answer.who]["argilla"], status=status)
            )
    return json.loads(json.dumps(GenericIO.to_list(built, flatten=flatten), default=str))


@pytest.mark.parametrize("task_type", EXPORTED)
def test_argilla_takes_the_dataset_and_gives_back_the_same_judgements(task_type: str, tmp_path: Path, rg: Any) -> None:
    settings_path, records_path = interop.write_argilla(tmp_path, task_type, INPUTS[task_type], min_submitted=3)
    settings = rg.Settings.from_json(settings_path)
    settings.validate()  # fields and questions there, no name used twice
    ours = json.loads(settings_path.read_text(encoding="utf-8"))
    theirs = settings.serialize()
    for kind in ("fields", "questions"):
        assert len(theirs[kind]) == len(ours[kind])
        for mine, built in zip(ours[kind], theirs[kind], strict=True):
            assert {key: built[key] for key in mine} == mine  # argilla reads every setting as we meant it
            assert interop.ARGILLA_NAME.match(mine["name"])  # and its server takes the name
    assert theirs["distribution"] == {"strategy": "overlap", "min_submitted": 3} and theirs["allow_extra_metadata"]
    form = interop.form_of(task_type, INPUTS[task_type])
    kinds = {"single": "label_selection", "multiple": "multi_label_selection", "text": "text"}
    assert [(q.name, q.type, q.required) for q in settings.questions] == [
        (f.argilla_name, kinds[f.kind], f.required) for f in form.fields
    ]
    records = json.loads(records_path.read_text(encoding="utf-8"))
    for record, given in zip(records, INPUTS[task_type], strict=True):
        built = rg.Record.from_dict(record)
        built.api_model()  # what it would be sent to the server as
        assert built.id == given.id  # type: ignore[attr-defined]
        assert set(built.fields) == {f.name for f in settings.fields}
        assert built.metadata["senseforge_task_type"] == task_type
        assert type(given).model_validate_json(built.metadata["senseforge_input"]) == blind(task_type, given)
    assert interop.check_argilla(ours, records) == []

    flat = argilla_export_of(rg, task_type, records, flatten=True)
    got = interop.argilla_import(task_type, flat)
    assert_same(task_type, got, expected(task_type, argilla_name))


def test_argilla_export_without_statuses_is_refused_and_with_them_taken(rg: Any) -> None:
    _, records = interop.argilla_export("verify", INPUTS["verify"])
    nested = argilla_export_of(rg, "verify", records, flatten=False)  # Record.to_dict(): no response status
    refused = interop.argilla_import("verify", nested)
    assert refused.judgements == [] and refused.rejected
    assert all("status" in r.problems[0] for r in refused.rejected)
    statuses = {
        (str(USERS[a.who]["argilla"]), a.item): ("discarded" if a.skipped else "submitted") for a in ANSWERS["verify"]
    }
    for index, record in enumerate(nested):
        for entries in record["responses"].values():
            for entry in entries:
                entry["status"] = statuses[(entry["user_id"], index)]
    got = interop.argilla_import("verify", nested)
    assert_same("verify", got, expected("verify", argilla_name))
    assert HOSTILE in {j.comment for j in got.judgements}  # type: ignore[union-attr]


def test_argilla_names_are_lower_case_and_stray_questions_are_rejected() -> None:
    settings, records = interop.argilla_export("create", INPUTS["create"])
    names = [q["name"] for q in settings["questions"]]
    assert "option_a" in names and "option_A" not in names
    assert [r["id"] for r in records] == ["h1", "h2"]
    user = "u-1"
    record = {**records[0], "responses": {"mood": [{"value": "ok", "user_id": user, "status": "submitted"}]}}
    got = interop.argilla_import("create", [record, "nonsense"], prefix="")
    assert got.rejected[0].annotator == user and "mood: not a question" in got.rejected[0].problems[0]
    assert "not a record object" in got.rejected[1].problems[0]


def test_the_files_are_written_without_the_tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    for module in ("argilla", "label_studio_sdk", "label_studio_sdk.label_interface"):
        monkeypatch.setitem(sys.modules, module, None)  # importing them now fails
    interop.write_label_studio(tmp_path / "ls", "qc", INPUTS["qc"])
    interop.write_argilla(tmp_path / "ag", "qc", INPUTS["qc"])
    assert sorted(p.name for p in (tmp_path / "ls").iterdir()) == ["label_config.xml", "tasks.json"]
    assert sorted(p.name for p in (tmp_path / "ag").iterdir()) == ["records.json", "settings.json"]
    from senseforge.errors import MissingDependencyError

    with pytest.raises(MissingDependencyError, match=r"senseforge\[interop\]"):
        interop.check_label_studio([], "<View/>")
    with pytest.raises(MissingDependencyError, match=r"senseforge\[interop\]"):
        interop.check_argilla({}, [])


def test_read_export_takes_json_and_json_lines(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text('[{"id": 1}]', encoding="utf-8")
    (tmp_path / "b.jsonl").write_text('{"id": 1}\n\n{"id": 2}\n', encoding="utf-8")
    (tmp_path / "c.jsonl").write_text('{"id": 1}\n{"id": \n', encoding="utf-8")
    assert interop.read_export(tmp_path / "a.json") == [{"id": 1}]
    assert interop.read_export(tmp_path / "b.jsonl") == [{"id": 1}, {"id": 2}]
    with pytest.raises(DataValidationError, match=r"c\.jsonl:2"):
        interop.read_export(tmp_path / "c.jsonl")


def test_every_task_type_has_a_form_and_an_unknown_one_is_refused_by_name() -> None:
    for name in TASK_TYPES:
        declared = TASK_TYPES[name].form
        form = interop.form_of(name)
        assert form.instructions == declared.instructions and form.shown == declared.shown
        assert {f.source for f in form.fields} == {f.name for f in declared.fields}  # every declared field travels
    with pytest.raises(ConfigError, match="no-such-type"):
        interop.form_of("no-such-type")


def test_the_triples_of_cka_travel_as_rows_and_come_back_as_the_apps() -> None:
    form = interop.form_of("cka", INPUTS["cka"])
    assert [f.name for f in form.fields[:4]] == ["head_1", "relation_1", "tail_1", "head_2"]
    negated = form.field("negated")
    assert negated is not None and negated.options == ("1", "2", "3", "4", "5")
    fields, problems = interop.fields_for_parse(
        form, INPUTS["cka"][0], {"head_2": "lid", "relation_2": "UsedFor", "tail_2": "heat", "negated": ["2", "21"]}
    )
    assert len(problems) == 1 and problems[0].startswith("negated: '21' is not one of 1, 2, 3,")
    assert fields["triples"] == [{"head": "lid", "relation": "Not UsedFor", "tail": "heat"}]
