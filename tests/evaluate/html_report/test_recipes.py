"""A run's section: calls answered through an API's Batch API are marked as such in its cost part, and a run reads
the same from a funnel of the form before the typed one as from the typed one."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

from senseforge.evaluate.html_report import write_report


def _cost_part(run: Path, stages: dict[str, dict[str, object]]) -> str:
    run.mkdir()
    (run / "manifest.json").write_text(json.dumps({"recipe": "mcsqa", "models": {}}))
    cost = {"stages": stages, "human": {"judgements": 0}, "total_usd": 0.0003, "kept": 3}
    (run / "cost.json").write_text(json.dumps(cost))
    text = write_report(run / "report.html", [run]).read_text(encoding="utf-8")
    found = re.search(r"<h3>Cost</h3>(.*?)(<h3>|</section>)", text, flags=re.S)
    assert found is not None
    return found.group(1)


def _stage(calls: int, batched: int | None = None) -> dict[str, object]:
    stage: dict[str, object] = {"models": ["openai/m"], "calls": calls, "tokens_in": 10, "tokens_out": 5}
    stage["cost_usd"] = 0.0001
    if batched is not None:
        stage["batched_calls"] = batched
    return stage


def test_batch_calls_are_marked_beside_the_stage_and_in_the_caption(tmp_path: Path) -> None:
    part = _cost_part(tmp_path / "batched", {"generate": _stage(18, 18), "verify": _stage(18, 6), "check": _stage(4)})
    assert "<td>generate</td><td>18 batch</td>" in part
    assert "<td>verify</td><td>18 (6 batch)</td>" in part
    assert "<td>check</td><td>4</td>" in part
    assert "calls marked batch went through the API&#x27;s Batch API, at its price" in part


def test_a_run_without_batch_calls_marks_none(tmp_path: Path) -> None:
    part = _cost_part(tmp_path / "online", {"generate": _stage(18), "verify": _stage(18)})
    assert "<td>generate</td><td>18</td>" in part and "batch" not in part.lower()


@pytest.mark.parametrize("golden", ["crow-people", "culture-gen-lm-review", "human-gen-people"])
def test_a_run_reads_the_same_from_its_old_funnel_and_from_the_typed_form(tmp_path: Path, golden: str) -> None:
    """A run written before the typed funnel and the same run in the typed form give the same section: every
    figure, caption and number is drawn from the declared figures, whichever form declared them."""
    from senseforge.evaluate.html_report import build_report
    from senseforge.runfolder.folder import RunFolder

    source = Path(__file__).parents[2] / "fixtures" / "golden" / golden
    old, typed = tmp_path / "old" / "run", tmp_path / "typed" / "run"
    shutil.copytree(source, old)
    shutil.copytree(source, typed)
    funnel = RunFolder.open(old).funnel
    assert funnel is not None and funnel.figures
    document = funnel.model_dump(mode="json", by_alias=True)
    (typed / "funnel.json").write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    old_page, old_figures = build_report([old])
    typed_page, typed_figures = build_report([typed])
    assert [d.name for d in old_figures.drawn] == [d.name for d in typed_figures.drawn]
    assert [d.caption for d in old_figures.drawn] == [d.caption for d in typed_figures.drawn]
    assert old_page.replace(str(old), "RUN") == typed_page.replace(str(typed), "RUN")
    for figure in funnel.figures:
        if figure.draw:
            assert f"-{figure.name}" in " ".join(d.name for d in old_figures.drawn), figure.name
