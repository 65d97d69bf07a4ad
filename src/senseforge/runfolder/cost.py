"""A run's cost as data: tokens and money per stage, people's judgements at their rate, and the cost per kept
item — ``null`` wherever a price or rate is unknown, never zero. (How it is priced from the run store is
:mod:`senseforge.pipelines.report`'s business.)"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer, model_validator


class _Ordered(BaseModel):
    """A model whose JSON keys follow :attr:`key_order` (the rest after, as declared)."""

    model_config = ConfigDict(populate_by_name=True)
    key_order: ClassVar[tuple[str, ...]] = ()

    @model_serializer(mode="wrap")
    def _in_order(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        dumped: dict[str, Any] = handler(self)
        first = {key: dumped[key] for key in self.key_order if key in dumped}
        return {**first, **{key: value for key, value in dumped.items() if key not in first}}


class StageCost(BaseModel):
    """Tokens and money of one stage's distinct calls."""

    models: list[str]
    calls: int
    tokens_in: int
    tokens_out: int
    cost_usd: float | None
    batched_calls: int = 0
    """Of ``calls``, those answered through an API's Batch API, at its price (written only when some were)."""

    @model_serializer(mode="wrap")
    def _batched_when_some(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        dumped: dict[str, Any] = handler(self)
        if not dumped.get("batched_calls"):
            dumped.pop("batched_calls", None)
        return dumped


class HumanCost(BaseModel):
    """Human judgements at their rate (``None``: no rate given, so unknown)."""

    judgements: int
    rate_usd: float | None = None
    cost_usd: float | None = None


class ReviewSaved(BaseModel):
    """The review judgements a verification panel saved: items the flow without it would have sent to review and
    it did not, ``per_item`` judgements each, at the review's rate (``None``: no rate given, so unknown)."""

    items: int
    per_item: int
    judgements: int
    rate_usd: float | None = None
    cost_usd: float | None = None


class Cost(_Ordered):
    """The cost of a run: per stage, people, and per kept item (``null`` wherever a price is unknown)."""

    lang: str | None = None
    currency: str = "USD"
    stages: dict[str, StageCost]
    human: HumanCost
    human_by_task: dict[str, HumanCost] | None = None
    """Per task type, when people did more than one kind of task."""
    unpriced_models: list[str] = Field(default_factory=list)
    total_usd: float | None
    kept: int
    cost_per_kept_item_usd: float | None = None
    review_saved: ReviewSaved | None = None
    """What a verification panel saved of the review (only when one ran)."""
    kept_unit: str = Field(default="item", exclude=True)
    """What was kept (the funnel's :attr:`Funnel.kept_unit`): the per-kept key is named after it."""

    @model_serializer(mode="wrap")
    def _named(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        dumped: dict[str, Any] = handler(self)
        for key in ("lang", "human_by_task", "review_saved"):
            if dumped.get(key, 0) is None:
                del dumped[key]
        per = dumped.pop("cost_per_kept_item_usd")
        dumped[f"cost_per_kept_{self.kept_unit}_usd"] = per
        return dumped

    @model_validator(mode="before")
    @classmethod
    def _read_named(cls, value: Any) -> Any:
        """Read ``cost_per_kept_<unit>_usd`` back (as written) into the field and its unit."""
        if not isinstance(value, dict) or ("cost_per_kept_item_usd" in value and "kept_unit" in value):
            return value
        named = [key for key in value if key.startswith("cost_per_kept_") and key.endswith("_usd")]
        if len(named) != 1:
            return value
        out = {key: item for key, item in value.items() if key != named[0]}
        out["cost_per_kept_item_usd"] = value[named[0]]
        out.setdefault("kept_unit", named[0].removeprefix("cost_per_kept_").removesuffix("_usd"))
        return out
