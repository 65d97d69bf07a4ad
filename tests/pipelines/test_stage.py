"""The stage bases: several calls per record (failures settled, calls logged per record, replies sliced back),
the request tag, yes/no judging by chat or by log-likelihood, ``applies``, and the router."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from senseforge.errors import BackendError
from senseforge.llm.base import (
    Completion,
    Failure,
    GenerateRequest,
    LoglikelihoodRequest,
)
from senseforge.llm.cache import cache_key
from senseforge.llm.jsonx import JSONExtractionError, extract_json
from senseforge.llm.mock import ScriptedLLM, from_responder
from senseforge.pipelines.calls import LLM_ERROR, PENDING, Reply, Said, YesNo, ask, ask_yes_no
from senseforge.pipelines.outcomes import MALFORMED, TRUNCATED, Parsed, Reject, StageOutput, cut_off, ok
from senseforge.pipelines.runstore import Record, StageResult, StoredJudgement
from senseforge.pipelines.stage import CheckStage, FanOutStage, LMStage, Route, RuleStage, YesNoStage


class Word(Record):
    text: str
    said: str | None = None


def _records(*texts: str) -> list[StageResult[Word]]:
    return [StageResult(f"r{i}", "ok", Word(text=t)) for i, t in enumerate(texts)]


@dataclass
class _Context:
    model: Any

    def llm(self, spec: str) -> Any:
        return self.model

    @property
    def judgements(self) -> Mapping[str, Sequence[StoredJudgement]]:
        return {}


@dataclass
class Both(FanOutStage[Word]):
    """Asks for the word twice (upper, then lower case) and keeps both replies."""

    def requests(self, record: StageResult[Word]) -> list[GenerateRequest]:
        return [GenerateRequest.chat(f"upper {record.data.text}"), GenerateRequest.chat(f"lower {record.data.text}")]

    def parse(self, record: StageResult[Word], replies: Sequence[Reply]) -> Parsed:
        return record.data.with_(said="+".join(r.text for r in replies if isinstance(r, Completion)))


def _answer(failing: Mapping[str, str] | None = None) -> Any:
    failing = failing or {}

    def respond(request: GenerateRequest | LoglikelihoodRequest) -> str | float | Completion:
        if isinstance(request, LoglikelihoodRequest):
            return -1.0
        text = request.as_messages()[-1].content
        if text in failing:
            return Completion(failure=Failure(kind=failing[text], message=f"{failing[text]} for {text}"))  # type: ignore[arg-type]
        how, word = text.split()
        return word.upper() if how == "upper" else word.lower()

    return from_responder("scripted/both", respond)


def test_a_fan_out_stage_hands_each_record_its_replies_and_its_calls() -> None:
    llm = _answer()
    out = Both("both", "scripted/both").run(_records("Sun", "Rain"), _Context(llm))
    assert [o.data.said for o in out.outcomes] == ["SUN+sun", "RAIN+rain"]  # type: ignore[union-attr]
    assert len(llm.generate_calls) == 4  # one call for the batch: four requests
    assert all(q.tag == "both" for q in llm.generate_calls)
    for outcome, word in zip(out.outcomes, ("Sun", "Rain"), strict=True):
        calls = outcome.calls["both"]  # type: ignore[union-attr]
        keys = [
            cache_key("scripted", llm.identity(), "generate", GenerateRequest.chat(f"{h} {word}"))
            for h in ("upper", "lower")
        ]
        assert [c.key for c in calls] == keys


def test_one_transient_failure_of_several_calls_leaves_the_record_pending() -> None:
    out = Both("both", "scripted/both").run(_records("Sun", "Rain"), _Context(_answer({"lower Sun": "timeout"})))
    assert out.outcomes[0] is PENDING
    assert out.outcomes[1].status == "ok"  # type: ignore[union-attr]


def test_a_refused_call_rejects_the_record_showing_the_request() -> None:
    out = Both("both", "scripted/both").run(_records("Sun"), _Context(_answer({"lower Sun": "bad_request"})))
    [refused] = out.outcomes
    assert refused.status == "rejected" and refused.reason == LLM_ERROR  # type: ignore[union-attr]
    assert refused.prompt == "[user]\nlower Sun" and refused.response == "bad_request for lower Sun"  # type: ignore[union-attr]
    assert len(refused.calls["both"]) == 1  # type: ignore[union-attr]  # the call that succeeded is paid for


def test_a_fatal_failure_stops_the_run() -> None:
    with pytest.raises(BackendError, match="auth"):
        Both("both", "scripted/both").run(_records("Sun"), _Context(_answer({"upper Sun": "auth"})))


def test_the_tag_reaches_the_model_but_not_the_cache_key() -> None:
    plain = GenerateRequest.chat("hello")
    tagged = plain.model_copy(update={"tag": "stage"})
    assert cache_key("p", {}, "generate", plain) == cache_key("p", {}, "generate", tagged)
    assert "tag" not in tagged.model_dump() and "stage" not in tagged.model_dump_json()
    score = LoglikelihoodRequest(context="a", continuation=" b", tag="stage")
    assert cache_key("p", {}, "loglikelihood", score) == cache_key(
        "p", {}, "loglikelihood", score.model_copy(update={"tag": None})
    )
    seen: list[str | None] = []
    llm = ScriptedLLM(responder=lambda request: seen.append(request.tag) or "ok")
    [got] = ask(llm, "mine", [[plain]])
    assert seen == ["mine"] and got.status is None and got.requests[0].tag == "mine"


def _judge(chat: bool) -> ScriptedLLM:
    def respond(request: GenerateRequest | LoglikelihoodRequest) -> str | float:
        if isinstance(request, GenerateRequest):
            return "Yes, it is." if "sun" in request.as_messages()[-1].content else "Tidak."
        yes, no = (
            (-0.5, -2.0) if "sun" in request.context else (-1.0, -1.2) if "warm" in request.context else (-2.0, -0.5)
        )
        return yes if request.continuation == " yes" else no

    return from_responder("scripted/judge", respond, chat=chat)


@pytest.mark.parametrize("chat", [True, False])
def test_yes_no_asks_a_chat_model_in_text_and_a_base_model_by_log_likelihood(chat: bool) -> None:
    llm = _judge(chat)
    questions = [[YesNo("sun?")], [YesNo("moon?")], [YesNo("moon?", words=(("yes", "no"), ("ya", "tidak")))]]
    answered = ask_yes_no(llm, "judge", questions)
    said = [s[0].yes for _, s in answered]
    assert said == ([True, None, False] if chat else [True, False, False])
    if chat:
        assert len(llm.generate_calls) == 3 and not llm.loglikelihood_calls
        assert answered[0][1][0] == Said(True, "Yes, it is.")
    else:
        assert not llm.generate_calls and [q.continuation for q in llm.loglikelihood_calls[:2]] == [" yes", " no"]
        assert answered[0][1][0] == Said(True, "loglik yes=-0.5000 no=-2.0000")
    assert [len(got.calls) for got, _ in answered] == ([1, 1, 1] if chat else [2, 2, 2])


def test_a_calibrated_yes_no_compares_with_its_blank() -> None:
    llm = _judge(chat=False)
    [(_, [plain]), (got, [said])] = ask_yes_no(
        llm, "judge", [[YesNo("warm?", cue="\nAnswer:")], [YesNo("warm?", blank="sun?", cue="\nAnswer:")]]
    )
    # " yes" is a little likelier after the prompt, but much likelier after the blank: calibrated, it is a no
    assert plain.yes is True and said.yes is False and len(got.calls) == 4
    assert [q.context for q in llm.loglikelihood_calls[2:]] == ["warm?\nAnswer:"] * 2 + ["sun?\nAnswer:"] * 2


@dataclass
class Sunny(YesNoStage[Word]):
    def questions(self, record: StageResult[Word]) -> list[YesNo]:
        return [YesNo(f"{record.data.text}?")]

    def decide(self, record: StageResult[Word], said: Sequence[Said]) -> Parsed:
        return record.data.with_(said="yes" if said[0].yes else "no")


def test_a_yes_no_stage_decides_by_the_answers() -> None:
    out = Sunny("sunny", "scripted/judge").run(_records("sun", "moon"), _Context(_judge(chat=False)))
    assert [o.data.said for o in out.outcomes] == ["yes", "no"]  # type: ignore[union-attr]


@dataclass
class NotShort(CheckStage[Word]):
    def applies(self, record: StageResult[Word]) -> bool:
        return record.data.text != "skip"

    def reason(self, data: Word) -> str | None:
        return "short" if len(data.text) < 3 else None


def test_records_a_stage_does_not_apply_to_pass_unchanged() -> None:
    records = _records("ox", "skip", "sun")
    out = NotShort("check").run(records, _Context(None))
    assert [o.status for o in out.outcomes] == ["rejected", "ok", "ok"]  # type: ignore[union-attr]
    assert out.outcomes[1] == ok(records[1])

    class Quiet(Both):
        def applies(self, record: StageResult[Word]) -> bool:
            return record.data.text != "skip"

    llm = _answer()
    passed = Quiet("both", "scripted/both").run(records, _Context(llm))
    assert [o.data.said for o in passed.outcomes] == ["OX+ox", None, "SUN+sun"]  # type: ignore[union-attr]
    assert len(llm.generate_calls) == 4


def _long(record: StageResult[Any]) -> bool:
    return len(record.data.text) > 3


@dataclass
class Mark(RuleStage[Word]):
    mark: str = ""

    def rule(self, records: Sequence[StageResult[Word]], ctx: Any) -> StageOutput:
        return StageOutput([ok(r, r.data.with_(said=self.mark)) for r in records])


def test_a_route_runs_each_sub_stage_on_its_share_in_order() -> None:
    route = Route("route", _long, Mark("long", mark="long"), Mark("short", mark="short"))
    out = route.run(_records("ox", "cloud", "sun", "rain"), _Context(None))
    assert [o.data.said for o in out.outcomes] == ["short", "long", "short", "long"]  # type: ignore[union-attr]
    assert route.specs == ()


@dataclass
class Listed(LMStage[Word]):
    """Asks for a JSON list and keeps its first string; anything else is malformed."""

    def requests(self, records: Sequence[StageResult[Word]]) -> list[GenerateRequest]:
        return [GenerateRequest.chat(r.data.text, max_tokens=4) for r in records]

    def parse(self, record: StageResult[Word], text: str) -> Parsed:
        try:
            return record.data.with_(said=str(extract_json(text)[0]))
        except (JSONExtractionError, IndexError, KeyError, TypeError):
            return Reject(MALFORMED)


def test_a_reply_cut_off_at_the_token_limit_is_rejected_as_truncated_apart_from_a_malformed_one() -> None:
    replies = {
        "cut": Completion(text='["alpha", "be', finish_reason="length"),
        "broken": Completion(text='["alpha", "be', finish_reason="stop"),
        "long": Completion(text='["alpha"]', finish_reason="length"),
    }
    llm = from_responder("scripted/lists", lambda request: replies[request.as_messages()[-1].content])
    done = Listed("listed", "scripted/lists").run(_records("cut", "broken", "long"), _Context(llm)).outcomes
    assert [(r.status, r.reason) for r in done] == [  # type: ignore[union-attr]
        ("rejected", TRUNCATED),
        ("rejected", MALFORMED),
        ("ok", None),  # cut off, but it parses: kept
    ]
    assert [r.response for r in done] == ['["alpha", "be', '["alpha", "be', '["alpha"]']  # type: ignore[union-attr]


def test_cut_off_makes_only_malformed_rejections_truncated_in_a_split_reply() -> None:
    cut = [Completion(text="…", finish_reason="length")]
    parts = cut_off([Word(text="a"), Reject(MALFORMED), Reject("no_item")], cut)
    assert isinstance(parts, list)
    assert [p.reason if isinstance(p, Reject) else "ok" for p in parts] == ["ok", TRUNCATED, "no_item"]
    assert cut_off(Reject(MALFORMED), [Completion(text="…", finish_reason="stop")]) == Reject(MALFORMED)


def test_a_chat_yes_no_question_carries_the_shape_of_its_answer_and_a_base_model_s_does_not() -> None:
    question = YesNo("moon?", words=(("yes", "no"), ("ya", "tidak"), ("yes", "nope")))
    (chat,) = question.requests(chat=True)
    assert isinstance(chat, GenerateRequest) and chat.reply_shape is not None
    assert chat.reply_shape.choices == ("yes", "no", "ya", "tidak", "nope")
    assert all(isinstance(r, LoglikelihoodRequest) for r in question.requests(chat=False))
