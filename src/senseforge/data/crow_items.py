"""What people are shown for CRoW's four stages: a (context, target) pair with what each task adds to it.

The task types of :mod:`senseforge.annotate.crowtasks` take these as their inputs; the crow
recipe's stages make them from their records.
"""

from __future__ import annotations

from pydantic import Field

from senseforge.data.schema import KnowledgeTriple, LangTag, _Record


class CrowPair(_Record):
    """A (context, target) pair of a CRoW task, as a validator sees it."""

    id: str = Field(min_length=1)
    """The run's record id (one task per triple or rewrite)."""
    task: str = Field(min_length=1)
    lang: LangTag
    """Language of the target."""
    context_name: str
    context: str
    target_name: str
    target: str
    label: str
    """What the target is for the task (``safe``, ``plausible`` …)."""


class KnowledgeCheckItem(CrowPair):
    """The input of a ``ckv`` task: one triple of a pair, to tick or not."""

    triple: KnowledgeTriple


class RewriteCheckItem(CrowPair):
    """The input of a ``wsv`` task: a rewrite of the pair's target, to check on CRoW's four conditions."""

    rewrite: str
    flipped: str
    """What the rewrite should be for the task (the opposite of :attr:`label`)."""
    violates: list[KnowledgeTriple]
    edits: int | None = None
    """Words changed, as the edit rule counted them."""
    flags: list[str] = Field(default_factory=list)
    """``negation_only`` when the rewrite only adds or removes a negation."""


class PairTarget(_Record):
    """Another target of a pair's context, shown beside it (a translation's wrong translation)."""

    text: str
    label: str


class AnnotationItem(CrowPair):
    """The input of a ``cka`` task: a pair to write the linking knowledge of."""

    others: list[PairTarget] = Field(default_factory=list)
    max_triples: int = Field(default=5, ge=1)


class RewriteItem(CrowPair):
    """The input of a ``wsg`` task: a target to rewrite so that it breaks one of the kept triples."""

    flipped: str
    """What the rewrite must be for the task (the opposite of :attr:`label`)."""
    flipped_valid: bool | None = None
    """Whether :attr:`flipped` is the task's label 1 (``plausible``, ``safe`` …): the rewrite then has to get away
    from the knowledge that made the original wrong, where otherwise it goes against the knowledge; ``None``:
    not said (the page then asks for both ways)."""
    triples: list[KnowledgeTriple] = Field(min_length=1)
    max_edits: int = Field(default=5, ge=0)
