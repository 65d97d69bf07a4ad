"""The request and result records: top log-probabilities, and the answer letters read from them."""

from __future__ import annotations

import json
import math

import pytest
from pydantic import BaseModel, ValidationError

from senseforge.llm.base import Completion, GenerateRequest, ReplyShape, letter_probabilities


def test_top_logprobs_is_off_and_out_of_every_dump_by_default() -> None:
    request = GenerateRequest.chat("Which? A or B", max_tokens=8)
    assert request.top_logprobs == 0
    assert "top_logprobs" not in request.model_dump(mode="json")
    assert "top_logprobs" not in json.loads(request.model_dump_json())
    asked = request.model_copy(update={"top_logprobs": 5})
    assert asked.model_dump(mode="json")["top_logprobs"] == 5
    assert GenerateRequest.model_validate_json(asked.model_dump_json()) == asked


@pytest.mark.parametrize("value", [-1, 21])
def test_top_logprobs_is_bounded(value: int) -> None:
    with pytest.raises(ValidationError, match="top_logprobs"):
        GenerateRequest(prompt="Q:", top_logprobs=value)


def test_a_completion_without_top_logprobs_dumps_as_before() -> None:
    plain = Completion(text="B", finish_reason="stop")
    assert "top_logprobs" not in plain.model_dump()
    assert json.loads(plain.model_dump_json()) == {
        "tokens_in": None,
        "tokens_out": None,
        "latency_s": 0.0,
        "service_s": None,
        "queue_s": None,
        "attempts": 1,
        "failure": None,
        "retry_errors": [],
        "cached": False,
        "concurrency": None,
        "batched": False,
        "text": "B",
        "finish_reason": "stop",
    }


def test_a_completion_with_top_logprobs_round_trips_through_json() -> None:
    with pytest.raises(ValidationError, match="top_logprobs"):  # alternatives without their position
        Completion(text=" B", top_logprobs=((" B", -0.1), (" A", -2.5)))  # type: ignore[arg-type]
    with_positions = Completion(text=" B", top_logprobs=(((" B", -0.1), (" A", -2.5)),))
    again = Completion.model_validate_json(with_positions.model_dump_json())
    assert again.top_logprobs == (((" B", -0.1), (" A", -2.5)),)


def test_non_finite_alternatives_are_dropped() -> None:
    reply = Completion(text="A", top_logprobs=((("A", -0.1), ("B", -math.inf), ("C", math.nan)),))
    assert reply.top_logprobs == ((("A", -0.1),),)
    assert Completion.model_validate_json(reply.model_dump_json()) == reply


def _reply(*positions: tuple[tuple[str, float], ...]) -> Completion:
    return Completion(text="", top_logprobs=positions)


def test_letter_probabilities_sum_the_spellings_of_a_letter() -> None:
    reply = _reply(((" B", math.log(0.5)), ("B", math.log(0.2)), ("(B", math.log(0.1)), ("A", math.log(0.15))))
    probs = letter_probabilities(reply, ["A", "B", "C"])
    assert probs == pytest.approx({"A": 0.15, "B": 0.8, "C": 0.0})


def test_letter_probabilities_skip_positions_of_spaces_and_punctuation() -> None:
    reply = _reply(
        (("\n", -0.01), ("A", -5.0)),  # a leading newline: not the answer's position
        (("**", -0.1),),
        (("C", math.log(0.6)), ("c.", math.log(0.3)), ("Answer", math.log(0.05))),
        (("A", 0.0),),  # later positions are not read
    )
    assert letter_probabilities(reply, ["A", "B", "C"]) == pytest.approx({"A": 0.0, "B": 0.0, "C": 0.9})


def test_letter_probabilities_of_a_word_answer_are_zero() -> None:
    reply = _reply((("The", -0.1), (" B", -3.0)))
    assert letter_probabilities(reply, ["A", "B"]) == pytest.approx({"A": 0.0, "B": math.exp(-3.0)})


def test_letter_probabilities_need_top_logprobs_and_a_word() -> None:
    assert letter_probabilities(Completion(text="B"), ["A", "B"]) is None
    assert letter_probabilities(_reply(), ["A", "B"]) is None
    assert letter_probabilities(_reply(((" ", -0.1),), ((")", -0.2),)), ["A", "B"]) is None
    assert letter_probabilities(_reply((), (("A", -0.1),)), ["A"]) == pytest.approx({"A": math.exp(-0.1)})


def test_letter_probabilities_never_exceed_one() -> None:
    reply = _reply((("A", -0.01), (" A", -0.01)))  # a server's rounding can sum past 1
    assert letter_probabilities(reply, ["A"]) == {"A": 1.0}


class _Pair(BaseModel):
    question: str
    options: list[str]


def test_reply_shape_is_out_of_every_dump_when_unset_and_keyed_when_set() -> None:
    request = GenerateRequest(prompt="Q:", max_tokens=8)
    assert "reply_shape" not in request.model_dump(mode="json")
    assert "reply_shape" not in json.loads(request.model_dump_json())
    shaped = request.model_copy(update={"reply_shape": ReplyShape.of_model(_Pair)})
    dumped = shaped.model_dump(mode="json")["reply_shape"]
    assert dumped["name"] == "_Pair" and dumped["choices"] is None
    assert json.loads(dumped["json_schema"])["required"] == ["question", "options"]
    assert GenerateRequest.model_validate_json(shaped.model_dump_json()) == shaped
    assert hash(shaped) != hash(request)


def test_a_reply_shape_is_a_schema_or_choices_never_both_nor_neither() -> None:
    assert ReplyShape.one_of("letter", "ABCDE").choices == ("A", "B", "C", "D", "E")
    assert ReplyShape.one_of("letter", "AB").as_schema() is None
    assert ReplyShape.of_model(_Pair).as_schema() == _Pair.model_json_schema()
    with pytest.raises(ValidationError, match="exactly one"):
        ReplyShape(name="x")
    with pytest.raises(ValidationError, match="exactly one"):
        ReplyShape(name="x", json_schema="{}", choices=("a",))
    with pytest.raises(ValidationError, match="non-empty"):
        ReplyShape.one_of("x", ["a", ""])
    with pytest.raises(ValidationError, match="name"):
        ReplyShape.one_of("no spaces", ["a"])
