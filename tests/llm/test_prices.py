"""The price table: shipped defaults, user overrides, unknown stays unknown."""

from __future__ import annotations

from pathlib import Path

import pytest

from senseforge.errors import ConfigError
from senseforge.llm.base import Loglikelihood, LoglikelihoodRequest
from senseforge.llm.cache import CachedLLM
from senseforge.llm.mock import ScriptedLLM
from senseforge.llm.prices import Price, PriceTable
from senseforge.store.db import Store


def test_shipped_table_prices_local_models_at_zero() -> None:
    table = PriceTable.load()
    assert table.lookup("llamacpp/gemma-3-270m") == Price(0.0, 0.0)
    assert table.lookup("hf/some/folder") == Price(0.0, 0.0)
    assert table.lookup("openai/some-unlisted-model") is None


@pytest.mark.parametrize("model", ["hf/./models/tiny", "hf//abs/path/model", "llamacpp/gemma-3-270m"])
@pytest.mark.parametrize(("tokens_in", "tokens_out"), [(None, None), (12, None), (None, 0), (12, 3)])
def test_local_models_cost_zero_even_without_token_counts(
    model: str, tokens_in: int | None, tokens_out: int | None
) -> None:
    """The hf provider's scoring reports no tokens; a $0 price needs none to say $0."""
    price = PriceTable.load().lookup(model)
    assert price is not None and price.cost(tokens_in, tokens_out) == 0.0


def test_a_local_hf_model_scored_without_token_counts_costs_zero(tmp_path: Path) -> None:
    """What `eval run -m hf/...` reports: $0, never "cost: unknown", like llamacpp."""
    inner = ScriptedLLM(name="hf/./models/tiny", scorer=lambda _: Loglikelihood(logprob=-1.0, is_greedy=True))
    llm = CachedLLM(inner, Store(f"sqlite:///{tmp_path / 'store.db'}"), prices=PriceTable.load())
    llm.loglikelihood([LoglikelihoodRequest(context="Q:", continuation=" a")])
    assert llm.stats.cost_unknown_calls == 0 and llm.stats.cost_usd == 0.0


def test_a_charged_count_that_is_unknown_leaves_the_cost_unknown() -> None:
    assert Price(1.5, 3.0).cost(None, None) is None
    assert Price(1.5, 3.0).cost(10, None) is None
    assert Price(0.0, 3.0).cost(None, 1_000_000) == pytest.approx(3.0)  # the free side needs no count
    assert Price(1.5, 0.0).cost(1_000_000, None) == pytest.approx(1.5)


def test_user_file_overrides_and_extends(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    prices = tmp_path / "prices.toml"
    prices.write_text('["openai/my-*"]\ninput = 1.5\noutput = 3\n["openai/my-model"]\ninput = 0.5\noutput = 1\n')
    monkeypatch.setenv("SENSEFORGE_PRICES", str(prices))
    table = PriceTable.load()
    assert table.lookup("openai/my-model") == Price(0.5, 1.0)  # exact beats wildcard
    assert table.lookup("openai/my-other") == Price(1.5, 3.0)
    assert Price(1.5, 3.0).cost(1_000_000, 1_000_000) == pytest.approx(4.5)
    assert Price(1.5, 3.0).cost(None, 10) is None


@pytest.mark.parametrize(
    "text",
    ['["x"]\ninput = 1\n', '["x"]\ninput = "a"\noutput = 1\n', '["x"]\ninput = -1\noutput = 1\n', "not toml ["],
)
def test_bad_user_file_is_a_located_config_error(tmp_path: Path, text: str) -> None:
    path = tmp_path / "prices.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=r"prices\.toml"):
        PriceTable.load(path)


def test_the_table_names_the_entry_and_file_that_price_each_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    prices = tmp_path / "prices.toml"
    monkeypatch.setenv("SENSEFORGE_PRICES", str(prices))
    shipped = PriceTable.load()
    assert shipped.sources == ["senseforge/llm/prices.toml"]
    assert shipped.statement() == (
        "costs: priced from recorded tokens with the price table as of now "
        f"(sources: senseforge/llm/prices.toml; no user file at {prices})"
    )
    prices.write_text('["openai/my-*"]\ninput = 2\noutput = 8\n["llamacpp/gemma-3-270m"]\ninput = 0\noutput = 1\n')
    table = PriceTable.load()
    assert table.sources == ["senseforge/llm/prices.toml", str(prices)]
    assert table.statement().endswith(f"(sources: senseforge/llm/prices.toml, {prices})")
    assert table.used_for(["openai/my-model", "hf/x", "openai/unlisted", "llamacpp/gemma-3-270m"]) == {
        "hf/x": {"entry": "hf/*", "source": "senseforge/llm/prices.toml", "input": 0.0, "output": 0.0},
        "llamacpp/gemma-3-270m": {"entry": "llamacpp/gemma-3-270m", "source": str(prices), "input": 0.0, "output": 1.0},
        "openai/my-model": {"entry": "openai/my-*", "source": str(prices), "input": 2.0, "output": 8.0},
        "openai/unlisted": None,
    }
    assert table.cost("openai/my-model", 1_000_000, 1_000_000) == pytest.approx(10.0)
    assert table.cost("openai/my-model", 1_000_000, 1_000_000, batched=True) == pytest.approx(5.0)
    assert table.cost("openai/unlisted", 1, 1) is None
