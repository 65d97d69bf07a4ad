"""``senseforge report``: one page over runs, evaluations, a transfer study and analyses, with the papers' figures.

Everything is read from the files the other commands write — a run's ``manifest.json``, ``funnel.json``
and ``cost.json``, every ``results.json`` (under a run's ``eval/`` or given with ``--eval``), a transfer
study's ``transfer.json``, the analyses' figures — plus, when the caller gives them, the judgements of each
run's store (for the review agreement). The page opens with an overview (every run; every model × dataset ×
language with its interval; figures across languages and across models), then each run with the figures of
its recipe's paper and the evaluations filed under it (:mod:`.inputs`), evaluations of other data, the
transfer study and the analyses, and a leaderboard.

Every figure is drawn at print size with matplotlib (:mod:`.figures`), shown in the page, captioned, and
written as SVG and PDF into ``<page stem>_figures/`` beside the page, linked under it. The page itself needs
nothing else to show (figures are embedded) and makes no request; it reads at 1280 px and on a phone.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from pathlib import Path

from senseforge.data.io import atomic_open
from senseforge.evaluate.html_report import common, evaluations, overview, sections
from senseforge.evaluate.html_report.figures import Figures
from senseforge.evaluate.html_report.inputs import (
    Evaluation,
    Judged,
    Run,
    file_evaluations,
    folder_kind,
    read_runs,
    sort_inputs,
)

__all__ = ["Judged", "build_report", "folder_kind", "sort_inputs", "write_report"]

_STYLE = """*{box-sizing:border-box}body{font:16px/1.45 system-ui,sans-serif;max-width:62rem;margin:1rem auto;
padding:0 1rem;color:#222}h1,h2,h3,h4{font-weight:600;line-height:1.2}h2{border-top:1px solid #ddd;padding-top:1rem;
margin-top:2rem}nav a{margin-right:.8rem}.scroll{overflow-x:auto;max-width:100%}table{border-collapse:collapse;
margin:.5rem 0 1rem;font-size:.9rem}td,th{border:1px solid #ccc;padding:.2rem .5rem;text-align:right}
th:first-child,td:first-child{text-align:left}figure{margin:1rem 0 1.5rem}figure img{display:block;max-width:100%;
height:auto}figcaption{font-size:.95rem;margin:.4rem 0;max-width:46rem}.dl{white-space:nowrap;margin-left:.4rem}
details{margin:.3rem 0}summary{cursor:pointer;color:#345}p.none{color:#777;font-style:italic}
p.note{background:#fff6e0;border-left:4px solid #e0a030;padding:.4rem .7rem}code{font-size:.85em;word-break:break-all}
@media (max-width:40rem){body{font-size:15px;padding:0 .5rem}td,th{padding:.15rem .3rem}}"""


def figures_folder(page: Path) -> Path:
    """Where the page's figures go: ``<page stem>_figures/`` beside it."""
    return page.with_name(f"{page.stem}_figures")


def _leaderboard(runs: Sequence[Run], unfiled: Sequence[Evaluation]) -> str:
    rows = []
    for dataset, evaluation in [(r.heading, ev) for r in runs for ev in r.evaluations] + [
        (ev.results.data.name, ev) for ev in unfiled
    ]:
        for task, metrics in evaluation.results.results.items():
            key = "crow_score_macro_f1" if task == "crow" else ("macro_f1" if evaluation.kind == "binary" else "acc")
            values = metrics.to_json()
            rows.append((evaluation.label, dataset, task, key, common.metric(values, key), common.ci_text(values, key)))
    if not rows:
        return ""
    return "<h2 id=leaderboard>Leaderboard</h2>" + common.table(
        ("model · setting · n", "dataset", "task", "metric", "value", "95% CI"), rows, digits=4
    )


def build_report(
    runs: Sequence[Path],
    *,
    evals: Sequence[Path] = (),
    transfer: Path | None = None,
    analyses: Sequence[Path] = (),
    judgements: Mapping[Path, Sequence[Judged]] | None = None,
    figures_name: str = "report_figures",
) -> tuple[str, Figures]:
    """The page's HTML and its figures.

    Raises:
        ConfigError: a run folder that does not exist.
    """
    read = read_runs(runs, judgements)
    unfiled = file_evaluations(read, evals)
    figures = Figures()
    body = [overview.overview(read, unfiled, figures)]
    body += [sections.run_section(run, figures) for run in read]
    body.append(evaluations.unfiled_part(unfiled, figures))
    body.append(sections.transfer_section(transfer, figures))
    body.append(sections.analyses_section(analyses, figures))
    body.append(_leaderboard(read, unfiled))
    links = ['<a href="#overview">overview</a>']
    links += [f'<a href="#{common.anchor(run)}">{html.escape(run.heading)}</a>' for run in read]
    links += ['<a href="#other-data">other data</a>'] if unfiled else []
    links += ['<a href="#transfer">transfer</a>'] if transfer is not None else []
    links += ['<a href="#analyses">analyses</a>'] if analyses else []
    text = "\n".join(
        [
            '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>senseforge report</title><style>{_STYLE}</style></head><body>",
            "<h1>senseforge report</h1>",
            f"<nav>{''.join(links)}</nav>",
            *body,
            "</body></html>",
        ]
    )
    return text.replace(common.FOLDER_TOKEN, html.escape(figures_name)), figures


def write_report(
    path: Path,
    runs: Sequence[Path],
    *,
    evals: Sequence[Path] = (),
    transfer: Path | None = None,
    analyses: Sequence[Path] = (),
    judgements: Mapping[Path, Sequence[Judged]] | None = None,
) -> Path:
    """Write the page and its figures folder (each file atomically; the page last; figures an earlier page left
    there and this one has not are removed); the page's path."""
    folder = figures_folder(path)
    text, figures = build_report(
        runs, evals=evals, transfer=transfer, analyses=analyses, judgements=judgements, figures_name=folder.name
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    written = set(figures.write(folder))
    for stale in [*folder.glob("fig*.svg"), *folder.glob("fig*.pdf")]:
        if stale not in written:
            stale.unlink()
    with atomic_open(path) as handle:
        handle.write(text)
    return path
