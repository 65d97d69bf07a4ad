"""Progress off a terminal: plain lines on stderr, spaced by time, never a live bar's control codes."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from senseforge.cli import _common
from senseforge.cli._common import PlainProgress, progress_bar, stage_progress
from senseforge.pipelines.progress import StageProgress


class FakeClock:
    """Seconds that move only when a test says so."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def stderr(monkeypatch: pytest.MonkeyPatch) -> io.StringIO:
    """What the CLI writes to stderr, through a console that is not a terminal (a pipe, a log)."""
    buffer = io.StringIO()
    monkeypatch.setattr(_common, "err", Console(file=buffer, force_terminal=False, highlight=False, soft_wrap=True))
    return buffer


def test_plain_lines_come_at_most_once_per_interval_and_at_the_end(stderr: io.StringIO) -> None:
    clock = FakeClock()
    progress = PlainProgress("evaluating m on d", 300, every_s=10.0, clock=clock)
    progress.advance(50)  # no time has passed: no line
    clock.now += 9.9
    progress.advance(10)
    assert stderr.getvalue() == ""
    clock.now += 60.1  # 70 s in
    progress.advance(60)
    clock.now += 1.0
    progress.advance(30)  # too soon after the last line
    clock.now += 20.0
    progress.advance(150)
    progress.finish()
    assert stderr.getvalue().splitlines() == [
        "evaluating m on d: 120/300 (40%) 0:01:10",
        "evaluating m on d: 300/300 (100%) 0:01:31",
        "evaluating m on d: 300/300 (100%) 0:01:31",
    ]


def test_an_unknown_total_counts_without_a_percentage(stderr: io.StringIO) -> None:
    clock = FakeClock()
    progress = PlainProgress("evaluating m on d", None, every_s=10.0, clock=clock)
    progress.advance(1_200)
    clock.now += 3_725.0
    progress.finish()
    assert stderr.getvalue() == "evaluating m on d: 1,200 done 1:02:05\n"


def test_nothing_done_prints_nothing(stderr: io.StringIO) -> None:
    PlainProgress("scoring", 10, clock=FakeClock()).finish()
    assert stderr.getvalue() == ""


def test_progress_bar_off_a_terminal_prints_plain_lines(stderr: io.StringIO, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_common, "PLAIN_PROGRESS_EVERY_S", 0.0)  # a line for every step, without waiting
    with progress_bar("generating with m", 4) as advance:
        for _ in range(4):
            advance(1)
    lines = stderr.getvalue().splitlines()
    assert [line.split(" 0:")[0] for line in lines] == [
        "generating with m: 0/4 (0%)",  # the work began: a log shows it at once
        "generating with m: 1/4 (25%)",
        "generating with m: 2/4 (50%)",
        "generating with m: 3/4 (75%)",
        "generating with m: 4/4 (100%)",
        "generating with m: 4/4 (100%)",
    ]
    assert "\x1b" not in stderr.getvalue() and "\r" not in stderr.getvalue()


def test_progress_bar_is_silent_for_one_item(stderr: io.StringIO, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_common, "PLAIN_PROGRESS_EVERY_S", 0.0)
    with progress_bar("generating with m", 1) as advance:
        advance(1)
    assert stderr.getvalue() == ""


def test_bars_open_at_once_share_one_live_display(monkeypatch: pytest.MonkeyPatch) -> None:
    """Stages streaming together each show a bar: on a terminal they are lines of one live display (rich allows
    one at a time), which ends with the last bar."""
    buffer = io.StringIO()
    monkeypatch.setattr(_common, "err", Console(file=buffer, force_terminal=True, width=100, highlight=False))
    with progress_bar("generate", 10) as first:
        with progress_bar("refine", None) as second:
            first(4)
            second(3)
            assert _common._Live.progress is not None and _common._Live.bars == 2
            shown = {task.description: task.completed for task in _common._Live.progress.tasks}
            assert shown == {"generate": 4, "refine": 3}
        first(6)
    assert _common._Live.progress is None and _common._Live.bars == 0


def test_a_stage_whose_records_wait_for_people_says_queued_not_done(
    stderr: io.StringIO, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_common, "PLAIN_PROGRESS_EVERY_S", 0.0)
    stage_progress(StageProgress("create", total=4))
    stage_progress(StageProgress("create", total=4, queued=4))
    stage_progress(StageProgress("create", total=4, queued=4, last=True))
    lines = [line.rsplit(" ", 1)[0] for line in stderr.getvalue().splitlines()]
    assert lines == [
        "create: 0/4 records (0%)",
        "create: 0/4 records (0%) · 4 queued for people",
        "create: 0/4 records (0%) · 4 queued for people",
    ]
    assert _common._Stages.open == {}


def test_a_stage_line_counts_records_with_the_requests_apart(
    stderr: io.StringIO, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_common, "PLAIN_PROGRESS_EVERY_S", 0.0)
    stage_progress(StageProgress("expand", total=None, requests=7))
    stage_progress(StageProgress("expand", total=20, done=18, retry=2, requests=100, last=True))
    stage_progress(StageProgress("split", total=1, done=1, last=True))  # one record: nothing shown
    lines = [line.rsplit(" ", 1)[0] for line in stderr.getvalue().splitlines()]
    assert lines == [
        "expand: 0 records · 7 requests answered",
        "expand: 18/20 records (90%) · 2 to retry · 100 requests answered",
    ]


def test_a_stage_bar_on_a_terminal_counts_decided_records(monkeypatch: pytest.MonkeyPatch) -> None:
    buffer = io.StringIO()
    monkeypatch.setattr(_common, "err", Console(file=buffer, force_terminal=True, width=120, highlight=False))
    stage_progress(StageProgress("create", total=4, done=1, queued=3, requests=2))
    assert _common._Live.progress is not None
    (task,) = _common._Live.progress.tasks
    assert (task.description, task.total, task.completed) == ("create", 4, 1)
    assert task.fields["detail"] == "3 queued for people · 2 requests answered"
    stage_progress(StageProgress("create", total=4, done=1, queued=3, requests=2, last=True))
    assert _common._Live.progress is None and _common._Stages.open == {}
