"""A recipe of a few lines on the engine: words → three parts each (a model) → (with ``people``: a person keeps or
drops each part) → two calls per part → middle parts dropped → three LM judges at 2 of 3. It holds only its own
parts, and declares its release (each kept part an item; ``grouped``: a folder per word); the rest (resume,
manifest, batches, judgements, dataset files, funnel, cost) is the engine's.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

from senseforge.data.schema import Choice, Judgement, MCItem
from senseforge.llm.base import Completion, GenerateRequest
from senseforge.pipelines import stage as st
from senseforge.pipelines.calls import AWAITING, Reply
from senseforge.pipelines.config import ReviewedConfig
from senseforge.pipelines.outcomes import Outcome, Parsed, Reject, ok, rejected
from senseforge.pipelines.release import Finished, Release, Splitting
from senseforge.pipelines.review import Review
from senseforge.pipelines.runstore import Record, StageResult
from senseforge.pipelines.split import Ratios
from senseforge.pipelines.taskqueue import QueuedTask
from senseforge.runfolder.figures import Counts, Figure

RESPONDER = f"scripted/{Path(__file__).with_name('responder.py')}:respond"


class TinyConfig(ReviewedConfig):
    lm_stages: ClassVar[tuple[str, ...]] = ("expand",)
    recipe: Literal["tiny"] = "tiny"
    words: tuple[str, ...] = ("sun", "rain")
    people: bool = False
    grouped: bool = False
    """A group (and folder) per word."""
    split: str | None = None
    """Train/validation/test shares; ``None``: every item in test."""


class Piece(Record):
    """A word, and once the model split it, one of its three parts."""

    word: str
    text: str | None = None
    around: str | None = None


@dataclass(frozen=True)
class Words:
    name: str = "words"

    def records(self, config: TinyConfig) -> tuple[list[StageResult[Piece]], dict[str, Any]]:
        return [StageResult(f"w{i}", "ok", Piece(word=w)) for i, w in enumerate(config.words)], {}


@dataclass
class Expand(st.LMStage):
    def requests(self, records: Sequence[StageResult[Piece]]) -> list[GenerateRequest]:
        return [GenerateRequest.chat(f"Split {r.data.word} into three.", max_tokens=16) for r in records]

    def parse(self, record: StageResult[Piece], text: str) -> Parsed:
        parts = text.split("|")
        return [record.data.with_(text=part) for part in parts] if len(parts) == 3 else Reject()


def item(record: StageResult[Piece]) -> MCItem:
    choices = [Choice(label="A", text=record.data.text or ""), Choice(label="B", text="none")]
    return MCItem(id=record.record_id, lang="en", question="Fine?", choices=choices, answer="A")


class Pick(st.PeopleStage[Piece]):
    """A person keeps a part (answers A, the part) or drops it (B, none)."""

    people_tasks = ("answer",)

    def shown(self, record: StageResult[Piece]) -> QueuedTask:
        return QueuedTask("answer", item(record))

    def decide(self, record: StageResult[Piece], judged: Sequence[Judgement]) -> Outcome:
        votes = [j.vote() for j in judged]
        return AWAITING if not votes else ok(record) if votes[0] == "A" else rejected(record, "dropped")


@dataclass
class Flank(st.FanOutStage):  # two calls per part, whose prompt is the bare part: the responder knows them by their tag
    def requests(self, record: StageResult[Piece]) -> list[GenerateRequest]:
        return [GenerateRequest.chat(record.data.text or "", max_tokens=8, seed=seed) for seed in (0, 1)]

    def parse(self, record: StageResult[Piece], replies: Sequence[Reply]) -> Parsed:
        return record.data.with_(around="".join(r.text for r in replies if isinstance(r, Completion)))


@dataclass
class Middle(st.CheckStage):  # drops the middle parts; the others are none of its business and pass
    def applies(self, record: StageResult[Piece]) -> bool:
        return record.record_id.endswith("/1")

    def reason(self, data: Piece) -> str | None:
        return "middle"


@dataclass
class Judge(Review):
    def judge_prompt(self, record: StageResult[Piece]) -> str:
        return f"Is {record.data.text} fine? Answer yes or no.\nAnswer:"

    def task_item(self, record: StageResult[Piece]) -> MCItem:
        return item(record)


@dataclass
class Tiny:
    name: str = "tiny"
    summary: str = "words → three parts each → two calls per part → kept at two of three LM judges"
    config_model: type[TinyConfig] = TinyConfig
    record: type[Record] = Piece
    flags: dict[str, Any] = field(default_factory=dict)
    authors: dict[str, Any] = field(default_factory=dict)

    def default_run_dir(self, config: TinyConfig) -> Path:
        return Path("runs") / "tiny"

    def source(self, config: TinyConfig) -> Words:
        return Words()

    def stages(self, config: TinyConfig) -> list[st.Stage]:
        people = [Pick("pick")] if config.people else []
        judge = Judge.configured("judge", "verify", config)
        return [Expand("expand", config.model), *people, Flank("flank", config.model), Middle("middle"), judge]

    def splitting(self) -> frozenset[str]:
        return frozenset({"expand"})

    def manifest(self, config: TinyConfig) -> dict[str, Any]:
        return {}

    def release(self, config: TinyConfig) -> Release[Piece]:
        grouped = config.grouped
        return Release(
            kept="judge",
            record=Piece,
            item=lambda record, _group: item(record),
            row=lambda record, _item: {"id": record.record_id, "text": record.data.text},
            split=Splitting(Ratios.of(config.split), config.seed) if config.split else Splitting(),
            groups=tuple(dict.fromkeys(config.words)) if grouped else (),
            group_by="task" if grouped else None,
            group_of=_word if grouped else None,
            folders=grouped,
            group_cost=grouped,
            figures=_parts,
            group_figures=lambda done, word: [
                Counts(name="kept", title="Kept", values={"parts": len(done.in_group(word))})
            ],
            kept_unit="part",
        )


def _word(record: StageResult[Piece]) -> str:
    return record.data.word


def _parts(done: Finished[Piece]) -> list[Figure]:
    """Kept parts per word."""
    per = Counter(record.data.word for record in done.kept)
    return [Counts(name="parts", title="Parts kept per word", values=dict(per), unit="parts", summary=True)]


def config(**overrides: Any) -> TinyConfig:
    settings: dict[str, Any] = {
        "model": RESPONDER,
        "reviewers": (RESPONDER,) * 3,
        "lm_review_policy": "at-least:2/3",
        "lm_review_final": True,
        "review_k": 1,
        "batch_size": 1,
    }
    return TinyConfig.model_validate({**settings, **overrides})
