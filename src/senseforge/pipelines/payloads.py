"""A stage result's stored payload: one JSON object with the recipe's data and the engine's fields beside it.

:mod:`senseforge.pipelines.runstore` writes and reads results through these functions. A payload holds the data's
fields and, when set, :data:`CALLS` (the LM calls the record made, per stage), :data:`REVIEW` (who accepted it) and
:data:`EVIDENCE` (what the check that rejected it found): the layout of runs stored before records were typed.

Reading is the hot path of a run (every stage's results are read back once stored, and again at the finish), so a
payload is parsed and validated in one pass of pydantic's core (:func:`read`): the data's model is extended with
the engine's keys (its *envelope*), and the data is then split off without validating anything twice.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, create_model
from pydantic_core import from_json

CALLS = "calls"
REVIEW = "review"
EVIDENCE = "evidence"
ENGINE_KEYS = (CALLS, REVIEW, EVIDENCE)
"""Keys of the stored payload that hold the engine's fields of a result, not the recipe's data."""

M = TypeVar("M", bound=BaseModel)


class CallEntry(BaseModel):
    """One call a record's stage made, named by its cache key (a call shared by several records counts once)."""

    model_config = ConfigDict(frozen=True)

    key: str
    model: str
    tokens_in: int | None
    tokens_out: int | None
    batched: bool = False
    """Answered through an API's batch endpoint, at its price (stored only when so)."""


ENTRIES_KEPT = 1 << 18
"""Call entries remembered as read and as stored (:func:`entry`, :func:`stored_entry`): a record carries the calls of
every stage before it, so each entry is read and written once per later stage; the memory is emptied when full."""
_entries: dict[tuple[tuple[str, Any], ...], CallEntry] = {}


def entry(stored: Mapping[str, Any]) -> CallEntry:
    """A stored call entry validated, once per distinct entry (the entry is frozen: one instance serves them all)."""
    try:
        key = tuple(stored.items())  # values that compare equal (1, 1.0, True) validate to the same entry
        found = _entries.get(key)
    except (TypeError, AttributeError):  # not an entry (an unhashable value, not an object): validation says why
        return CallEntry.model_validate(stored)
    if found is None:
        found = CallEntry.model_validate(stored)
        if len(_entries) >= ENTRIES_KEPT:
            _entries.clear()
        _entries[key] = found
    return found


_shared_entries: dict[tuple[Any, ...], CallEntry] = {}


def _shared(found: CallEntry) -> CallEntry:
    """One instance per distinct entry, like :func:`entry`'s (a run's records share most of their calls)."""
    kept = _shared_entries.setdefault(tuple(found.__dict__.values()), found)  # a tuple hashes and compares in C
    if len(_shared_entries) > ENTRIES_KEPT:
        _shared_entries.clear()
    return kept


_stored_entries: dict[int, tuple[CallEntry, dict[str, Any]]] = {}


def stored_entry(entry: CallEntry) -> dict[str, Any]:
    """A call entry as a payload stores it (``batched`` only when set), made once per entry instance (the entries
    are shared: :func:`entry`, :func:`read`) and shared in turn: not to be changed."""
    found = _stored_entries.get(id(entry))
    if found is not None and found[0] is entry:  # kept alive here, so its id is its own
        return found[1]
    stored = entry.model_dump(mode="json", exclude_defaults=True)
    if len(_stored_entries) >= ENTRIES_KEPT:
        _stored_entries.clear()
    _stored_entries[id(entry)] = (entry, stored)
    return stored


_ENCODER = json.JSONEncoder(ensure_ascii=False, sort_keys=True, separators=(",", ":"))
""":func:`json.dumps`' encoder for these settings, made once (``dumps`` makes one per call when given any)."""


def dumps(value: Any) -> str:
    """A payload as stored: compact JSON, every object's keys sorted, text unescaped (what ``json.dumps(value,
    ensure_ascii=False, sort_keys=True, separators=(",", ":"))`` writes)."""
    return _ENCODER.encode(value)


