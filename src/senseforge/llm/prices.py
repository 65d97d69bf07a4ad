"""The price table: US dollars per million tokens, by ``provider/model`` pattern.

The shipped table (``prices.toml`` beside this module) prices local providers at zero
and a few API models at their list prices. Users override or extend it with their own
TOML file at ``$SENSEFORGE_HOME/prices.toml`` or the path in ``SENSEFORGE_PRICES``;
entries there win. A model that matches no entry has an **unknown** cost (``None``),
never zero.

File format::

    ["openai/gpt-4o-mini"]
    input = 0.15     # USD per 1M prompt tokens
    output = 0.60    # USD per 1M generated tokens

Patterns use shell wildcards (``"llamacpp/*"``); the most specific (longest) match wins.

A call answered through an API's batch endpoint costs :data:`BATCH_SHARE` of its listed price.

**One price for a call** (:data:`PRICING_RULE`): whatever senseforge shows or writes about money (``runs
show``, ``llm ledger``, ``ledger.json``, ``cost.json``, the HTML report) is computed from the calls' recorded
token counts, and whether each was batched, with the table as loaded when the figure is shown or written. A
price added later prices the calls made before it; the cost a ledger row recorded at call time stays in the
store as a record only.
"""

from __future__ import annotations

import fnmatch
import os
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from senseforge.errors import ConfigError
from senseforge.store.db import senseforge_home

BATCH_SHARE = 0.5
"""What a call answered through a batch costs, as a share of its listed price (OpenAI's Batch API: half)."""

PRICING_RULE = "priced from recorded tokens with the price table as of now"
"""How every cost senseforge shows or writes is computed (see the module notes)."""

SHIPPED = "senseforge/llm/prices.toml"
"""The shipped table, as sources name it."""


@dataclass(frozen=True)
class Price:
    """USD per million input and output tokens."""

    input: float
    output: float

    def cost(self, tokens_in: int | None, tokens_out: int | None, *, batched: bool = False) -> float | None:
        """Cost of a call (at :data:`BATCH_SHARE` of it when ``batched``), or ``None`` when a token count that is
        charged for is unknown.

        A count priced at zero is never needed: a local backend (``hf/``, ``llamacpp/``) costs
        $0 whether or not it reports its tokens (the ``hf`` provider's scoring reports none).
        """
        if (tokens_in is None and self.input) or (tokens_out is None and self.output):
            return None
        listed = ((tokens_in or 0) * self.input + (tokens_out or 0) * self.output) / 1_000_000
        return listed * BATCH_SHARE if batched else listed


def _parse(text: str, origin: str) -> dict[str, Price]:
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{origin}: not valid TOML: {exc}") from exc
    table: dict[str, Price] = {}
    for pattern, entry in raw.items():
        if not isinstance(entry, dict) or set(entry) != {"input", "output"}:
            raise ConfigError(f"{origin}: [{pattern!r}] needs exactly `input` and `output` (USD per 1M tokens)")
        try:
            price = Price(input=float(entry["input"]), output=float(entry["output"]))
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"{origin}: [{pattern!r}] prices must be numbers") from exc
        if price.input < 0 or price.output < 0:
            raise ConfigError(f"{origin}: [{pattern!r}] prices must not be negative")
        table[pattern] = price
    return table


def user_price_file() -> Path:
    """Where the user's price table lives."""
    env = os.environ.get("SENSEFORGE_PRICES")
    return Path(env).expanduser() if env else senseforge_home() / "prices.toml"


class PriceTable:
    """Looks up the price of a ``provider/model``.

    Args:
        entries: prices by pattern.
        origins: the file each pattern came from (default: none named).
    """

    def __init__(self, entries: dict[str, Price], origins: dict[str, str] | None = None) -> None:
        self.entries = dict(entries)
        self.origins = {pattern: (origins or {}).get(pattern, "given") for pattern in self.entries}
        self.user_file: Path | None = None
        """The user's file :meth:`load` looked for (whether or not it exists)."""

    @classmethod
    def load(cls, user_file: Path | None = None) -> PriceTable:
        """The shipped table overlaid with the user's file (if it exists)."""
        shipped = resources.files("senseforge.llm").joinpath("prices.toml").read_text(encoding="utf-8")
        entries = _parse(shipped, SHIPPED)
        origins = dict.fromkeys(entries, SHIPPED)
        path = user_file or user_price_file()
        if path.is_file():
            users = _parse(path.read_text(encoding="utf-8"), str(path))
            entries.update(users)
            origins.update(dict.fromkeys(users, str(path)))
        table = cls(entries, origins)
        table.user_file = path
        return table

    @property
    def sources(self) -> list[str]:
        """The files the table was read from, shipped first."""
        return list(dict.fromkeys(self.origins.values()))

    def entry(self, name: str) -> str | None:
        """The pattern that prices ``provider/model`` (itself, else the longest matching one), or ``None``."""
        if name in self.entries:
            return name
        matches = [pattern for pattern in self.entries if fnmatch.fnmatchcase(name, pattern)]
        return max(matches, key=len) if matches else None

    def lookup(self, name: str) -> Price | None:
        """The price for ``provider/model``, or ``None`` when unknown."""
        pattern = self.entry(name)
        return None if pattern is None else self.entries[pattern]

    def cost(self, model: str, tokens_in: int | None, tokens_out: int | None, *, batched: bool = False) -> float | None:
        """What calls of ``model`` with these tokens cost now (see :meth:`Price.cost`); ``None`` when the model has
        no price or a charged count is unknown."""
        price = self.lookup(model)
        return None if price is None else price.cost(tokens_in, tokens_out, batched=batched)

    def used_for(self, models: Iterable[str]) -> dict[str, dict[str, Any] | None]:
        """Per model, the entry that prices it: its pattern, the file it came from, and its prices (``None``: no
        price), for a report to say how it priced its calls."""
        out: dict[str, dict[str, Any] | None] = {}
        for model in sorted(set(models)):
            pattern = self.entry(model)
            if pattern is None:
                out[model] = None
                continue
            price = self.entries[pattern]
            out[model] = {
                "entry": pattern,
                "source": self.origins[pattern],
                "input": price.input,
                "output": price.output,
            }
        return out

    def statement(self) -> str:
        """``costs: priced from recorded tokens with the price table as of now (sources: …)``, naming the user's
        file where it would be when there is none."""
        sources = ", ".join(self.sources) or "none"
        if self.user_file is not None and str(self.user_file) not in self.sources:
            sources += f"; no user file at {self.user_file}"
        return f"costs: {PRICING_RULE} (sources: {sources})"
