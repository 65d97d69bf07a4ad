"""The garbage collector's settings while a build runs."""

from __future__ import annotations

import gc
import threading

import pytest

from senseforge.pipelines import collection


def test_a_build_spaces_collections_out_and_restores_them() -> None:
    before = gc.get_threshold()
    with collection.spaced():
        assert gc.get_threshold() == (collection.YOUNG, collection.MIDDLE, collection.OLD)
        assert gc.get_freeze_count() > 0
        with collection.spaced():  # a nested build leaves the outer one's settings in place
            pass
        assert gc.get_threshold()[0] == collection.YOUNG
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0


def test_what_survives_a_collection_is_frozen_and_cycles_that_are_garbage_are_freed() -> None:
    class Node:
        def __init__(self) -> None:
            self.other: Node | None = None

    with collection.spaced():
        kept = [Node() for _ in range(10)]
        frozen = gc.get_freeze_count()
        a, b = Node(), Node()
        a.other, b.other = b, a  # a cycle, garbage once the names go
        del a, b
        assert gc.collect(0) >= 2
        assert gc.get_freeze_count() >= frozen + len(kept)  # the survivors are not walked again
    assert gc.get_freeze_count() == 0


def test_the_wrapped_function_runs_inside_and_errors_restore_the_settings() -> None:
    before = gc.get_threshold()
    seen: list[tuple[int, int, int]] = []

    @collection.spaced_out
    def build(fail: bool) -> str:
        seen.append(gc.get_threshold())
        if fail:
            raise RuntimeError("stopped")
        return "built"

    assert build(False) == "built" and seen == [(collection.YOUNG, collection.MIDDLE, collection.OLD)]
    with pytest.raises(RuntimeError):
        build(True)
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0
    assert collection._freeze_survivors not in gc.callbacks


def test_builds_on_several_threads_restore_once_the_last_ends() -> None:
    before = gc.get_threshold()
    inside = threading.Barrier(3)
    done = threading.Event()

    def build() -> None:
        with collection.spaced():
            inside.wait()
            done.wait(5)

    threads = [threading.Thread(target=build) for _ in range(2)]
    for thread in threads:
        thread.start()
    inside.wait()
    assert gc.get_threshold()[0] == collection.YOUNG
    done.set()
    for thread in threads:
        thread.join()
    assert gc.get_threshold() == before
