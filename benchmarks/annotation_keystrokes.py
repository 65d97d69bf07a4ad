#!/usr/bin/env python3
"""Keystrokes and time per judgement for every task type of the annotation app, done by keyboard alone.

The keyboard sessions are the ones ``tests/annotate/test_keyboard.py`` asserts (one per registered task type,
in ``tests/annotate/keyboard.py``): the app over a fresh SQLite run store on loopback, Debian's chromium
driven by Playwright, ``--n`` tasks of each type judged one after another by one annotator. For each type it
prints the keys pressed (shortcuts, Tab, Esc, Enter) and the characters typed per judgement, their sum, and
the median and 95th-percentile time from the first key to the next task's page (the app's part: keys
dispatched, the form posted, the judgement stored, the next page rendered; the text is typed with no delay
between characters). A person's time is their reading and thinking plus their typing: the last column is the
typing alone at 0.28 s a keystroke (the keystroke-level model's average typist, Card, Moran and Newell 1980).

Goal: at most 2 keystrokes for a judgement that is one pick (verify, answer, qc, adapt-check, open-judge,
ckv, wsv); exit status 1 when one takes more.

    .venv/bin/python benchmarks/annotation_keystrokes.py
    .venv/bin/python benchmarks/annotation_keystrokes.py --n 20 --chromium /usr/bin/chromium
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import tempfile
from pathlib import Path
from types import ModuleType

from machine import cpu_name  # benchmarks/machine.py: the scripts run from benchmarks/

from senseforge.annotate.store import AnnotationStore
from senseforge.annotate.tasktypes import TASK_TYPES

HERE = Path(__file__).resolve().parent
SESSIONS_FILE = HERE.parent / "tests" / "annotate" / "keyboard.py"
KLM_KEYSTROKE_S = 0.28
"""Seconds a keystroke takes an average typist (the keystroke-level model's K for 40 words a minute)."""


def _sessions() -> ModuleType:
    """tests/annotate/keyboard.py, loaded by its path (tests/ is not a package)."""
    spec = importlib.util.spec_from_file_location("annotation_keyboard", SESSIONS_FILE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10, help="tasks judged per task type (default 10)")
    parser.add_argument("--chromium", default="/usr/bin/chromium", help="the chromium to drive")
    args = parser.parse_args()
    if args.n < 1:
        parser.error("--n must be at least 1")
    from playwright.sync_api import sync_playwright

    keyboard = _sessions()
    tasks = list(TASK_TYPES)
    with tempfile.TemporaryDirectory() as folder, sync_playwright() as playwright:
        url = f"sqlite:///{Path(folder) / 'run.db'}"
        store = AnnotationStore(url)
        browser = playwright.chromium.launch(executable_path=args.chromium, args=["--no-sandbox", "--disable-gpu"])
        try:
            with keyboard.serve(url) as base:
                page = browser.new_page()
                page.set_default_timeout(20_000)
                measured = keyboard.judge_all(page, base, store, tasks, n=args.n)
        finally:
            browser.close()
            store.close()

    print(f"# Judgements by keyboard alone: {args.n} per task type, one annotator, chromium on {cpu_name()}\n")
    print("| task type | keys | typed | keystrokes | ms per judgement (median) | p95 ms | typing at 0.28 s a key |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    over = []
    for name in tasks:
        done = measured[name]
        keys, typed = statistics.median(done.keys), statistics.median(done.typed)
        total = keys + typed
        if keyboard.SESSIONS[name].style == "verify" and total > 2:
            over.append(name)
        ms = [s * 1000 for s in done.seconds]
        print(
            f"| {name} | {keys:g} | {typed:g} | {total:g} | {statistics.median(ms):.0f} | {_p95(ms):.0f} "
            f"| {total * KLM_KEYSTROKE_S:.1f} s |"
        )
    print("\nThe keys of each: " + "; ".join(f"{name}: {keyboard.SESSIONS[name].path}" for name in tasks) + ".")
    if over:
        print(f"\nGOAL MISSED: more than 2 keystrokes for {', '.join(over)}")
        return 1
    print("\ngoal met: every one-pick judgement in at most 2 keystrokes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
