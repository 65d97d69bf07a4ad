"""The review settings: one nested model that only recipes with a review have, given and stored flat."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from senseforge.errors import ConfigError
from senseforge.pipelines.config import (
    REVIEW_DEFAULTS,
    RecipeConfig,
    ReviewSettings,
    config_differences,
    resolve_config,
)
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
    assert str(refused.value) == (
        "crow does not use review_k: its panels are given by --validators, --stage-by, --k, --ckv-min, --wsv-min "
        "and --validator-temperature"
    )
    with pytest.raises(ConfigError, match=r"^human-gen does not use reviewers: its panels are given by --answers, "):
        resolve_config(HumanGenConfig, sets=["reviewers=scripted/x"])
    with pytest.raises(ConfigError, match=r"^human-gen does not use model: people write"):  # its unused settings
        resolve_config(HumanGenConfig, sets=["model=scripted/x"])
    with pytest.raises(ConfigError, match="culture-adapt does not use reviewers: it has no review stage"):
        resolve_config(CultureAdaptConfig, sets=["reviewers=scripted/x"])
    with pytest.raises(ConfigError, match=r"^--set 'review=1': CrowConfig has no setting 'review'"):
        resolve_config(CrowConfig, sets=["review=1"])


def test_flat_settings_nest_from_every_source(tmp_path: Path) -> None:
    toml = tmp_path / "run.toml"
    toml.write_text('lang = "en"\nreviewers = ["scripted/a", "scripted/b"]\nlm_review_policy = "at-least:1/2"\n')
    config = resolve_config(McsqaConfig, config_file=toml, sets=["review_k=3"], flags={"lm_review_final": True})
    assert config.review == McsqaReviewSettings(
        judges=("scripted/a", "scripted/b"), judges_policy="at-least:1/2", final=True, k=3
    )
    flat = {"reviewers": ["scripted/a", "scripted/b"], "lm_review_policy": "at-least:1/2", "lm_review_final": True}
    assert config.review == McsqaReviewSettings.model_validate({**flat, "review_k": 3})
    assert McsqaConfig(lang="en", lm_review_as_hard=True).review.final  # mCSQA's own name still works
    stage = Review.configured("review", "verify", config)
    assert (stage.judges, stage.judges_policy, stage.lm_final, stage.k) == (
        config.review.judges,
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


STORED = Path(__file__).parents[1] / "fixtures" / "config" / "stored_configs.json"
PINNED = {
    "crow-defaults": "5d5ddc49cc8f5b6e5e2e8a3060d64faa19f31cbf6494d16c4137c811a49102f0",
    "crow-lm-panels": "6ef7a712ed8dfc9b2f9b066996acce8b490572af1e3a84bfccac897109827bc7",
    "crow-people-panels": "bbb03b48345caf82a0a6f0b93c5cec421b9240655d812314ef760d4d993c5496",
    "crow-older-manifest": "332fe8fb10404f9e2ed254b61650496115c841957f5f1ddda194a9c52699504c",
    "human-gen-defaults": "f9c95108fa4d567872507a72dee866034315fd5880351b9c7ab665aa85b50bd6",
    "human-gen-panel": "6f96c065a43c914d49a300e5a4c755929e77994e82fae2b6d148deb47e25bb38",
    "mcsqa-people": "5b22232fca96da5e12ee9ded22a5834fcb13285065bc446672ef54c53235eda1",
    "mcsqa-lm-and-people": "f193d8b80bd7ff772ec403c92c81b72f2eb17fed8d482d7142a50ded9971c219",
    "culture-gen-lm-review": "6b034de05b3db42be099af7e7dbf9f32cfe83d137c0c36579e13db3d4a37b694",
    "culture-gen-people": "cbdc91e3c95720f9520c313a8492cb1dd4025a977b7628e76c01fb82576fb012",
}
"""The ``config_hash`` of each stored config in :data:`STORED`, computed before the panels shared one model."""
MODELS: dict[str, type[RecipeConfig]] = {
    "crow": CrowConfig,
    "human-gen": HumanGenConfig,
    "mcsqa": McsqaConfig,
    "culture-gen": CultureGenConfig,
}


@pytest.mark.parametrize("name", sorted(PINNED))
def test_a_stored_config_keeps_its_hash_and_its_form(name: str) -> None:
    """A manifest's config reads into the panel model, and is written back key for key under the hash it had."""
    stored = json.loads(STORED.read_text(encoding="utf-8"))[name]
    model = MODELS[stored["recipe"]]
    config = resolve_config(model, recorded=stored)
    assert config.hash() == PINNED[name]
    dumped = config.model_dump(mode="json")
    if name == "crow-older-manifest":  # its review settings, at their default, are no longer recorded
        stored = {key: value for key, value in stored.items() if key not in REVIEW_DEFAULTS}
    assert list(dumped.items()) == list(stored.items())
    assert resolve_config(model, recorded=dumped).hash() == PINNED[name]  # and resumes from what it writes


def test_old_flags_and_sets_give_the_pinned_configs(tmp_path: Path) -> None:
    """Each recipe's own names for its panel, from ``--set``, a TOML file and flags, make the configs pinned."""
    crow = resolve_config(
        CrowConfig,
        sets=["validators=scripted/a,scripted/b", "k=4", "ckv_min=3", "n=5"],
        flags={"model": "scripted/crow-author", "wsv_min": 1, "validator_temperature": 0.3, "task": ("safety",)},
    )
    assert crow.hash() == PINNED["crow-lm-panels"]
    toml = tmp_path / "run.toml"
    toml.write_text('pool = ["a", "b", "c", "d", "e", "f"]\nanswers = 3\nconcepts = "concepts.csv"\n')
    human = resolve_config(HumanGenConfig, config_file=toml, sets=["adjudicate=true"], flags={"max_ambiguity_flags": 2})
    assert human.hash() == PINNED["human-gen-panel"]
    mcsqa = resolve_config(
        McsqaConfig,
        sets=["reviewers=scripted/a,scripted/b,scripted/a", "lm_review_policy=at-least:2/3", "review_k=3"],
        flags={"lang": "en", "lm_review_as_hard": True, "review_policy": "at-least:1/2", "adjudicate": True},
    )
    assert mcsqa.hash() == PINNED["mcsqa-lm-and-people"]
    culture = resolve_config(CultureGenConfig, sets=["review_k=3"], flags={"review_policy": "majority"})
    assert culture.hash() == PINNED["culture-gen-people"]


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"panel": ["m@letter", "m@letter"]}, "--panel: --panel names m@letter twice"),
        ({"panel": ["a", "b"], "hard_when": "at-most:2"}, "--hard-when at-most:2 would make every item Hard"),
        ({"panel": ["a"], "hard_when": "most"}, "--hard-when: unknown hard-when policy 'most'"),
        ({"panel": ["a"], "skip_review_when": "confident:2"}, "--skip-review-when: unknown skip-review-when policy"),
    ],
)
def test_a_verification_panel_setting_is_refused_at_the_flag_that_gives_it(
    given: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError) as refused:
        resolve_config(McsqaConfig, flags={"lang": "en", **given})
    assert str(refused.value).startswith(message)
