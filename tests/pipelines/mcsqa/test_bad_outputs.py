"""Crafted bad model outputs are rejected with the right reason and counted (scripted backend)."""

from __future__ import annotations

import json
from pathlib import Path

from senseforge.data.schema import QuestionSet
from senseforge.kb.question_sets import extract_question_sets
from senseforge.llm.base import GenerateRequest
from senseforge.llm.mock import ScriptedLLM
from senseforge.pipelines.mcsqa import McsqaConfig
from senseforge.pipelines.mcsqa.dryrun import author_reply
from senseforge.pipelines.mcsqa.recipe import Mcsqa
from senseforge.pipelines.mcsqa.templates import templates
from senseforge.pipelines.moderation import WordListModerator
from senseforge.pipelines.runner import build
from senseforge.store.db import Store

from .conftest import STAGES, read_jsonl

SPEC = "scripted/crafted"
MARK = "zebra riddle"


def _kind(request: GenerateRequest) -> str:
    system = request.as_messages()[0].content
    t = templates("en")
    for stage in ("generate", "refine", "distractors"):
        if system == t.stage(stage).system:
            return stage
    return "other"


def test_crafted_bad_outputs_are_rejected_with_their_reason(demo_kb: Path, tmp_path: Path) -> None:
    sets, _ = extract_question_sets(demo_kb, "en", 20, 0)
    broken_json, dup_distractor, answer_in_q, two_sentences, no_mark, refusal, wrong_letter, listed = sets[:8]

    def bad_question(qs: QuestionSet, user: str) -> str | None:
        if f'"{qs.targets[0]}"' not in user or f'"{qs.anchor}"' not in user:
            return None
        if qs is answer_in_q:
            return f"Which {qs.targets[0]} is meant here?"
        if qs is two_sentences:
            return "This one is tricky. Which thing is meant here?"
        if qs is no_mark:
            return "Tell me which thing is meant here"
        if qs is refusal:
            return "I'm sorry, but I can't help with that."
        if qs is wrong_letter:
            return f"Which one solves the {MARK}?"
        return None

    def respond(request: GenerateRequest) -> str:
        user = request.as_messages()[-1].content
        kind = _kind(request)
        if kind == "generate":
            for qs in (answer_in_q, two_sentences, no_mark, refusal, wrong_letter):
                crafted = bad_question(qs, user)
                if crafted is not None:
                    return crafted
        if kind == "distractors":
            if json.dumps(broken_json.targets, ensure_ascii=False) in user:
                return '{"distractors": ["pebble", '
            if json.dumps(dup_distractor.targets, ensure_ascii=False) in user:
                return json.dumps({"distractors": [dup_distractor.targets[1].upper(), "pebble"]})
        if kind == "refine" and MARK in user:
            return f"Which one solves the {MARK}?"
        if kind == "other" and MARK in user and "Marked answer" not in user:
            return "F"  # a letter that is not an option
        return author_reply(request.as_messages())

    llm = ScriptedLLM(responder=respond, name=SPEC)
    config = McsqaConfig(
        lang="en", n=20, answers_per_set=1, kb=str(demo_kb), model=SPEC, reviewers=(SPEC,), lm_review_as_hard=True
    )
    # a word on the moderation list among one set's targets: only the moderation stage sees it in an item
    moderator = WordListModerator({"en": [listed.targets[2]]})
    summary = build(Mcsqa(moderator=moderator), config, tmp_path / "run", store=Store(), llms={SPEC: llm})
    assert summary.state == "done"

    rejects = {(row["stage"], row["id"]): row["reason"] for row in read_jsonl(tmp_path / "run" / "rejects.jsonl")}
    assert rejects[("filter", f"{answer_in_q.id}-0")] == "target_in_question"
    assert rejects[("filter", f"{two_sentences.id}-0")] == "multiple_sentences"
    assert rejects[("filter", f"{no_mark.id}-0")] == "no_question_mark"
    assert rejects[("generate", f"{refusal.id}-0")] == "malformed_output"
    assert rejects[("distractors", f"{broken_json.id}-0")] == "malformed_output"
    assert rejects[("distractors", f"{dup_distractor.id}-0")] == "duplicate"
    assert rejects[("moderate", f"{listed.id}-0")] == "inappropriate"

    funnel = json.loads((tmp_path / "run" / "funnel.json").read_text())
    by_stage = {row["stage"]: row for row in funnel["stages"]}
    assert by_stage["filter"]["rejected"] == {"multiple_sentences": 1, "no_question_mark": 1, "target_in_question": 1}
    assert by_stage["generate"]["rejected"] == {"malformed_output": 1}
    assert by_stage["distractors"]["rejected"] == {"duplicate": 1, "malformed_output": 1}
    assert by_stage["moderate"]["rejected"] == {"inappropriate": 1}
    for row in funnel["stages"]:
        assert row["in"] == row["out"] + sum(row["rejected"].values())
    assert funnel["stages"][0]["in"] == 20 and len(STAGES) == len(funnel["stages"])
    verify = next(figure for figure in funnel["figures"] if figure["name"] == "verify")
    assert verify["values"]["unparsed_answer"] == 1

    # the wrong letter sent the item to review instead of making it Easy; the raw reply is kept
    items = {
        item["id"]: item
        for name in ("train", "validation", "test")
        for item in read_jsonl(tmp_path / "run" / "items" / f"{name}.jsonl")
    }
    marked = items.get(f"{wrong_letter.id}-0")
    rejected_by_panel = rejects.get(("review", f"{wrong_letter.id}-0")) == "lm_review_rejected"
    assert rejected_by_panel or (marked is not None and marked["difficulty"] == "hard")
    broken = next(row for row in read_jsonl(tmp_path / "run" / "rejects.jsonl") if row["id"] == f"{broken_json.id}-0")
    assert broken["response"] == '{"distractors": ["pebble", '