def loads(stored: str | bytes) -> Any:
    """A stored payload parsed: by pydantic's JSON parser, about twice as fast as :func:`json.loads` on the run's
    payloads and the same values (floats read to the same double, later keys winning, objects in stored order)."""
    return from_json(stored)


def split(payload: Mapping[str, Any], model: type[M]) -> tuple[M, dict[str, Any]]:
    """The data (validated as ``model``) and the engine's fields of a parsed payload."""
    rest = {key: value for key, value in payload.items() if key not in ENGINE_KEYS}
    calls = payload.get(CALLS)
    parsed = {stage: tuple(entry(e) for e in entries) for stage, entries in calls.items()} if calls else None
    return model.model_validate(rest), engine_fields(parsed, payload.get(REVIEW), payload.get(EVIDENCE))


def engine_fields(calls: Mapping[str, Any] | None, review: Any, evidence: Any) -> dict[str, Any]:
    """The engine's fields of a result (``StageResult``'s keyword arguments) from the values a payload holds: only
    those that are set (``calls`` already validated, per stage)."""
    engine: dict[str, Any] = {}
    if calls:
        engine[CALLS] = calls
    if review is not None:
        engine[REVIEW] = review
    if evidence:
        engine[EVIDENCE] = dict(evidence)
    return engine


def read(
    stored: str | bytes, model: type[M], known: Mapping[str, Sequence[CallEntry]] | None = None
) -> tuple[M, dict[str, Any]]:
    """The data (validated as ``model``) and the engine's fields of a stored payload, parsed and validated in one
    pass: the same values as :func:`split` of :func:`loads`.

    ``known``: the calls the payload was written from, when the caller has them. Their entries are validated values
    that JSON writes and reads back as they are, so they stand for the stored ones (in stored order: by stage), and
    the stored ones are not looked up one by one to be shared.

    Raises:
        pydantic.ValidationError: the payload is not JSON, or its data does not fit ``model``.
    """
    envelope = _envelope(model)
    if envelope is None:  # the model names an engine key itself: the payload is split in Python
        return split(loads(stored), model)
    whole = envelope.model_validate_json(stored)
    values = dict(whole.__dict__)
    calls = values.pop(CALLS)
    if calls and known is not None:
        calls = {stage: tuple(known[stage]) for stage in sorted(known)}
    elif calls:
        calls = {stage: tuple(map(_shared, entries)) for stage, entries in calls.items()}
    engine = engine_fields(calls, values.pop(REVIEW), values.pop(EVIDENCE))
    data = model.__new__(model)
    # what BaseModel.model_construct sets, from values the envelope validated as the model's own
    object.__setattr__(data, "__dict__", values)
    object.__setattr__(data, "__pydantic_fields_set__", whole.__pydantic_fields_set__.difference(ENGINE_KEYS))
    object.__setattr__(data, "__pydantic_extra__", whole.__pydantic_extra__)
    object.__setattr__(data, "__pydantic_private__", whole.__pydantic_private__)
    return data, engine


@functools.cache
def _envelope(model: type[BaseModel]) -> type[BaseModel] | None:
    """``model`` with the engine's keys as optional fields (so a payload validates whole, and a key that is neither
    the data's nor the engine's fails as it does for the data alone); ``None`` when the model has such a field or
    alias itself."""
    names: set[str] = set()
    for field, info in model.model_fields.items():
        if info.validation_alias is not None and not isinstance(info.validation_alias, str):
            return None  # an alias path or choice: which keys it reads is the model's business
        names.update(name for name in (field, info.alias, info.validation_alias) if isinstance(name, str))
    if names.intersection(ENGINE_KEYS) or model.__pydantic_root_model__:
        return None
    fields: dict[str, Any] = {
        CALLS: (dict[str, tuple[CallEntry, ...]] | None, None),
        REVIEW: (Any, None),
        EVIDENCE: (Any, None),
    }
    return create_model(model.__name__, __base__=model, __module__=model.__module__, **fields)
