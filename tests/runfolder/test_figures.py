"""The figure kinds print themselves as plain lines and read back from JSON by their ``kind``."""

from __future__ import annotations

from pydantic import TypeAdapter

from senseforge.runfolder.figures import Agreement, Counts, Figure, Rated, Share, Table


def test_each_kind_prints_its_numbers() -> None:
    assert Counts(name="v", title="Verification", values={"easy": 2, "to_review": 7}).lines() == [
        "Verification: easy 2 · to_review 7"
    ]
    assert Counts(name="v", title="Empty", values={}).lines() == ["Empty: none"]
    share = Share(
        name="r", title="Refinement", part=9, whole=42, part_label="changed", rest_label="unchanged", unit="questions"
    )
    assert share.lines() == ["Refinement: 9 of 42 questions changed (21.4%)"] and share.fraction == 9 / 42
    assert Share(name="r", title="R", part=0, whole=0, part_label="changed", rest_label="x").fraction is None
    table = Table(
        name="s", title="Splits", rows=["train", "test"], columns=["Easy", "Hard"], values=[[3, 7], [0, None]]
    )
    assert table.lines() == ["Splits:", "  train: Easy 3 · Hard 7", "  test: Easy 0 · Hard –"]
    assert table.column("Hard") == [7, None]
    rated = Rated(label="answerers", items=8, fleiss_kappa=-0.17647, krippendorff_alpha=None, extra={"excluded": 1})
    assert Agreement(name="a", title="Agreement", groups=[rated]).lines() == [
        "Agreement:",
        "  answerers: Fleiss κ -0.176 · Krippendorff α – (8 items) · excluded 1",
    ]


def test_a_figure_reads_back_by_its_kind() -> None:
    figures = [
        Counts(name="c", title="C", values={"a": 1}, draw=False),
        Share(name="s", title="S", part=1, whole=2, part_label="p", rest_label="r"),
        Table(name="t", title="T", rows=["r"], columns=["c"], values=[[1.5]], stacked=True),
        Agreement(name="a", title="A", groups=[Rated(label="g", items=2, raters=3)]),
    ]
    adapter: TypeAdapter[list[Figure]] = TypeAdapter(list[Figure])
    assert adapter.validate_json(adapter.dump_json(figures)) == figures
