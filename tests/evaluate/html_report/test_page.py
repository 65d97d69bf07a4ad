"""``senseforge report`` over the demo's runs, a human-gen run and evaluations in and out of them: every evaluation
under the dataset it evaluated, the papers' figures per recipe with captions and SVG/PDF files, labels of 9 pt or
more, the circularity note, a page chromium shows at 1280 px and on a phone without asking for anything."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("matplotlib")

from senseforge.data.text import money
from senseforge.evaluate.html_report import write_report
from senseforge.evaluate.html_report.figures import MIN_FONT_PT

from .conftest import Inputs


def write_all(inputs: Inputs, page: Path) -> Path:
    return write_report(
        page,
        inputs.runs,
        evals=inputs.evals,
        transfer=inputs.transfer,
        analyses=inputs.analyses,
        judgements=inputs.judgements,
    )


@pytest.fixture(scope="module")
def written(inputs: Inputs, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The page over everything (tests only read it)."""
    return write_all(inputs, tmp_path_factory.mktemp("out") / "report.html")


def sections(text: str) -> dict[str, str]:
    """Heading → the HTML of that run's section (and ``other data``)."""
    out = {}
    for match in re.finditer(r'<section id="[^"]+"><h2>([^<]+)</h2>(.*?)</section>', text, flags=re.S):
        out[match.group(1)] = match.group(2)
    return out


def figure_ids(html: str) -> list[str]:
    return re.findall(r'<figure id="(fig\d\d-[^"]+)"', html)


def label(results: Path) -> str:
    from senseforge.evaluate.records import EvalResults

    return EvalResults.model_validate_json(results.read_text(encoding="utf-8")).label()


def test_every_evaluation_is_filed_under_the_dataset_it_evaluated(inputs: Inputs, written: Path) -> None:
    parts = sections(written.read_text(encoding="utf-8"))
    assert set(parts) == {
        "runs/mcsqa-en",
        "second/mcsqa-en",  # two runs of one name: headings tell them apart
        "mcsqa-ja",
        "culture-gen",
        "culture-adapt",
        "crow",
        "human-gen",
        "Evaluations of other data",
    }
    en, ja = parts["runs/mcsqa-en"], parts["mcsqa-ja"]
    # in the run's eval/ folder, and by its path from another folder, and by its items' digest after the move
    # (both demo runs keep 7 questions: en's three evaluations are filed under en, ja's one under ja)
    evaluated = "scripted/echo · loglik · n=7"
    assert en.count(evaluated) >= 2 and 0 < ja.count(evaluated) < en.count(evaluated)
    assert "scripted/echo · binary/loglik" in parts["crow"]
    assert "No evaluations yet" in parts["second/mcsqa-en"] and "No evaluations yet" in parts["culture-gen"]
    other = parts["Evaluations of other data"]
    assert label(inputs.results["other"]) in other and "test_sample" in other
    assert all(
        label(inputs.results["other"]) not in parts[name] for name in parts if name != "Evaluations of other data"
    )


