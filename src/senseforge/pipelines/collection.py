"""Python's cyclic garbage collector, spaced out while a run builds.

A build allocates millions of small containers (records, their payloads, call entries, SQL rows) and keeps many of
them alive for a while. With the interpreter's default thresholds the collector runs thousands of times in a
1,000-set rebuild and walks every live object on each full pass: about a quarter of the rebuild's CPU time. While a
build runs, the objects that were alive before it (modules, configuration) are frozen out of the collector's walks
(:func:`gc.freeze`) and the youngest generation is collected every :data:`YOUNG` allocations instead of 700; the
collector's settings are restored when the last build of the process ends. Garbage without cycles is freed at once
as always; cycles live a little longer.
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
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _saved is not None:
                gc.set_threshold(*_saved)
                gc.unfreeze()
                _saved = None


def spaced_out(function: Callable[P, T]) -> Callable[P, T]:
    """``function`` run inside :func:`spaced`."""

    @functools.wraps(function)
    def run(*args: P.args, **kwargs: P.kwargs) -> T:
        with spaced():
            return function(*args, **kwargs)

    return run
