"""A build's progress in records: each stage's pass ends with as many records as it had (never more), the
requests its models answered said apart and told within a batch as they come, and records that only wait for
people told as queued, not as done."""

from __future__ import annotations

import itertools
import threading
from pathlib import Path
from typing import Any

import pytest

from senseforge.llm.loopback import LoopbackOpenAI
from senseforge.llm.loopback_handler import request_text
from senseforge.pipelines.progress import StageProgress, StageTally
from senseforge.pipelines.runner import build
from senseforge.store.db import Store

from .engine.tiny import Tiny, config


def _passes(events: list[StageProgress]) -> dict[str, list[StageProgress]]:
    """The events of each stage's pass, in the order they came."""
    out: dict[str, list[StageProgress]] = {}
    for event in events:
        out.setdefault(event.label, []).append(event)
    return out


def _check_counts(events: list[StageProgress]) -> None:
    """Within a pass, counts only grow, never past the pass's records, and only the last event says it is last."""
    for label, seen in _passes(events).items():
        assert [e.last for e in seen] == [False] * (len(seen) - 1) + [True], label
        for before, after in itertools.pairwise(seen):
            for count in ("done", "queued", "retry", "requests"):
                assert getattr(after, count) >= getattr(before, count), (label, count)
        for event in seen:
            assert event.total is None or event.handled <= event.total, (label, event)
        assert seen[-1].total == seen[-1].handled, (label, seen[-1])


def test_each_stage_counts_its_records_and_the_requests_apart(tmp_path: Path) -> None:
    events: list[StageProgress] = []
    summary = build(
        Tiny(), config(words=("sun", "rain", "broken")), tmp_path / "run", store=Store(), progress=events.append
    )
    assert summary.state == "done"
    _check_counts(events)
    last = {label: seen[-1] for label, seen in _passes(events).items()}
    # records, whatever a record costs: three words (one split into none), six parts, each part two calls, four
    # parts past the check, three judges each
    counts = {label: (e.total, e.done, e.queued, e.retry, e.requests) for label, e in last.items()}
    assert counts == {
        "expand": (3, 3, 0, 0, 3),
        "flank": (6, 6, 0, 0, 12),
        "middle": (6, 6, 0, 0, 0),
        "judge": (4, 4, 0, 0, 12),
    }
    # a batch of one part makes two calls: the first answer is told before the part is stored
    flank = [(e.done, e.requests) for e in _passes(events)["flank"]]
    assert (0, 1) in flank and (0, 2) in flank and (1, 2) in flank
    assert flank.index((0, 1)) < flank.index((0, 2)) < flank.index((1, 2))


def test_a_resumed_pass_counts_only_the_records_left(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    people = config(words=("sun", "rain"), people=True)
    assert build(Tiny(), people, run_dir, store=Store()).state == "awaiting_review"
    events: list[StageProgress] = []
    again = build(Tiny(), people, run_dir, store=Store(), resume=True, progress=events.append)
    assert again.state == "awaiting_review"
    _check_counts(events)
    # the split is stored: the resume asks again only about the parts people have not judged
    assert [e.label for e in events if e.last] == ["pick"]
    assert (events[-1].total, events[-1].done, events[-1].queued) == (6, 0, 6)


def test_records_waiting_for_people_are_queued_not_done(tmp_path: Path) -> None:
    events: list[StageProgress] = []
    summary = build(
        Tiny(), config(words=("sun", "rain"), people=True), tmp_path / "run", store=Store(), progress=events.append
    )
    assert summary.state == "awaiting_review" and summary.awaiting == 6
    _check_counts(events)
    pick = _passes(events)["pick"]
    assert (pick[-1].total, pick[-1].done, pick[-1].queued, pick[-1].requests) == (6, 0, 6, 0)
    assert all(e.done == 0 for e in pick)  # never told as decided
    assert "flank" not in _passes(events)  # nothing went past the people's stage


def test_answers_of_a_concurrent_api_are_told_within_the_batch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("openai")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    spec = "openai/loopback"
    words = ("sun", "rain", "snow", "wind", "hail", "fog")
    in_flight: list[int] = [0, 0]  # now, most at once
    lock = threading.Lock()
    release = threading.Event()

    def reply(body: dict[str, Any]) -> str:
        with lock:
            in_flight[0] += 1
            in_flight[1] = max(in_flight)
            if in_flight[0] >= 2:
                release.set()
        release.wait(5.0)  # the first answer waits for a second request: the calls are in flight together
        with lock:
            in_flight[0] -= 1
        words = request_text(body).split()
        return "|".join(f"{words[1]}-{i}" for i in range(3)) if words[0] == "Split" else "[x]"

    events: list[StageProgress] = []
    with LoopbackOpenAI(reply) as server:
        options = {spec: {"base_url": server.base_url, "max_concurrency": 4, "timeout_s": 10.0}}
        settings = config(words=words, model=spec, model_options=options, batch_size=50)
        summary = build(Tiny(), settings, tmp_path / "run", store=Store(), progress=events.append)
    assert summary.state == "done"
    assert in_flight[1] >= 2
    _check_counts(events)
    expand = _passes(events)["expand"]
    # one batch of six words: each answer is told as it comes, before the batch is stored in one go
    assert [e.requests for e in expand if e.done == 0 and e.requests] == [1, 2, 3, 4, 5, 6]
    assert [(e.total, e.done, e.requests, e.last) for e in expand if e.done] == [(6, 6, 6, False), (6, 6, 6, True)]


def test_a_tally_tells_nothing_after_its_last_event() -> None:
    events: list[StageProgress] = []
    tally = StageTally("create", 0, None, events.append)
    tally.requests(2)
    tally.records(done=1, queued=1)
    tally.know_total(2)
    tally.close()
    tally.requests(1)  # a late answer of a batch the run no longer waits for
    tally.close()
    assert [(e.total, e.done, e.queued, e.requests, e.last) for e in events] == [
        (None, 0, 0, 0, False),
        (None, 0, 0, 2, False),
        (None, 1, 1, 2, False),
        (2, 1, 1, 2, False),
        (2, 1, 1, 2, True),
    ]
    assert StageProgress("create", attempt=2).label == "create (retry 2)"
