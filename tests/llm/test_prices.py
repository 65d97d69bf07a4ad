"""The price table: shipped defaults, user overrides, unknown stays unknown."""

from __future__ import annotations

from pathlib import Path

import pytest

from senseforge.errors import ConfigError
from senseforge.llm.prices import Price, PriceTable


def test_shipped_table_prices_local_models_at_zero() -> None:
    table = PriceTable.load()
    assert table.lookup("llamacpp/gemma-3-270m") == Price(0.0, 0.0)
    assert table.lookup("hf/some/folder") == Price(0.0, 0.0)
    assert table.lookup("openai/some-unlisted-model") is None


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
