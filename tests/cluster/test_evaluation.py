"""``eval run --executor ray``: the same bytes as ``--executor local``, and a lost actor's pair redone."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from senseforge.cli.eval import app
from senseforge.cluster.evaluation import actor_resources, ray_pair_runner
from senseforge.errors import ConfigError
from senseforge.evaluate.pairs import ModelSpec, PairSettings, pair_grid
from senseforge.evaluate.run import EvalConfig

pytest.importorskip("ray")

FIXTURES = Path(__file__).parent.parent / "fixtures"
CSQA = FIXTURES / "csqa" / "dev_sample.jsonl"
HUMAN_GEN = FIXTURES / "id-csqa" / "human_gen" / "ind" / "filtered_test.json"

runner = CliRunner()

RESPONDER = """
def first(request):
    if hasattr(request, "continuation"):
        return -1.0 * len(request.continuation)
    return "A"
"""

# dies (the whole actor process) on its first call, once: a marker file says it already did
DYING = """
import os
from pathlib import Path

MARKER = Path(__file__).with_suffix(".died")

def first(request):
    if not MARKER.exists():
        MARKER.write_text("died", encoding="utf-8")
        os._exit(1)
    if hasattr(request, "continuation"):
        return -1.0 * len(request.continuation)
    return "A"
"""


@pytest.fixture
def ray_cluster(local_ray: object) -> None:
    """The session's local Ray (tests/cluster/conftest.py)."""


def _timeless(text: str) -> str:
    import json

    def strip(value: object) -> object:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if not any(word in k for word in ("time", "second"))}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    return json.dumps(strip(json.loads(text)), sort_keys=True)


def _outputs(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("samples.jsonl"))}


@pytest.mark.xdist_group("ray")
def test_two_models_on_ray_write_the_same_bytes_as_local(tmp_path: Path, ray_cluster: None) -> None:
    responder = tmp_path / "first.py"
    responder.write_text(RESPONDER, encoding="utf-8")
    args = ["run", "-d", str(CSQA), "-d", str(HUMAN_GEN), "--bootstrap", "100"]
    args += [
        "-m",
        "scripted/echo",
        "-m",
        f"scripted/{responder}:first",
        "--store",
        f"sqlite:///{tmp_path / 'store.db'}",
    ]
    local = runner.invoke(app, [*args, "--out", str(tmp_path / "local"), "--executor", "local"])
    assert local.exit_code == 0, local.output
    ray = runner.invoke(
        app, [*args, "--out", str(tmp_path / "ray"), "--executor", "ray", "--replicas", "2", "--no-cache"]
    )
    assert ray.exit_code == 0, ray.output
    samples = _outputs(tmp_path / "local")
    assert len(samples) == 4 and samples == _outputs(tmp_path / "ray")
    for results in (tmp_path / "local").rglob("results.json"):
        twin = tmp_path / "ray" / results.relative_to(tmp_path / "local")
        assert _timeless(results.read_text(encoding="utf-8")) == _timeless(twin.read_text(encoding="utf-8"))
    assert (tmp_path / "ray" / "leaderboard.json").is_file()


@pytest.mark.xdist_group("ray")
def test_more_models_than_the_cluster_holds_at_once_all_get_evaluated(tmp_path: Path, ray_cluster: None) -> None:
    """Three models of one CPU a replica on two CPUs: a model's replica goes once its model has no pair left, so the
    third model's replica starts then (kept to the end, they would hold the CPUs it waits for)."""
    models = ["scripted/echo"]
    for name in ("second", "third"):
        (tmp_path / f"{name}.py").write_text(RESPONDER, encoding="utf-8")
        models.append(f"scripted/{tmp_path / name}.py:first")
    store = f"sqlite:///{tmp_path / 'store.db'}"
    specs = {model: ModelSpec(model, {}, store, False) for model in models}
    pairs = pair_grid(models, [CSQA], tmp_path / "ray", lambda text: re.sub(r"[^A-Za-z0-9._-]+", "_", text))
    created: list[int] = []
    done = ray_pair_runner(specs, on_start=lambda actors: created.append(len(actors)))(
        pairs, PairSettings(config=EvalConfig(n_bootstrap=100))
    )
    assert [payload.model.name for payload, _ in done] == [pair.model for pair in pairs]
    assert created == [3]  # a replica per pair
    assert all((where / "samples.jsonl").is_file() for _, where in done)


