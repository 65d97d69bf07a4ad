"""The review settings: one nested model that only recipes with a review have, given and stored flat."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from senseforge.errors import ConfigError
from senseforge.pipelines.config import REVIEW_DEFAULTS, ReviewSettings, config_differences, resolve_config
from senseforge.pipelines.crow.config import CrowConfig
from senseforge.pipelines.culture_adapt.config import CultureAdaptConfig
from senseforge.pipelines.culture_gen.recipe import CultureGenConfig
from senseforge.pipelines.human_gen.config import HumanGenConfig
from senseforge.pipelines.mcsqa.config import McsqaConfig, McsqaReviewSettings
from senseforge.pipelines.review import Review

PAUSED = Path(__file__).parents[1] / "fixtures" / "golden" / "paused" / "mcsqa-en-awaiting" / "manifest.json"
PANEL = ("reviewers", "lm_review_policy", "lm_review_final", "review_policy", "review_k")


def test_only_recipes_with_a_review_have_review_settings() -> None:
    for model in (CrowConfig, HumanGenConfig, CultureAdaptConfig):
        assert model.review_settings() is None
        assert not set(PANEL) & set(model.model_fields) and not set(PANEL) & set(model.settings())
        assert "review" not in model.model_fields
    assert McsqaConfig.review_settings() is McsqaReviewSettings
    assert CultureGenConfig.review_settings() is ReviewSettings
    assert list(McsqaConfig.settings())[5:12] == ["style", *PANEL, "adjudicate"]  # flat, where flags always were


def test_a_recipe_without_a_review_refuses_its_settings_in_one_line() -> None:
    with pytest.raises(ConfigError) as refused:
        resolve_config(CrowConfig, sets=["review_k=3"])
    assert str(refused.value) == "crow does not use review_k: its panels are --validators, --k, --ckv-min and --wsv-min"
    with pytest.raises(ConfigError, match="culture-adapt does not use reviewers: it has no review stage"):
        resolve_config(CultureAdaptConfig, sets=["reviewers=scripted/x"])
    with pytest.raises(ConfigError, match=r"^--set 'review=1': CrowConfig has no setting 'review'"):
        resolve_config(CrowConfig, sets=["review=1"])


def test_flat_settings_nest_from_every_source(tmp_path: Path) -> None:
    toml = tmp_path / "run.toml"
    toml.write_text('lang = "en"\nreviewers = ["scripted/a", "scripted/b"]\nlm_review_policy = "at-least:1/2"\n')
    config = resolve_config(McsqaConfig, config_file=toml, sets=["review_k=3"], flags={"lm_review_final": True})
    assert config.review == McsqaReviewSettings(
        reviewers=("scripted/a", "scripted/b"), lm_review_policy="at-least:1/2", lm_review_final=True, review_k=3
    )
    assert McsqaConfig(lang="en", lm_review_as_hard=True).review.lm_review_final  # mCSQA's own name still works
    stage = Review.configured("review", "verify", config)
    assert (stage.judges, stage.judges_policy, stage.lm_final, stage.k) == (
        config.review.reviewers,
        "at-least:1/2",
        True,
        3,
    )
    with pytest.raises(ConfigError, match=r"^--set review_k: Input should be greater than or equal to 1$"):
        resolve_config(McsqaConfig, recorded={"lang": "en"}, sets=["review_k=0"])
    with pytest.raises(ConfigError, match=r"^lm_review_policy 'unanimous:3' needs 3 LM judges, but reviewers names 1"):
        resolve_config(CultureGenConfig, sets=["reviewers=scripted/a", "lm_review_policy=unanimous:3"])


def test_the_stored_form_is_flat_and_unchanged() -> None:
    """An old manifest's config resolves to a config that writes it back key for key, under the same hash."""
    manifest = json.loads(PAUSED.read_text(encoding="utf-8"))
    config = resolve_config(McsqaConfig, recorded=manifest["config"])
    assert config.hash() == manifest["config_hash"]
    assert list(config.model_dump(mode="json").items()) == list(manifest["config"].items())
    assert "review" not in json.loads(config.canonical())


def test_a_recipe_without_a_review_reads_its_older_manifests() -> None:
    """Its manifests recorded the review settings at their default; they resume, under the hash they had."""
    config = CrowConfig()
    old = {**config.model_dump(mode="json"), **REVIEW_DEFAULTS}
    again = resolve_config(CrowConfig, recorded=old)
    assert again == config and not set(PANEL) & set(again.model_dump())
    panel = {key: REVIEW_DEFAULTS[key] for key in PANEL}  # adjudicate, a later setting, was never hashed at its default
    assert json.loads(config.canonical()) == {**config.model_dump(mode="json"), **panel}
    assert config_differences(old, again.model_dump(mode="json")) == []
    assert config_differences(old, CrowConfig(k=4).model_dump(mode="json")) == ["k: 3 → 4"]
