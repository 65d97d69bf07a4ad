"""The engine's end of a run: a recipe's declared release (:mod:`.release`) written, and its funnel made.

For every recipe alike: the kept records read (typed), made items, grouped and split; ``dataset/<split>.jsonl``
(released rows) and ``items/<split>.jsonl`` (full items) per group folder or for the run; each group's
``funnel.json`` (its :class:`~senseforge.runfolder.funnel.Group`) and, where declared, its ``cost.json``; and the
run's :class:`~senseforge.runfolder.funnel.Funnel`, with the release's figures. The runner writes the run's own
``funnel.json``, ``cost.json`` and ``rejects.jsonl`` beside them. Everything comes from the run store, so a resumed
run writes the same bytes as an uninterrupted one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from senseforge.data.schema import MCItem
from senseforge.llm.prices import PriceTable
from senseforge.pipelines.recheck import RECHECK, REJECTED_ON_RECHECK, recheck_reject, rejected_on_recheck
from senseforge.pipelines.release import AnyRelease, Finished, OwnFiles, Release
from senseforge.pipelines.report import (
    cost_by,
    funnel_rows_by,
    shown_checked,
    shown_question,
    write_json,
    write_splits,
)
from senseforge.pipelines.runstore import RunStore, StageResult
from senseforge.runfolder import files
from senseforge.runfolder.funnel import Funnel, Group, StageRow, summed_splits


@dataclass(frozen=True)
class Released:
    """What the release wrote: the run's funnel, and the ``rejects.jsonl`` rows of the items people rejected on a
    re-check (none without one)."""

    funnel: Funnel
    rechecked: list[dict[str, Any]] = field(default_factory=list)


def release(
    declared: AnyRelease,
    recipe: str,
    run: RunStore,
    run_dir: Path,
    rows: list[StageRow],
    *,
    splitting: frozenset[str],
    facts: Mapping[str, Any],
    human_rate: float | Mapping[str, float] | None = None,
    prices: PriceTable | None = None,
) -> Released:
    """Write what ``declared`` releases under ``run_dir``; the run's funnel (``rows``: its stage rows) and the
    rejects of its re-checks."""
    if isinstance(declared, OwnFiles):
        return _own_files(declared, recipe, run, run_dir, rows, splitting, facts, human_rate, prices)
    return _items(declared, recipe, run, run_dir, rows, splitting, facts, prices)


def _items(
    declared: Release[Any],
    recipe: str,
    run: RunStore,
    run_dir: Path,
    rows: list[StageRow],
    splitting: frozenset[str],
    facts: Mapping[str, Any],
    prices: PriceTable | None,
) -> Released:
    kept = sorted(run.results(declared.kept, "ok", declared.record), key=lambda r: r.record_id)
    names: Sequence[str | None] = list(declared.groups) or [None]
    made: dict[str | None, list[tuple[StageResult[Any], MCItem]]] = {
        group: [
            (record, declared.item(record, group))
            for record in kept
            if group is None or declared.group_of is None or declared.group_of(record) == group
        ]
        for group in names
    }
    splits = {group: declared.split.cut(pairs) for group, pairs in made.items()}
    dropped = rejected_on_recheck(run)
    had = {group: len(pairs) for group, pairs in made.items()}
    rechecked: dict[tuple[str, str], dict[str, Any]] = {}
    if dropped:  # after the splits were drawn over every kept record: the other items keep theirs
        removed = {record.record_id for pairs in made.values() for record, item in pairs if item.id in dropped}
        for pairs in made.values():
            for record, item in pairs:
                if item.id in dropped:
                    shown = {"question": shown_question(record), "checked": shown_checked(record)}
                    rechecked[(record.record_id, item.id)] = recheck_reject(
                        record.record_id, item.id, dropped[item.id], shown
                    )
        made = {group: [(r, i) for r, i in pairs if i.id not in dropped] for group, pairs in made.items()}
        splits = {
            group: {name: [i for i in items if i.id not in dropped] for name, items in cut.items()}
            for group, cut in splits.items()
        }
        recheck_row = StageRow(
            stage=RECHECK, in_=len(kept), out=len(kept) - len(removed), rejected={REJECTED_ON_RECHECK: len(removed)}
        )
        rows = [*rows, recheck_row]
        kept = [record for record in kept if record.record_id not in removed]
    for group, pairs in made.items():
        folder = run_dir / (group if group is not None and declared.folders else declared.folder)
        write_splits(folder, splits[group], _released(declared, pairs))
    done = Finished(
        run=run,
        facts=facts,
        stages=rows,
        kept=kept,
        items={group: [item for _, item in pairs] for group, pairs in made.items()},
        splits=splits,
        group_of=declared.group_of,
    )
    stage_names = [row.stage for row in rows]
    by_group = (
        funnel_rows_by(run, stage_names, declared.group_of, declared.record, splitting, declared.groups)
        if declared.group_of is not None
        else {group: rows for group in declared.groups}
    )
    if dropped and declared.group_of is not None:  # each group's own re-check row
        by_group = {
            group: [
                *group_rows,
                StageRow(
                    stage=RECHECK,
                    in_=had[group],
                    out=len(made[group]),
                    rejected={REJECTED_ON_RECHECK: had[group] - len(made[group])},
                ),
            ]
            for group, group_rows in by_group.items()
        }
    groups = [
        Group(
            name=group,
            stages=by_group[group],
            kept=len(made[group]),
            splits={split: len(items) for split, items in splits[group].items()},
            folder=group if declared.folders else None,
            figures=declared.group_figures(done, group),
        )
        for group in declared.groups
    ]
    if declared.group_cost and declared.group_of is not None:
        costs = cost_by(
            run,
            stage_names,
            declared.group_of,
            kept={group: len(made[group]) for group in declared.groups},
            langs=declared.group_by == "lang",
            prices=prices,
            kept_unit=declared.kept_unit,
            record_model=declared.record,
        )
        for group in declared.groups:
            write_json(run_dir / group / files.COST, costs[group])
    if declared.folders:
        for row in groups:
            write_json(run_dir / str(row.folder) / files.FUNNEL, row)
    funnel = Funnel(
        recipe=recipe,
        lang=declared.lang,
        title=declared.title,
        cost_title=declared.cost_title,
        kept_unit=declared.kept_unit,
        group_by=declared.group_by,
        stages=rows,
        kept=len(kept),
        splits=summed_splits(groups) if declared.groups else {name: len(items) for name, items in splits[None].items()},
        datasets=declared.datasets(),
        groups=groups,
        groups_title=declared.groups_title,
        figures=declared.figures(done),
        judges_in_figures=declared.judges_in_figures,
    )
    return Released(funnel, [rechecked[key] for key in sorted(rechecked)])


def _released(
    declared: Release[Any], pairs: Sequence[tuple[StageResult[Any], MCItem]]
) -> Callable[[MCItem], Mapping[str, Any]]:
    """The released row of an item of ``pairs``, made from its record."""
    of = {item.id: record for record, item in pairs}
    return lambda item: declared.row(of[item.id], item)


def _own_files(
    declared: OwnFiles[Any, Any],
    recipe: str,
    run: RunStore,
    run_dir: Path,
    rows: list[StageRow],
    splitting: frozenset[str],
    facts: Mapping[str, Any],
    human_rate: float | Mapping[str, float] | None,
    prices: PriceTable | None,
) -> Released:
    dropped = rejected_on_recheck(run)
    written = declared.write(run, run_dir, facts, frozenset(dropped))
    kept = dict(declared.kept(written))
    stage_names = [row.stage for row in rows]
    by_group = funnel_rows_by(run, stage_names, declared.group_of, declared.record, splitting, list(kept))
    removed = declared.rechecked(written) if dropped else {}
    rechecked: list[dict[str, Any]] = []
    if dropped:  # the release left them out; the funnel says so, run and groups alike
        out = sum(kept.values())
        gone = sum(len(items) for items in removed.values())
        rows = [*rows, StageRow(stage=RECHECK, in_=out + gone, out=out, rejected={REJECTED_ON_RECHECK: gone})]
        for group, n in kept.items():
            left = len(removed.get(group, {}))
            row = StageRow(stage=RECHECK, in_=n + left, out=n, rejected={REJECTED_ON_RECHECK: left})
            by_group[group] = [*by_group[group], row]
        for items in removed.values():
            for item_id, shown in sorted(items.items()):
                rechecked.append(
                    recheck_reject(item_id, item_id, dropped[item_id], {"question": None, "checked": dict(shown)})
                )
    costs = cost_by(
        run,
        stage_names,
        declared.group_of,
        kept=kept,
        human_judgements={group: declared.judgements(run, group) for group in kept},
        human_rate=human_rate,
        prices=prices,
        kept_unit=declared.kept_unit,
        record_model=declared.record,
    )
    write_json(run_dir / declared.cost_file, costs)
    funnel = Funnel(
        recipe=recipe,
        title=declared.title,
        cost_title=declared.cost_title,
        kept_unit=declared.kept_unit,
        group_by=declared.group_by,
        stages=rows,
        kept=sum(kept.values()),
        groups=[
            Group(
                name=group,
                stages=[row for row in by_group[group] if row.stage == RECHECK or declared.shown(group, row.stage)],
                kept=n,
                figures=declared.group_figures(run, written, group),
            )
            for group, n in kept.items()
        ],
        figures=declared.figures(run, written),
        judges_in_figures=declared.judges_in_figures,
    )
    return Released(funnel, rechecked)
