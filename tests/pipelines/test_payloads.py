"""A stored payload read in one pass (:func:`read`) gives what parsing and splitting it in Python gives."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import AliasChoices, ConfigDict, Field, ValidationError

from senseforge.data.schema import MCItem
from senseforge.pipelines.payloads import CallEntry, dumps, loads, read, split, stored_entry
from senseforge.pipelines.runstore import Loose, Record

ITEM = {
    "answer": "A",
    "choices": [{"label": "A", "text": "dog"}, {"label": "B", "text": "cat"}],
    "id": "i1",
    "lang": "en",
    "metadata": {"z": 1, "a": [0.1, None]},
    "question": "What barks?",
}


class Asked(Record):
    q: str
    item: MCItem | None = None
    score: float | None = None


class Aliased(Record):
    """A model whose field reads an engine key: read in Python, as before."""

    model_config = ConfigDict(populate_by_name=True)

    who: str | None = Field(default=None, alias="review")


class Chosen(Record):
    q: str = Field(validation_alias=AliasChoices("q", "question"))


def _same(stored: str, model: type[Record]) -> tuple[Record, dict[str, Any]]:
    data, engine = read(stored, model)
    want_data, want_engine = split(loads(stored), model)
    assert type(data) is model and data == want_data and data.model_fields_set == want_data.model_fields_set
    assert repr(data) == repr(want_data) and data.stored() == want_data.stored()
    assert engine == want_engine
    return data, engine


@pytest.mark.parametrize(
    "payload",
    [
        {"q": "Why?"},
        {"q": "Why?", "score": 1, "item": ITEM},
        {"q": "Why?", "review": "lm", "calls": {"b": [{"key": "k", "model": "m", "tokens_in": 1, "tokens_out": 2}]}},
        {"q": "Why?", "calls": {}, "review": None, "evidence": {}},
        {
            "q": "Why?",
            "evidence": {"words": 1},
            "calls": {
                "a": [],
                "b": [{"key": "k", "model": "m", "tokens_in": None, "tokens_out": None, "batched": True}],
            },
        },
    ],
)
def test_read_gives_what_split_gives(payload: dict[str, Any]) -> None:
    engine_keys = {key for key in ("calls", "evidence") if payload.get(key)} | (
        {"review"} if payload.get("review") is not None else set()
    )
    for model in (Asked, Loose):
        data, engine = _same(dumps(payload), model)
        assert data.q == "Why?" and set(engine) == engine_keys  # type: ignore[attr-defined]
        assert {stage: len(entries) for stage, entries in engine.get("calls", {}).items()} == {
            stage: len(entries) for stage, entries in payload.get("calls", {}).items()
        }
    if "item" in payload:
        item = read(dumps(payload), Asked)[0].item  # type: ignore[attr-defined]
        assert isinstance(item, MCItem) and item.answer == "A" and item.metadata == {"z": 1, "a": [0.1, None]}


def test_models_that_name_an_engine_key_or_choose_aliases_read_as_before() -> None:
    _same(dumps({"review": "lm"}), Aliased)
    assert read(dumps({"review": "lm"}), Aliased)[1] == {"review": "lm"}
    _same(dumps({"question": "Why?", "review": "human"}), Chosen)


def test_call_entries_read_back_shared_and_a_known_call_list_stands_for_them() -> None:
    entry = {"key": "k", "model": "m", "tokens_in": 1, "tokens_out": 2}
    stored = dumps({"q": "a", "calls": {"z": [entry], "a": [entry, entry]}})
    _, first = read(stored, Asked)
    _, second = read(stored, Asked)
    assert list(first["calls"]) == ["a", "z"] and first["calls"]["a"][0] is second["calls"]["z"][0]
    known = {"z": [CallEntry(**entry)], "a": (CallEntry(**entry),) * 2}
    _, given = read(stored, Asked, known)
    assert given == first and list(given["calls"]) == ["a", "z"] and isinstance(given["calls"]["z"], tuple)
    assert stored_entry(given["calls"]["z"][0]) == entry and stored_entry(CallEntry(**entry, batched=True))["batched"]


def test_a_payload_that_does_not_fit_fails_with_the_field_it_names() -> None:
    with pytest.raises(ValidationError) as caught:
        read(dumps({"q": "a", "stray": 1}), Asked)
    assert caught.value.errors()[0]["loc"] == ("stray",)
    with pytest.raises(ValidationError):
        read(dumps({"q": "a", "calls": {"s": [{"key": "k"}]}}), Asked)
    with pytest.raises(ValidationError):
        read("not json", Asked)
