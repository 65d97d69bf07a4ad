"""The records of ``build crow``: a context and its target, then one of its triples, then a rewrite of the target.

One model carries a record through every stage: the source fills in the pair (:class:`CrowRecord`'s
first fields), CKA narrows it to one triple, WSG adds the rewrite and the triples it breaks, the edit
rule counts the words it changed, and the validations say who accepted it. A field a later stage sets
is empty (``None``, or no flags) until then, and is not stored.
"""

from __future__ import annotations

from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from senseforge.pipelines.runstore import JudgementSource, Record

T = TypeVar("T")

KnowledgeFrom = Literal["cka", "human", "source"]
"""Who gave a record's triple: the CKA model, a person, or the source."""


class CrowTriple(BaseModel):
    """One piece of everyday knowledge that links a context with its target."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    head: str
    relation: str
    """The relation as the relation table labels it (``UsedFor``, ``Not CapableOf``, ``Other: …``); a source's
    relation that the table lacks, as the source wrote it."""
    tail: str
    dimension: str | None = None
    """CRoW's dimension of the relation (``social``, ``physical/spatial`` …), ``None`` when it has none."""
    verbalized: str | None = None
    """The triple as a sentence."""


class OtherTarget(BaseModel):
    """Another target of a translation context, carried through unchanged."""

    model_config = ConfigDict(extra="forbid")

    text: str
    label: bool
    """The source's label: ``True`` for a valid target."""
    id: str
    knowledge: list[CrowTriple]


class CrowRecord(Record):
    """What passes between the stages of ``build crow`` (see the module notes)."""

    task: str
    """The task spec's name (``safety``, ``mt-zh-en`` …)."""
    context_id: str
    """The source item's id (a dialogue's is its prefix's)."""
    context: str
    turns: list[str] | None
    """A dialogue's turns before the target (``None`` for a task without turns)."""
    target: str
    """The original target: the one rewritten, or a translation context's first valid one."""
    label: bool
    """The source's label of :attr:`target`: ``True`` for a valid target."""
    target_id: str
    others: list[OtherTarget]
    """A translation context's other targets (none for a task that rewrites)."""
    knowledge: list[CrowTriple]
    """The knowledge the source brought with the target."""
    source: dict[str, str]
    """Where the context came from: its ``file`` (and ``where`` in it, for a row of a user's file)."""
    triple: CrowTriple | None = None
    """The one triple the record holds, from CKA on."""
    triple_index: int | None = None
    """Which of the context's triples it is."""
    knowledge_from: KnowledgeFrom | None = None
    """Who gave the triple."""
    ckv_by: JudgementSource | None = None
    """Who accepted the triple in CKV."""
    rewrite: str | None = None
    """The rewritten target, from WSG on."""
    violates: list[CrowTriple] | None = None
    """The triples the rewrite breaks (after dedup, those of every identical rewrite of the context)."""
    edits: int | None = None
    """Words the rewrite changed, as the edit rule counts them."""
    flags: list[str] = Field(default_factory=list)
    """What the edit rule noticed without rejecting (``negation_only``); none until it ran."""
    wsv_by: JudgementSource | None = None
    """Who accepted the rewrite in WSV."""

    def shown_checked(self) -> dict[str, Any]:
        """The target, the rewrite and the triple as the checks saw them, and the record's source."""
        shown: dict[str, Any] = {"target": self.target}
        if self.rewrite is not None:
            shown["rewrite"] = self.rewrite
        if self.triple is not None:
            shown["triple"] = dict(sorted(self.triple.model_dump(mode="json").items()))
        shown["source"] = dict(sorted(self.source.items()))
        return shown


def required(value: T | None, name: str) -> T:
    """``value``, which a stage before this one set.

    Raises:
        ValueError: it was never set (a record that skipped the stage that sets it).
    """
    if value is None:
        raise ValueError(f"the record has no {name} yet")
    return value
