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
"""

from __future__ import annotations

import fnmatch
import os
import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from senseforge.errors import ConfigError
from senseforge.store.db import senseforge_home

BATCH_SHARE = 0.5
"""What a call answered through a batch costs, as a share of its listed price (OpenAI's Batch API: half)."""


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
    """Looks up the price of a ``provider/model``."""

    def __init__(self, entries: dict[str, Price]) -> None:
        self.entries = dict(entries)

    @classmethod
    def load(cls, user_file: Path | None = None) -> PriceTable:
        """The shipped table overlaid with the user's file (if it exists)."""
        shipped = resources.files("senseforge.llm").joinpath("prices.toml").read_text(encoding="utf-8")
        entries = _parse(shipped, "senseforge/llm/prices.toml")
        path = user_file or user_price_file()
        if path.is_file():
            entries.update(_parse(path.read_text(encoding="utf-8"), str(path)))
        return cls(entries)

    def lookup(self, name: str) -> Price | None:
        """The price for ``provider/model``, or ``None`` when unknown."""
        if name in self.entries:
            return self.entries[name]
        matches = [pattern for pattern in self.entries if fnmatch.fnmatchcase(name, pattern)]
        if not matches:
            return None
        return self.entries[max(matches, key=len)]