def test_the_papers_figures_per_recipe_each_with_caption_svg_and_pdf(written: Path) -> None:
    text = written.read_text(encoding="utf-8")
    parts = sections(text)
    wanted = {
        "runs/mcsqa-en": {"funnel", "cost", "refined", "verify", "splits", "accuracy"},
        "mcsqa-ja": {"funnel", "cost", "refined", "verify", "splits", "accuracy"},
        "culture-gen": {"funnel", "cost", "per-language", "id-categories", "su-categories"},
        "culture-adapt": {"funnel", "cost", "per-language", "adapted"},
        "crow": {"funnel", "cost", "tasks", "dimensions", "binary-loglik"},
        "human-gen": {"funnel", "people", "qc", "answers", "agreement"},
    }
    for heading, kinds in wanted.items():
        ids = " ".join(figure_ids(parts[heading]))
        for kind in kinds:
            assert f"-{kind}" in ids, (heading, kind, ids)
    overview = text.split('<section id="', 1)[0]
    for kind in ("mcsqa-easy-hard-per-language", "cross-language", "cross-model-mc", "cross-model-binary"):
        assert kind in " ".join(figure_ids(overview)), kind
    assert "transfer-heatmap" in text and "Table 7 · total" in text and "fig" in text and "-lexical" in text

    folder = written.with_name("report_figures")
    figures = re.findall(r'<figure id="([^"]+)">(.*?)</figure>', text, flags=re.S)
    assert len(figures) >= 35
    numbers = [int(re.search(r"<b>Figure (\d+)\.</b>", body).group(1)) for _, body in figures]  # type: ignore[union-attr]
    assert numbers == list(range(1, len(figures) + 1))
    for name, body in figures:
        caption = re.search(r"<figcaption><b>Figure \d+\.</b> (.*?) <span", body, flags=re.S)
        assert caption and len(caption.group(1)) > 20, name
        assert f'href="report_figures/{name}.svg"' in body and f'href="report_figures/{name}.pdf"' in body, name
        svg = (folder / f"{name}.svg").read_text(encoding="utf-8")
        assert (folder / f"{name}.pdf").read_bytes().startswith(b"%PDF"), name
        sizes = [float(size) for size in re.findall(r"font-size: ([\d.]+)px", svg)]
        assert sizes and min(sizes) >= MIN_FONT_PT, (name, sorted(set(sizes)))
    assert sorted(p.stem for p in folder.glob("*.svg")) == sorted(name for name, _ in figures)


def test_the_page_holds_the_numbers_of_the_files(inputs: Inputs, written: Path) -> None:
    parts = sections(written.read_text(encoding="utf-8"))
    crow = inputs.runs[4]
    for row in json.loads((crow / "funnel.json").read_text())["stages"]:
        assert f"<td>{row['stage']}</td><td>{row['in']}</td><td>{row['out']}</td>" in parts["crow"], row
    cost = json.loads((crow / "cost.json").read_text())
    assert f"total {money(cost['total_usd'])} · " in parts["crow"]
    assert "tokens, since no stage has a known price above zero" in parts["crow"]  # a free model: tokens drawn
    results = json.loads(inputs.results["crow"].read_text())["results"]
    assert f"Macro-F1 {results['crow']['crow_score_macro_f1,none']:.4f}" in parts["crow"]
    task = next(t for t in results if t != "crow")
    f1, sa = results[task]["macro_f1,none"], results[task]["situational_acc,none"]
    assert f"<td>{task}</td><td>{f1:.3f}</td><td>{sa:.3f}</td>" in parts["crow"]
    assert "<td>test</td><td>0.875</td><td>8</td><td>[0.750, 1.000]</td>" in parts["mcsqa-ja"]  # human baseline
    text = written.read_text(encoding="utf-8")
    row = json.loads((inputs.transfer / "transfer.json").read_text())["subsets"]["total"]["table7"][0]
    assert f"<td>{row['lang']}</td><td>{row['mono']:.3f}</td>" in text and "Leaderboard" in text


def test_the_circularity_note_where_the_evaluated_model_verified_the_items(written: Path) -> None:
    parts = sections(written.read_text(encoding="utf-8"))
    assert "also verified these items" in parts["runs/mcsqa-en"]  # scripted/echo built and is evaluated
    assert "also verified these items" not in parts["mcsqa-ja"]  # built with another model


def test_the_overview_lists_every_run_and_every_model_dataset_language(inputs: Inputs, written: Path) -> None:
    text = written.read_text(encoding="utf-8")
    overview = text.split('<section id="', 1)[0]
    for heading in ("runs/mcsqa-en", "second/mcsqa-en", "mcsqa-ja", "culture-gen", "crow", "human-gen"):
        assert f">{heading}</a>" in overview, heading
    en = json.loads(inputs.results["en"].read_text(encoding="utf-8"))
    acc = en["breakdowns"]["lang"]["en"]["acc,none"]
    low, high = en["breakdowns"]["lang"]["en"]["acc_ci95,none"]
    row = f"<td>scripted/echo · loglik</td><td>runs/mcsqa-en</td><td>en</td><td>7</td><td>acc</td><td>{acc:.3f}</td>"
    assert row + f"<td>[{low:.3f}, {high:.3f}]</td>" in overview
    human = re.search(r">human-gen</a></td>(<td>[^<]*</td>){7}<td>([^<]*)</td>", overview)
    assert human and human.group(2) == "1.000"  # people wrote every item


