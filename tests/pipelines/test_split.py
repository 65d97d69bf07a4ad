"""The one ratio type (both forms a config gives) and the split every recipe that cuts its items uses."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from senseforge.data.schema import Choice, MCItem
from senseforge.data.splits import split_items
from senseforge.pipelines.culture_gen.recipe import CultureGenConfig
from senseforge.pipelines.mcsqa.config import McsqaConfig
from senseforge.pipelines.split import Ratios, split


def _items(n: int) -> list[MCItem]:
    choices = [Choice(label="A", text="yes"), Choice(label="B", text="no")]
    return [MCItem(id=f"q{i:03d}", lang="en", question=f"Q{i}?", choices=choices, answer="A") for i in range(n)]


def test_ratios_read_text_as_shares_and_numbers_as_given() -> None:
    assert Ratios.of("80/10/10") == (0.8, 0.1, 0.1)
    assert Ratios.of("2:1:1") == (0.5, 0.25, 0.25)
    assert Ratios.of((8, 1, 1)) == (8.0, 1.0, 1.0)
    assert Ratios.of([0.5, 0.25, 0.25]).validation == 0.25


@pytest.mark.parametrize("bad", ["80/20", "a/b/c", "0/0/0", (1, -1, 1), (1, 2)])
def test_ratios_refuse_anything_but_three_shares(bad: str | tuple[float, ...]) -> None:
    with pytest.raises(ValueError, match="train/validation/test"):
        Ratios.of(bad)


def test_both_config_forms_are_checked_and_kept_as_given() -> None:
    with pytest.raises(ValidationError):
        McsqaConfig(lang="en", ratios=(1, -1, 1))
    with pytest.raises(ValidationError):
        CultureGenConfig(split="80/20")
    assert CultureGenConfig(split="80/10/10").model_dump()["split"] == "80/10/10"
    assert McsqaConfig(lang="en").model_dump()["ratios"] == (0.8, 0.1, 0.1)


def test_split_is_the_seeded_stratified_cut_or_everything_in_test() -> None:
    items = _items(40)
    assert split(items, None, 0) == {"test": items}
    assert split(items, Ratios.of("80/10/10"), 3) == split_items(items, ratios=(0.8, 0.1, 0.1), seed=3)
