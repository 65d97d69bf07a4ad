"""A run's manifest as data: what it was asked to do (recipe, config and its hash), with what (models, templates,
seeds, the knowledge and the stores), by which version of senseforge. A recipe adds facts of its own (sampling,
its contamination gate …), kept as they were written."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ModelWrapValidatorHandler, PrivateAttr, model_validator


class Manifest(BaseModel):
    """``manifest.json``: the common facts typed, the recipe's own kept in order after them."""

    model_config = ConfigDict(extra="allow")

    recipe: str | None = None
    config: dict[str, Any] = Field(default_factory=dict)
    config_hash: str | None = None
    senseforge_version: str | None = None
    git_sha: str | None = None
    python: str | None = None
    seeds: dict[str, Any] = Field(default_factory=dict)
    templates: dict[str, str] = Field(default_factory=dict)
    models: dict[str, dict[str, Any]] = Field(default_factory=dict)
    store_url: str | None = None
    run_store_url: str | None = None
    run_id: str | None = None
    _order: list[str] = PrivateAttr(default_factory=list)

    @model_validator(mode="wrap")
    @classmethod
    def _remember_order(cls, value: Any, handler: ModelWrapValidatorHandler[Manifest]) -> Manifest:
        manifest = handler(value)
        if isinstance(value, dict):
            manifest._order = list(value)
        return manifest

    def fact(self, key: str) -> Any:
        """A recipe's own fact (``contamination``, ``sampling`` …), or ``None``."""
        return (self.model_extra or {}).get(key)

    def as_dict(self) -> dict[str, Any]:
        """The manifest as written (the recipe's facts in place, nothing added)."""
        dumped: dict[str, Any] = self.model_dump(mode="json", exclude_unset=True)
        first = {key: dumped[key] for key in self._order if key in dumped}
        return {**first, **{key: value for key, value in dumped.items() if key not in first}}