@pytest.mark.xdist_group("ray")
def test_a_lost_actor_has_its_pair_redone(tmp_path: Path, ray_cluster: None) -> None:
    dying = tmp_path / "dying.py"
    dying.write_text(DYING, encoding="utf-8")
    model = f"scripted/{dying}:first"
    settings = PairSettings(config=EvalConfig(n_bootstrap=100))
    pairs = pair_grid([model], [CSQA], tmp_path / "ray", str)
    store = f"sqlite:///{tmp_path / 'store.db'}"
    runner_ = ray_pair_runner({model: ModelSpec(model, {}, store, False)})
    [(payload, where)] = runner_(pairs, settings)
    assert dying.with_suffix(".died").is_file()  # the actor did die once
    # the same evaluation in this process, once the responder no longer dies
    local = runner.invoke(
        app, ["run", "-d", str(CSQA), "-m", model, "--bootstrap", "100", "--out", str(tmp_path / "local")]
    )
    assert local.exit_code == 0, local.output
    assert (where / "samples.jsonl").read_bytes() == (tmp_path / "local" / "samples.jsonl").read_bytes()
    assert payload.model.name == model


@pytest.mark.xdist_group("ray")
def test_a_bad_dataset_is_the_same_one_line_error_as_local(tmp_path: Path, ray_cluster: None) -> None:
    bad = tmp_path / "empty.jsonl"
    bad.write_text("", encoding="utf-8")
    result = runner.invoke(app, ["run", "-d", str(bad), "-m", "scripted/echo", "--executor", "ray"])
    assert result.exit_code != 0
    assert isinstance(result.exception, ConfigError | ValueError), result.output


def test_replica_resources_follow_the_model_options() -> None:
    assert actor_resources(ModelSpec("llamacpp/x", {"n_threads": 3}))["num_cpus"] == 3
    resources = actor_resources(ModelSpec("hf/x", {"device": "cuda:0"}))
    assert resources["num_gpus"] == 1 and resources["num_cpus"] == 1
    with pytest.raises(ConfigError, match="n_threads"):
        actor_resources(ModelSpec("llamacpp/x", {"n_threads": 0}))


def test_an_unknown_executor_is_refused(tmp_path: Path) -> None:
    result = runner.invoke(app, ["run", "-d", str(CSQA), "-m", "scripted/echo", "--executor", "dask"])
    assert isinstance(result.exception, ConfigError) and "--executor" in str(result.exception)
    result = runner.invoke(app, ["run", "-d", str(CSQA), "-m", "scripted/echo", "--replicas", "2"])
    assert isinstance(result.exception, ConfigError) and "--replicas needs --executor ray" in str(result.exception)


@pytest.mark.slow
@pytest.mark.xdist_group("ray")
def test_the_bundled_model_on_ray_writes_the_same_bytes_as_local(tmp_path: Path, ray_cluster: None) -> None:
    args = ["run", "-d", str(CSQA), "-m", "llamacpp/gemma-3-270m", "-o", "n_threads=1", "--bootstrap", "100"]
    args += ["--no-cache", "--store", f"sqlite:///{tmp_path / 'store.db'}"]
    local = runner.invoke(app, [*args, "--out", str(tmp_path / "local")])
    assert local.exit_code == 0, local.output
    ray = runner.invoke(app, [*args, "--out", str(tmp_path / "ray"), "--executor", "ray"])
    assert ray.exit_code == 0, ray.output
    assert (tmp_path / "local" / "samples.jsonl").read_bytes() == (tmp_path / "ray" / "samples.jsonl").read_bytes()
