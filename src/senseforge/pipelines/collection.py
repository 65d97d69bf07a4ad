"""Python's cyclic garbage collector, spaced out while a run builds.

A build allocates millions of small containers (records, their payloads, call entries, SQL rows) and keeps many of
them alive until it ends. With the interpreter's default thresholds the collector ran about 3,000 times in a
1,000-set cached rebuild and walked the same live objects again on every pass as they aged: 5.6 s, a quarter of
the rebuild's CPU time. While a build runs:

* the objects alive before it (modules, configuration) are frozen out of the collector's walks (:func:`gc.freeze`);
* the youngest generation is collected every :data:`YOUNG` allocations instead of 700;
* what survives a collection is frozen too, so each object is walked once, while it is young.

Garbage without cycles is freed by reference counting as always, and cycles that are garbage when a collection runs
are freed by it; a cycle whose objects were still alive at their first collection waits until the build ends (a
1,000-set rebuild leaves about 5,000 such objects, a few hundred kilobytes). The collector's settings are restored,
and the frozen objects handed back to it, when the last build of the process ends. About 0.5 s of collection is
left in that rebuild.
"""

from __future__ import annotations

import functools
import gc
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import ParamSpec, TypeVar

YOUNG = 50_000
"""Allocations (less deallocations) of container objects between collections of the youngest generation."""
MIDDLE = 20
"""Collections of the youngest generation between collections of the middle one."""
OLD = 100
"""Collections of the middle generation between full collections (which also wait until the survivors since the
last full one are a quarter of the old generation)."""

_lock = threading.Lock()
_depth = 0
_saved: tuple[int, int, int] | None = None

P = ParamSpec("P")
T = TypeVar("T")


@contextmanager
def spaced() -> Iterator[None]:
    """Collections spaced out (and what was alive before frozen) until the outermost ``spaced`` block ends."""
    global _depth, _saved
    with _lock:
        if _depth == 0:
            _saved = gc.get_threshold()
            gc.freeze()
            gc.set_threshold(YOUNG, MIDDLE, OLD)
            gc.callbacks.append(_freeze_survivors)
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _saved is not None:
                gc.callbacks.remove(_freeze_survivors)
                gc.set_threshold(*_saved)
                gc.unfreeze()
                _saved = None


def _freeze_survivors(phase: str, _info: dict[str, int]) -> None:
    """After each collection, freeze what survived it: a build's objects are walked once, when they are young, not
    again and again as they age (a build keeps its records and results to the end; they die by reference count)."""
    if phase == "stop":
        gc.freeze()


def spaced_out(function: Callable[P, T]) -> Callable[P, T]:
    """``function`` run inside :func:`spaced`."""

    @functools.wraps(function)
    def run(*args: P.args, **kwargs: P.kwargs) -> T:
        with spaced():
            return function(*args, **kwargs)

    return run