def test_a_fresh_run_gets_its_page_with_the_empty_sections_named(tmp_path: Path) -> None:
    run = tmp_path / "fresh"
    run.mkdir()
    (run / "manifest.json").write_text(json.dumps({"recipe": "mcsqa", "models": {}}), encoding="utf-8")
    text = write_report(run / "report.html", [run]).read_text(encoding="utf-8")
    assert "No funnel yet" in text and "No evaluations yet" in text and "No cost yet" in text


def test_a_gated_run_says_what_it_was_checked_against_and_what_was_rejected(tmp_path: Path) -> None:
    run = tmp_path / "gated"
    run.mkdir()
    gate = {"mode": "reject", "checked_against": [{"name": "csqa-dev", "items": 1221, "licence": "MIT"}]}
    (run / "manifest.json").write_text(json.dumps({"recipe": "mcsqa", "models": {}, "contamination": gate}))
    stages = [{"stage": "contamination", "in": 30, "out": 27, "rejected": {"contaminated": 2, "near_duplicate": 1}}]
    (run / "funnel.json").write_text(json.dumps({"stages": stages, "kept": 20}))
    text = write_report(run / "report.html", [run]).read_text(encoding="utf-8")
    assert "<h3>Contamination</h3>" in text and "<td>csqa-dev</td><td>1221</td><td>MIT</td>" in text
    assert (
        "copies rejected; cross-lingual matches flagged · 30 items checked, rejected: contaminated 2, near_duplicate 1"
        in text
    )
    stages.append({"stage": "self_duplicates", "in": 20, "out": 19, "rejected": {"cross_split": 1}})
    (run / "funnel.json").write_text(json.dumps({"stages": stages, "kept": 19}))
    text = write_report(run / "report.html", [run]).read_text(encoding="utf-8")
    assert "; 20 kept items checked against each other, rejected: cross_split 1" in text
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "manifest.json").write_text(json.dumps({"recipe": "mcsqa", "models": {}}))
    assert "Contamination" not in write_report(plain / "report.html", [plain]).read_text(encoding="utf-8")


def test_a_second_page_leaves_no_figure_of_the_first(inputs: Inputs, tmp_path: Path) -> None:
    page = write_all(inputs, tmp_path / "report.html")
    folder = page.with_name("report_figures")
    assert len(list(folder.glob("*.pdf"))) > 10
    write_report(page, inputs.runs[:1])
    text = page.read_text(encoding="utf-8")
    assert sorted(p.stem for p in folder.glob("*.svg")) == sorted(figure_ids(text))


@pytest.mark.browser
@pytest.mark.parametrize("width", [1280, 390])
def test_chromium_shows_every_figure_and_the_page_asks_for_nothing(written: Path, chromium: Any, width: int) -> None:
    view = chromium.new_page(viewport={"width": width, "height": 900})
    try:
        asked: list[str] = []
        view.on("request", lambda request: asked.append(request.url))
        view.goto(written.as_uri())
        view.wait_for_load_state("load")
        shown = view.evaluate(
            "Array.from(document.querySelectorAll('figure')).map((f) => { const img = f.querySelector('img');"
            " const box = img.getBoundingClientRect(); const cap = f.querySelector('figcaption');"
            " return [img.complete && img.naturalWidth > 0, box.width, cap.innerText, box.right]; })"
        )
        assert len(shown) >= 35
        for loaded, drawn, caption, right in shown:
            assert loaded and drawn > 0.5 * min(width, 600) and right <= width + 1, (loaded, drawn, right)
            assert caption.startswith("Figure ") and "SVG" in caption and "PDF" in caption
        # nothing wider than the window: long tables scroll inside their own box
        assert view.evaluate("document.documentElement.scrollWidth") <= width
        assert all(url.startswith(("file:", "data:")) for url in asked), asked
        view.screenshot(path=str(written.with_name(f"report-{width}.png")), full_page=True)
    finally:
        view.close()
