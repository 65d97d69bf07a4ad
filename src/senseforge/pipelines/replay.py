"""Stage outcomes kept by what decides them, and replayed by a rebuild instead of run again.

A stage that works record by record makes of a record what its code, its settings, its models and the record
decide, given the answers its calls get; and the answers are the cache's. So a build keeps, in the store beside
the cache, each record's outcome at such a stage under a digest of all of these (:func:`stage_prefix`,
:meth:`Replayer.keys`): the results as stored (status, reason, payload, prompt, response; a record's children
too) and the judgements the stage made of it. A later build that meets the same record at the same stage stores
that outcome as it is (no request built, no reply parsed, no payload dumped) and writes the ledger rows of its
calls as hits from their cache rows, as a build answered from the cache writes them; the run store, the outputs and
the ledger come out as a run of the stage would leave them.

What keeps a replay right:

* **the key** holds a digest of every file of the installed package (code, prompts, word lists), the stage's
  class and settings as plain data (:func:`plain`), the identity of each model it asks, and the input record as
  stored. A setting that is not plain data (an object that does not say what decides it with ``__replay__``) makes
  the stage's results unkept: no key, no replay;
* **only stages that say so** (``replayable``, true on the model and check bases; a stage reading anything else,
  people's judgements or other records, says no) and never a barrier or a stage deciding in order;
* **only whole, clean batches are kept**: every call answered (a failed one would be sent again by a rebuild), every
  call recorded on the record that made it (the calls the records recorded add up to the requests the stage sent),
  no task for people, every judgement on a record of the batch;
* **a replay needs every cache row** its calls were answered from; a record missing one runs as usual.

A rebuild with the ``ray`` executor, or a model whose cache is not read, runs every stage.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import hashlib
import json
import types
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path, PurePath
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import from_json

from senseforge.data.schema import JUDGEMENT, Judgement
from senseforge.llm.cache import CachedLLM
from senseforge.pipelines.calls import AWAITING, PENDING
from senseforge.pipelines.outcomes import Children, Outcome, StageOutput
from senseforge.pipelines.payloads import CALLS, EVIDENCE, REVIEW, dumps, read
from senseforge.pipelines.runstore import CallEntry, JudgementSource, Record, StageResult, Status
from senseforge.pipelines.stage import InOrder, Stage
from senseforge.store.db import Store

__all__ = ["Kept", "Replay", "Replayer", "code_digest", "plain", "stage_prefix"]

FORMAT = 3
"""The layout of a kept outcome; part of every key, so a change of layout keeps nothing old."""


@functools.cache
def code_digest() -> str:
    """A digest of every file of the installed package (its code and its data: prompts, word lists, literals)."""
    root = Path(__file__).resolve().parents[1]  # the package: pipelines/ is one of its folders
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix not in (".pyc", ".pyo"):
            digest.update(path.relative_to(root).as_posix().encode() + b"\0")
            digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


class Opaque(Exception):
    """A value that does not say what decides it."""


def _name(kind: type) -> str:
    return f"{kind.__module__}:{kind.__qualname__}"


def plain(value: Any) -> Any:
    """``value`` as plain JSON data that decides it: dataclasses and pydantic models field by field (with the class),
    containers item by item, module-level functions by name, and any object by its ``__replay__()``.

    Raises:
        Opaque: a value that is none of these (a live object, a closure, a lambda).
    """
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return {"float": repr(value)}
    if isinstance(value, enum.Enum):
        return {"enum": _name(type(value)), "name": value.name}
    if isinstance(value, PurePath):
        return {"path": str(value)}
    replay = getattr(type(value), "__replay__", None)
    if replay is not None and not isinstance(value, type):
        return {"object": _name(type(value)), "settings": plain(replay(value))}
    if isinstance(value, BaseModel):
        if value.__pydantic_private__:
            raise Opaque(_name(type(value)))
        try:
            fields = value.model_dump(mode="json", round_trip=True)
        except Exception as exc:  # a field pydantic cannot write as JSON
            raise Opaque(_name(type(value))) from exc
        return {"model": _name(type(value)), "fields": fields}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        state = (
            vars(value)
            if hasattr(value, "__dict__")
            else {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
        )
        return {"dataclass": _name(type(value)), "fields": {key: plain(state[key]) for key in sorted(state)}}
    if isinstance(value, list | tuple):
        return {"seq": type(value).__name__, "items": [plain(item) for item in value]}
    if isinstance(value, set | frozenset):
        return {"set": sorted(json.dumps(plain(item), sort_keys=True) for item in value)}
    if isinstance(value, Mapping):
        if not all(isinstance(key, str) for key in value):
            raise Opaque("a mapping with keys that are not text")
        return {"map": {key: plain(value[key]) for key in sorted(value)}}
    if isinstance(value, functools.partial):
        return {"partial": plain(value.func), "args": plain(value.args), "keywords": plain(value.keywords)}
    if isinstance(value, types.FunctionType | types.BuiltinFunctionType):
        if "<" in value.__qualname__ or getattr(value, "__closure__", None):
            raise Opaque(f"{value.__qualname__}: not a module-level function")
        return {"function": f"{value.__module__}:{value.__qualname__}"}
    if isinstance(value, type):
        return {"class": _name(value)}
    raise Opaque(_name(type(value)))


def _ours(kind: type) -> bool:
    """Whether ``kind`` is the package's own (or Python's: ``object``, ``Generic``, protocols)."""
    return kind.__module__.split(".")[0] in ("senseforge", "builtins", "typing", "typing_extensions", "abc")


def stage_prefix(stage: Stage, identities: Mapping[str, Mapping[str, str]]) -> str | None:
    """The part of every key of ``stage`` that is not the record (the code, the stage's class and settings, its
    models' identities); ``None`` when the stage's outcomes are not kept (see the module)."""
    if stage.barrier or isinstance(stage, InOrder) or not getattr(stage, "replayable", False):
        return None
    if not all(_ours(kind) for kind in type(stage).__mro__):
        return None  # code outside the package (a plugin's stage) is not in the code digest
    try:
        settings = plain(stage)
    except Opaque:
        return None
    whole = {
        "format": FORMAT,
        "code": code_digest(),
        "stage": settings,
        "models": {k: dict(v) for k, v in identities.items()},
    }
    return hashlib.sha256(json.dumps(whole, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def record_key(prefix: str, record: StageResult[Any], payload: str) -> str:
    """The key of ``record`` (stored as ``payload``) at the stage of ``prefix``."""
    digest = hashlib.sha256(prefix.encode())
    for part in (record.record_id, record.status, record.reason, record.prompt, record.response):
        digest.update(b"\1" if part is None else b"\2" + part.encode() + b"\0")
    digest.update(payload.encode())
    return digest.hexdigest()


class Kept(StageResult[Any]):
    """A replayed result: its data and engine fields are read from its stored payload (:attr:`stored`) when first
    used, so a record the next stage replays too is never read. Made by :meth:`of`; ``dataclasses.replace`` makes one
    like any other result, with the values it is given."""

    def __init__(
        self,
        record_id: str,
        status: Status,
        data: Any = None,
        reason: str | None = None,
        prompt: str | None = None,
        response: str | None = None,
        calls: Mapping[str, tuple[CallEntry, ...]] | None = None,
        review: JudgementSource | None = None,
        evidence: Mapping[str, Any] | None = None,
    ) -> None:
        self._set(record_id, status, reason, prompt, response, None)
        self.__dict__["_read"] = (data, calls or {}, review, evidence)

    def _set(
        self,
        record_id: str,
        status: Status,
        reason: str | None,
        prompt: str | None,
        response: str | None,
        stored: str | None,
    ) -> None:
        for name, value in (
            ("record_id", record_id),
            ("status", status),
            ("reason", reason),
            ("prompt", prompt),
            ("response", response),
            ("stored", stored),
        ):
            object.__setattr__(self, name, value)

    @classmethod
    def of(
        cls,
        record_id: str,
        status: Status,
        reason: str | None,
        payload: str,
        prompt: str | None,
        response: str | None,
        model: type[Record],
    ) -> Kept:
        """The result stored as ``payload`` (read as ``model`` when used)."""
        kept = cls.__new__(cls)
        kept._set(record_id, status, reason, prompt, response, payload)
        kept.__dict__["_model"] = model
        return kept

    def _values(
        self,
    ) -> tuple[Any, Mapping[str, tuple[CallEntry, ...]], JudgementSource | None, Mapping[str, Any] | None]:
        got = self.__dict__.get("_read")
        if got is None:
            assert self.stored is not None
            data, engine = read(self.stored, self.__dict__["_model"])
            made = (data, engine.get(CALLS) or {}, engine.get(REVIEW), engine.get(EVIDENCE))
            got = self.__dict__.setdefault("_read", made)  # one reading wins, whichever thread asks
        return got  # type: ignore[no-any-return]

    @property
    def data(self) -> Any:
        return self._values()[0]

    @property
    def calls(self) -> Mapping[str, tuple[CallEntry, ...]]:
        return self._values()[1]

    @property
    def review(self) -> JudgementSource | None:
        return self._values()[2]

    @property
    def evidence(self) -> Mapping[str, Any] | None:
        return self._values()[3]


def _new_calls(before: StageResult[Any], after: StageResult[Any]) -> list[CallEntry]:
    """The calls ``after`` recorded that ``before`` (the record as it came to the stage) did not."""
    return [entry for stage, entries in after.calls.items() if before.calls.get(stage) != entries for entry in entries]


@dataclasses.dataclass
class Replay:
    """What a batch replayed: outcomes by the index of their record, the judgements that came with them."""

    outcomes: dict[int, Outcome] = dataclasses.field(default_factory=dict)
    judgements: list[tuple[Judgement, JudgementSource]] = dataclasses.field(default_factory=list)

    def merged(self, records: int, rest: StageOutput) -> StageOutput:
        """The batch's output: the replayed outcomes, and ``rest``'s for the records the stage ran on, in order."""
        run = iter(rest.outcomes)
        outcomes = [self.outcomes[i] if i in self.outcomes else next(run) for i in range(records)]
        return StageOutput(
            outcomes, [*self.judgements, *rest.judgements], rest.tasks, asked=rest.asked, failed=rest.failed
        )

    def results(self) -> set[int]:
        """The ids of the replayed results (``id()``: they are stored and handed on as they are)."""
        out: set[int] = set()
        for outcome in self.outcomes.values():
            out.update(map(id, outcome.results if isinstance(outcome, Children) else (outcome,)))
        return out


class Replayer:
    """Keeps and replays the outcomes of a run's stages (see the module).

    Args:
        store: where the cache, the ledger and the kept outcomes live.
        model: the recipe's record model.
        llms: the run's model of ``spec`` (opened through the cache and ledger).
    """

    def __init__(self, store: Store, model: type[Record], llms: Callable[[str], CachedLLM]) -> None:
        self.store = store
        self.model = model
        self.llms = llms
        self._prefixes: dict[int, str | None] = {}
        self._named: dict[str, CachedLLM] = {}
        self._known: dict[str, bool] = {}
        """Per stage prefix, whether outcomes were kept before this run (asked once per run)."""
        self._noted: set[str | None] = set()
        """The stage prefixes this run noted as kept (:meth:`Store.replays_known`), each once."""

    def prefix(self, stage: Stage) -> str | None:
        """:func:`stage_prefix` of ``stage``, once per stage."""
        if id(stage) not in self._prefixes:
            llms = {spec: self.llms(spec) for spec in stage.specs}
            if any(not llm.read_cache for llm in llms.values()):
                self._prefixes[id(stage)] = None
            else:
                self._named.update({llm.name: llm for llm in llms.values()})
                self._prefixes[id(stage)] = stage_prefix(stage, {spec: llm.identity() for spec, llm in llms.items()})
        return self._prefixes[id(stage)]

    def keys(self, stage: Stage, records: Sequence[StageResult[Any]]) -> list[str] | None:
        """Each record's key at ``stage`` (``None``: its outcomes are not kept)."""
        prefix = self.prefix(stage)
        if prefix is None:
            return None
        return [record_key(prefix, r, r.stored if r.stored is not None else _payload(r)) for r in records]

    def replay(self, stage: Stage, records: Sequence[StageResult[Any]], keys: Sequence[str]) -> Replay:
        """The outcomes kept for the records whose every call still has its cache row, their calls ledgered as hits
        (none looked up for a stage of which nothing was kept before this run: a first build)."""
        prefix = self.prefix(stage)
        if prefix is None:
            return Replay()
        if prefix not in self._known:
            self._known[prefix] = self.store.replays_known(prefix)
        if not self._known[prefix]:
            return Replay()
        kept = self.store.replays_get(keys)
        found: dict[int, tuple[Outcome, list[tuple[str, str]], list[tuple[Judgement, JudgementSource]]]] = {}
        for index, key in enumerate(keys):
            if key in kept:
                made = self._outcome(kept[key])
                if made is not None:
                    found[index] = made
        if not found:
            return Replay()
        rows = self.store.cache_rows([key for _, calls, _ in found.values() for _, key in calls])
        hits: dict[str, list[tuple[str, str, str]]] = {}
        done = Replay()
        for index, (outcome, calls, judged) in found.items():
            if not all(key in rows and name in self._named for name, key in calls):
                continue
            for name, key in calls:
                hits.setdefault(name, []).append((key, *rows[key]))
            done.outcomes[index] = outcome
            done.judgements += judged
        for name, answered in hits.items():
            self._named[name].ledger_hits(answered)
        return done

    def _outcome(
        self, kept: str
    ) -> tuple[Outcome, list[tuple[str, str]], list[tuple[Judgement, JudgementSource]]] | None:
        try:
            head, *payloads = kept.split("\n")
            value = from_json(head)
            results = [
                Kept.of(record_id, status, reason, payload, prompt, response, self.model)
                for (record_id, status, reason, prompt, response), payload in zip(
                    value["results"], payloads, strict=True
                )
            ]
            judged = [(JUDGEMENT.validate_json(body), source) for body, source in value["judgements"]]
            calls = [(str(name), str(key)) for name, key in value["calls"]]
        except (ValueError, KeyError, TypeError, ValidationError):  # kept by another version: run the stage
            return None
        if not results:
            return None
        if value["children"]:
            return Children(tuple(results)), calls, judged
        return (results[0], calls, judged) if len(results) == 1 else None

    def remember(
        self,
        stage: Stage,
        keys: Sequence[str],
        records: Sequence[StageResult[Any]],
        output: StageOutput,
        payloads: Mapping[int, str],
        replayed: Replay,
    ) -> None:
        """Keep what the stage made of the batch's records it ran on, if the batch is clean (see the module).

        ``output``: the batch's output (replayed outcomes included); ``payloads``: each stored result's payload, by
        ``id()`` of the result.
        """
        if output.asked is None or output.failed or output.tasks:
            return
        ran = [i for i in range(len(records)) if i not in replayed.outcomes]
        if any(output.outcomes[i] is PENDING or output.outcomes[i] is AWAITING for i in ran):
            return
        by_record: dict[str, list[tuple[Judgement, JudgementSource]]] = {}
        replayed_ids = {id(j) for j, _ in replayed.judgements}
        for judged, source in output.judgements:
            if id(judged) not in replayed_ids:
                by_record.setdefault(judged.item_id, []).append((judged, source))
        ids = {records[i].record_id for i in ran}
        if not set(by_record) <= ids:
            return
        values: dict[str, str] = {}
        recorded = 0
        for i in ran:
            outcome = output.outcomes[i]
            children = isinstance(outcome, Children) and bool(outcome.results)
            results = list(outcome.results) if isinstance(outcome, Children) else [outcome]
            if not results or any(id(r) not in payloads or "\n" in payloads[id(r)] for r in results):
                return  # a record with no children is stored as a rejection the runner makes: not kept
            calls = _new_calls(records[i], results[0])  # type: ignore[arg-type]
            recorded += len(calls)
            value = {
                "children": children,
                "calls": [[entry.model, entry.key] for entry in calls],
                "results": [[r.record_id, r.status, r.reason, r.prompt, r.response] for r in results],  # type: ignore[union-attr]
                "judgements": [[j.model_dump_json(), source] for j, source in by_record.get(records[i].record_id, [])],
            }
            # the payloads follow the head a line each, as stored (compact JSON holds no line break)
            values[keys[i]] = "\n".join([json.dumps(value, ensure_ascii=False), *(payloads[id(r)] for r in results)])
        if recorded != output.asked:
            return  # calls the records did not record: a replay would ledger fewer than a run sends
        prefix = self.prefix(stage)
        self.store.replays_put(values, prefix if prefix not in self._noted else None)
        self._noted.add(prefix)


def _payload(record: StageResult[Any]) -> str:
    return dumps(record._stored())
