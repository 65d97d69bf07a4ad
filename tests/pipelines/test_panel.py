"""One panel vocabulary: every recipe's judging stages run with a :class:`Panel` its config describes."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from senseforge.errors import ConfigError
from senseforge.evaluate.policies import AtLeast, ExcludeAmbiguous, Majority, parse_policy
from senseforge.pipelines.config import resolve_config
from senseforge.pipelines.crow.config import CrowConfig
from senseforge.pipelines.crow.recipe import CROW
from senseforge.pipelines.crow.stages import ValidateKnowledge, ValidateSchema
from senseforge.pipelines.culture_gen.recipe import CULTURE_GEN, CultureGenConfig
from senseforge.pipelines.human_gen.config import HumanGenConfig
from senseforge.pipelines.human_gen.recipe import HUMAN_GEN
from senseforge.pipelines.human_gen.stages import BlindAnswers
from senseforge.pipelines.mcsqa.config import McsqaConfig
from senseforge.pipelines.panel import Panel
from senseforge.pipelines.review import Review


def test_a_panel_checks_its_policies_and_that_its_judges_can_decide() -> None:
    panel = Panel(judges=("scripted/a",) * 3, judges_policy="at-least:2/3", final=True)
    assert (panel.k, panel.policy, panel.adjudicate, panel.temperature) == (2, "unanimous", False, 0.0)
    with pytest.raises(ValidationError, match="unknown review policy 'most'"):
        Panel(policy="most")
    with pytest.raises(ValidationError, match=r"judges_policy 'unanimous:3' needs 3 LM judges, but judges names 2"):
        Panel(judges=("scripted/a", "scripted/b"), judges_policy="unanimous:3")
    with pytest.raises(ValidationError, match="greater than or equal to 1"):
        Panel(k=0)
    with pytest.raises(ValidationError, match="frozen"):
        panel.k = 3  # type: ignore[misc]


def test_the_review_panel_is_named_as_the_review_always_was() -> None:
    """mCSQA's and culture-gen's review is a Panel given by its flat names; a message names them so."""
    config = McsqaConfig(lang="en", reviewers=("scripted/a",), lm_review_final=True, review_k=3)
    assert isinstance(config.review, Panel) and config.panels() == {"review": config.review}
    assert (config.review.judges, config.review.final, config.review.k) == (("scripted/a",), True, 3)
    with pytest.raises(ConfigError, match=r"^lm_review_policy 'at-least:2/2' needs 2 LM judges, but reviewers names 1"):
        resolve_config(CultureGenConfig, sets=["reviewers=scripted/a", "lm_review_policy=at-least:2/2"])
    with pytest.raises(ConfigError, match=r"^--set review_policy: unknown review policy 'most'"):
        resolve_config(CultureGenConfig, sets=["review_policy=most"])
    with pytest.raises(ValidationError, match="sample at temperature 0"):
        McsqaConfig(lang="en", review={"temperature": 0.5})


def test_the_review_stage_is_its_panel() -> None:
    panel = Panel(judges=("scripted/a", "scripted/b"), judges_policy="at-least:1/2", k=3, adjudicate=True)
    stage = Review.of_panel("review", "verify", panel, seed=4, group="g")
    assert (stage.judges, stage.judges_policy, stage.lm_final, stage.policy, stage.k, stage.adjudicate) == (
        ("scripted/a", "scripted/b"),
        "at-least:1/2",
        False,
        "unanimous",
        3,
        True,
    )
    assert (stage.seed, stage.group, stage.judge_temperature) == (4, "g", 0.0)
    with pytest.raises(ConfigError, match="review: its panel names no k"):
        Review.of_panel("review", "verify", Panel(k=None), seed=0, group="g")
    config = CultureGenConfig(reviewers=("scripted/a",), review_k=3)
    (review,) = [s for s in CULTURE_GEN.stages(config) if isinstance(s, Review)]
    assert (review.judges, review.k, review.group) == (("scripted/a",), 3, "culture-gen-review")


def test_crows_validators_are_two_panels() -> None:
    """CKV and WSV: the validators in turn for k votes, at least ckv_min (wsv_min) of them; people where named."""
    config = CrowConfig(
        model="scripted/m", validators=("scripted/a", "scripted/b"), k=3, wsv_min=3, validator_temperature=0.5
    )
    ckv, wsv = config.panels()["ckv"], config.panels()["wsv"]
    assert ckv == Panel(
        judges=("scripted/a", "scripted/b", "scripted/a"),
        judges_policy="at-least:2/3",
        final=True,
        policy="at-least:2/3",
        k=3,
        temperature=0.5,
    )
    assert wsv == ckv.model_copy(update={"judges_policy": "at-least:3/3", "policy": "at-least:3/3"})
    assert parse_policy(ckv.policy) == AtLeast(2, 3)
    stages = {stage.name: stage for stage in CROW.stages(config)}
    for name, kind in (("ckv", ValidateKnowledge), ("wsv", ValidateSchema)):
        stage, panel = stages[name], config.panels()[name]
        assert isinstance(stage, kind) and stage.task == name and stage.group == "crow-review"
        assert (stage.judges, stage.judges_policy, stage.policy, stage.k) == (
            panel.judges,
            panel.judges_policy,
            panel.policy,
            panel.k,
        )
        assert stage.lm_final and stage.judge_temperature == 0.5
    people = CrowConfig(model="scripted/m", stage_by=("ckv=human",)).panels()
    assert people["ckv"].judges == () and people["wsv"].judges == ("scripted/m",) * 3


def test_human_gens_blind_answers_are_a_people_panel() -> None:
    config = HumanGenConfig(pool=("a", "b", "c", "d"), max_ambiguity_flags=1, adjudicate=True)
    panel = config.panels()["answer"]
    assert panel == Panel(k=None, policy="majority,exclude-ambiguous:1", adjudicate=True)
    assert parse_policy(panel.policy) == ExcludeAmbiguous(1, Majority())
    (stage,) = [s for s in HUMAN_GEN.stages(config) if isinstance(s, BlindAnswers)]
    assert (stage.k, stage.policy, stage.adjudicate, stage.pool) == (3, panel.policy, True, config.pool)  # pool − 1
    answers = HumanGenConfig(pool=("a", "b", "c", "d"), answers=2).panels()["answer"]
    assert BlindAnswers.of_panel("answer", answers, pool=("a", "b", "c", "d")).k == 2
