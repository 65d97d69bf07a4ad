"""The registry of judgement bodies: bodies register beside their definition, and every reader reads it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import ClassVar, Literal

import pytest
import sqlalchemy as sa
from pydantic import ValidationError

from senseforge.cli.annotate import _casts_votes
from senseforge.data.judgements import JudgementRegistry
from senseforge.data.schema import JUDGEMENT, JUDGEMENTS, CreateJudgement, VerifyJudgement, judgement
from senseforge.data.schema import Judgement as Body
from senseforge.pipelines.runstore import RunStore, sqlite_url
from senseforge.pipelines.tables import judgements


class RateJudgement(Body):
    """A body no task type of ours has: a 1–5 rating."""

    vote_kind: ClassVar[None] = None
    task: Literal["rate"] = "rate"
    stars: int


def test_every_body_of_the_schema_is_registered_by_its_task() -> None:
    bodies = JUDGEMENTS.bodies()
    assert len(bodies) == 12 and bodies["verify"] is VerifyJudgement and bodies["create"] is CreateJudgement
    assert all(body.model_fields["task"].default == task for task, body in bodies.items())
    assert JUDGEMENT is JUDGEMENTS


def test_a_registry_validates_what_registered_and_names_an_unregistered_task() -> None:
    registry: JudgementRegistry[Body] = JudgementRegistry()
    registry.register(VerifyJudgement)
    with pytest.raises(ValidationError, match="'rate'"):
        registry.validate_python({"item_id": "q", "annotator": "a", "task": "rate", "stars": 4})
    with pytest.raises(KeyError, match=r"'rate'.*known: verify"):
        registry.body("rate")
    registry.register(RateJudgement)  # a new body is one registration, no union to edit
    made = registry.validate_json(json.dumps({"item_id": "q", "annotator": "a", "task": "rate", "stars": 4}))
    assert isinstance(made, RateJudgement) and made.stars == 4
    assert isinstance(registry.validate_python({"item_id": "q", "annotator": "a", "task": "verify"}), VerifyJudgement)
    registry.register(RateJudgement)  # the same body again changes nothing
    with pytest.raises(ValueError, match=r"'rate'.*RateJudgement is already registered"):
        registry.register(type("OtherRate", (RateJudgement,), {"__doc__": "another"}))


def test_a_body_without_a_task_default_is_refused() -> None:
    class NoTask(Body):
        task: str

    with pytest.raises(TypeError, match="NoTask"):
        JudgementRegistry[Body]().register(NoTask)


def test_status_counts_votes_by_the_registry() -> None:
    assert _casts_votes("verify") and _casts_votes("answer") and _casts_votes("ckv")
    assert not _casts_votes("create") and not _casts_votes("cka") and not _casts_votes("no-such-task")


def test_the_run_store_reads_every_registered_body_and_fails_loudly_on_another(tmp_path: Path) -> None:
    run = RunStore(sqlite_url(tmp_path / "run.db"))
    made = [judgement(item_id=f"q{n}", annotator="ana", task=task, **fields)
            for n, (task, fields) in enumerate([("verify", {"accept": True}), ("ckv", {"accept": False}),
                                                 ("open-judge", {"verdict": "correct"})])]  # fmt: skip
    run.add_judgements(made, "human")
    assert [s.judgement for s in run.every_judgement()] == made
    with run.engine.begin() as conn:
        conn.execute(sa.update(judgements).where(judgements.c.task == "ckv").values(body=json.dumps(
            {"item_id": "q1", "annotator": "ana", "task": "rate", "stars": 3})))  # fmt: skip
    with pytest.raises(ValidationError, match="'rate'"):
        run.every_judgement()
