"""``RunFolder.open``: a run folder's manifest, funnel and cost read and validated in one call; a file missing is
``None``, one that is there but wrong is an error naming it; a funnel in the typed form reads back as written."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from senseforge.errors import ConfigError
from senseforge.runfolder import files
from senseforge.runfolder.folder import RunFolder

GOLDEN = Path(__file__).parents[1] / "fixtures" / "golden"


def test_a_folder_without_run_files_is_no_run_folder(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not a run folder"):
        RunFolder.open(tmp_path)


def test_the_golden_culture_run_with_its_cost_and_a_language_s_cost() -> None:
    run = RunFolder.open(GOLDEN / "demo" / "culture-gen")
    assert run.manifest is None and run.recipe == "culture-gen" and run.finished
    assert run.cost is not None and run.cost.kept == 0 and run.cost.stages["generate"].calls > 0
    own = json.loads((GOLDEN / "demo" / "culture-gen" / "id" / files.COST).read_text(encoding="utf-8"))
    cost = run.group_cost("id")
    assert (
        cost is not None
        and cost.lang == "id"
        and cost.stages["generate"].tokens_in == own["stages"]["generate"]["tokens_in"]
    )
    assert run.group_cost("xx") is None


def test_a_typed_funnel_reads_back_as_written(tmp_path: Path) -> None:
    old = RunFolder.open(GOLDEN / "demo" / "crow").funnel
    assert old is not None
    (tmp_path / files.FUNNEL).write_text(
        json.dumps(old.model_dump(mode="json", by_alias=True), indent=2), encoding="utf-8"
    )
    again = RunFolder.open(tmp_path).funnel
    assert again == old and again is not None and again.format == 2


@pytest.mark.parametrize(
    ("name", "text", "where"),
    [
        (files.MANIFEST, '{"recipe": ["mcsqa"]}', r"manifest\.json: recipe: "),
        (files.MANIFEST, "{", r"manifest\.json: not JSON"),
        (files.COST, '{"stages": {}, "human": {"judgements": "x"}}', r"cost\.json: human\.judgements: "),
        (files.FUNNEL, '{"format": 2, "recipe": "x", "stages": [], "kept": "many"}', r"funnel\.json: kept: "),
    ],
)
def test_a_file_of_the_wrong_shape_is_an_error_naming_it_and_the_place(
    tmp_path: Path, name: str, text: str, where: str
) -> None:
    shutil.copy(GOLDEN / "paused" / "mcsqa-en-awaiting" / files.MANIFEST, tmp_path / files.MANIFEST)
    (tmp_path / name).write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match=where):
        RunFolder.open(tmp_path)
